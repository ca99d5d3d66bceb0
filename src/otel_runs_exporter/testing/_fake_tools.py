"""Which tool the fake model API calls next: the rule its module docstring states, in any API's shape.

An agent framework holds a conversation over several requests; the fake answers each
from its history: the first offered tool not called yet (ids numbered within the
conversation), text once every offered tool was called.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

__all__ = ["Call", "tool_call_for"]


def _offered_tools(body: dict[str, Any], provider: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, parameter schema) of each tool the request offers, in its order, whatever the API's shape."""
    offered: list[tuple[str, dict[str, Any]]] = []
    for tool in body.get("tools") or ():
        if not isinstance(tool, dict):
            continue
        if provider == "gemini":  # {"functionDeclarations": [{"name", "parameters" | "parametersJsonSchema"}]}
            # The API takes proto JSON, camelCase or snake_case (google-genai sends parameters_json_schema).
            for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or ():
                schema = (decl.get("parameters") or decl.get("parametersJsonSchema")
                          or decl.get("parameters_json_schema") or {})
                offered.append((decl.get("name", "tool"), schema))
        elif provider == "anthropic":
            offered.append((tool.get("name", "tool"), tool.get("input_schema") or {}))
        elif "function" in tool:  # chat completions: {"type": "function", "function": {...}}
            offered.append((tool["function"].get("name", "tool"), tool["function"].get("parameters") or {}))
        else:  # responses: {"type": "function", "name": ..., "parameters": ...}
            offered.append((tool.get("name", "tool"), tool.get("parameters") or {}))
    return offered


#: How smolagents writes a tool call into the history: an assistant text turn, not a structured call.
_TEXT_CALL = re.compile(r"'name': '([^']+)'")


def _named(call: dict[str, Any]) -> list[str]:
    name = call.get("name")
    return [name] if isinstance(name, str) else []


def _called(history: Any) -> list[str]:
    """The names of the tools the conversation's history already called, in any API's shape, in order."""
    names: list[str] = []
    for turn in history if isinstance(history, list) else ():
        if not isinstance(turn, dict):
            continue
        for call in turn.get("tool_calls") or ():  # chat completions
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                names += _named(call["function"])
        if turn.get("type") == "function_call":  # a responses input item
            names += _named(turn)
        blocks = turn.get("parts") if isinstance(turn.get("parts"), list) else turn.get("content")
        for block in blocks if isinstance(blocks, list) else ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":  # anthropic
                names += _named(block)
            if isinstance(block.get("functionCall"), dict):  # gemini
                names += _named(block["functionCall"])
        if turn.get("role") == "assistant":
            text = turn.get("content")
            if isinstance(text, list):
                text = " ".join(b.get("text", "") for b in text if isinstance(b, dict))
            if isinstance(text, str) and text.lstrip().startswith("Calling tools:"):
                names.extend(_TEXT_CALL.findall(text))
    return names


class Call(NamedTuple):
    name: str
    arguments: dict[str, Any]
    #: 1 + the calls already in the history: ids stay unique within a conversation.
    number: int


def tool_call_for(body: dict[str, Any], provider: str) -> Call | None:
    """The tool call to answer with, or None for a text reply.

    The first offered tool the history has not called yet; None when there is none.
    """
    called = _called(body.get("messages") or body.get("input") or body.get("contents"))
    pending = [(name, schema) for name, schema in _offered_tools(body, provider) if name not in called]
    if not pending:
        return None
    name, schema = pending[0]
    return Call(name, {key: f"fake-{key}" for key in (schema.get("properties") or {})}, len(called) + 1)
