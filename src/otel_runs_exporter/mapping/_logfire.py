"""Logfire's LLM integrations and pydantic-ai: their event arrays, request and response bodies, usage objects.

Logfire (``instrument_openai``, ``instrument_anthropic``) and pydantic-ai's
``Instrumentation`` write GenAI attributes too (``_genai``'s rows read those);
this module reads what only they write. Several of their names are generic
(``prompt``, ``events``, ``request_data``): each is taken only in the shape its
producer gives it, and none marks a span as GenAI.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ._context import Ctx
from ._genai_events import ASSISTANT_EVENT, CHOICE_EVENT, MESSAGE_EVENT_ROLES
from ._messages import looks_like_message, message_of, messages_of, payload_of
from ._model import FINAL, NOT_FINAL, Key, Source, attr, generic
from ._msg_genai import system_message
from ._readers import read_value
from ._values import as_int, as_list, json_text, json_value, plain

__all__ = ["ROWS", "SCOPES", "LOGFIRE_REQUEST", "LOGFIRE_CONVERSATION_KEYS", "logfire_body", "logfire_usage_details"]

SCOPES = (
    ("pydantic-ai", "pydantic-ai's Instrumentation"),
    ("logfire.openai", "Logfire's instrument_openai"),
    ("logfire.anthropic", "Logfire's instrument_anthropic"),
)

#: Logfire's attributes: a JSON array of GenAI events as objects named by "event.name".
#: doc: prompt -> inputs. "Logfire prompt input"
_LOGFIRE_PROMPT = "prompt"
#: doc: all_messages_events -> outputs. "Logfire message events output"
_LOGFIRE_ALL_MESSAGES = "all_messages_events"
#: doc: events -> inputs/outputs. "Logfire events array, splits input/choice events"
_LOGFIRE_EVENTS = "events"
#: Logfire's LLM integrations (``instrument_openai``, ``instrument_anthropic``) in their legacy
#: format (``version=1``): the request body as one JSON object, and the response's message (or
#: text) with the provider's usage object. Format 2, the default, writes the GenAI attributes and
#: keeps ``request_data`` with the model alone. Names this generic are read only on spans Logfire
#: made, which always carry its message template.
_LOGFIRE_REQUEST = "request_data"
_LOGFIRE_RESPONSE = "response_data"
_LOGFIRE_MARK = "logfire.msg_template"
#: The request body's conversation keys (OpenAI chat, completions and embeddings, Anthropic's
#: system prompt, the Responses API's instructions): the inputs; every other key of the body is
#: an invocation parameter.
_LOGFIRE_CONVERSATION_KEYS = frozenset({"messages", "prompt", "input", "system", "instructions"})
#: Logfire keeps the provider's usage object whole (``gen_ai.usage.raw``; ``response_data.usage`` in
#: format 1) and writes only its input, output and cache counts as GenAI attributes: the other
#: details are read from the object. ``(path in the object, path in usage_metadata)``, OpenAI's
#: chat and Responses names and Anthropic's; they complete the usage rows, never override.
_LOGFIRE_USAGE_RAW = "gen_ai.usage.raw"
_PROVIDER_USAGE_DETAILS: tuple[tuple[tuple[str, str], tuple[str, str]], ...] = (
    (("prompt_tokens_details", "cached_tokens"), ("input_token_details", "cache_read")),
    (("input_tokens_details", "cached_tokens"), ("input_token_details", "cache_read")),
    (("", "cache_read_input_tokens"), ("input_token_details", "cache_read")),
    (("", "cache_creation_input_tokens"), ("input_token_details", "cache_creation")),
    (("prompt_tokens_details", "audio_tokens"), ("input_token_details", "audio")),
    (("completion_tokens_details", "reasoning_tokens"), ("output_token_details", "reasoning")),
    (("output_tokens_details", "reasoning_tokens"), ("output_token_details", "reasoning")),
    (("completion_tokens_details", "audio_tokens"), ("output_token_details", "audio")),
)

#: pydantic-ai's agent run span (its ``Instrumentation`` capability, data formats 2 to 6): the
#: whole conversation as GenAI messages and the agent's answer, both set as the run ends, and
#: where this run's own messages start when it was given a history (absent when it was not).
_PYDANTIC_AI_MESSAGES = "pydantic_ai.all_messages"
_PYDANTIC_AI_NEW_MESSAGE_INDEX = "pydantic_ai.new_message_index"
_PYDANTIC_AI_FINAL_RESULT = "final_result"
#: Its tool span in data format 2 (later formats write ``gen_ai.tool.call.arguments``/``.result``).
#: ``tool_arguments`` is also a documented row (``ParamRow`` below), which this does not replace.
_PYDANTIC_AI_TOOL_ARGUMENTS = "tool_arguments"
_PYDANTIC_AI_TOOL_RESULT = "tool_response"

#: Keys of the per-span cache (``Ctx.cache``) for what this module decodes once.
_EVENTS_CACHE = "logfire events:"
_BODY_CACHE = "logfire body:"
LOGFIRE_REQUEST = _LOGFIRE_REQUEST
LOGFIRE_CONVERSATION_KEYS = _LOGFIRE_CONVERSATION_KEYS


def _logfire_events(ctx: Ctx, key: str) -> list[dict[str, Any]] | None:
    """The event objects of a Logfire ``events``/``all_messages_events`` attribute, or None.

    These names are generic, so the attribute is claimed only when it has
    Logfire's shape: an array of objects, named by ``event.name`` (pydantic-ai's
    events). Logfire itself also writes ``all_messages_events`` as plain messages
    (``role`` and ``content`` or ``tool_calls``, no event names), which it builds
    for the spans of other instrumentations; for that name, that shape counts too.
    """
    cached = _EVENTS_CACHE + key
    if cached in ctx.cache:
        found: list[dict[str, Any]] | None = ctx.cache[cached]
        return found
    value = ctx.attributes.get(key)
    items = as_list(value) if value is not None else None
    if (
        not items
        or not all(isinstance(i, dict) for i in items)
        or not (
            any("event.name" in i for i in items)
            or (key == _LOGFIRE_ALL_MESSAGES and all(looks_like_message(i) for i in items))
        )
    ):
        items = None
    else:
        ctx.consumed.add(key)
    ctx.cache[cached] = items
    return items


def _logfire_messages(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items:
        name = item.get("event.name")
        role = None if not isinstance(name, str) else "assistant" if name == CHOICE_EVENT else MESSAGE_EVENT_ROLES.get(name)
        out.extend(message_of(item, role))
    return out


def _read_logfire_events(ctx: Ctx, side: str) -> dict[str, Any] | None:
    # The choice events are the outputs; every other event is the conversation that led to them.
    items = _logfire_events(ctx, _LOGFIRE_EVENTS)
    if ctx.claim_only or not items:
        return None
    if any(i.get("event.name") == CHOICE_EVENT for i in items):
        chosen = [i for i in items if (i.get("event.name") == CHOICE_EVENT) == (side == "out")]
    else:
        # Logfire's Responses spans (instrument_openai version=1) give the reply as trailing
        # gen_ai.assistant.message events, not gen_ai.choice: those are the outputs once the call
        # answered (finish reasons written); else they are the conversation so far.
        replies = 0
        if ctx.attributes.get("gen_ai.response.finish_reasons"):
            while replies < len(items) and items[-1 - replies].get("event.name") == ASSISTANT_EVENT:
                replies += 1
        split = len(items) - replies
        chosen = items[split:] if side == "out" else items[:split]
    messages = _logfire_messages(chosen)
    if not messages:
        return None
    out: dict[str, Any] = {"messages": messages}
    reasons = [i["finish_reason"] for i in chosen if i.get("finish_reason") is not None]
    if side == "out" and reasons:
        out["finish_reason"] = reasons[0]
    return out


def _read_logfire_prompt(ctx: Ctx, key: str) -> dict[str, Any] | None:
    # A name this generic may be the app's own attribute, not another encoding of
    # the inputs: it is taken only when it is the inputs, else it stays in metadata.
    if ctx.claim_only or key not in ctx.attributes:
        return None
    return read_value(ctx, key)


def _read_logfire_all_messages(ctx: Ctx, key: str) -> dict[str, Any] | None:
    items = _logfire_events(ctx, key)
    if ctx.claim_only or not items:
        return None
    messages = _logfire_messages(items)
    return {"messages": messages} if messages else None


def logfire_body(ctx: Ctx, key: str) -> dict[str, Any] | None:
    """Logfire's ``request_data``/``response_data`` object on a span Logfire made, decoded once, else None.

    An unreadable one is reported once and left as it came (in metadata).
    """
    cached = _BODY_CACHE + key
    if cached in ctx.cache:
        body: dict[str, Any] | None = ctx.cache[cached]
        return body
    found: dict[str, Any] | None = None
    raw = ctx.attributes.get(key)
    if raw is not None and ctx.attributes.get(_LOGFIRE_MARK) is not None:
        value = json_value(raw)
        if isinstance(value, dict):
            found = value
        else:
            ctx.malformed.append((key, "a JSON object"))
    ctx.cache[cached] = found
    return found


def _read_logfire_data(ctx: Ctx, key: str) -> dict[str, Any] | None:
    """Logfire's format 1: the conversation in ``request_data`` (the request body) as the inputs,
    the message or text of ``response_data`` as the outputs.

    The rest of the request body is the invocation parameters (``find_invocation_params``), which
    consume it; a response with neither message nor text (an embedding's usage alone, images)
    stays in metadata. Logfire writes Anthropic's tool calls with the arguments wrapped in
    ``{"input": ...}``: they are unwrapped.
    """
    data = logfire_body(ctx, key)
    if data is None:
        return None
    if key == _LOGFIRE_REQUEST:
        if ctx.claim_only or not _LOGFIRE_CONVERSATION_KEYS.intersection(data):
            return None  # format 2's request_data names the model alone
        messages = messages_of(data["messages"]) if isinstance(data.get("messages"), list) else []
        system = data.get("system", data.get("instructions"))
        sys_msg = system_message(system) if system is not None else None
        if sys_msg:
            messages.insert(0, sys_msg)
        if messages:
            return {"messages": messages}
        if data.get("prompt") is not None:
            return {"prompt": plain(data["prompt"])}
        return payload_of(data["input"], "input") if data.get("input") is not None else None
    message = data.get("message")
    text = data.get("text", data.get("combined_chunk_content"))
    if not isinstance(message, dict) and not isinstance(text, str):
        return None
    ctx.consumed.add(key)
    if ctx.claim_only:
        return None
    if isinstance(message, dict):
        if message.get("content") is None and isinstance(message.get("refusal"), str):
            message = {**message, "content": message["refusal"]}
        replies = message_of(message, "assistant")
    else:
        replies = [{"role": "assistant", "content": text}]
    if ctx.attributes.get("gen_ai.system") == "anthropic":
        for reply in replies:
            for call in reply.get("tool_calls") or ():
                function = call.get("function")
                arguments = json_value(function.get("arguments")) if isinstance(function, dict) else None
                if isinstance(arguments, dict) and len(arguments) == 1 and "input" in arguments:
                    function["arguments"] = json_text(arguments["input"])
    out: dict[str, Any] = {"messages": replies}
    if data.get("finish_reason") is not None:
        out["finish_reason"] = plain(data["finish_reason"])
    return out


def logfire_usage_details(attributes: Mapping[str, Any], consumed: set[str]) -> dict[str, Any] | None:
    """The token details of the provider's usage object Logfire keeps whole, as usage_metadata's.

    From ``gen_ai.usage.raw`` (consumed), else from format 1's ``response_data.usage``.
    """
    raw = json_value(attributes.get(_LOGFIRE_USAGE_RAW))
    if isinstance(raw, dict):
        consumed.add(_LOGFIRE_USAGE_RAW)
    elif attributes.get(_LOGFIRE_MARK) is not None:
        response = json_value(attributes.get(_LOGFIRE_RESPONSE))
        raw = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(raw, dict):
        return None
    details: dict[str, Any] = {}
    for (group, name), (where, detail) in _PROVIDER_USAGE_DETAILS:
        holder = raw.get(group) if group else raw
        count = holder.get(name) if isinstance(holder, dict) else None
        if isinstance(count, int) and not isinstance(count, bool):
            details.setdefault(where, {}).setdefault(detail, count)
    return details or None


def _read_pydantic_ai(ctx: Ctx, side: str) -> dict[str, Any] | None:
    """pydantic-ai's agent run and its format-2 tool span.

    The agent run's inputs are the conversation it was given: the instructions,
    the history, and its prompt (every message before its first reply); its
    outputs are its final result as the assistant's answer, so the run reads as
    one chat turn, the way the service shows a chat (its thread view included).
    The whole exchange in between (tool calls, tool results) is in the child runs.
    A run that failed has no final result, hence no outputs: its error says why.
    """
    attributes = ctx.attributes
    if _PYDANTIC_AI_MESSAGES not in attributes:
        if not attributes.get("gen_ai.tool.name"):
            return None
        # The tool span's arguments are also the documented invocation_params.tool_arguments row.
        key = _PYDANTIC_AI_TOOL_ARGUMENTS if side == "in" else _PYDANTIC_AI_TOOL_RESULT
        value = ctx.take(key)
        if ctx.claim_only or value is None:
            return None
        return payload_of(value, "input" if side == "in" else "output")
    if side == "out":
        final = ctx.take(_PYDANTIC_AI_FINAL_RESULT)
        if ctx.claim_only or final is None:
            return None
        return {"messages": [{"role": "assistant", "content": json_text(plain(final))}]}
    raw = ctx.take(_PYDANTIC_AI_MESSAGES)
    index = as_int(ctx.take(_PYDANTIC_AI_NEW_MESSAGE_INDEX)) or 0
    system = ctx.take("gen_ai.system_instructions")
    if ctx.claim_only:
        return None
    items = as_list(raw) or []
    # new_message_index counts pydantic-ai messages: a response is one GenAI message (the
    # assistant's), a request one or more consecutive others (system, user, tool parts).
    start = counted = 0
    while start < len(items) and counted < index:
        if _role_of(items[start]) == "assistant":
            start += 1
        else:
            while start < len(items) and _role_of(items[start]) != "assistant":
                start += 1
        counted += 1
    end = start
    while end < len(items) and _role_of(items[end]) != "assistant":
        end += 1
    messages = messages_of(items[:end])
    sys_msg = system_message(system) if system is not None else None
    if sys_msg:
        messages.insert(0, sys_msg)
    return {"messages": messages} if messages else None


def _role_of(item: Any) -> Any:
    return item.get("role") if isinstance(item, dict) else None


_PYDANTIC_AI_READS = tuple(
    generic(key) if key in (_PYDANTIC_AI_FINAL_RESULT, _PYDANTIC_AI_TOOL_ARGUMENTS, _PYDANTIC_AI_TOOL_RESULT) else Key(key)
    for key in (_PYDANTIC_AI_MESSAGES, "gen_ai.tool.name", _PYDANTIC_AI_TOOL_ARGUMENTS, _PYDANTIC_AI_TOOL_RESULT,
                _PYDANTIC_AI_FINAL_RESULT, _PYDANTIC_AI_NEW_MESSAGE_INDEX, "gen_ai.system_instructions")
)
_MARK = generic(_LOGFIRE_MARK)

ROWS = (
    # Logfire's tags (an attribute array: its LLM integrations tag their spans "LLM").
    attr("logfire.tags", marks=False, tags=30),
    # Where the provider's whole usage object may be (``logfire_usage_details``).
    attr(_LOGFIRE_USAGE_RAW, provider_usage=10),
    attr(_LOGFIRE_MARK, marks=False, provider_usage=20),
    attr(_LOGFIRE_RESPONSE, marks=False, provider_usage=30),
    # doc: tools -> invocation_params.tools. "Array of tool definitions"
    attr("tools", marks=False, param=("tools", "tools", 60)),
    # doc: tool_arguments -> invocation_params.tool_arguments. "Tool arguments as JSON or key-value pairs"
    attr("tool_arguments", marks=False, param=("tool_arguments", "json", 70)),
    # pydantic-ai repeats its counts under gen_ai.usage.details.<its usage field> (cache_*_tokens
    # "for backwards compat"), and names audio by side there; reasoning is ``_genai``'s documented row.
    attr("gen_ai.usage.details.cache_read_tokens", usage=(("input_token_details", "cache_read"), 40)),
    attr("gen_ai.usage.details.cache_write_tokens", usage=(("input_token_details", "cache_creation"), 50)),
    attr("gen_ai.usage.details.input_audio_tokens", usage=(("input_token_details", "audio"), 20)),
    attr("gen_ai.usage.details.output_audio_tokens", usage=(("output_token_details", "audio"), 20)),
    # pydantic-ai's agent run (set as it ends) and its format-2 tool span (set at its start). First,
    # because the GenAI input row would take the agent's instructions alone as its inputs.
    Source("in", _read_pydantic_ai, "in", _PYDANTIC_AI_READS, order=10, final=frozenset({"tool"})),
    # Logfire's format 1: the request body, set as its span starts.
    Source("in", _read_logfire_data, _LOGFIRE_REQUEST, (generic(_LOGFIRE_REQUEST), _MARK, Key("gen_ai.system")),
           order=50, final=FINAL),
    Source("in", _read_logfire_prompt, _LOGFIRE_PROMPT, (generic(_LOGFIRE_PROMPT),), order=130, final=NOT_FINAL),
    Source("in", _read_logfire_events, "in", (generic(_LOGFIRE_EVENTS),), order=140, final=NOT_FINAL),
    # Logfire's format 1: the response's message.
    Source("out", _read_logfire_data, _LOGFIRE_RESPONSE, (generic(_LOGFIRE_RESPONSE), _MARK, Key("gen_ai.system")),
           order=40),
    Source("out", _read_pydantic_ai, "out", _PYDANTIC_AI_READS, order=90),
    Source("out", _read_logfire_all_messages, _LOGFIRE_ALL_MESSAGES, (generic(_LOGFIRE_ALL_MESSAGES),), order=100),
    Source("out", _read_logfire_events, "out", (generic(_LOGFIRE_EVENTS),), order=110),
)
