"""One message of any convention, as the one shape runs carry::

    {"messages": [{"role": "user", "content": "hi"},
                  {"role": "assistant", "content": None,
                   "tool_calls": [{"id": "c1", "type": "function",
                                   "function": {"name": "f", "arguments": "{}"}}]},
                  {"role": "tool", "content": "42", "tool_call_id": "c1"}]}

``content`` is a string when the message is plain text (a single text part),
otherwise a list of content blocks (``{"type": "text", "text": ...}`` and the
non-text parts as they came). Each convention's message shape has its reader
(``_msg_genai``, ``_msg_anthropic``, ``_msg_bedrock``, ``_msg_langchain``, ``_msg_llamaindex``;
``_content`` for OpenAI's); :func:`read_message` tells which one applies.
"""

from __future__ import annotations

from typing import Any, Iterable

from ._content import content_of, contents_of, tool_call
from ._msg_anthropic import anthropic_content
from ._msg_bedrock import bedrock_result, bedrock_content, is_converse
from ._msg_genai import genai_parts, plain_text_message
from ._msg_langchain import langchain_message, wrapped_message
from ._msg_llamaindex import REPR_PREFIX, chat_message_repr
from ._values import as_list, as_object, json_text, json_value

__all__ = ["message_of", "read_message", "messages_of", "looks_like_message", "payload_of"]


def message_of(raw: Any, role: str | None = None) -> list[dict[str, Any]]:
    """Normalize one message of any convention; may yield several (tool results).

    Accepts OpenAI-style (``role``/``content``/``tool_calls``), GenAI
    (``role``/``parts``), OpenInference unflattened (``{"message": {...}}``),
    traceloop unflattened, and the bodies of the older message/choice events.
    """
    raw = json_value(raw)
    if isinstance(raw, str):
        return [{"role": role or "user", "content": raw}]
    if not isinstance(raw, dict):
        return []
    simple = plain_text_message(raw)
    if simple is not None:
        return [simple]
    return read_message(raw, role)


def read_message(raw: dict[str, Any], role: str | None) -> list[dict[str, Any]]:
    """:func:`message_of`'s full reading of a message object, whatever its convention."""
    if "role" not in raw and "type" in raw:
        raw = langchain_message(raw) or raw
    if isinstance(raw.get("message"), (dict, str)) and "role" not in raw and "content" not in raw:
        inner = json_value(raw["message"])  # OpenInference, or a gen_ai.choice body
        outer, raw = raw, inner if isinstance(inner, dict) else {"content": inner}
        if "tool_calls" in outer and "tool_calls" not in raw:
            # A gen_ai.choice event documents its tool calls beside the message (tool_calls.{n}.*).
            raw = {**raw, "tool_calls": outer["tool_calls"]}
    # The message's own role wins, whatever its type (the compiled build checks a str-typed name).
    speaker: Any = raw.get("role") or role or "user"
    msg: dict[str, Any] = {"role": speaker, "content": None}
    tool_calls = [c for c in map(tool_call, as_list(raw.get("tool_calls")) or ()) if c]
    extra: list[dict[str, Any]] = []

    parts = as_list(raw.get("parts"))
    if parts is not None:
        msg["content"] = genai_parts(parts, tool_calls, extra)
    elif "contents" in raw:  # OpenInference multi-part content
        msg["content"] = contents_of(raw["contents"], tool_calls)
    else:
        content = raw.get("content")
        converse = bedrock_content(content, tool_calls, extra)
        if converse is not content:  # Converse blocks (Strands), read
            msg["content"] = converse
        else:
            msg["content"] = content_of(anthropic_content(content, tool_calls, extra))

    if raw.get("function_call_name"):  # OpenInference legacy function call
        tool_calls.append(
            {"type": "function", "function": {"name": raw["function_call_name"],
                                              "arguments": raw.get("function_call_arguments_json") or ""}}
        )
    if tool_calls:
        msg["tool_calls"] = tool_calls
    if speaker == "tool" and isinstance(msg["content"], dict):
        msg["content"] = json_text(msg["content"])  # a returned object (pydantic-ai's tool message events)
    tool_call_id = raw.get("tool_call_id", raw.get("id") if speaker == "tool" else None)
    if tool_call_id is not None:
        msg["tool_call_id"] = tool_call_id
    if raw.get("name"):
        msg["name"] = raw["name"]
    if msg["content"] is None and not tool_calls and extra:
        return extra  # a GenAI tool message is only its results
    # Tool results answer calls made before this message: they come first, as the OpenAI
    # shape has them (Anthropic puts them first in the user message too).
    return [*extra, msg]


#: What a caller's ``problems`` list is told of a message repr that does not parse.
REPR_UNREAD = "a LlamaIndex ChatMessage repr (role and content)"


def messages_of(
    items: Iterable[Any], role: str | None = None, problems: list[str] | None = None
) -> list[dict[str, Any]]:
    """Every message of a conversation, in order. A ``ChatMessage(...)`` repr that does not parse is kept
    as its text with no role, and said in ``problems``."""
    out: list[dict[str, Any]] = []
    for item in items:
        if type(item) is not dict:
            if isinstance(item, str) and item.startswith(REPR_PREFIX):
                parsed = chat_message_repr(item)
                if parsed is None:
                    parsed = {"content": item}
                    if problems is not None:
                        problems.append(REPR_UNREAD)
                out.append(parsed)
            else:
                out.extend(message_of(item, role))
            continue
        # The commonest message straight away: most conversations are only these. Any other
        # object goes to the full reading directly, not through message_of's same first look.
        simple = plain_text_message(item)
        if simple is not None:
            out.append(simple)
        else:
            out.extend(read_message(item, role))
    return out


def looks_like_message(item: Any) -> bool:
    item = json_value(item)
    if not isinstance(item, dict):
        return False
    if "role" in item:
        return "content" in item or "parts" in item or "tool_calls" in item
    return "type" in item and langchain_message(item) is not None


def payload_of(value: Any, key: str, problems: list[str] | None = None) -> dict[str, Any]:
    """A whole inputs/outputs value: messages are normalized, objects kept.

    A lone LangChain message (the input of a parser run, the output of a tool
    run) is shown as the message, in a list of one, as any conversation is.
    What could not be read as it claims to be is said in ``problems``.
    """
    decoded = json_value(value)
    if isinstance(decoded, (list, tuple)) and decoded and all(looks_like_message(m) for m in decoded):
        return {"messages": messages_of(decoded, None, problems)}
    if is_converse(decoded):  # a whole value given as Converse blocks (a Strands tool's result): its text
        return payload_of(bedrock_result(decoded), key)
    if isinstance(decoded, dict) and "role" not in decoded and "type" in decoded:
        lone = langchain_message(decoded)
        if lone is not None:
            return {"messages": message_of(lone)}
    obj = as_object(decoded, key)
    messages = obj.get("messages")
    if isinstance(messages, list):
        if len(messages) == 1 and isinstance(messages[0], list):
            messages = messages[0]  # LangChain's batch of conversations: [[...]]; one is the usual case
        obj = {**obj, "messages": messages_of(messages, None, problems)}
    # A chain's other inputs may hold a conversation too (a MessagesPlaceholder's "history"), serialized
    # by LangChain's message_to_dict, or LlamaIndex's chat_history as reprs: read as messages, as the SDK
    # records them, not as wrappers.
    for name, value in obj.items():
        if name != "messages" and isinstance(value, list) and value and all(_history_item(v) for v in value):
            obj = {**obj, name: messages_of(value, None, problems)}
    return obj


def _history_item(item: Any) -> bool:
    return wrapped_message(item) or (isinstance(item, str) and item.startswith(REPR_PREFIX))
