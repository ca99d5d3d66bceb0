"""LangChain's message dicts (``dumpd``, ``message_to_dict``, ``model_dump``) as OpenAI-style messages."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["langchain_message", "wrapped_message"]


#: LangChain's message types (``BaseMessage.type``, and the class a serialized
#: message names last in its ``id``) -> role. A ``ChatMessage`` carries its own role.
_LANGCHAIN_ROLES = {
    "system": "system", "SystemMessage": "system",
    "human": "user", "HumanMessage": "user",
    "ai": "assistant", "AIMessage": "assistant",
    "tool": "tool", "ToolMessage": "tool",
    "function": "function", "FunctionMessage": "function",
}


_LANGCHAIN_CHAT = frozenset({"chat", "ChatMessage"})


def langchain_message(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    """A LangChain message, in any of the shapes it is serialized in, as an OpenAI-style message.

    LangChain messages have a ``type``, not a ``role``, and arrive as
    ``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``
    (``dumpd``/``to_json``), ``{"type": "ai", "data": {...}}`` (``message_to_dict``)
    or the message's own fields (``model_dump``: ``{"type": "ai", "content": ...}``).
    None when ``raw`` is none of these. Tool calls are LangChain's parsed ones
    (``{"name", "args", "id"}``), else the provider's raw ones in ``additional_kwargs``.
    """
    kind: Any
    body: Any
    if raw.get("lc") == 1 and raw.get("type") == "constructor":
        ident = raw.get("id")
        kind = ident[-1] if isinstance(ident, (list, tuple)) and ident else None
        body = raw.get("kwargs")
    elif len(raw) == 2 and isinstance(raw.get("data"), dict):
        kind, body = raw.get("type"), raw["data"]
    else:
        kind, body = raw.get("type"), raw
    if not isinstance(kind, str) or not isinstance(body, Mapping) or "content" not in body:
        return None
    if kind.endswith("Chunk"):  # a streamed message: AIMessageChunk
        kind = kind[: -len("Chunk")]
    role: Any = body.get("role") if kind in _LANGCHAIN_CHAT else _LANGCHAIN_ROLES.get(kind)
    if not isinstance(role, str) or not role:
        return None
    msg: dict[str, Any] = {"role": role, "content": body.get("content")}
    calls = body.get("tool_calls")
    if isinstance(calls, (list, tuple)) and calls:
        msg["tool_calls"] = [
            {"id": c.get("id"), "function": {"name": c.get("name"), "arguments": c.get("args")}}
            if "args" in c else c
            for c in calls if isinstance(c, dict)
        ]
    else:
        extra = body.get("additional_kwargs")
        if isinstance(extra, dict) and extra.get("tool_calls"):
            msg["tool_calls"] = extra["tool_calls"]
    for key in ("tool_call_id", "name"):
        if body.get(key) is not None:
            msg[key] = body[key]
    return msg


def wrapped_message(item: Any) -> bool:
    """``{"type": "human", "data": {"content": ...}}``: LangChain's message_to_dict, and nothing else."""
    return (isinstance(item, dict) and len(item) == 2 and isinstance(item.get("data"), dict)
            and isinstance(item.get("type"), str) and langchain_message(item) is not None)
