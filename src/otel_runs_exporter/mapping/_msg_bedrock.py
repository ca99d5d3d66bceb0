"""Bedrock Converse content blocks, as Strands writes each message: ``[{"text": ...}, {"toolUse": {...}}]``.

A Converse block is typed by its one key (``text``, ``toolUse``, ``toolResult``,
``reasoningContent``, ``image`` ...). They become what every other convention
becomes: text, OpenAI-style tool calls, tool messages answering a call by its
id, a ``thinking`` block, an ``image_url`` block. Only a list whose every item
is such a block is read so: text that merely looks like JSON stays text.
"""

from __future__ import annotations

import string
from typing import Any

from ._content import tool_call
from ._values import json_text, json_value

__all__ = ["is_converse", "bedrock_content", "bedrock_result"]

#: The keys of a Converse ``ContentBlock`` (one per block).
_BLOCK_KEYS = frozenset({
    "text", "toolUse", "toolResult", "reasoningContent", "image", "document", "video", "cachePoint",
    "guardContent", "citationsContent", "json",
})
_IMAGE_FORMATS = frozenset({"png", "jpeg", "gif", "webp"})


def is_converse(value: Any) -> bool:
    """Whether ``value`` is a non-empty list of Converse blocks (each a dict with one block key).

    >>> is_converse([{"text": "hi"}]), is_converse([{"text": "hi", "type": "text"}]), is_converse("[]")
    (True, False, False)
    """
    if not isinstance(value, (list, tuple)) or not value:
        return False
    for block in value:
        if not isinstance(block, dict) or len(block) != 1:
            return False
        for key in block:
            if key not in _BLOCK_KEYS:
                return False
    return True


def _blocks(value: Any) -> list[tuple[str, Any]] | None:
    """``(type, body)`` of each Converse block in ``value`` (or its JSON text); None when it is not blocks."""
    blocks = json_value(value) if isinstance(value, str) and value[:1] == "[" else value
    return [next(iter(block.items())) for block in blocks] if is_converse(blocks) else None


def bedrock_content(content: Any, tool_calls: list[dict[str, Any]], results: list[dict[str, Any]]) -> Any:
    """A message's content given as Converse blocks (or their JSON text): ``toolUse`` blocks become
    tool calls (appended to ``tool_calls``), ``toolResult`` blocks tool messages (appended to
    ``results``); the rest is returned as content blocks (one text block: its text). Content that is
    not Converse blocks is returned as it came.

    >>> calls, results = [], []
    >>> bedrock_content('[{"text": "Checking."}, {"toolUse": {"toolUseId": "t1", "name": "f", "input": {"x": 1}}}]',
    ...                 calls, results)
    'Checking.'
    >>> calls
    [{'id': 't1', 'type': 'function', 'function': {'name': 'f', 'arguments': '{"x":1}'}}]
    """
    blocks = _blocks(content)
    if blocks is None:
        return content
    rest: list[Any] = []
    for kind, body in blocks:
        if kind == "toolUse" and isinstance(body, dict):
            call = tool_call({"id": body.get("toolUseId"), "name": body.get("name"), "arguments": body.get("input")})
            if call:
                tool_calls.append(call)
        elif kind == "toolResult" and isinstance(body, dict):
            results.append({"role": "tool", "content": bedrock_result(body.get("content")),
                            "tool_call_id": body.get("toolUseId")})
        else:
            rest.append(_block(kind, body))
    if not rest:
        return None
    if len(rest) == 1 and rest[0].get("type") == "text":
        return rest[0]["text"]
    return rest


def bedrock_result(content: Any) -> Any:
    """A tool's result given as Converse blocks: its text (blocks joined by newlines, a ``json``
    block as JSON text), as the model was sent it; anything else as it came.

    >>> bedrock_result([{"text": "sunny"}]), bedrock_result('[{"json": {"t": 21}}]')
    ('sunny', '{"t":21}')
    """
    blocks = _blocks(content)
    return content if blocks is None else "\n".join(_block_text(kind, body) for kind, body in blocks)


def _block_text(kind: str, body: Any) -> str:
    if kind == "text" and isinstance(body, str):
        return body
    text: str = json_text(body if kind == "json" else {kind: body})
    return text


def _block(kind: str, body: Any) -> dict[str, Any]:
    """One Converse block other than a tool's, as the typed block the service shows; an unknown one as it came."""
    if kind == "text" and isinstance(body, str):
        return {"type": "text", "text": body}
    if kind == "reasoningContent" and isinstance(body, dict):
        reasoning = body.get("reasoningText")
        if isinstance(reasoning, dict) and isinstance(reasoning.get("text"), str):
            block: dict[str, Any] = {"type": "thinking", "thinking": reasoning["text"]}
            if isinstance(reasoning.get("signature"), str):
                block["signature"] = reasoning["signature"]
            return block
    if kind == "image" and isinstance(body, dict):
        source = body.get("source")
        data = source.get("bytes") if isinstance(source, dict) else None
        fmt = body.get("format")
        if isinstance(data, str) and fmt in _IMAGE_FORMATS and _is_base64(data):
            return {"type": "image_url", "image_url": {"url": f"data:image/{fmt};base64,{data}"}}
    return {kind: body}


_BASE64 = frozenset(string.ascii_letters + string.digits + "+/=")


def _is_base64(text: str) -> bool:
    return bool(text) and all(c in _BASE64 for c in text[:256])
