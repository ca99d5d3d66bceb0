"""Producer: smolagents' ToolCallingAgent traced by openinference-instrumentation-smolagents.

The app (``apps/smolagents_agent.py``) runs the agent on ``OpenAIServerModel``: a tool
call, then ``final_answer`` (how smolagents ends a run); the same run streamed; a refused
model. What the instrumentation writes, read from its source and the spans: an AGENT span
per run (the task and run options as ``input.value``, the final answer as
``output.value``, the run's token totals), a CHAIN span per step (``Step N``, the memory
step's repr as input), an LLM span per model call (``OpenAIModel.generate`` or
``generate_stream``) with OpenInference messages, the requested model, provider, tools
and input/output token counts, and a TOOL span per tool call named after the tool's class
(``SimpleTool``, ``FinalAnswerTool``; ``tool.name`` holds the tool's name) whose
``input.value`` is ``Tool.__call__``'s bound arguments (``{"args": [], "kwargs": {...},
"sanitize_inputs_outputs": true}``). smolagents writes tool calls and results into the
history as text turns of its own roles (``tool-call``: ``Calling tools: [...]``;
``tool-response``: ``Observation: ...``), with no call id. No finish reason, no usage
details (smolagents' ``TokenUsage`` keeps input and output counts only), no response
model, no first-token time; the model only with a response (a refused call names none). Its run wrapper sets the run's status OK in a ``finally``
after recording the error, and, for a run without ``stream=True`` that raises, never ends
the run's span (so the app's refused run is streamed).
"""

from __future__ import annotations

import pytest

from producers.expected import ARGUMENTS, TOOL_CALL
from producers.matrix import (
    NA, OPENINFERENCE_CONSUMED, Contains, Json, Like, Row, assert_same_runs, check_rows, run_app,
)
from producers.scenarios import MODEL, QUESTION, SYSTEM, TOOL_SCHEMA, WEATHER

from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "OpenInference (smolagents)"
PACKAGES = ("openinference-instrumentation-smolagents", "smolagents", "openai")

RUN = "ToolCallingAgent.run"
ANSWER = "fake-answer"  # the fake API gives final_answer's one property, answer, "fake-answer"
FINAL_CALL = {"id": "call_fake_2", "type": "function",
              "function": {"name": "final_answer", "arguments": Json({"answer": ANSWER})}}
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city",
        "parameters": {**TOOL_SCHEMA, "properties": {"city": {"type": "string",
                                                             "description": "the city to look up"}}}}},
    {"type": "function", "function": {
        "name": "final_answer", "description": "Provides a final answer to the given problem.",
        "parameters": {"type": "object", "required": ["answer"], "properties": {
            "answer": {"type": "string", "description": "The final answer to the problem"}}}}},
]


def _tree() -> list[tuple[int, str, str]]:
    def steps(llm: str) -> list[tuple[int, str, str]]:
        return [(1, "chain", "Step 1"), (2, "llm", llm), (2, "tool", "get_weather"),
                (1, "chain", "Step 2"), (2, "llm", llm), (2, "tool", "final_answer")]
    generate, stream = "OpenAIModel.generate", "OpenAIModel.generate_stream"
    return [(0, "chain", RUN), *steps(generate), (0, "chain", RUN), *steps(stream),
            (0, "chain", RUN), (1, "chain", "Step 1"), (2, "llm", generate)]


def smolagents_rows() -> list[Row]:
    api = FakeLLMAPI
    tree = _tree()
    # llm#1: calls get_weather; #2: calls final_answer; #3-#4: the same streamed; #5: refused.
    called = [{"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}]
    return [
        ("tree", "trace", "tree", tree),
        ("run_types", "trace", "run_types", [(d, t) for d, t, _ in tree]),
        # smolagents' system prompt is its own template with the agent's instructions in it.
        ("input_messages", "type:llm#1", "inputs.messages.0.role", "system"),
        ("input_messages", "type:llm#1", "inputs.messages.0.content", Contains(SYSTEM)),
        ("input_messages", "type:llm#1", "inputs.messages.1", {"role": "user", "content": f"New task:\n{QUESTION}"}),
        ("input_messages", RUN, "inputs.task", QUESTION),
        ("output_messages", "type:llm#2", "outputs.messages", Like([{"role": "assistant", "content": None,
                                                                     "tool_calls": [FINAL_CALL]}])),
        ("output_messages", RUN, "outputs.output", ANSWER),
        ("output_messages", "final_answer", "outputs.output", ANSWER),
        ("tool_calls", "type:llm#1", "outputs.messages", Like(called)),
        ("tool_calls", "type:llm#3", "outputs.messages", Like([{**called[0], "content": ""}])),
        ("tool_calls", "get_weather", "inputs", ARGUMENTS),
        ("tool_calls", "final_answer", "inputs", {"answer": ANSWER}),
        ("tool_results", "get_weather", "outputs", WEATHER),
        # The history as smolagents writes it: its own roles, text turns, no call id.
        ("tool_results", "type:llm#2", "inputs.messages.2",
         {"role": "tool-call", "content": "Calling tools:\n[{'id': 'call_fake_1', 'type': 'function', "
                                          "'function': {'name': 'get_weather', 'arguments': {'city': 'fake-city'}}}]"}),
        ("tool_results", "type:llm#2", "inputs.messages.3",
         {"role": "tool-response", "content": f"Observation:\n{WEATHER}"}),
        ("tool_results", "type:llm#2", "inputs.messages.3.tool_call_id",
         NA("smolagents writes a tool's result into the history as a text turn (Observation: ...), with no call id")),
        ("usage", "type:llm#1", "outputs.usage_metadata",
         {"input_tokens": api.input_tokens, "output_tokens": api.tool_call_tokens,
          "total_tokens": api.input_tokens + api.tool_call_tokens}),
        ("usage", "type:llm#3", "outputs.usage_metadata.output_tokens", api.tool_call_tokens),
        ("usage_details", "type:llm#1", "outputs.usage_metadata",
         NA("smolagents' TokenUsage keeps input and output token counts only")),
        ("model", "type:llm#1", "extra.metadata.ls_model_name", MODEL),
        ("model", "type:llm#5", "extra.metadata.ls_model_name",
         NA("it writes the model with the response only: a refused call's span names none")),
        ("provider", "type:llm#1", "extra.metadata.ls_provider", "openai"),
        ("error", "type:llm#5", "error", Contains("500")),
        ("error", "Step 1#3", "error", Contains("500")),
        ("error", f"{RUN}#3", "error", Contains("500")),
        ("first_token", "type:llm#3", "events", NA("it records no first-token event or time for a streamed call")),
        ("tool_definitions", "type:llm#1", "extra.invocation_params.tools", Like(TOOLS)),
    ]


ROWS = smolagents_rows()


@pytest.fixture(scope="module")
def stored(fake, services):
    return run_app("smolagents_agent", fake, *services)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS, consumed=OPENINFERENCE_CONSUMED)
