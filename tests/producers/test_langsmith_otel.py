"""Producer: the langsmith SDK 0.15 in its OTel-only mode, ``@traceable`` runs and ``wrap_openai`` on the real client.

The SDK turns each run into a span on the global tracer provider (our two
paths) and sends nothing itself: ``LANGSMITH_ENDPOINT`` points at the discard
port, where any attempt would fail loudly in the app's stderr. Our bridge to the
SDK stays off in this mode (it would send the SDK's runs twice): the tree must
hold exactly the runs below, once each.

The runs must match what the SDK's native mode stores for the same calls, so the
llm runs' outputs are the SDK's own (the OpenAI response: ``choices``, with
``usage_metadata`` beside them), not messages; ``test_langsmith_otel_mode.py``
compares the two modes field by field for plain ``@traceable`` runs.
"""

from __future__ import annotations

import pytest

from producers.expected import CONVERSATION, REPLY, TOOL_CALL, TOOL_RESULT, usage
from producers.matrix import NA, Contains, Like, assert_same_runs, check_rows, run_app
from producers.scenarios import MODEL, OPENAI_TOOLS, QUESTION, WEATHER

from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "langsmith SDK, OTel mode"
PACKAGES = ("langsmith", "openai")

#: What the SDK reads to run in OTel-only mode; the endpoint is the discard port, so a send of its own would fail.
ENV = {
    "LANGSMITH_TRACING": "true",
    "LANGSMITH_OTEL_ENABLED": "true",
    "LANGSMITH_OTEL_ONLY": "true",
    "LANGSMITH_ENDPOINT": "http://127.0.0.1:9",
    "LANGSMITH_API_KEY": "unused",
}

CHAT = "ChatOpenAI"  # wrap_openai's name for its chat runs
FIRST, SECOND, STREAMED, FAILED = (f"{CHAT}#{n}" for n in (1, 2, 3, 4))
WORDS = len(REPLY.split(" "))
# The app's traceable llm run returns this usage (apps/langsmith_otel.py).
PLANNER_USAGE = {
    "input_tokens": 9,
    "output_tokens": 4,
    "total_tokens": 13,
    "input_token_details": {"cache_read": 3},
    "output_token_details": {"reasoning": 2},
}
# The fake API's usage as wrap_openai records it: its details include the zero audio counts.
OPENAI_USAGE = usage(WORDS)
OPENAI_USAGE["input_token_details"]["audio"] = 0
OPENAI_USAGE["output_token_details"]["audio"] = 0

ROWS = [
    ("tree", "trace", "tree",
     [(0, "chain", "agent"), (1, "llm", "planner"), (1, "tool", "get_weather"), *[(1, "llm", CHAT)] * 4]),
    ("run_types", "trace", "run_types", [(0, "chain"), (1, "llm"), (1, "tool"), *[(1, "llm")] * 4]),
    # One tree, one project: the SDK names its own ("default") on every span, the tree is in ours.
    ("project", "agent", "session_name", "matrix"),
    ("project", FIRST, "session_name", "matrix"),
    ("input_messages", "agent", "inputs", {"question": QUESTION}),
    ("input_messages", "planner", "inputs.messages", CONVERSATION),
    ("input_messages", FIRST, "inputs.messages", CONVERSATION),
    ("input_messages", "get_weather", "inputs", {"city": "fake-city"}),
    ("output_messages", "agent", "outputs", {"answer": "sunny"}),
    ("output_messages", "get_weather", "outputs", WEATHER),
    # The SDK's own outputs of a chat call: the response, as its native mode stores it.
    ("output_messages", SECOND, "outputs.choices.0.message.content", REPLY),
    ("output_messages", SECOND, "outputs.choices.0.finish_reason", "stop"),
    ("tool_calls", FIRST, "outputs.choices.0.message.tool_calls", Like([TOOL_CALL])),
    ("tool_calls", FIRST, "outputs.choices.0.finish_reason", "tool_calls"),
    ("tool_results", SECOND, "inputs.messages",
     [*CONVERSATION, {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}, TOOL_RESULT]),
    ("usage", SECOND, "outputs.usage_metadata.input_tokens", FakeLLMAPI.input_tokens),
    ("usage", SECOND, "outputs.usage_metadata.output_tokens", WORDS),
    ("usage", SECOND, "outputs.usage_metadata.total_tokens", FakeLLMAPI.input_tokens + WORDS),
    ("usage", FIRST, "outputs.usage_metadata.output_tokens", FakeLLMAPI.tool_call_tokens),
    ("usage_details", SECOND, "outputs.usage_metadata", OPENAI_USAGE),
    ("usage_details", STREAMED, "outputs.usage_metadata", OPENAI_USAGE),
    ("usage_details", "planner", "outputs.usage_metadata", PLANNER_USAGE),
    ("model", FIRST, "extra.metadata.ls_model_name", MODEL),
    ("model", FIRST, "extra.metadata.response_model", f"{MODEL}-fake-0001"),
    ("model", FAILED, "extra.metadata.ls_model_name", "error-500"),
    ("model", "planner", "extra.metadata.ls_model_name", MODEL),
    ("provider", FIRST, "extra.metadata.ls_provider", "openai"),
    ("provider", "planner", "extra.metadata.ls_provider", "openai"),
    ("error", FAILED, "error", Contains("Error code: 500")),
    ("first_token", STREAMED, "events", NA(
        "the SDK's OTel exporter writes no run events to its spans: the new_token event its native mode "
        "records for a streamed wrapped call is lost before it reaches OTel, so no time to first token"
    )),
    ("first_token", STREAMED, "outputs.choices.0.message", {"role": "assistant", "content": REPLY}),
    ("tool_definitions", FIRST, "extra.invocation_params.tools", Like(OPENAI_TOOLS)),
    ("tool_definitions", FIRST, "inputs.tools", Like(OPENAI_TOOLS)),
]


@pytest.fixture(scope="module")
def stored(fake, services):
    return run_app("langsmith_otel", fake, *services, env=ENV)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS)


def test_the_sdk_sent_nothing_itself_and_no_run_twice(stored):
    # Each plan: its root, the agent, the planner, the tool and four chat calls; nothing doubled by a bridge.
    assert len(stored.processor) == len(stored.exporter) == 2 * 8
    assert "127.0.0.1:9" not in stored.report["stderr"] and "Traceback" not in stored.report["stderr"]

