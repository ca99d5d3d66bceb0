"""The source readers several producers' rows share, and the one loop that applies a source table.

A reader takes the span's :class:`~._context.Ctx` and its row's argument (a key,
or a family's prefix) and returns the inputs or outputs it found, or None. Once
a table has its winner (``ctx.claim_only``), the readers after it only mark
their attributes consumed: they are other encodings of the same content.
"""

from __future__ import annotations

from typing import Any

import orjson

from .._parsed import ParsedJson
from ._context import Ctx
from ._messages import messages_of, payload_of
from ._model import Reader
from ._values import as_list, plain, unflatten

__all__ = ["message_items", "message_list", "read_flat_messages", "read_value", "read_json_value", "first_source"]


_MESSAGES_JSON = "a JSON array of messages"


def message_items(ctx: Ctx, key: str, raw: Any) -> list[Any]:
    """The items of a JSON array of messages; a value that is not one is refused (kept as text)."""
    items = as_list(raw)
    if items is None:
        ctx.refuse(key, _MESSAGES_JSON)
        return []
    return items


def read_flat_messages(ctx: Ctx, prefix: str) -> dict[str, Any] | None:
    """A flattened family of messages (``llm.input_messages.0.message.role``): the conversation so far, or,
    as outputs, the model's replies, each with its own ``finish_reason``."""
    group = ctx.take_flat(prefix)
    if ctx.claim_only or not group:
        return None
    items = unflatten(group)
    return message_list(items if isinstance(items, list) else [], ctx.side == "out")


def message_list(items: list[Any], replies: bool) -> dict[str, Any] | None:
    """``{"messages": ...}``; for ``replies`` (the model's answers), with the first finish reason
    as ``finish_reason`` (as the ``gen_ai.choice`` events give theirs)."""
    messages = messages_of(items)
    if replies:
        # A failed call's reply with a role and nothing else (OpenInference writes one): not an empty
        # answer to show beside the error.
        messages = [m for m in messages if _says_something(m)]
    if not messages:
        return None
    out: dict[str, Any] = {"messages": messages}
    if replies:
        for item in items:
            reason = item.get("finish_reason") if isinstance(item, dict) else None
            if reason not in (None, ""):
                out["finish_reason"] = plain(reason)
                break
    return out


def _says_something(message: dict[str, Any]) -> bool:
    """Whether a reply holds more than its role; its content, when it has some, settles it in one look."""
    if message.get("content") not in (None, "", []):
        return True
    return any(v not in (None, "", []) for k, v in message.items() if k != "role")


def read_value(ctx: Ctx, key: str) -> dict[str, Any] | None:
    """A whole inputs or outputs value (``input.value``), JSON when its ``.mime_type`` says so."""
    return _value(ctx, key, False)


def read_json_value(ctx: Ctx, key: str) -> dict[str, Any] | None:
    """A whole value that its producer always writes as JSON (traceloop's entity input and output)."""
    return _value(ctx, key, True)


def _value(ctx: Ctx, key: str, declared_json: bool) -> dict[str, Any] | None:
    value = ctx.take(key)
    mime = ctx.take(key[: -len(".value")] + ".mime_type") if key.endswith(".value") else None
    if ctx.claim_only or value is None:
        return None
    default = "output" if "output" in key or "result" in key else "input"
    if mime == "text/plain":
        return {default: value}
    problems: list[str] = []
    if isinstance(value, str) and (declared_json or mime == "application/json"):
        # Declared JSON: decode scalars too (traceloop json.dumps a returned
        # string as '"text"'), keeping the raw text if it is not JSON after all.
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return _said(ctx, key, payload_of(value, default, problems), problems)
        payload = _said(ctx, key, payload_of(value, default, problems), problems)
        # Kept as decoded (not reshaped as messages): the encoder may skip its checks for non-JSON values.
        # (Typed here: the compiled build sees ParsedJson's module as untyped.)
        marked: dict[str, Any]
        if payload is value:
            marked = ParsedJson(payload)
        elif len(payload) == 1 and payload.get(default) is value:
            marked = ParsedJson({default: value})
        else:
            marked = payload
        return marked
    return _said(ctx, key, payload_of(value, default, problems), problems)


def _said(ctx: Ctx, key: str, payload: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """``payload``, with what of it could not be read reported against ``key`` (it stays consumed: the
    value is in the run, as its producer gave it)."""
    for expected in problems:
        ctx.malformed.append((key, expected))
    return payload


def first_source(
    ctx: Ctx, sources: tuple[tuple[Reader, str], ...], run_types: tuple[frozenset[str], ...], run_type: str
) -> tuple[dict[str, Any] | None, int]:
    """Apply a source table to a run of ``run_type``: the value found and the index of its row (-1: none).

    ``run_types`` (parallel to ``sources``) leaves out the rows for other types of run. The
    sources a winner shadows are read too (and so consumed): they are other encodings of the
    same content, and repeating them in metadata would only double the run's size."""
    found = None
    row = -1
    ctx.claim_only = False
    for index, (reader, arg) in enumerate(sources):
        applies_to = run_types[index]
        if applies_to and run_type not in applies_to:
            continue
        value = reader(ctx, arg)
        if found is None and value is not None:
            found = value
            row = index
            ctx.claim_only = True
    ctx.claim_only = False
    return found, row
