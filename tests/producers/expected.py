"""Expected values for the scenarios in ``scenarios.py``, shared by the producers of one client library.

A producer module builds its table from these rows, replacing a row's expected
value with ``NA("why")`` for a field that producer never emits.
"""

from __future__ import annotations

import json
from typing import Any

from producers.matrix import Contains, Json, Like, Row
from producers.scenarios import ANTHROPIC_MODEL, MODEL, OPENAI_TOOLS, QUESTION, SYSTEM, WEATHER

from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

REPLY = FakeLLMAPI.reply_text
CALL_ID = "call_fake_1"
ARGUMENTS = {"city": "fake-city"}
CONVERSATION = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
TOOL_CALL = {"id": CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": Json(ARGUMENTS)}}
TOOL_RESULT = {"role": "tool", "content": json.dumps(WEATHER), "tool_call_id": CALL_ID}


def usage(output_tokens: int, *, details: bool = True) -> dict[str, Any]:
    """usage_metadata as the fake API counts it (FakeLLMAPI's docstring)."""
    api = FakeLLMAPI
    out: dict[str, Any] = {
        "input_tokens": api.input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": api.input_tokens + output_tokens,
    }
    if details:
        out["input_token_details"] = {"cache_read": api.cached_tokens}
        out["output_token_details"] = {"reasoning": api.reasoning_tokens}
    return out


def openai_rows(name: str) -> list[Row]:
    """The OpenAI conversation's table; ``name`` is what the producer calls its chat runs."""
    api = FakeLLMAPI
    words = len(REPLY.split(" "))
    first, second, streamed, failed = (f"{name}#{n}" for n in (1, 2, 3, 4))
    return [
        ("tree", "trace", "tree", [(0, "llm", name)] * 4),
        ("run_types", "trace", "run_types", [(0, "llm")] * 4),
        ("input_messages", first, "inputs.messages", CONVERSATION),
        ("output_messages", second, "outputs.messages", [{"role": "assistant", "content": REPLY}]),
        ("output_messages", second, "outputs.finish_reason", "stop"),
        ("tool_calls", first, "outputs.messages", [{"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}]),
        ("tool_calls", first, "outputs.finish_reason", "tool_calls"),
        ("tool_results", second, "inputs.messages",
         [*CONVERSATION, {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}, TOOL_RESULT]),
        ("usage", second, "outputs.usage_metadata.input_tokens", api.input_tokens),
        ("usage", second, "outputs.usage_metadata.output_tokens", words),
        ("usage", second, "outputs.usage_metadata.total_tokens", api.input_tokens + words),
        ("usage", first, "outputs.usage_metadata.output_tokens", api.tool_call_tokens),
        ("usage_details", second, "outputs.usage_metadata.input_token_details.cache_read", api.cached_tokens),
        ("usage_details", second, "outputs.usage_metadata.output_token_details.reasoning", api.reasoning_tokens),
        ("model", first, "extra.metadata.ls_model_name", MODEL),
        ("model", first, "extra.metadata.response_model", f"{MODEL}-fake-0001"),
        ("model", failed, "extra.metadata.ls_model_name", "error-500"),
        ("provider", first, "extra.metadata.ls_provider", "openai"),
        ("error", failed, "error", Contains("500")),
        ("first_token", streamed, "events.0.name", "new_token"),
        ("first_token", streamed, "outputs.messages", [{"role": "assistant", "content": REPLY}]),
        ("tool_definitions", first, "extra.invocation_params.tools", Like(OPENAI_TOOLS)),
    ]


def langchain_rows(parser_run_type: str = "parser") -> list[Row]:
    """The LangChain conversation's table (``scenarios.langchain_conversation`` with ChatOpenAI).

    ``parser_run_type``: what the producer makes of the ``StrOutputParser`` run.
    """
    api = FakeLLMAPI
    words = len(REPLY.split(" "))
    # ChatOpenAI#1: the tool call; #2: the answer to the tool result; #3: in the chain; #4: streamed; #5: refused.
    called, answered, chained, streamed, failed = (f"ChatOpenAI#{n}" for n in (1, 2, 3, 4, 5))
    call_message = {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}
    # LangChain's ToolMessage names its tool.
    tool_result = {**TOOL_RESULT, "name": "get_weather"}
    chain = [(1, "prompt", "ChatPromptTemplate"), (1, "llm", "ChatOpenAI"), (1, parser_run_type, "StrOutputParser")]
    tree = [
        (0, "prompt", "ChatPromptTemplate"), (0, "llm", "ChatOpenAI"), (0, "tool", "get_weather"),
        (0, "llm", "ChatOpenAI"),
        (0, "chain", "RunnableSequence"), *chain,
        (0, "chain", "RunnableSequence"), *chain,
        (0, "chain", "RunnableSequence"), *chain[:2],
    ]
    return [
        ("tree", "trace", "tree", tree),
        ("run_types", "trace", "run_types", [(d, t) for d, t, _ in tree]),
        ("input_messages", called, "inputs.messages", CONVERSATION),
        ("input_messages", chained, "inputs.messages", CONVERSATION),
        # The prompt template's output is the conversation, each message with its own role.
        ("input_messages", "ChatPromptTemplate", "outputs.messages", CONVERSATION),
        # A parser's input is the model's message, shown as the message.
        ("input_messages", "StrOutputParser", "inputs", {"messages": [{"role": "assistant", "content": REPLY}]}),
        ("output_messages", answered, "outputs.messages", [{"role": "assistant", "content": REPLY}]),
        ("output_messages", answered, "outputs.finish_reason", "stop"),
        ("output_messages", chained, "outputs.messages", [{"role": "assistant", "content": REPLY}]),
        ("output_messages", "StrOutputParser", "outputs.output", REPLY),
        ("output_messages", "RunnableSequence", "outputs.output", REPLY),
        ("tool_calls", called, "outputs.messages", [call_message]),
        ("tool_calls", called, "outputs.finish_reason", "tool_calls"),
        ("tool_results", "get_weather", "outputs.messages", [tool_result]),
        ("tool_results", answered, "inputs.messages", [*CONVERSATION, call_message, tool_result]),
        ("usage", answered, "outputs.usage_metadata.input_tokens", api.input_tokens),
        ("usage", answered, "outputs.usage_metadata.output_tokens", words),
        ("usage", answered, "outputs.usage_metadata.total_tokens", api.input_tokens + words),
        ("usage", called, "outputs.usage_metadata.output_tokens", api.tool_call_tokens),
        ("usage", streamed, "outputs.usage_metadata.output_tokens", words),
        ("usage_details", answered, "outputs.usage_metadata.input_token_details.cache_read", api.cached_tokens),
        ("usage_details", answered, "outputs.usage_metadata.output_token_details.reasoning", api.reasoning_tokens),
        ("usage_details", streamed, "outputs.usage_metadata.input_token_details.cache_read", api.cached_tokens),
        ("model", called, "extra.metadata.ls_model_name", MODEL),
        ("model", called, "extra.metadata.response_model", f"{MODEL}-fake-0001"),
        ("model", failed, "extra.metadata.ls_model_name", "error-500"),
        ("provider", called, "extra.metadata.ls_provider", "openai"),
        ("error", failed, "error", Contains("500")),
        ("error", "RunnableSequence#3", "error", Contains("500")),
        ("first_token", streamed, "events.0.name", "new_token"),
        ("first_token", streamed, "outputs.messages", [{"role": "assistant", "content": REPLY}]),
        ("tool_definitions", called, "extra.invocation_params.tools", Like(OPENAI_TOOLS)),
    ]


ANTHROPIC_CALL_ID = "toolu_fake_1"
ANTHROPIC_TOOL_CALL = {
    "id": ANTHROPIC_CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": Json(ARGUMENTS)}
}
#: The fake's first Anthropic answer says a sentence before its tool_use block.
ANTHROPIC_PREAMBLE = "Let me check."


def anthropic_rows(name: str) -> list[Row]:
    """The Anthropic conversation's table, in the OpenAI shapes the runs use: the ``system``
    parameter as the first message, ``tool_use`` as a tool call, ``tool_result`` as a tool
    message. Finish reasons are Anthropic's own (a producer that maps them replaces those rows)."""
    api = FakeLLMAPI
    words = len(REPLY.split(" "))
    first, second, streamed, failed = (f"{name}#{n}" for n in (1, 2, 3, 4))
    result = {"role": "tool", "content": json.dumps(WEATHER), "tool_call_id": ANTHROPIC_CALL_ID}
    return [
        ("tree", "trace", "tree", [(0, "llm", name)] * 4),
        ("run_types", "trace", "run_types", [(0, "llm")] * 4),
        ("input_messages", first, "inputs.messages", CONVERSATION),
        ("input_messages", failed, "inputs.messages", [{"role": "user", "content": QUESTION}]),
        ("output_messages", second, "outputs.messages", [{"role": "assistant", "content": REPLY}]),
        ("output_messages", second, "outputs.finish_reason", "end_turn"),
        ("tool_calls", first, "outputs.messages",
         [{"role": "assistant", "content": ANTHROPIC_PREAMBLE, "tool_calls": [ANTHROPIC_TOOL_CALL]}]),
        ("tool_calls", first, "outputs.finish_reason", "tool_use"),
        ("tool_results", second, "inputs.messages",
         [*CONVERSATION, {"role": "assistant", "content": None, "tool_calls": [ANTHROPIC_TOOL_CALL]}, result]),
        # Anthropic counts cached input apart; usage_metadata's input_tokens is all of it.
        ("usage", second, "outputs.usage_metadata.input_tokens", api.input_tokens),
        ("usage", second, "outputs.usage_metadata.output_tokens", words),
        ("usage", second, "outputs.usage_metadata.total_tokens", api.input_tokens + words),
        ("usage", first, "outputs.usage_metadata.output_tokens", api.tool_call_tokens),
        ("usage_details", second, "outputs.usage_metadata.input_token_details.cache_read", api.cached_tokens),
        ("usage_details", second, "outputs.usage_metadata.input_token_details.cache_creation", 0),
        ("model", first, "extra.metadata.ls_model_name", ANTHROPIC_MODEL),
        ("model", first, "extra.metadata.response_model", f"{ANTHROPIC_MODEL}-fake-0001"),
        ("model", failed, "extra.metadata.ls_model_name", "error-500"),
        ("provider", first, "extra.metadata.ls_provider", "anthropic"),
        ("error", failed, "error", Contains("500")),
        ("first_token", streamed, "events.0.name", "new_token"),
        ("first_token", streamed, "outputs.messages", [{"role": "assistant", "content": REPLY}]),
        ("tool_definitions", first, "extra.invocation_params.tools", Like(OPENAI_TOOLS)),
    ]


def replaced(rows: list[Row], changes: dict[tuple[str, str, str], Any]) -> list[Row]:
    """``rows`` with the expected value of each ``(field, run, path)`` in ``changes`` replaced
    (by a producer's own value, or ``NA("why")``); a key that names no row is an error."""
    unknown = set(changes) - {(f, r, p) for f, r, p, _ in rows}
    assert not unknown, f"no such rows: {sorted(unknown)}"
    return [(f, r, p, changes.get((f, r, p), want)) for f, r, p, want in rows]


#: Tool definitions as a framework offers them in strict mode (pydantic-ai): the schema closed.
STRICT_OPENAI_TOOLS = [
    {**t, "function": {**t["function"], "parameters": {**t["function"]["parameters"], "additionalProperties": False}}}
    for t in OPENAI_TOOLS
]
#: The tool message of a framework that sends the tool's returned dict back as JSON text, its own way.
TOOL_RESULT_JSON = {"role": "tool", "content": Json(WEATHER), "tool_call_id": CALL_ID}


def agent_rows(
    agents: tuple[str, str], tools: list[dict[str, Any]], *, finish: tuple[str, str] = ("tool_calls", "stop"),
    tool_result: Any = TOOL_RESULT,
) -> list[Row]:
    """The agent conversation's table (``scenarios.agent_conversation``) for an agent framework on OpenAI.

    ``agents``: the names of the answering and the refused agent's runs; ``tools``: the tool
    definitions as the framework offers them; ``finish``: its finish reasons for a tool call and
    for text; ``tool_result``: the tool message it sends back. Runs are picked by type and
    position: ``type:chain#1`` is the flush plan's root, so the agents are chains 2 to 4; the
    chats are llm 1-2 (run_sync), 3-4 (streamed), 5 (refused).
    """
    api = FakeLLMAPI
    answering, refused = agents
    chat, tool = f"chat {MODEL}", "get_weather"
    turn = [(0, "chain", answering), (1, "llm", chat), (1, "tool", tool), (1, "llm", chat)]
    answer = [{"role": "assistant", "content": REPLY}]
    called = [{"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}]
    runs = [*turn, *turn, (0, "chain", refused), (1, "llm", "chat error-500")]
    return [
        ("tree", "trace", "tree", runs),
        ("run_types", "trace", "run_types", [(depth, run_type) for depth, run_type, _ in runs]),
        ("input_messages", "type:llm#1", "inputs.messages", CONVERSATION),
        ("input_messages", "type:chain#2", "inputs.messages", CONVERSATION),
        ("input_messages", "type:chain#3", "inputs.messages", CONVERSATION),
        ("input_messages", "type:chain#4", "inputs.messages", CONVERSATION),
        ("output_messages", "type:llm#2", "outputs.messages", answer),
        ("output_messages", "type:llm#2", "outputs.finish_reason", finish[1]),
        ("output_messages", "type:chain#2", "outputs.messages", answer),
        ("output_messages", "type:chain#3", "outputs.messages", answer),
        ("tool_calls", "type:llm#1", "outputs.messages", Like(called)),
        ("tool_calls", "type:llm#1", "outputs.finish_reason", finish[0]),
        ("tool_calls", "type:llm#3", "outputs.messages", Like(called)),
        ("tool_calls", "type:tool#1", "inputs", ARGUMENTS),
        ("tool_results", "type:tool#1", "outputs", WEATHER),
        ("tool_results", "type:llm#2", "inputs.messages", Like([*CONVERSATION, *called, tool_result])),
        ("usage", "type:llm#2", "outputs.usage_metadata.input_tokens", api.input_tokens),
        ("usage", "type:llm#2", "outputs.usage_metadata.output_tokens", len(REPLY.split(" "))),
        ("usage", "type:llm#2", "outputs.usage_metadata.total_tokens", api.input_tokens + len(REPLY.split(" "))),
        ("usage", "type:llm#1", "outputs.usage_metadata.output_tokens", api.tool_call_tokens),
        ("usage_details", "type:llm#2", "outputs.usage_metadata.input_token_details.cache_read", api.cached_tokens),
        ("usage_details", "type:llm#2", "outputs.usage_metadata.output_token_details.reasoning", api.reasoning_tokens),
        ("model", "type:llm#1", "extra.metadata.ls_model_name", MODEL),
        ("model", "type:llm#1", "extra.metadata.response_model", f"{MODEL}-fake-0001"),
        ("model", "type:llm#5", "extra.metadata.ls_model_name", "error-500"),
        ("provider", "type:llm#1", "extra.metadata.ls_provider", "openai"),
        ("error", "type:llm#5", "error", Contains("500")),
        ("error", "type:chain#4", "error", Contains("500")),
        ("first_token", "type:llm#3", "events.0.name", "new_token"),
        ("first_token", "type:llm#4", "events.0.name", "new_token"),
        ("first_token", "type:llm#4", "outputs.messages", answer),
        ("tool_definitions", "type:llm#1", "extra.invocation_params.tools", Like(tools)),
    ]
