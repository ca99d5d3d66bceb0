"""Anthropic's content blocks: ``tool_use`` and ``tool_result`` blocks among a message's content."""

from __future__ import annotations

from typing import Any

from ._content import content_of, tool_call
from ._values import json_value, plain

__all__ = ["anthropic_content"]


_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result"})


def anthropic_content(content: Any, tool_calls: list[dict[str, Any]], results: list[dict[str, Any]]) -> Any:
    """Anthropic's content blocks, as a message's ``content`` arrives when a producer
    passes the request through: ``tool_use`` blocks become OpenAI-style tool calls
    (appended to ``tool_calls``), ``tool_result`` blocks tool messages (appended to
    ``results``); the other blocks are returned as the content. Content with
    neither kind of block is returned as it came.

    >>> calls, results = [], []
    >>> anthropic_content([{"type": "text", "text": "Let me check."},
    ...     {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}], calls, results)
    [{'type': 'text', 'text': 'Let me check.'}]
    >>> calls
    [{'id': 't1', 'type': 'function', 'function': {'name': 'f', 'arguments': '{"x":1}'}}]
    """
    blocks = json_value(content) if isinstance(content, str) and content[:1] == "[" else content
    if not isinstance(blocks, (list, tuple)) or not any(
        # (a type that is not a string, a list say, cannot be looked up in a set)
        isinstance(b, dict) and isinstance(b.get("type"), str) and b["type"] in _ANTHROPIC_BLOCKS for b in blocks
    ):
        return content
    rest: list[Any] = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_use":
            call = tool_call({"id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")})
            if call:
                tool_calls.append(call)
        elif kind == "tool_result":
            result = block.get("content")
            results.append({
                "role": "tool",
                "content": content_of(result) if isinstance(result, (list, tuple)) else plain(result),
                "tool_call_id": block.get("tool_use_id"),
            })
        else:
            rest.append(block)
    return rest or None
