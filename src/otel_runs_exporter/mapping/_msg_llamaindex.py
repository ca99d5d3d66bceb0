"""LlamaIndex's (and smolagents') ``ChatMessage`` repr, as OpenInference writes a message it could not serialize.

``ChatMessage(role=<MessageRole.SYSTEM: 'system'>, additional_kwargs={}, blocks=[TextBlock(block_type='text',
text='Be brief.')])`` is read for its role, text and tool calls only when it parses exactly: Python's own
tokenizer and parser read it (nothing is evaluated), the role given as ``<MessageRole.X: 'x'>``, every
block a text block, every value a literal. Anything else is not read: the caller keeps it as text, with no
role, and reports it (a role the producer did not give is never invented).
"""

from __future__ import annotations

import ast
import io
import tokenize
from typing import Any

from ._content import content_of, tool_call
from ._values import json_text

__all__ = ["REPR_PREFIX", "chat_message_repr"]

#: How a repr this module reads starts.
REPR_PREFIX = "ChatMessage("
#: Longer text is not parsed (a repr of a whole conversation's system prompt is a few KB).
_MAX_CHARS = 256 * 1024
_TOOL_CALL_CLASSES = frozenset({
    "ChoiceDeltaToolCall", "ChatCompletionMessageToolCall", "ChatCompletionMessageFunctionToolCall",
    "ChatMessageToolCall", "ToolCall",
})


def chat_message_repr(text: str) -> dict[str, Any] | None:
    """The message a ``ChatMessage(...)`` repr shows, or None when it does not parse exactly.

    >>> chat_message_repr("ChatMessage(role=<MessageRole.SYSTEM: 'system'>, additional_kwargs={}, "
    ...                   "blocks=[TextBlock(block_type='text', text='Be brief.')])")
    {'role': 'system', 'content': 'Be brief.'}
    >>> chat_message_repr("ChatMessage(role=<MessageRole.USER: 'user'>, blocks=[ImageBlock(url='x')])") is None
    True
    """
    if not text.startswith(REPR_PREFIX) or len(text) > _MAX_CHARS:
        return None
    try:
        tree = ast.parse(_roles_as_strings(text), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError, tokenize.TokenError, IndentationError):
        return None
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "ChatMessage"
            and not tree.args):
        return None
    fields = {kw.arg: kw.value for kw in tree.keywords if kw.arg is not None}
    role = _literal(fields.get("role"))
    if not isinstance(role, str) or not role:
        return None
    message: dict[str, Any] = {"role": role, "content": None}
    if "blocks" in fields:
        texts = _text_blocks(fields["blocks"])
        if texts is None:
            return None
        message["content"] = texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts] or None
    elif "content" in fields:
        content = _literal(fields["content"])
        if content is _NOT_LITERAL:
            return None
        message["content"] = content_of(content) if isinstance(content, list) else content
    calls = _tool_calls(fields.get("tool_calls"))
    extra = fields.get("additional_kwargs")
    if not calls and isinstance(extra, ast.Dict):
        for key, value in zip(extra.keys, extra.values):
            if _literal(key) == "tool_calls":
                calls = _tool_calls(value)
    if calls is None:
        return None
    if calls:
        message["tool_calls"] = calls
    return message


_NOT_LITERAL: Any = object()


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return _NOT_LITERAL


def _roles_as_strings(text: str) -> str:
    """``<MessageRole.USER: 'user'>`` -> ``'user'``, token by token, so a string's own text is never touched."""
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(tokens):
        window = tokens[i:i + 7]
        if (len(window) == 7 and window[0].string == "<" and window[1].string == "MessageRole"
                and window[2].string == "." and window[3].type == tokenize.NAME and window[4].string == ":"
                and window[5].type == tokenize.STRING and window[6].string == ">"):
            out.append((tokenize.STRING, window[5].string))
            i += 7
        else:
            out.append((tokens[i].type, tokens[i].string))
            i += 1
    return tokenize.untokenize(out)


def _text_blocks(node: ast.expr) -> list[str] | None:
    """The texts of a list of ``TextBlock(...)`` calls; None when anything else is there."""
    if not isinstance(node, ast.List):
        return None
    texts: list[str] = []
    for item in node.elts:
        if not (isinstance(item, ast.Call) and isinstance(item.func, ast.Name) and item.func.id == "TextBlock"):
            return None
        fields = {kw.arg: _literal(kw.value) for kw in item.keywords}
        if not isinstance(fields.get("text"), str) or fields.get("block_type", "text") != "text":
            return None
        texts.append(fields["text"])
    return texts


def _tool_calls(node: ast.expr | None) -> list[dict[str, Any]] | None:
    """Tool calls written as a literal or as the client library's objects (``ChoiceDeltaToolCall(...)``);
    ``[]`` when there are none, None when they cannot be read."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return []
    if not isinstance(node, ast.List):
        return None
    calls: list[dict[str, Any]] = []
    for item in node.elts:
        value = _object(item)
        call = tool_call(value) if isinstance(value, dict) else None
        if call is None:
            return None
        arguments = call["function"].get("arguments")
        if not isinstance(arguments, str):
            call["function"]["arguments"] = json_text(arguments)
        calls.append(call)
    return calls


def _object(node: ast.expr) -> Any:
    """A literal, or a known object's keyword arguments as a dict (nested objects too)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.args or not (node.func.id in _TOOL_CALL_CLASSES or node.func.id.endswith("Function")):
            return _NOT_LITERAL
        fields = {kw.arg: _object(kw.value) for kw in node.keywords if kw.arg is not None}
        return _NOT_LITERAL if any(v is _NOT_LITERAL for v in fields.values()) else fields
    return _literal(node)
