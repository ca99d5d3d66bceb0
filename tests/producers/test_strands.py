"""Producer: Strands Agents (``strands-agents``), its own OpenTelemetry spans, on its OpenAI model provider.

Runs in the second environment (``requirements-env2.txt``: Strands' openai extra needs
openai<3). Strands writes, in both conventions (``OTEL_SEMCONV_STABILITY_OPT_IN`` unset,
or ``gen_ai_latest_experimental``): ``invoke_agent <name>`` per agent call,
``execute_event_loop_cycle`` per cycle, ``chat`` per model call, ``execute_tool <tool>``
per tool call, each with ``gen_ai.operation.name``; its own name, ``strands-agents``, as
``gen_ai.system`` (default) or ``gen_ai.provider.name`` (latest) on every span: the
framework, not the provider, which it never names. The requested model, input/output and
cache_read token counts, and ``gen_ai.server.time_to_first_token`` (ms: Strands always
streams) on each ``chat``; no response model, no reasoning count. Messages: default,
span events (``gen_ai.system.message``, ``gen_ai.user.message``,
``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.choice``) whose content is
JSON text of Bedrock-style blocks (``text``, ``toolUse``, ``toolResult``); latest,
``gen_ai.client.inference.operation.details`` span events holding
``gen_ai.system_instructions`` / ``gen_ai.input.messages`` / ``gen_ai.output.messages``,
and on ``execute_tool`` ``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result``.
Tool definitions only with the ``gen_ai_tool_definitions`` opt-in token. The tool's result
is a list of content blocks, here one text block holding the dict as JSON.
"""

from __future__ import annotations

import pytest

from producers.expected import ARGUMENTS, CONVERSATION, REPLY, TOOL_CALL, TOOL_RESULT
from producers.matrix import (
    ENV2, NA, Absent, Contains, Like, Row, assert_same_runs, check_rows, run_app, skip_unless_installed,
)
from producers.scenarios import MODEL, WEATHER

from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

#: Its row in the README's "Works with" table, the packages whose pinned versions that row
#: names, and the file that pins them (the second environment).
PRODUCER = "Strands Agents"
PACKAGES = ("strands-agents", "openai")
REQUIREMENTS = ENV2

AGENT, CYCLE, CHAT, TOOL = "invoke_agent weather", "execute_event_loop_cycle", "chat", "get_weather"
MODES = ("default", "gen_ai_latest_experimental")


def strands_rows() -> list[Row]:
    api = FakeLLMAPI
    words = len(REPLY.split(" "))
    tree = [
        (0, "chain", AGENT), (1, "chain", CYCLE), (2, "llm", CHAT), (2, "tool", TOOL), (1, "chain", CYCLE),
        (2, "llm", CHAT),
        (0, "chain", AGENT), (1, "chain", CYCLE), (2, "llm", CHAT),
    ]
    called = {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}
    answer = [{"role": "assistant", "content": REPLY}]
    # chat#1: calls the tool; #2: answers; #3: refused.
    return [
        ("tree", "trace", "tree", tree),
        # An agent cycle is a chain: it names an operation the model table does not know.
        ("run_types", "trace", "run_types", [(d, t) for d, t, _ in tree]),
        ("input_messages", "chat#1", "inputs.messages", CONVERSATION),
        ("input_messages", AGENT, "inputs.messages", CONVERSATION),
        ("output_messages", "chat#2", "outputs.messages", answer),
        ("output_messages", "chat#2", "outputs.finish_reason", "end_turn"),
        # The agent's result as Strands writes it, its text with a newline.
        ("output_messages", AGENT, "outputs.messages", [{"role": "assistant", "content": REPLY + "\n"}]),
        ("tool_calls", "chat#1", "outputs.messages", Like([called])),
        ("tool_calls", "chat#1", "outputs.finish_reason", "tool_use"),
        ("tool_calls", TOOL, "inputs", ARGUMENTS),
        # Its one text block, read as the JSON object it holds (as a JSON result is read elsewhere).
        ("tool_results", TOOL, "outputs", WEATHER),
        ("tool_results", "chat#2", "inputs.messages", Like([*CONVERSATION, called, TOOL_RESULT])),
        ("usage", "chat#2", "outputs.usage_metadata.input_tokens", api.input_tokens),
        ("usage", "chat#2", "outputs.usage_metadata.output_tokens", words),
        ("usage", "chat#2", "outputs.usage_metadata.total_tokens", api.input_tokens + words),
        ("usage", "chat#1", "outputs.usage_metadata.output_tokens", api.tool_call_tokens),
        ("usage_details", "chat#2", "outputs.usage_metadata.input_token_details.cache_read", api.cached_tokens),
        ("model", "chat#1", "extra.metadata.ls_model_name", MODEL),
        ("model", "chat#3", "extra.metadata.ls_model_name", "error-500"),
        ("model", "chat#1", "extra.metadata.response_model", NA("Strands records the requested model only")),
        # strands-agents is the framework: the provider is unset, never guessed.
        ("provider", "chat#1", "extra.metadata.ls_provider", Absent()),
        ("provider", AGENT, "extra.metadata.ls_provider", Absent()),
        ("error", "chat#3", "error", Contains("500")),
        ("error", f"{CYCLE}#3", "error", Contains("500")),
        ("error", f"{AGENT}#2", "error", Contains("500")),
        ("first_token", "chat#1", "events.0.name", "new_token"),
        ("first_token", "chat#2", "events.0.name", "new_token"),
        ("tool_definitions", "chat#1", "extra.invocation_params.tools",
         NA("Strands writes gen_ai.tool.definitions only with the gen_ai_tool_definitions opt-in token")),
    ]


ROWS = strands_rows()


@pytest.fixture(scope="module", params=MODES)
def stored(request, fake, services):
    skip_unless_installed("strands", "openai")
    env = {} if request.param == "default" else {"OTEL_SEMCONV_STABILITY_OPT_IN": request.param}
    return run_app("strands_agent", fake, *services, env=env)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS)
