"""The real openai client instrumented by OpenLLMetry's opentelemetry-instrumentation-openai, as its README sets it up.

Its module is ``opentelemetry.instrumentation.openai`` (openai-v2's is ``..openai_v2``). Content
capture is on by default (``TRACELOOP_TRACE_CONTENT`` unset means true).
"""

import app_harness
import openai
from opentelemetry.instrumentation.openai import OpenAIInstrumentor
from scenarios import openai_conversation

harness = app_harness.start()
OpenAIInstrumentor().instrument()
client = openai.OpenAI(max_retries=0)
harness.run(lambda: openai_conversation(client))
