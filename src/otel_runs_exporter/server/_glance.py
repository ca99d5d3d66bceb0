"""What a list shows of a run at a glance: a one-line preview of its input and output, and the model it asked for.

Pure functions over a stored run (posted and patched, merged). The read API answers
them as the local service's own ``select`` fields (:mod:`._query`): ``preview``
(``{"input": ..., "output": ...}``, the viewer's trace list and ``otel-runs runs list``)
and ``requested_model`` (the viewer's tree rows). Five traces named
``conversation_turn`` are told apart by what each was asked and answered.

A preview is one line of at most :data:`PREVIEW_CHARS` characters whatever the run
holds, so an answer of 100 previews stays small: whitespace runs and control
characters become one space, and no value is serialized past what is shown.
For chat-shaped values (a list of messages, or one under ``messages``, ``input``,
``output``, ...; OpenAI's ``choices``; LangChain's ``generations``) an input's
preview is its last user message and an output's the last reply; otherwise the
value's one string (of a one-key object), a well-known key's string (``question``, ``answer``, ...),
or a short JSON of it. An image is ``[image]``, never its bytes.

>>> preview({"inputs": {"messages": [{"role": "system", "content": "Be brief."},
...          {"role": "user", "content": "Where is  order\\n#1002?"}]},
...          "outputs": {"answer": "It shipped.", "tokens": 12}})
{'input': 'Where is order #1002?', 'output': 'It shipped.'}
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

__all__ = ["PREVIEW_CHARS", "preview", "preview_text", "requested_model"]

PREVIEW_CHARS = 160
"""Characters of one side of a preview at most (an ellipsis marks a cut)."""

_USER_ROLES = ("user", "human")
_REPLY_ROLES = ("assistant", "ai", "model")
_ROLES = frozenset(("system", "developer", *_USER_ROLES, *_REPLY_ROLES, "tool", "function", "chat"))
_MESSAGE_KEYS = ("messages", "input", "inputs", "output", "outputs", "prompt", "prompts")
# A value's one telling string, when it has several keys: what was asked, then what was answered.
_INPUT_KEYS = ("question", "query", "input", "prompt", "text", "message", "content", "task", "request")
_OUTPUT_KEYS = ("answer", "output", "result", "response", "text", "content", "message", "completion", "reply")
_TEXT_PARTS = frozenset(("text", "input_text", "output_text"))
_IMAGE_PARTS = frozenset(("image", "image_url", "input_image", "blob", "uri", "file", "image_file"))
_WHITESPACE = re.compile(r"[\s\x00-\x1f\x7f]+")
_SCAN_CHARS = 4 * PREVIEW_CHARS  # of a long string, only this much is looked at
_MAX_PARTS = 50  # content parts of one message read for its text


def preview(run: Mapping[str, Any]) -> dict[str, str]:
    """``{"input": ..., "output": ...}`` of a run: one line each, empty where the run has none."""
    error = run.get("error")
    output = preview_text(run.get("outputs"), _REPLY_ROLES)
    if not output and isinstance(error, str):
        output = _line(error.strip().splitlines()[-1] if error.strip() else "")
    return {"input": preview_text(run.get("inputs"), _USER_ROLES), "output": output}


def preview_text(value: Any, roles: Sequence[str] = _USER_ROLES) -> str:
    """One line saying what ``value`` holds: the last message of ``roles`` in a conversation, else its telling text.

    >>> preview_text({"choices": [{"message": {"role": "assistant", "content": "Hi!"}}]}, ("assistant",))
    'Hi!'
    >>> preview_text([{"role": "user", "content": [{"type": "text", "text": "What is this?"},
    ...               {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])
    'What is this? [image]'
    >>> preview_text({"city": "Paris", "days": 3}), preview_text({"question": "Why?", "user": "ann"})
    ('{"city":"Paris","days":3}', 'Why?')
    """
    if value is None or value == {} or value == []:
        return ""
    messages = _conversation(value)
    if messages:
        mine = [m for m in messages if _role(m) in roles]
        return _line(_message_text((mine or messages)[-1]))
    if isinstance(value, str):
        return _line(value)
    if isinstance(value, Mapping):
        if len(value) == 1:
            (only,) = value.values()
            if isinstance(only, str):
                return _line(only)
        keys = _INPUT_KEYS if roles == _USER_ROLES else _OUTPUT_KEYS
        for key in keys:
            if isinstance(value.get(key), str) and value[key].strip():
                return _line(value[key])
    return _line(_short_json(value))


def requested_model(run: Mapping[str, Any]) -> str | None:
    """The model a model run asked for: ``metadata.ls_model_name``, else ``invocation_params.model``; else None.

    The store's ``model`` is the one that answered (what it is priced by); a tree row names
    the one the code asked for, as the run's page does.

    >>> requested_model({"extra": {"metadata": {"ls_model_name": "gpt-4o-mini"}}})
    'gpt-4o-mini'
    """
    extra = run.get("extra")
    if not isinstance(extra, Mapping):
        return None
    for holder, key in (("metadata", "ls_model_name"), ("invocation_params", "model"), ("invocation_params", "model_name")):
        found = extra.get(holder)
        value = found.get(key) if isinstance(found, Mapping) else None
        if isinstance(value, str) and value.strip():
            return value[:200]
    return None


def _line(text: str) -> str:
    flat = _WHITESPACE.sub(" ", text[:_SCAN_CHARS]).strip()
    return flat if len(flat) <= PREVIEW_CHARS and len(text) <= _SCAN_CHARS else flat[: PREVIEW_CHARS - 1].rstrip() + "…"


def _role(message: Mapping[str, Any]) -> str:
    role = message.get("role", message.get("type"))
    return role.lower() if isinstance(role, str) and role.lower() in _ROLES else ""


def _is_message(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(_role(value)) and any(k in value for k in ("content", "parts", "text", "tool_calls"))


def _messages(value: Any) -> list[Mapping[str, Any]] | None:
    if not isinstance(value, list) or not value:
        return None
    # LangChain writes a batch of conversations, [[...messages]]; one of them is the usual case.
    flat = value[0] if len(value) == 1 and isinstance(value[0], list) else value
    return flat if flat and all(_is_message(m) for m in flat) else None


def _conversation(value: Any) -> list[Mapping[str, Any]] | None:
    direct = _messages(value)
    if direct or not isinstance(value, Mapping):
        return direct
    for key in _MESSAGE_KEYS:
        found = _messages(value.get(key))
        if found:
            return found
        if _is_message(value.get(key)):
            return [value[key]]
    choices = value.get("choices")
    if isinstance(choices, list) and choices and all(isinstance(c, Mapping) and _is_message(c.get("message")) for c in choices):
        return [c["message"] for c in choices]
    generations = value.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0][0] if isinstance(generations[0], list) and generations[0] else generations[0]
        if isinstance(first, Mapping) and _is_message(first.get("message")):
            return [first["message"]]
        if isinstance(first, Mapping) and isinstance(first.get("text"), str):
            return [{"role": "assistant", "content": first["text"]}]
    return None


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content", message.get("parts", message.get("text")))
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        pieces = []
        for part in content[:_MAX_PARTS]:
            if isinstance(part, str):
                pieces.append(part[:_SCAN_CHARS])
            elif isinstance(part, Mapping):
                kind = part.get("type")
                body = part.get("text", part.get("content"))
                if kind in _TEXT_PARTS and isinstance(body, str):
                    pieces.append(body[:_SCAN_CHARS])
                elif kind in _IMAGE_PARTS or "image_url" in part or "inline_data" in part:
                    pieces.append("[image]" if kind != "file" else "[file]")
            if sum(len(p) for p in pieces) > _SCAN_CHARS:
                break
        text = " ".join(pieces)
    else:
        text = ""
    calls = message.get("tool_calls")
    if not text.strip() and isinstance(calls, list) and calls:
        names = [_call_name(c) for c in calls[:5]]
        text = "calls " + ", ".join(n for n in names if n)
    return text


def _call_name(call: Any) -> str:
    if not isinstance(call, Mapping):
        return ""
    function = call.get("function")
    name = function.get("name") if isinstance(function, Mapping) else call.get("name")
    return f"{name[:60]}()" if isinstance(name, str) else ""


def _short_json(value: Any) -> str:
    """JSON of ``value`` cut to a preview: shrunk before it is serialized, so a 5 MB value costs what a small one does."""
    try:
        return orjson.dumps(_shrunk(value, 3), default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return ""


def _shrunk(value: Any, depth: int) -> Any:
    """``value`` with at most 8 items a level, ``depth`` levels, strings cut to a preview's length."""
    if isinstance(value, str):
        return value[:PREVIEW_CHARS]
    if isinstance(value, Mapping):
        return {str(k)[:40]: _shrunk(v, depth - 1) for k, v in list(value.items())[:8]} if depth else "{…}"
    if isinstance(value, (list, tuple)):
        return [_shrunk(v, depth - 1) for v in value[:8]] if depth else "[…]"
    return value
