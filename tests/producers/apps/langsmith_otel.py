"""The langsmith SDK in its OTel-only mode: ``@traceable`` runs and ``wrap_openai`` on the real openai client.

Set up as the SDK's docs say for OTel: ``LANGSMITH_TRACING=true``,
``LANGSMITH_OTEL_ENABLED=true`` and ``LANGSMITH_OTEL_ONLY=true`` (the test module
passes them), a global tracer provider (the harness's), then ``@traceable`` and
``wrap_openai`` as usual. The SDK turns each run into a span on that provider
from its own background thread, so the scenario ends with ``flush()``: a plan's
runs are all spans before the next plan starts.
"""

import app_harness
import openai
from langsmith import traceable
from langsmith.run_trees import get_cached_client
from langsmith.wrappers import wrap_openai
from scenarios import MODEL, QUESTION, SYSTEM, WEATHER, openai_conversation

harness = app_harness.start()
client = wrap_openai(openai.OpenAI(max_retries=0))

#: What the traceable llm run returns: an OpenAI-style answer with the SDK's usage shape, details included.
PLANNER_USAGE = {
    "input_tokens": 9,
    "output_tokens": 4,
    "total_tokens": 13,
    "input_token_details": {"cache_read": 3},
    "output_token_details": {"reasoning": 2},
}


@traceable(run_type="llm", name="planner", metadata={"ls_provider": "openai", "ls_model_name": MODEL})
def planner(messages: list) -> dict:
    return {
        "choices": [{"message": {"role": "assistant", "content": "Look it up."}, "finish_reason": "stop"}],
        "usage_metadata": PLANNER_USAGE,
    }


@traceable(run_type="tool", name="get_weather")
def get_weather(city: str) -> dict:
    return WEATHER


@traceable(name="agent")
def agent(question: str) -> dict:
    planner([{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}])
    get_weather("fake-city")
    openai_conversation(client)
    return {"answer": "sunny"}


def scenario() -> None:
    agent(QUESTION)
    # The SDK makes its spans on its own thread: all of this plan's, before the next plan starts.
    get_cached_client().flush()


harness.run(scenario)
