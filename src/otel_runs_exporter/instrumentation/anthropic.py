"""OpenTelemetry instrumentor for the ``anthropic`` client, emitting the OTel GenAI conventions.

Traced: ``messages.create`` (sync and async, incl. ``stream=True``) and the ``messages.stream(...)``
context manager (sync and async). Each call is one CLIENT span ``"chat {model}"``; a streamed call's
span lasts until the stream is exhausted or closed, gets a ``new_token`` event at the first content
delta, and carries the aggregated content, stop reason and usage.

Usage follows the conventions: ``gen_ai.usage.input_tokens`` counts every input token, so it is
Anthropic's ``input_tokens`` plus ``cache_read_input_tokens`` plus ``cache_creation_input_tokens``
(Anthropic reports them apart); the cached parts are also given as
``gen_ai.usage.cache_read.input_tokens`` / ``gen_ai.usage.cache_creation.input_tokens``.

Tracing once: recent ``anthropic`` releases emit their own ``anthropic.messages.create`` span
for each call (on by default; ``ANTHROPIC_OPEN_TELEMETRY=false`` or
``Anthropic(open_telemetry=False)`` turns it off). When a client does that, this instrumentor leaves
the call to it rather than nesting a second span of the same call; note the SDK's own spans record
message content only with ``ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content``. Other
instrumentations already tracing the call are detected as for OpenAI (see ``_genai``).

Message content capture: ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, ON by default here.

>>> from otel_runs_exporter.instrumentation.anthropic import RunsAnthropicInstrumentor
>>> RunsAnthropicInstrumentor().instrument(tracer_provider=provider)  # doctest: +SKIP
>>> anthropic.Anthropic(open_telemetry=False).messages.create(...)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from importlib import import_module
from typing import Any, Callable, Collection, Mapping

import wrapt
from opentelemetry import trace

from . import _genai
from ._genai import (
    REQUEST_MODEL,
    SAMPLING,
    STREAM,
    TOOLS,
    AsyncStreamProxy,
    Attr,
    GenAICall,
    GenAIInstrumentor,
    Operation,
    StreamAccumulator,
    Switch,
    SyncStreamProxy,
    count,
    get,
    json_attr,
    json_of,
    message,
    read_attributes,
    response_rows,
    text_part,
    tool_call_part,
    tool_response_part,
)

__all__ = ["RunsAnthropicInstrumentor"]

logger = logging.getLogger("otel_runs_exporter.instrumentation")

_PROVIDER = "anthropic"


# --------------------------------------------------------------------------- message conversion


def _block_part(block: Any) -> dict[str, Any]:
    kind = get(block, "type")
    if kind == "text":
        return text_part(get(block, "text", ""))
    if kind in ("tool_use", "server_tool_use"):
        return tool_call_part(get(block, "id"), get(block, "name"), get(block, "input", {}))
    if kind == "tool_result":
        content = get(block, "content")
        if isinstance(content, list):
            content = [get(c, "text") if get(c, "type") == "text" else _genai._plain(c) for c in content]
            if all(isinstance(c, str) for c in content):
                content = "".join(content)
        return tool_response_part(get(block, "tool_use_id"), content)
    if kind == "thinking":
        return {"type": "reasoning", "content": get(block, "thinking", "")}
    if kind in ("image", "document"):
        source = get(block, "source")
        modality = "image" if kind == "image" else "document"
        if get(source, "type") == "base64":
            return {"type": "blob", "modality": modality, "mime_type": get(source, "media_type"),
                    "content": get(source, "data")}
        if get(source, "type") == "url":
            return {"type": "uri", "modality": modality, "uri": get(source, "url")}
    return _genai.generic_part(block)


def _parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [text_part(content)]
    return [_block_part(block) for block in content]


def input_messages(messages: Any) -> list[dict[str, Any]]:
    """Anthropic ``messages`` in the GenAI input-messages shape (tool results become role ``tool``)."""
    out = []
    for msg in messages or []:
        parts = _parts(get(msg, "content"))
        role = get(msg, "role", "user")
        if parts and all(p["type"] == "tool_call_response" for p in parts):
            role = "tool"
        out.append(message(role, parts))
    return out


def system_instructions(system: Any) -> list[dict[str, Any]] | None:
    """The ``system`` argument (a string or text blocks) as GenAI instruction parts; None when empty."""
    if system is None:
        return None
    return _parts(system) or None


# --------------------------------------------------------------------------- operation


def _input_tokens(usage: Any) -> int | None:
    # The conventions count every input token; Anthropic reports the cached ones apart.
    fresh = get(usage, "input_tokens")
    if not isinstance(fresh, int):
        return None
    return count(fresh + (get(usage, "cache_read_input_tokens") or 0) + (get(usage, "cache_creation_input_tokens") or 0))


def _finish_reasons(stop_reason: Any) -> list[Any] | None:
    return [stop_reason] if stop_reason else None


_REQUEST = (
    REQUEST_MODEL,
    Attr("max_tokens", "gen_ai.request.max_tokens"),
    *SAMPLING,
    Attr("top_k", "gen_ai.request.top_k"),
    Attr("stop_sequences", "gen_ai.request.stop_sequences"),
    STREAM,
    Attr("system", "gen_ai.system_instructions", json_of(system_instructions), content=True),
    # Written even when empty: the run's inputs are the messages.
    Attr("messages", "gen_ai.input.messages", json_of(input_messages), content=True),
    TOOLS,
)

_RESPONSE = response_rows(
    Attr("stop_reason", "gen_ai.response.finish_reasons", _finish_reasons),
    # The conventions count every input token; Anthropic's input_tokens leaves the cached ones out.
    Attr("usage", "gen_ai.usage.input_tokens", _input_tokens),
    output="usage.output_tokens",
    cache_read="usage.cache_read_input_tokens",
    cache_write="usage.cache_creation_input_tokens",
    reasoning="usage.output_tokens_details.thinking_tokens",
)


class MessagesCreate(Operation):
    operation_name = "chat"
    provider = _PROVIDER
    request_table = _REQUEST
    response_table = _RESPONSE
    response_field = "content"

    def output_messages(self, result: Any) -> list[dict[str, Any]]:
        reason = get(result, "stop_reason")
        return [message(get(result, "role", "assistant"), _parts(result.content), finish_reason=reason or "")]

    def is_stream(self, kwargs: Mapping[str, Any], result: Any) -> bool:
        import anthropic

        return isinstance(result, (anthropic.Stream, anthropic.AsyncStream))

    def accumulator(self, kwargs: Mapping[str, Any], capture: bool) -> StreamAccumulator:
        return _MessageStream(capture)

    def client_traces_itself(self, instance: Any) -> bool:
        # The SDK's ``_tracer`` is None when its own spans are off (or OTel cannot give a tracer).
        client = getattr(instance, "_client", None)
        return getattr(client, "_tracer", None) is not None


class _MessageStream(StreamAccumulator):
    """Rebuilds the message from raw stream events (message_start … message_stop)."""

    def __init__(self, capture: bool) -> None:
        self.capture = capture
        self.message_id: str | None = None
        self.model: str | None = None
        self.role = "assistant"
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}

    def _merge_usage(self, usage: Any) -> None:
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = get(usage, key)
            if isinstance(value, int):
                self.usage[key] = value

    def add(self, event: Any, call: GenAICall) -> None:
        kind = get(event, "type")
        if kind == "message_start":
            msg = get(event, "message")
            self.message_id = get(msg, "id")
            self.model = get(msg, "model")
            self.role = get(msg, "role", "assistant")
            self._merge_usage(get(msg, "usage"))
        elif kind == "content_block_start":
            block = get(event, "content_block")
            self.blocks[get(event, "index", len(self.blocks))] = {
                "type": get(block, "type"), "id": get(block, "id"), "name": get(block, "name"),
                "text": [get(block, "text", "")], "json": [],
            }
        elif kind == "content_block_delta":
            call.first_token()
            delta = get(event, "delta")
            state = self.blocks.setdefault(get(event, "index", 0), {"type": "text", "text": [], "json": []})
            dtype = get(delta, "type")
            if dtype == "text_delta":
                state["text"].append(get(delta, "text", ""))
            elif dtype == "input_json_delta":
                state["json"].append(get(delta, "partial_json", ""))
            elif dtype == "thinking_delta":
                state["text"].append(get(delta, "thinking", ""))
        elif kind == "message_delta":
            self.stop_reason = get(get(event, "delta"), "stop_reason", self.stop_reason)
            self._merge_usage(get(event, "usage"))

    def attributes(self) -> dict[str, Any]:
        # The events add up to a message: read it with the same table as a complete one.
        summed = {"model": self.model, "id": self.message_id, "stop_reason": self.stop_reason, "usage": self.usage}
        attrs = read_attributes(_RESPONSE, summed)
        if self.capture:
            parts = []
            for index in sorted(self.blocks):
                block = self.blocks[index]
                if block["type"] in ("tool_use", "server_tool_use"):
                    parts.append(tool_call_part(block.get("id"), block.get("name"), "".join(block["json"]) or {}))
                elif block["type"] == "thinking":
                    parts.append({"type": "reasoning", "content": "".join(block["text"])})
                else:
                    parts.append(text_part("".join(block["text"])))
            attrs["gen_ai.output.messages"] = json_attr(
                [message(self.role, parts, finish_reason=self.stop_reason or "")]
            )
        return attrs


# --------------------------------------------------------------------------- messages.stream(...)


class _StreamManagerProxy(wrapt.ObjectProxy):  # type: ignore[misc]
    """``messages.stream(...)`` returns a manager that sends the request on ``__enter__``; the span
    starts there and ends when the stream closes (at the latest, when the ``with`` block ends)."""

    def __init__(self, manager: Any, start: Callable[[], GenAICall | None], capture: bool) -> None:
        super().__init__(manager)
        self._self_start = start
        self._self_capture = capture
        self._self_call: GenAICall | None = None

    def _self_begin(self) -> GenAICall | None:
        call = self._self_start()
        self._self_call = call
        return call

    def _self_proxy_raw(self, stream: Any, call: GenAICall, proxy_class: type) -> None:
        # MessageStream reads events from ``_raw_stream`` lazily (also for get_final_message and
        # text_stream), so proxying that one object sees every event however the user reads.
        try:
            raw = stream._raw_stream
            stream._raw_stream = proxy_class(raw, call, _MessageStream(self._self_capture))
        except Exception:
            logger.warning("anthropic MessageStream changed shape; the span has no streamed output", exc_info=True)

    def __enter__(self) -> Any:
        call = self._self_begin()
        if call is None:
            return self.__wrapped__.__enter__()
        with call:
            stream = self.__wrapped__.__enter__()
        self._self_proxy_raw(stream, call, SyncStreamProxy)
        return stream

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            if self._self_call is not None:
                self._self_call.end()  # no-op when closing the stream already ended it

    async def __aenter__(self) -> Any:
        call = self._self_begin()
        if call is None:
            return await self.__wrapped__.__aenter__()
        with call:
            stream = await self.__wrapped__.__aenter__()
        self._self_proxy_raw(stream, call, AsyncStreamProxy)
        return stream

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            if self._self_call is not None:
                self._self_call.end()


def _stream_method_wrapper(op: MessagesCreate, tracer: trace.Tracer, capture: bool, switch: Switch) -> Callable[..., Any]:
    def traced(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        manager = wrapped(*args, **kwargs)

        def start() -> GenAICall | None:
            # Decided on enter: that is where the request is sent, under the context current then.
            if _genai.should_skip(switch, op, wrapped, instance):
                return None
            return GenAICall.start(tracer, op, instance, {**kwargs, "stream": True}, capture)

        try:
            return _StreamManagerProxy(manager, start, capture)
        except Exception:
            logger.warning("could not wrap messages.stream()", exc_info=True)
            return manager

    return traced


# --------------------------------------------------------------------------- the instrumentor

_MODULE = "anthropic.resources.messages.messages"


class RunsAnthropicInstrumentor(GenAIInstrumentor):
    """Traces ``anthropic`` ``messages.create`` and ``messages.stream`` as GenAI client spans.

    ``instrument()`` accepts ``tracer_provider=`` and ``capture_content=`` (overriding
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).

    >>> RunsAnthropicInstrumentor().instrument(tracer_provider=provider)  # doctest: +SKIP
    >>> client = anthropic.Anthropic(open_telemetry=False)  # doctest: +SKIP
    >>> client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=[...])  # doctest: +SKIP
    """

    probes = ((_MODULE, "Messages", "create"),)

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("anthropic >= 0.30",)

    def _instrument(self, **kwargs: Any) -> None:
        tracer, capture = self._begin(kwargs, __name__)
        op = MessagesCreate()
        switch = self._switch

        def wrap_all() -> None:
            try:
                module = import_module(_MODULE)
            except ImportError:
                logger.debug("anthropic has no %s; not traced", _MODULE)
                return
            targets = (
                ("Messages", "create", _genai.sync_wrapper(op, tracer, capture, switch)),
                ("AsyncMessages", "create", _genai.async_wrapper(op, tracer, capture, switch)),
                ("Messages", "stream", _stream_method_wrapper(op, tracer, capture, switch)),
                ("AsyncMessages", "stream", _stream_method_wrapper(op, tracer, capture, switch)),
            )
            for class_name, method, wrapper in targets:
                owner = getattr(module, class_name, None)
                if owner is None or not hasattr(owner, method):
                    logger.debug("anthropic has no %s.%s; not traced", class_name, method)
                    continue
                self._wrap(owner, method, wrapper)

        self._when_imported("anthropic", wrap_all)
