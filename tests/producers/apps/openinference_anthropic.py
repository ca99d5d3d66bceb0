"""The real anthropic client instrumented by openinference-instrumentation-anthropic, as its README sets it up."""

import anthropic
import app_harness
from openinference.instrumentation.anthropic import AnthropicInstrumentor
from scenarios import anthropic_conversation

harness = app_harness.start()
AnthropicInstrumentor().instrument()
# anthropic 2.x traces its own calls unless told not to: each call would be traced twice.
client = anthropic.Anthropic(max_retries=0, open_telemetry=False)
harness.run(lambda: anthropic_conversation(client))
