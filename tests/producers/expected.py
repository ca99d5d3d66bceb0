"""Expected values for the scenarios in ``scenarios.py``, shared by the producers of one client library.

A producer module builds its table from these rows, replacing a row's expected
value with ``NA("why")`` for a field that producer never emits.
"""

from __future__ import annotations

import json
from typing import Any

from producers.matrix import Contains, Json, Like, Row
from producers.scenarios import MODEL, OPENAI_TOOLS, QUESTION, SYSTEM, WEATHER

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
