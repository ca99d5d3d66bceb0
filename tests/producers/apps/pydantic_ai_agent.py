"""pydantic-ai's own instrumentation (the ``Instrumentation`` capability) on its OpenAI chat model.

``MATRIX_PYDANTIC_AI_VERSION`` picks the instrumentation data format (``InstrumentationSettings(version=...)``):
unset, the package's default; ``2``, the oldest format the package still writes.
"""

import os
import warnings

import app_harness
import openai
from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from scenarios import MODEL, SYSTEM, agent_conversation, weather

harness = app_harness.start()
version = os.environ.get("MATRIX_PYDANTIC_AI_VERSION")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # formats 2-4 are deprecated, and say so
    # Made after the harness: the settings take the global tracer provider when they are made.
    settings = InstrumentationSettings(**({"version": int(version)} if version else {}))
provider = OpenAIProvider(openai_client=openai.AsyncOpenAI(max_retries=0))


def agent(name: str, model: str) -> Agent:
    built = Agent(OpenAIChatModel(model, provider=provider), name=name, instructions=SYSTEM,
                  capabilities=[Instrumentation(settings=settings)])
    built.tool_plain(weather, name="get_weather")
    return built


harness.run(lambda: agent_conversation(agent("weather", MODEL), agent("refused", "error-500")))
