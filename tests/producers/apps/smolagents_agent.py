"""smolagents' ToolCallingAgent on its OpenAI model class, traced by openinference-instrumentation-smolagents.

Set up as OpenInference's README says: ``SmolagentsInstrumentor().instrument()``. The model
is ``OpenAIServerModel`` (the real ``openai`` client inside) pointed at the fake API.

Under each flush plan:

1. ``agent.run``: the model calls ``get_weather`` (step 1), then ``final_answer`` (step 2),
   smolagents' way to end a run: the fake API calls the offered tools in order;
2. the same agent made with ``stream_outputs=True``, run with ``stream=True``: its model
   calls stream (``generate_stream``);
3. an agent whose model the API refuses with a 500, run with ``stream=True``: the run raises.
   (Run without ``stream``, the instrumentation never ends the run's span when the run
   raises: its ``_RunWrapper`` records the error and re-raises without ``span.end()``, so
   the run would never arrive at the exporter path.)
"""

import contextlib
import io
import os

import app_harness
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from scenarios import MODEL, QUESTION, SYSTEM, weather
from smolagents import LogLevel, OpenAIServerModel, ToolCallingAgent, tool

harness = app_harness.start()
SmolagentsInstrumentor().instrument()


@tool
def get_weather(city: str) -> dict:
    """Weather for a city

    Args:
        city: the city to look up
    """
    return weather(city)


def agent(model: str, *, stream: bool = False) -> ToolCallingAgent:
    return ToolCallingAgent(
        tools=[get_weather],
        model=OpenAIServerModel(model_id=model, api_base=os.environ["OPENAI_BASE_URL"], api_key="test",
                                client_kwargs={"max_retries": 0}),
        instructions=SYSTEM,
        max_steps=3,
        stream_outputs=stream,
        verbosity_level=LogLevel.OFF,
    )


def conversation() -> None:
    agent(MODEL).run(QUESTION)
    for _ in agent(MODEL, stream=True).run(QUESTION, stream=True):
        pass
    try:
        for _ in agent("error-500").run(QUESTION, stream=True):
            pass
    except Exception:  # noqa: BLE001 - the refusal is the point
        pass


def scenario() -> None:
    # A streamed run prints its tool calls to stdout whatever the verbosity: keep the report line alone.
    with contextlib.redirect_stdout(io.StringIO()):
        conversation()


harness.run(scenario)
