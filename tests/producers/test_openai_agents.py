"""Producer: the OpenAI Agents SDK (``openai-agents``) traced by openinference-instrumentation-openai-agents.

The app (``apps/openai_agents.py``) runs a handoff (``triage`` to ``weather``), a function
tool, a streamed run and a refused model, all on the Responses API. What the processor
writes, read from its source: every attribute at the span's end (the SDK's span data is
complete only then); the SDK's trace as an AGENT span ``Agent workflow`` with the SDK's own
task span (CHAIN, same name) under it; an AGENT span per agent (name only: the SDK's agent
span data has no input or output); a CHAIN span per turn; the model call as an LLM span
``response`` whose messages are the Responses API items as OpenInference messages (the
agent's instructions first, as the system message); the function tool and the handoff as
TOOL spans, the handoff's input and output being the agents' names. It records the
response's model only (a refused call names none), no first-token time, and leaves out a
tool call's arguments when they are ``{}`` (the handoff's), which OpenInference reads as
no arguments. The tool's result goes back to the model as the SDK writes it: ``str()`` of
the returned dict.
"""

from __future__ import annotations

import pytest

from producers.expected import ARGUMENTS, CONVERSATION, REPLY
from producers.matrix import NA, OPENINFERENCE_CONSUMED, Contains, Json, Like, Row, assert_same_runs, check_rows, run_app
from producers.scenarios import QUESTION, WEATHER

from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "OpenInference (OpenAI Agents SDK)"
PACKAGES = ("openinference-instrumentation-openai-agents", "openai-agents", "openai")

TRIAGE = "Hand weather questions to the weather agent."
RESPONSE_MODEL = "gpt-4o-mini-fake-0001"
WORKFLOW = "Agent workflow"
HANDOFF = "handoff to weather"


def _tree() -> list[tuple[int, str, str]]:
    tool_turn = [(3, "chain", "turn"), (4, "llm", "response"), (4, "tool", "get_weather")]
    answer_turn = [(3, "chain", "turn"), (4, "llm", "response")]
    weather = [(2, "chain", "weather"), *tool_turn, *answer_turn]
    workflow = [(0, "chain", WORKFLOW), (1, "chain", WORKFLOW)]
    return [
        *workflow, (2, "chain", "triage"), (3, "chain", "turn"), (4, "llm", "response"), (4, "tool", HANDOFF),
        *weather,
        *workflow, *weather,
        *workflow, (2, "chain", "refused"), *answer_turn,
    ]


def _call(number: int, name: str, arguments: object) -> dict:
    return {"id": f"call_fake_{number}", "type": "function", "function": {"name": name, "arguments": arguments}}


def openai_agents_rows() -> list[Row]:
    api = FakeLLMAPI
    words = len(REPLY.split(" "))
    tree = _tree()
    # llm#1: triage hands off; #2: weather calls the tool; #3: it answers; #4-#5: the same streamed; #6: refused.
    # OpenInference leaves a handoff's {} arguments out: stored as empty text, not guessed.
    handoff_call = _call(1, "transfer_to_weather", "")
    weather_call = _call(2, "get_weather", Json(ARGUMENTS))
    history = [
        *CONVERSATION,
        {"role": "assistant", "content": None, "tool_calls": [handoff_call]},
        {"role": "tool", "content": '{"assistant": "weather"}', "tool_call_id": "call_fake_1"},
        {"role": "assistant", "content": None, "tool_calls": [weather_call]},
        {"role": "tool", "content": str(WEATHER), "tool_call_id": "call_fake_2"},
    ]
    answer = [{"role": "assistant", "content": REPLY}]
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city", "strict": True,
        "parameters": {"properties": {"city": {"title": "City", "type": "string"}}, "required": ["city"],
                       "title": "get_weather_args", "type": "object", "additionalProperties": False}}}]
    return [
        ("tree", "trace", "tree", tree),
        ("run_types", "trace", "run_types", [(d, t) for d, t, _ in tree]),
        ("input_messages", "type:llm#1", "inputs.messages",
         [{"role": "system", "content": TRIAGE}, {"role": "user", "content": QUESTION}]),
        ("input_messages", "type:llm#4", "inputs.messages", CONVERSATION),
        ("input_messages", "weather", "inputs", NA("the SDK's agent span data has no input or output")),
        ("output_messages", "type:llm#3", "outputs.messages", answer),
        ("output_messages", "type:llm#3", "outputs.finish_reason", "stop"),
        ("output_messages", "type:llm#5", "outputs.messages", answer),
        ("tool_calls", "type:llm#1", "outputs.messages", Like([{"role": "assistant", "content": None,
                                                                "tool_calls": [handoff_call]}])),
        ("tool_calls", "type:llm#2", "outputs.messages", Like([{"role": "assistant", "content": None,
                                                                "tool_calls": [weather_call]}])),
        ("tool_calls", "type:llm#4", "outputs.messages", Like([{"role": "assistant", "content": None,
                                                                "tool_calls": [_call(1, "get_weather", Json(ARGUMENTS))]}])),
        ("tool_calls", "get_weather", "inputs", ARGUMENTS),
        ("tool_calls", HANDOFF, "inputs", {"input": "triage"}),
        ("tool_results", "get_weather", "outputs", WEATHER),
        ("tool_results", HANDOFF, "outputs", {"output": "weather"}),
        ("tool_results", "type:llm#3", "inputs.messages", Like(history)),
        ("usage", "type:llm#3", "outputs.usage_metadata.input_tokens", api.input_tokens),
        ("usage", "type:llm#3", "outputs.usage_metadata.output_tokens", words),
        ("usage", "type:llm#3", "outputs.usage_metadata.total_tokens", api.input_tokens + words),
        ("usage", "type:llm#1", "outputs.usage_metadata.output_tokens", api.tool_call_tokens),
        ("usage", "type:llm#5", "outputs.usage_metadata.output_tokens", words),
        ("usage_details", "type:llm#3", "outputs.usage_metadata.input_token_details.cache_read", api.cached_tokens),
        ("usage_details", "type:llm#3", "outputs.usage_metadata.output_token_details.reasoning", api.reasoning_tokens),
        # The response span carries the response's model only (llm.model_name from the response object).
        ("model", "type:llm#1", "extra.metadata.ls_model_name", RESPONSE_MODEL),
        ("model", "type:llm#6", "extra.metadata.ls_model_name",
         NA("it records the response's model only: a refused call, with no response, names none")),
        ("provider", "type:llm#1", "extra.metadata.ls_provider", "openai"),
        ("error", "type:llm#6", "error", Contains("500")),
        ("error", "refused", "error", Contains("500")),
        ("first_token", "type:llm#5", "events", NA("it records no first-token event or time for a streamed response")),
        ("tool_definitions", "type:llm#2", "extra.invocation_params.tools", Like(tools)),
    ]


ROWS = openai_agents_rows()


@pytest.fixture(scope="module")
def stored(fake, services):
    return run_app("openai_agents", fake, *services)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS, consumed=OPENINFERENCE_CONSUMED)
