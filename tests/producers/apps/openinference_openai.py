"""The real openai client instrumented by openinference-instrumentation-openai, as its README sets it up."""

import app_harness
import openai
from openinference.instrumentation.openai import OpenAIInstrumentor
from scenarios import openai_conversation

harness = app_harness.start()
OpenAIInstrumentor().instrument()
client = openai.OpenAI(max_retries=0)
harness.run(lambda: openai_conversation(client))
