"""The producer matrix's LangChain and pydantic-ai conversations, in one app under ``configure(instrument=True)``.

Each framework is instrumented as the matrix's apps instrument it (OpenInference's
LangChain tracer, pydantic-ai's ``Instrumentation`` capability: their own llm spans)
and runs the matrix's conversation under a root of its name; then one direct
``openai`` call, which our instrumentor traces. Endpoint, key and the fake model
API come from the environment.
"""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "producers"))  # the matrix's scenarios

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

import openai  # noqa: E402
from openinference.instrumentation.langchain import LangChainInstrumentor  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.capabilities import Instrumentation  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402
from scenarios import MODEL, QUESTION, SYSTEM, agent_conversation, langchain_conversation, weather  # noqa: E402

from otel_runs_exporter import configure, traceable  # noqa: E402

configure(project="frameworks", instrument=True)
LangChainInstrumentor().instrument()
client = openai.OpenAI(max_retries=0)
provider = OpenAIProvider(openai_client=openai.AsyncOpenAI(max_retries=0))


def agent(name: str, model: str) -> Agent:
    built = Agent(OpenAIChatModel(model, provider=provider), name=name, instructions=SYSTEM,
                  capabilities=[Instrumentation()])
    built.tool_plain(weather, name="get_weather")
    return built


@traceable(name="langchain")
def with_langchain() -> None:
    langchain_conversation()


@traceable(name="pydantic_ai")
def with_pydantic_ai() -> None:
    agent_conversation(agent("weather", MODEL), agent("refused", "error-500"))


@traceable(name="direct")
def direct(question: str) -> str:
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content or ""


with_langchain()
with_pydantic_ai()
direct(QUESTION)
