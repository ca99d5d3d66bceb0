"""A Strands agent (``strands-agents``) on its OpenAI model provider, traced by Strands' own OpenTelemetry spans.

Strands traces on the global tracer provider (the harness's) with no set-up: an
``invoke_agent`` span per call, an ``execute_event_loop_cycle`` span per cycle, a ``chat``
span per model call (Strands always streams, and times the first token) and an
``execute_tool`` span per tool call. ``OTEL_SEMCONV_STABILITY_OPT_IN`` (the test module
runs it unset and ``gen_ai_latest_experimental``) picks its conventions: messages as span
events (``gen_ai.user.message``, ``gen_ai.choice``, ... with Bedrock-style content blocks as
JSON text), or ``gen_ai.input.messages``/``gen_ai.output.messages``.

Under each flush plan:

1. ``agent(QUESTION)``: the model calls ``get_weather``, Strands runs it and sends the
   result back, the model answers (two cycles);
2. an agent whose model the API refuses with a 500: the call raises.

Each call gets a new agent, so no conversation carries over from the plan before. Strands'
retry on model errors is turned off (``retry_strategy=None``), and its default callback
handler, which prints the streamed text, is left out.
"""

import os

import app_harness
from scenarios import MODEL, QUESTION, SYSTEM, weather
from strands import Agent, tool
from strands.models.openai import OpenAIModel

harness = app_harness.start()


@tool
def get_weather(city: str) -> dict:
    """Weather for a city

    Args:
        city: the city to look up
    """
    return weather(city)


def agent(model: str) -> Agent:
    client_args = {"api_key": "test", "base_url": os.environ["OPENAI_BASE_URL"], "max_retries": 0}
    return Agent(
        model=OpenAIModel(client_args=client_args, model_id=model, params={"temperature": 0.2}),
        tools=[get_weather],
        system_prompt=SYSTEM,
        name="weather",
        callback_handler=None,
        retry_strategy=None,
    )


def scenario() -> None:
    agent(MODEL)(QUESTION)
    try:
        agent("error-500")(QUESTION)
    except Exception:  # noqa: BLE001 - the refusal is the point
        pass


harness.run(scenario)
