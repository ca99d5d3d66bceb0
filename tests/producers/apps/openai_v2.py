"""The real openai client instrumented by opentelemetry-instrumentation-openai-v2, as its README sets it up.

The content mode comes from the environment, as it does for a user:
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``span_only``: messages on
the span; ``event_only``: messages only in a ``gen_ai.client.inference.operation.details``
log event). ``log_events=True`` installs what ``configure()`` installs beside the
span processor: the log record processor that joins GenAI events to their runs.
"""

import app_harness
import openai
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from scenarios import openai_conversation

harness = app_harness.start(log_events=True)
OpenAIInstrumentor().instrument()
client = openai.OpenAI(max_retries=0)
harness.run(lambda: openai_conversation(client))
