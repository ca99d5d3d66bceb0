"""The real anthropic client instrumented by OpenLLMetry's opentelemetry-instrumentation-anthropic, as its README sets it up.

Content capture is on by default (``TRACELOOP_TRACE_CONTENT`` unset means true).
"""

import anthropic
import app_harness
from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
from scenarios import anthropic_conversation

harness = app_harness.start()
AnthropicInstrumentor().instrument()
# anthropic 2.x traces its own calls unless told not to: each call would be traced twice.
client = anthropic.Anthropic(max_retries=0, open_telemetry=False)
harness.run(lambda: anthropic_conversation(client))
