"""Producer: LlamaIndex (``llama-index-core`` with ``llama-index-llms-openai``) traced by openinference-instrumentation-llama-index.

Runs in the second environment (``requirements-env2.txt``: llama-index-llms-openai needs
openai<3). The app runs a ``FunctionAgent`` twice: streamed (the default) with a tool
that answers, and not streamed with a tool that raises. The instrumentation follows
LlamaIndex's own dispatcher: a CHAIN span per workflow step (``BaseWorkflowAgent.*``, their
inputs the step's event reprs), an LLM span per model call (``OpenAI.astream_chat`` /
``OpenAI.achat``: OpenInference messages, the requested model, provider, tools, finish
reason; usage only without streaming, since LlamaIndex's OpenAI class asks a stream for no
usage; a ``First Token Stream Event`` on a stream), and another LLM span,
``OpenAI._prepare_chat_with_tools``, whose output gives the prepared messages as
``ChatMessage(...)`` repr strings. A tool is a TOOL span whose input is ``{"kwargs": ...}``
and output LlamaIndex's ``ToolOutput`` (its ``raw_output`` the tool's return). The
tool's result goes back to the model as ``str()`` of the returned dict. No response model.
"""

from __future__ import annotations

import pytest

from producers.expected import ARGUMENTS, CONVERSATION, REPLY, TOOL_CALL
from producers.matrix import (
    ENV2, NA, OPENINFERENCE_CONSUMED, Contains, Like, Row, assert_same_runs, check_rows, run_app, skip_unless_installed,
)
from producers.scenarios import MODEL, WEATHER

from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

#: Its row in the README's "Works with" table, the packages whose pinned versions that row
#: names, and the file that pins them (the second environment).
PRODUCER = "OpenInference (LlamaIndex)"
PACKAGES = ("openinference-instrumentation-llama-index", "llama-index-core", "llama-index-llms-openai", "openai")
REQUIREMENTS = ENV2

RUN, STEP = "FunctionAgent.run", "BaseWorkflowAgent"
PREPARE, STREAM, CHAT = "OpenAI._prepare_chat_with_tools", "OpenAI.astream_chat", "OpenAI.achat"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "get_weather(city: str) -> dict\nWeather for a city", "strict": False,
    "parameters": {"properties": {"city": {"title": "City", "type": "string"}}, "required": ["city"],
                   "type": "object", "additionalProperties": False}}}]


def _tree() -> list[tuple[int, str, str]]:
    def turn(llm: str) -> list[tuple[int, str, str]]:
        return [(1, "chain", f"{STEP}.setup_agent"), (1, "chain", f"{STEP}.run_agent_step"),
                (2, "llm", PREPARE), (2, "llm", llm), (1, "chain", f"{STEP}.parse_agent_output")]

    def run(llm: str) -> list[tuple[int, str, str]]:
        return [(0, "chain", RUN), (1, "chain", f"{STEP}.init_run"), *turn(llm),
                (1, "chain", f"{STEP}.call_tool"), (2, "tool", "get_weather"),
                (1, "chain", f"{STEP}.aggregate_tool_results"), *turn(llm)]

    return [*run(STREAM), *run(CHAT)]


def llama_index_rows() -> list[Row]:
    api = FakeLLMAPI
    words = len(REPLY.split(" "))
    tree = _tree()
    streamed_call = {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]}
    result = {"role": "tool", "content": str(WEATHER), "tool_call_id": "call_fake_1"}
    return [
        ("tree", "trace", "tree", tree),
        ("run_types", "trace", "run_types", [(d, t) for d, t, _ in tree]),
        ("input_messages", f"{STREAM}#1", "inputs.messages", CONVERSATION),
        ("input_messages", f"{CHAT}#1", "inputs.messages", CONVERSATION),
        # The prepared messages, ChatMessage reprs read for their role and content.
        ("input_messages", f"{PREPARE}#1", "outputs.messages", CONVERSATION),
        ("output_messages", f"{STREAM}#2", "outputs.messages", [{"role": "assistant", "content": REPLY}]),
        ("output_messages", f"{STREAM}#2", "outputs.finish_reason", "stop"),
        ("output_messages", f"{CHAT}#2", "outputs.messages", [{"role": "assistant", "content": REPLY}]),
        ("tool_calls", f"{STREAM}#1", "outputs.messages", Like([streamed_call])),
        ("tool_calls", f"{STREAM}#1", "outputs.finish_reason", "tool_calls"),
        ("tool_calls", f"{CHAT}#1", "outputs.messages", Like([{**streamed_call, "content": None}])),
        ("tool_calls", "get_weather#1", "inputs", ARGUMENTS),
        ("tool_results", "get_weather#1", "outputs", WEATHER),
        ("tool_results", f"{STREAM}#2", "inputs.messages", Like([*CONVERSATION, streamed_call, result])),
        ("usage", f"{CHAT}#2", "outputs.usage_metadata.input_tokens", api.input_tokens),
        ("usage", f"{CHAT}#2", "outputs.usage_metadata.output_tokens", words),
        ("usage", f"{CHAT}#2", "outputs.usage_metadata.total_tokens", api.input_tokens + words),
        ("usage", f"{CHAT}#1", "outputs.usage_metadata.output_tokens", api.tool_call_tokens),
        ("usage", f"{STREAM}#1", "outputs.usage_metadata",
         NA("a stream from LlamaIndex's OpenAI class asks for no usage (no stream_options), so it has none")),
        ("usage_details", f"{CHAT}#2", "outputs.usage_metadata.input_token_details.cache_read", api.cached_tokens),
        ("usage_details", f"{CHAT}#2", "outputs.usage_metadata.output_token_details.reasoning", api.reasoning_tokens),
        ("model", f"{STREAM}#1", "extra.metadata.ls_model_name", MODEL),
        ("model", f"{STREAM}#1", "extra.metadata.response_model", NA("it records the requested model only")),
        ("provider", f"{STREAM}#1", "extra.metadata.ls_provider", "openai"),
        ("error", "get_weather#2", "error", Contains("the weather service is down")),
        ("first_token", f"{STREAM}#1", "events.0.name", "new_token"),
        ("first_token", f"{STREAM}#2", "events.0.name", "new_token"),
        ("tool_definitions", f"{STREAM}#1", "extra.invocation_params.tools", Like(TOOLS)),
    ]


ROWS = llama_index_rows()


@pytest.fixture(scope="module")
def stored(fake, services):
    skip_unless_installed("llama_index.core", "llama_index.llms.openai", "openinference.instrumentation.llama_index")
    return run_app("llama_index_agent", fake, *services)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS, consumed=OPENINFERENCE_CONSUMED)
