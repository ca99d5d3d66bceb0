"""A LlamaIndex ``FunctionAgent`` on its OpenAI LLM, traced by openinference-instrumentation-llama-index.

Set up as OpenInference's README says: ``LlamaIndexInstrumentor().instrument()``. The LLM
is ``llama_index.llms.openai.OpenAI`` (the real ``openai`` client inside) pointed at the
fake API; the agent streams its model calls (the workflow's default).

Under each flush plan:

1. ``weather`` (system prompt ``SYSTEM``, the tool ``get_weather``): the model calls the
   tool, the agent runs it and sends the result back, the model answers;
2. ``broken``, whose tool raises, made with ``streaming=False`` (its model calls are plain
   chat completions, with usage: a stream from LlamaIndex's OpenAI class asks for none): the
   agent sends the error back as the tool's result and the model answers; the tool's run
   carries the error.

(A refused model is not used: LlamaIndex's OpenAI class refuses a model name it does not
know before any request, so the fake API's ``error-500`` model cannot be reached.)
"""

import asyncio
import os

import app_harness
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from scenarios import MODEL, QUESTION, SYSTEM, weather

harness = app_harness.start()
LlamaIndexInstrumentor().instrument()


def get_weather(city: str) -> dict:
    """Weather for a city"""
    return weather(city)


def broken_weather(city: str) -> dict:
    """Weather for a city"""
    raise RuntimeError("the weather service is down")


def agent(name: str, tool, *, streaming: bool = True) -> FunctionAgent:
    llm = OpenAI(model=MODEL, api_base=os.environ["OPENAI_BASE_URL"], api_key="test", max_retries=0,
                 temperature=0.2)
    return FunctionAgent(name=name, tools=[FunctionTool.from_defaults(tool, name="get_weather")], llm=llm,
                         system_prompt=SYSTEM, streaming=streaming)


async def conversation() -> None:
    await agent("weather", get_weather).run(QUESTION)
    await agent("broken", broken_weather, streaming=False).run(QUESTION)


# One loop for every plan: the client's connection pool belongs to the loop it first ran on.
loop = asyncio.new_event_loop()
harness.run(lambda: loop.run_until_complete(conversation()))
