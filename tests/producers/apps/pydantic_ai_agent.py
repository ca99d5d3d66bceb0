"""pydantic-ai's own instrumentation (the ``Instrumentation`` capability) on its OpenAI chat model.

``MATRIX_PYDANTIC_AI_VERSION`` picks the instrumentation data format (``InstrumentationSettings(version=...)``):
unset, the package's default; ``2``, the oldest format the package still writes.
"""

import os
import warnings

import app_harness
import openai
from scenarios import MODEL, SYSTEM, agent_conversation, weather

harness = app_harness.start()

from pydantic_ai import Agent  # noqa: E402 - after the harness, as an app configures tracing first
from pydantic_ai.capabilities import Instrumentation  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

version = os.environ.get("MATRIX_PYDANTIC_AI_VERSION")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # versions 2-4 are deprecated, and say so
    settings = InstrumentationSettings(**({"version": int(version)} if version else {}))
provider = OpenAIProvider(openai_client=openai.AsyncOpenAI(max_retries=0))


def agent(name: str, model: str) -> Agent:
    built = Agent(OpenAIChatModel(model, provider=provider), name=name, instructions=SYSTEM,
                  capabilities=[Instrumentation(settings=settings)])
    built.tool_plain(weather, name="get_weather")
    return built


harness.run(lambda: agent_conversation(agent("weather", MODEL), agent("refused", "error-500")))
