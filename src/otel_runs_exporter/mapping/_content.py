"""OpenAI chat's shapes, which every convention's messages leave in: tool calls and content blocks.

A tool call becomes ``{"id", "type": "function", "function": {"name", "arguments"}}``
with the arguments as JSON text; a content part becomes an OpenAI block (text,
``image_url``), the image parts of the GenAI semconv and OpenInference included,
since that is the block the service's chat view shows.
"""

from __future__ import annotations

from typing import Any

from ._values import json_text, json_value, nested

__all__ = ["tool_call", "content_block", "content_of", "contents_of"]


def tool_call(call: Any) -> dict[str, Any] | None:
    """One tool call in the OpenAI shape, from any of the conventions' shapes."""
    call = json_value(call)
    if not isinstance(call, dict):
        return None
    call = nested(call, "tool_call")  # OpenInference nests it one level down
    if not isinstance(call, dict):
        return None
    function = call.get("function")
    if isinstance(function, dict):
        name, arguments = function.get("name"), function.get("arguments")
    else:
        name, arguments = call.get("name"), call.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        arguments = json_text(arguments)  # JSON text, whatever the value (an int past 64 bits too)
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments or ""}}
    if call.get("id") is not None:
        out = {"id": call["id"], **out}
    return out


def content_block(part: Any) -> Any:
    """A content part as an OpenAI-style block (text), or as it came."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, dict):
        return part
    part = nested(part, "message_content")  # OpenInference nesting
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "text":
        text = part.get("text", part.get("content"))
        return {"type": "text", "text": text if isinstance(text, str) else "" if text is None else str(text)}
    if kind in ("uri", "blob") and part.get("modality") == "image":
        # The GenAI semconv's parts: a uri, or base64 content with its mime type (a data URL, as OpenAI takes it).
        if kind == "uri" and isinstance(part.get("uri"), str):
            return {"type": "image_url", "image_url": {"url": part["uri"]}}
        if kind == "blob" and isinstance(part.get("content"), str):
            mime = part.get("mime_type") if isinstance(part.get("mime_type"), str) else "image/png"
            return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{part['content']}"}}
    if kind == "image" and isinstance(part.get("image"), dict):
        # OpenInference: message_content.image.image.url. As OpenAI's block, the one the service's chat
        # view shows (and the SDK records for the same LangChain call); other image shapes stay as they are.
        image = nested(part["image"], "image")
        url = image.get("url") if isinstance(image, dict) else None
        if isinstance(url, str):
            return {"type": "image_url", "image_url": {"url": url}}
    return part


def content_of(value: Any) -> Any:
    """Message content: a string when it is plain text, else a list of blocks."""
    if isinstance(value, str) and value[:1] == "[":
        # traceloop stores multi-part content as a JSON list of blocks; text that
        # merely starts with "[" stays text.
        decoded = json_value(value)
        if isinstance(decoded, list) and decoded and all(isinstance(p, dict) and "type" in p for p in decoded):
            value = decoded
    if isinstance(value, (list, tuple)):
        blocks = [content_block(p) for p in value]
        if len(blocks) == 1 and isinstance(blocks[0], dict) and blocks[0].get("type") == "text":
            return blocks[0]["text"]
        return blocks
    return value


#: OpenInference's content types for a part that is a tool call (``contents.N.message_content.type``),
#: whose call is beside it under ``contents.N.tool_call``.
_CALL_PARTS = frozenset({"tool_use", "tool_call"})


def contents_of(items: Any, tool_calls: list[dict[str, Any]]) -> Any:
    """OpenInference's multi-part content (``message.contents.N``): a part that is a tool call becomes one
    (appended to ``tool_calls`` unless a call with its id is there already); the rest is the content.

    >>> calls = []
    >>> contents_of([{"message_content": {"type": "text", "text": "Let me check."}},
    ...              {"message_content": {"type": "tool_use"}, "tool_call": {"id": "t1", "function": {"name": "f"}}}],
    ...             calls)
    'Let me check.'
    >>> calls
    [{'id': 't1', 'type': 'function', 'function': {'name': 'f', 'arguments': ''}}]
    """
    if not isinstance(items, list):
        return content_of(items)
    rest: list[Any] = []
    for item in items:
        call = item.get("tool_call") if isinstance(item, dict) else None
        part = nested(item, "message_content") if call is not None else None
        if isinstance(call, dict) and isinstance(part, dict) and part.get("type") in _CALL_PARTS:
            found = tool_call(call)
            if found and all(c.get("id") != found.get("id") or found.get("id") is None for c in tool_calls):
                tool_calls.append(found)
        else:
            rest.append(item)
    return content_of(rest) if rest else None
