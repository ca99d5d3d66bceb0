"""The OpenAI Agents SDK (``openai-agents``) on the Responses API, traced by openinference-instrumentation-openai-agents.

Set up as OpenInference's README says: ``OpenAIAgentsInstrumentor().instrument()``, whose
processor replaces the SDK's own trace exporter (nothing is sent to OpenAI's trace
backend). The SDK's default client is a real ``AsyncOpenAI`` pointed at the fake API.

Under each flush plan:

1. ``triage`` (its instructions :data:`TRIAGE`) is offered a handoff to ``weather`` and takes
   it; ``weather`` (instructions ``SYSTEM``, the tool ``get_weather``) calls the tool, gets its
   result and answers;
2. ``weather`` again, streamed (``Runner.run_streamed``): the tool call and the answer arrive
   as Responses API events;
3. ``refused``, whose model the API refuses with a 500: the run raises.
"""

import asyncio

import app_harness
import openai
from agents import Agent, Runner, function_tool, set_default_openai_client
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from scenarios import MODEL, QUESTION, SYSTEM, weather

TRIAGE = "Hand weather questions to the weather agent."

harness = app_harness.start()
OpenAIAgentsInstrumentor().instrument()
set_default_openai_client(openai.AsyncOpenAI(max_retries=0), use_for_tracing=False)

get_weather = function_tool(weather, name_override="get_weather")
weather_agent = Agent(name="weather", instructions=SYSTEM, model=MODEL, tools=[get_weather])
triage = Agent(name="triage", instructions=TRIAGE, model=MODEL, handoffs=[weather_agent])
refused = Agent(name="refused", instructions=SYSTEM, model="error-500", tools=[get_weather])


async def conversation() -> None:
    await Runner.run(triage, QUESTION)
    streamed = Runner.run_streamed(weather_agent, QUESTION)
    async for _ in streamed.stream_events():
        pass
    try:
        await Runner.run(refused, QUESTION)
    except Exception:  # noqa: BLE001 - the refusal is the point
        pass


# One loop for every plan: the client's connection pool belongs to the loop it first ran on.
loop = asyncio.new_event_loop()
harness.run(lambda: loop.run_until_complete(conversation()))
