"""The GenAI semconv's messages: ``{"role", "parts": [...]}``, and its system instructions."""

from __future__ import annotations

from typing import Any

from ._content import content_of, tool_call
from ._msg_bedrock import bedrock_result, is_converse
from ._values import as_list, json_text, json_value

__all__ = ["genai_parts", "plain_text_message", "system_message"]


def genai_parts(parts: list[Any], tool_calls: list[dict[str, Any]], results: list[dict[str, Any]]) -> Any:
    """A GenAI message's parts: ``tool_call`` parts become OpenAI-style tool calls (appended to
    ``tool_calls``), ``tool_call_response`` parts tool messages (appended to ``results``); the
    message's content is what remains (None when nothing does).

    >>> calls, results = [], []
    >>> genai_parts([{"type": "text", "content": "Checking."},
    ...              {"type": "tool_call", "id": "c1", "name": "f", "arguments": {"x": 1}}], calls, results)
    'Checking.'
    >>> calls
    [{'id': 'c1', 'type': 'function', 'function': {'name': 'f', 'arguments': '{"x":1}'}}]
    """
    content_parts = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "tool_call":
            call = tool_call(part)
            if call:
                tool_calls.append(call)
        elif kind == "tool_call_response":
            # The GenAI semconv names the tool's output "response"; pydantic-ai (and the semconv's
            # own examples since) write it as "result".
            response = part.get("response", part.get("result"))
            # Content blocks ([{"type": "text", ...}], as Anthropic's tool_result takes) read as content,
            # Converse blocks (Strands) as their text; any other object is the JSON text the model was sent.
            blocks = isinstance(response, list) and bool(response) and all(isinstance(b, dict) and "type" in b for b in response)
            if blocks:
                text = content_of(response)
            elif is_converse(response):
                text = bedrock_result(response)
            else:
                text = json_text(response)
            results.append({"role": "tool", "content": text, "tool_call_id": part.get("id")})
        else:
            content_parts.append(part)
    return content_of(content_parts) if content_parts else None


def plain_text_message(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The commonest GenAI message, ``{"role", "parts": [{"type": "text", "content"}]}`` with one text part (an
    output message also says its ``finish_reason``, which :func:`message_list` reads), read in one step; None
    for any other shape, which :func:`message_of` reads in full.

    The result is what the full reading (:func:`read_message`) gives for it; a test compares the two.
    """
    if len(raw) != 2 and (len(raw) != 3 or "finish_reason" not in raw):
        return None
    speaker = raw.get("role")
    parts = raw.get("parts")
    if not isinstance(speaker, str) or not speaker or type(parts) is not list or len(parts) != 1:
        return None
    part = parts[0]
    if type(part) is not dict or len(part) != 2 or part.get("type") != "text":
        return None
    text = part.get("content")
    if type(text) is not str:
        return None
    return {"role": speaker, "content": text}


def system_message(value: Any) -> dict[str, Any] | None:
    """``gen_ai.system_instructions``: a list of parts, or a plain string."""
    decoded = json_value(value)
    if isinstance(decoded, str):
        return {"role": "system", "content": decoded} if decoded else None
    parts = as_list(decoded)
    if not parts:
        return None
    return {"role": "system", "content": content_of(parts)}
