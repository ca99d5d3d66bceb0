"""What the OpenAI and Anthropic instrumentors share: one GenAI client span per model call.

Both instrumentors describe each wrapped method as an :class:`Operation` (how to read the request,
the response and the streamed chunks) and let :func:`sync_wrapper` / :func:`async_wrapper` do the
rest: the "already traced" check, starting the span, ending it on the response, the error, or the
end of a stream, the ``new_token`` time-to-first-token event, and the guard that keeps our own
failures out of the user's call.

Messages are written in the OTel GenAI "parts" shape as JSON strings::

    gen_ai.input.messages   [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
    gen_ai.output.messages  [{"role": "assistant", "parts": [...], "finish_reason": "stop"}]
    gen_ai.system_instructions  [{"type": "text", "content": "be brief"}]

Content capture (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``): the OTel convention is
opt-in, but this package is ON by default, because the runs it feeds exist for people to read the
prompts and completions. Set the variable to ``false`` (or ``0``/``no``/``off``, or the newer
``NO_CONTENT``/``EVENT_ONLY`` values) to record only model, parameters and usage; anything else
keeps content. It is read when ``instrument()`` runs (``instrument(capture_content=False)``
overrides it), through the settings module (``_settings.resolve_instrumentation``), where the
variable is declared with its parser.

Tracing once: when another instrumentation already traces the same call, ours steps aside.
It recognises (1) a call already inside one of our own spans (a context flag), (2) a current
span that is someone else's llm span, whatever the provider: OpenInference, OpenLLMetry, the
GenAI conventions (pydantic-ai among them; :func:`is_llm_span`), (3) a wrapt wrapper from a
known tracing package under ours on the same method, or on the client's ``request`` method
(openinference wraps ``OpenAI.request``), (4) clients that trace themselves (the Anthropic
SDK's built-in spans), via :meth:`Operation.client_traces_itself`, and (5) a framework's model
call whose llm span its tracer keeps out of the context (LangChain under OpenInference).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable, Iterable, Mapping, NamedTuple
from urllib.parse import urlsplit

import orjson
import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .. import environment_variables as ev
from .._encode import json_value
from .._settings import resolve_instrumentation
from ._span import SpanCall, json_dumps

logger = logging.getLogger("otel_runs_exporter.instrumentation")

CAPTURE_CONTENT_ENV = ev.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
"""Env var switching message content capture; default here: capture (see module docstring)."""

FIRST_TOKEN_EVENT = "new_token"
"""Span event added when the first content chunk of a stream arrives (time to first token)."""

_ACTIVE_KEY = otel_context.create_key("otel_runs_exporter.genai_call")

# Packages whose wrappers trace calls; a wrapt wrapper from one of them means the call is covered.
_TRACING_MODULES = (
    "opentelemetry.instrumentation.",
    "opentelemetry.util.genai",
    "openinference.",
    "traceloop.",
    "opentelemetry_instrumentation_",
    "openlit.",
    "langfuse.",
    "logfire.",
    "agentops.",
)


def capture_content_enabled(override: bool | None = None) -> bool:
    """Whether message content is recorded: ``override`` if given, else the env var, default True.

    >>> capture_content_enabled(False)
    False
    """
    if override is not None:
        return bool(override)
    return resolve_instrumentation().capture_content


def get(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` for mappings, ``obj.key`` for SDK objects; ``default`` when missing or None."""
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        value = obj.get(key, default)
    else:
        value = getattr(obj, key, default)
    return default if value is None else value


def _not_given(value: Any) -> bool:
    """Whether ``value`` is the SDKs' stand-in for an argument the caller left out."""
    return type(value).__name__ in ("NotGiven", "Omit")


def set_if(attributes: dict[str, Any], key: str, value: Any) -> None:
    """Set an attribute only when the value is something OTel can hold.

    A value JSON has no type for is first what ``json_value`` makes of it (a Decimal
    ``temperature`` a number, an enum its value), the rule the messages' JSON follows too.
    """
    if value is None or _not_given(value):
        return
    if not isinstance(value, (str, bool, int, float, list, tuple, dict)):
        value = json_value(value)
    if isinstance(value, (str, bool, int, float)):
        attributes[key] = value
    elif isinstance(value, (list, tuple)) and value:
        if all(isinstance(v, str) for v in value):
            attributes[key] = list(value)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            attributes[key] = list(value)


# --------------------------------------------------------------------------- attribute tables


class Attr(NamedTuple):
    """One row of an attribute table: where a value is read, the attribute it sets, and how.

    ``path`` is a request keyword or a response field; dots go into nested fields
    (``usage.prompt_tokens``); an empty path reads the whole source (for a value drawn from several
    fields). ``convert`` gets the value read (None when absent) and returns what
    to set (None: nothing). ``content`` rows are read only when message content is captured.
    """

    path: str
    attribute: str
    convert: Callable[[Any], Any] | None = None
    content: bool = False


def read_attributes(table: Iterable[Attr], source: Any, capture: bool = True) -> dict[str, Any]:
    """The attributes ``table`` reads from ``source``: a call's keyword arguments or a response.

    A value that is missing, None or an SDK "not given" sentinel reads as None. For each attribute
    the first row that gives a value OTel can hold wins, so a newer keyword can be listed before
    the older one it replaces. A converter that raises is a bug of ours; the caller guards it.

    >>> table = (Attr("max_completion_tokens", "gen_ai.request.max_tokens"),
    ...          Attr("max_tokens", "gen_ai.request.max_tokens"),
    ...          Attr("stop", "gen_ai.request.stop_sequences", as_list),
    ...          Attr("messages", "gen_ai.input.messages", json_of(list), content=True))
    >>> read_attributes(table, {"max_tokens": 50, "stop": "END", "messages": []}, capture=False)
    {'gen_ai.request.max_tokens': 50, 'gen_ai.request.stop_sequences': ['END']}
    """
    attributes: dict[str, Any] = {}
    for row in table:
        if row.attribute in attributes or (row.content and not capture):
            continue
        value = _read(source, row.path)
        set_if(attributes, row.attribute, value if row.convert is None else row.convert(value))
    return attributes


def _read(source: Any, path: str) -> Any:
    if not path:
        return source
    value = source
    for key in path.split("."):
        value = get(value, key)
        if value is None or _not_given(value):
            return None
    return value


def count(value: Any) -> int | None:
    """Converter for token counts and sizes: ints only (a bool is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def flag(value: Any) -> bool | None:
    """Converter for switches such as ``stream``: set to True when on, left out otherwise."""
    return True if value else None


def as_list(value: Any) -> Any:
    """Converter for arguments that take one string or a list of them (``stop``)."""
    return [value] if isinstance(value, str) else value


def json_of(convert: Callable[[Any], Any]) -> Callable[[Any], str | None]:
    """Converter: ``convert``, then the JSON string the conventions ask for (None stays None)."""

    def to_json(value: Any) -> str | None:
        converted = convert(value)
        return None if converted is None else json_attr(converted)

    return to_json


def tool_definitions(tools: Any) -> str | None:
    """Converter for the ``tools`` argument: its JSON when there are any."""
    return json_attr(list(tools)) if tools else None


# Rows every provider's tables share, named once: what a request's model, sampling, stream flag
# and tools become, and a response's model and id.
REQUEST_MODEL = Attr("model", "gen_ai.request.model")
SAMPLING = (Attr("temperature", "gen_ai.request.temperature"), Attr("top_p", "gen_ai.request.top_p"))
STREAM = Attr("stream", "gen_ai.request.stream", flag)
TOOLS = Attr("tools", "gen_ai.tool.definitions", tool_definitions, content=True)
RESPONSE_MODEL = Attr("model", "gen_ai.response.model")
RESPONSE_ID = Attr("id", "gen_ai.response.id")


_USAGE_ATTRIBUTES = {
    "input": "gen_ai.usage.input_tokens",
    "output": "gen_ai.usage.output_tokens",
    "cache_read": "gen_ai.usage.cache_read.input_tokens",
    "cache_write": "gen_ai.usage.cache_creation.input_tokens",
    "reasoning": "gen_ai.usage.reasoning.output_tokens",
}


def usage_rows(**paths: str) -> tuple[Attr, ...]:
    """The token-count rows of a response table: each keyword names where a provider puts one count.

    >>> [row.attribute for row in usage_rows(input="usage.prompt_tokens", reasoning="usage.r")]
    ['gen_ai.usage.input_tokens', 'gen_ai.usage.reasoning.output_tokens']
    """
    return tuple(Attr(path, _USAGE_ATTRIBUTES[kind], count) for kind, path in paths.items())


def response_rows(finish_reasons: Attr, *more: Attr, **usage: str) -> tuple[Attr, ...]:
    """A chat response's table: its model and id, ``finish_reasons``, any ``more`` rows, then its token counts.

    >>> [row.attribute for row in response_rows(Attr("choices", "gen_ai.response.finish_reasons"),
    ...                                          output="usage.completion_tokens")]
    ['gen_ai.response.model', 'gen_ai.response.id', 'gen_ai.response.finish_reasons', 'gen_ai.usage.output_tokens']
    """
    return (RESPONSE_MODEL, RESPONSE_ID, finish_reasons, *more, *usage_rows(**usage))


def server_attributes(instance: Any) -> dict[str, Any]:
    """``server.address`` / ``server.port`` from the resource's client ``base_url``."""
    try:
        url = urlsplit(str(instance._client.base_url))
        attributes: dict[str, Any] = {}
        if url.hostname:
            attributes["server.address"] = url.hostname
        if url.port:
            attributes["server.port"] = url.port
        return attributes
    except Exception:
        return {}


# --------------------------------------------------------------------------- message parts


def parse_arguments(arguments: Any) -> Any:
    """Tool-call arguments as an object when they are JSON text (models send strings)."""
    if isinstance(arguments, str):
        try:
            return orjson.loads(arguments)
        except Exception:
            return arguments
    return _plain(arguments)


def _plain(value: Any) -> Any:
    """SDK objects (pydantic) as plain data, so the JSON keeps their fields rather than a repr."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", exclude_none=True)
        except Exception:
            return value
    return value


def text_part(text: Any) -> dict[str, Any]:
    return {"type": "text", "content": text if isinstance(text, str) else json_dumps(text)}


def tool_call_part(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call", "name": name, "arguments": parse_arguments(arguments)}
    if call_id:
        part["id"] = call_id
    return part


def tool_response_part(call_id: Any, response: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call_response", "response": _plain(response)}
    if call_id:
        part["id"] = call_id
    return part


def image_url_part(url: Any, modality: str = "image") -> dict[str, Any]:
    """A ``data:`` URL becomes a blob part, anything else a uri part."""
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        header, data = url[5:].split(";base64,", 1)
        return {"type": "blob", "modality": modality, "mime_type": header or None, "content": data}
    return {"type": "uri", "modality": modality, "uri": url}


def generic_part(block: Any) -> dict[str, Any]:
    """A part type the conventions do not name: keep its type and its fields."""
    data = _plain(block)
    if isinstance(data, Mapping):
        return {**data, "type": data.get("type") or "unknown"}
    return {"type": "unknown", "content": data}


def message(role: Any, parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"role": role or "user", "parts": parts}
    for key, value in extra.items():
        if value is not None:
            out[key] = value
    return out


# --------------------------------------------------------------------------- the span of one call


class Operation:
    """How one wrapped client method maps to the GenAI conventions; subclassed per method."""

    operation_name = "chat"
    provider = ""
    request_table: tuple[Attr, ...] = ()
    """Request keyword -> attribute rows, read by :func:`read_attributes`."""
    response_table: tuple[Attr, ...] = ()
    """Response field -> attribute rows, read from a complete response."""
    response_field: str | None = None
    """A field every parsed response has; a result without it (a raw response, from the client's
    ``with_raw_response``) gives no response attributes."""

    def request_attributes(self, instance: Any, kwargs: Mapping[str, Any], capture: bool) -> dict[str, Any]:
        """Attributes known before the call; must include ``gen_ai.request.model`` when known."""
        return read_attributes(self.request_table, kwargs, capture)

    def response_attributes(self, result: Any, capture: bool) -> dict[str, Any]:
        """Attributes read from a complete (non-streamed) response: its table's, and the output
        messages when content is captured."""
        if self.response_field is not None and not hasattr(result, self.response_field):
            return {}
        attributes = read_attributes(self.response_table, result)
        if capture:
            messages = self.output_messages(result)
            if messages is not None:
                attributes["gen_ai.output.messages"] = json_attr(messages)
        return attributes

    def output_messages(self, result: Any) -> list[dict[str, Any]] | None:
        """A complete response's output in the GenAI output-messages shape; None: the operation has none."""
        return None

    def is_stream(self, kwargs: Mapping[str, Any], result: Any) -> bool:
        """Whether ``result`` is a stream whose end ends the span."""
        return False

    def accumulator(self, kwargs: Mapping[str, Any], capture: bool) -> "StreamAccumulator":
        raise NotImplementedError

    def client_traces_itself(self, instance: Any) -> bool:
        """Whether the client SDK emits its own span for this call (then ours is left out)."""
        return False


class StreamAccumulator:
    """Folds streamed items into the attributes of the finished call."""

    def add(self, item: Any, call: "GenAICall") -> None:
        """Take one streamed item; call ``call.first_token()`` at the first content."""

    def attributes(self) -> dict[str, Any]:
        return {}


class GenAICall(SpanCall):
    """One model call's span; every method is guarded and ends the span at most once.

    ``with call:`` runs the client's request with the span current (and marked as ours, for the
    double-tracing check); an exception leaving it is recorded and re-raised unchanged.
    """

    __slots__ = ("capture", "_ended", "_first_token")

    def __init__(self, span: Span, capture: bool) -> None:
        super().__init__(span, otel_context.set_value(_ACTIVE_KEY, True, trace.set_span_in_context(span)))
        self.capture = capture
        self._ended = False
        self._first_token = False

    @classmethod
    def start(
        cls, tracer: trace.Tracer, op: Operation, instance: Any, kwargs: Mapping[str, Any], capture: bool
    ) -> "GenAICall | None":
        try:
            attributes = {
                "gen_ai.operation.name": op.operation_name,
                "gen_ai.provider.name": op.provider,
                **server_attributes(instance),
                **op.request_attributes(instance, kwargs, capture),
            }
            model = attributes.get("gen_ai.request.model")
            name = f"{op.operation_name} {model}" if model else op.operation_name
            return cls(tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes), capture)
        except Exception:
            logger.warning("could not start the span of a %s call", op.provider, exc_info=True)
            return None

    def first_token(self) -> None:
        if not self._first_token:
            self._first_token = True
            self.span.add_event(FIRST_TOKEN_EVENT)

    @property
    def ended(self) -> bool:
        return self._ended

    def end(self, attributes: Mapping[str, Any] | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            if attributes:
                self.span.set_attributes(attributes)
        except Exception:
            logger.warning("could not set the response attributes", exc_info=True)
        self.span.end()

    def fail(self, exc: BaseException) -> None:
        if self._ended:
            return
        try:
            self.span.set_attribute("error.type", type(exc).__qualname__)
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, str(exc)))
        except Exception:
            logger.warning("could not record an error", exc_info=True)
        self.end()

    def complete(self, op: Operation, kwargs: Mapping[str, Any], result: Any, is_async: bool) -> Any:
        """End the span on ``result``, or hand back a stream proxy that ends it later."""
        try:
            if op.is_stream(kwargs, result):
                acc = op.accumulator(kwargs, self.capture)
                return AsyncStreamProxy(result, self, acc) if is_async else SyncStreamProxy(result, self, acc)
            self.end(op.response_attributes(result, self.capture))
        except Exception:
            logger.warning("could not read a %s response", op.provider, exc_info=True)
            self.end()
        return result


# --------------------------------------------------------------------------- double-tracing check


def _is_tracing_wrapper(obj: Any) -> bool:
    """Whether ``obj`` is, or wraps, a wrapt wrapper installed by a known tracing package."""
    for _ in range(8):  # wrapper stacks are shallow; the bound protects against cycles
        if not isinstance(obj, wrapt.ObjectProxy) and not hasattr(obj, "_self_wrapper"):
            return False
        wrapper = getattr(obj, "_self_wrapper", None)
        if wrapper is not None:
            module = getattr(wrapper, "__module__", None) or type(wrapper).__module__ or ""
            if module.startswith(_TRACING_MODULES):
                return True
        obj = getattr(obj, "__wrapped__", None)
        if obj is None:
            return False
    return False


def _client_request_wrapped(instance: Any) -> bool:
    client = getattr(instance, "_client", None)
    if client is None:
        return False
    for klass in type(client).__mro__:
        attr = klass.__dict__.get("request")
        if attr is not None:
            return _is_tracing_wrapper(attr)
    return False


# The GenAI conventions' model operations (its operation-name enum): a span current with one of
# these is a model call someone already traces, whoever the provider.
_MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings", "completion"})


def is_llm_span(attrs: Mapping[str, Any]) -> bool:
    """Whether a span's attributes say it is a model call traced by a known convention.

    OpenInference (``openinference.span.kind`` LLM or EMBEDDING), OpenLLMetry
    (``llm.request.type``), and the OTel GenAI conventions, pydantic-ai's among them
    (a model ``gen_ai.operation.name``). Its llm run already counts the call's tokens:
    a second span from us under it would count them twice.

    >>> is_llm_span({"gen_ai.operation.name": "chat"}), is_llm_span({"gen_ai.operation.name": "invoke_agent"})
    (True, False)
    """
    if attrs.get("openinference.span.kind") in ("LLM", "EMBEDDING"):
        return True
    if attrs.get("llm.request.type") is not None:
        return True
    return attrs.get("gen_ai.operation.name") in _MODEL_OPERATIONS


# Frameworks whose tracer records their model calls as llm spans it never makes current (OpenInference's
# LangChain tracer keeps its spans out of the OTel context, by design: callbacks may never detach one). For
# each: the modules that call the client from inside such a model call, and the instrumentor that records it.
_FRAMEWORK_MODELS = (
    (("langchain_openai.", "langchain_anthropic.", "langchain_core.language_models."),
     "openinference.instrumentation.langchain", "LangChainInstrumentor"),
)


def _in_traced_framework_model() -> bool:
    """Whether a framework's model call, recorded as an llm span by its instrumentation, made this call.

    Told by the callers on the stack (the framework's model integration) and the framework's
    instrumentor being on; neither is imported here.
    """
    for callers, module_name, instrumentor in _FRAMEWORK_MODELS:
        module = sys.modules.get(module_name)
        if module is None or not getattr(module, instrumentor)().is_instrumented_by_opentelemetry:
            continue
        frame = sys._getframe(2)
        for _ in range(64):  # a model integration calls the client a few frames up, never this far
            if frame is None:
                break
            if str(frame.f_globals.get("__name__", "")).startswith(callers):
                return True
            frame = frame.f_back
    return False


def traced_elsewhere(op: Operation, wrapped: Any, instance: Any) -> bool:
    """Whether this call is already traced (by us further out, or by someone else)."""
    if otel_context.get_value(_ACTIVE_KEY):
        return True
    span = trace.get_current_span()
    if span.is_recording() and is_llm_span(getattr(span, "attributes", None) or {}):
        return True
    return (
        _is_tracing_wrapper(wrapped) or _client_request_wrapped(instance) or op.client_traces_itself(instance)
        or _in_traced_framework_model()
    )


# --------------------------------------------------------------------------- wrappers


class Switch:
    """Turns an instrumentor's wrappers into pass-throughs after ``uninstrument`` when they
    cannot be removed (another package wrapped the method on top of ours)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True


def should_skip(switch: Switch, op: Operation, wrapped: Any, instance: Any) -> bool:
    """Whether a call goes straight through: instrumentor off, instrumentation suppressed, or traced elsewhere."""
    if not switch.on or not is_instrumentation_enabled():
        return True
    try:
        return traced_elsewhere(op, wrapped, instance)
    except Exception:
        logger.warning("double-tracing check failed; tracing the call", exc_info=True)
        return False


def sync_wrapper(op: Operation, tracer: trace.Tracer, capture: bool, switch: Switch) -> Callable[..., Any]:
    """A ``wrapt`` wrapper tracing a synchronous client method described by ``op``."""

    def traced(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if should_skip(switch, op, wrapped, instance):
            return wrapped(*args, **kwargs)
        call = GenAICall.start(tracer, op, instance, kwargs, capture)
        if call is None:
            return wrapped(*args, **kwargs)
        with call:
            result = wrapped(*args, **kwargs)
        return call.complete(op, kwargs, result, is_async=False)

    return traced


def async_wrapper(op: Operation, tracer: trace.Tracer, capture: bool, switch: Switch) -> Callable[..., Any]:
    """A ``wrapt`` wrapper tracing an ``async`` client method described by ``op``."""

    async def traced(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if should_skip(switch, op, wrapped, instance):
            return await wrapped(*args, **kwargs)
        call = GenAICall.start(tracer, op, instance, kwargs, capture)
        if call is None:
            return await wrapped(*args, **kwargs)
        with call:
            result = await wrapped(*args, **kwargs)
        return call.complete(op, kwargs, result, is_async=True)

    return traced


def unwrap_own(owner: Any, attr: str, switch: Switch) -> None:
    """Remove our wrapper from ``owner.attr`` if it is the outermost; the switch covers the rest."""
    switch.on = False
    current = owner.__dict__.get(attr)
    wrapper = getattr(current, "_self_wrapper", None)
    if wrapper is not None and str(getattr(wrapper, "__module__", "")).startswith("otel_runs_exporter."):
        setattr(owner, attr, current.__wrapped__)


# --------------------------------------------------------------------------- stream proxies


class _StreamProxy(wrapt.ObjectProxy):  # type: ignore[misc]
    """What the sync and async stream proxies share: folding each item into the accumulator and
    ending the span at the stream's end, failure or close. Nothing here raises into the reader."""

    def __init__(self, stream: Any, call: GenAICall, acc: StreamAccumulator) -> None:
        super().__init__(stream)
        self._self_call = call
        self._self_acc = acc

    def _self_took(self, item: Any) -> Any:
        try:
            self._self_acc.add(item, self._self_call)
        except Exception:
            logger.warning("could not read a streamed chunk", exc_info=True)
        return item

    def _self_stopped(self, exc: BaseException) -> None:
        """The stream's reader got ``exc``: the end of the stream, or the stream's own failure."""
        if isinstance(exc, (StopIteration, StopAsyncIteration)):
            self._self_end()
        else:
            self._self_call.fail(exc)

    def _self_end(self) -> None:
        try:
            attributes = self._self_acc.attributes()
        except Exception:
            logger.warning("could not aggregate a stream", exc_info=True)
            attributes = {}
        self._self_call.end(attributes)

    def __del__(self) -> None:
        # A stream the app stopped reading and let go of without closing it: its span ends with
        # what was read, as OpenInference's and OpenLLMetry's proxies end theirs. Left open, its
        # run would read as running for good. A stream closed or exhausted ended it already: then
        # nothing is aggregated again.
        try:
            if not self._self_call.ended:
                self._self_end()
        except BaseException:  # noqa: BLE001 - a finalizer, maybe at interpreter exit: never raise
            pass


class SyncStreamProxy(_StreamProxy):
    """The client's stream, unchanged for the user, ending our span when it is exhausted,
    fails, or is closed (directly or by leaving its ``with`` block)."""

    def __iter__(self) -> "SyncStreamProxy":
        return self

    def __next__(self) -> Any:
        try:
            item = next(self.__wrapped__)
        except BaseException as exc:
            self._self_stopped(exc)
            raise
        return self._self_took(item)

    def __enter__(self) -> "SyncStreamProxy":
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            self._self_end()

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_end()


class AsyncStreamProxy(_StreamProxy):
    """The async counterpart of :class:`SyncStreamProxy`."""

    def __aiter__(self) -> "AsyncStreamProxy":
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self.__wrapped__.__anext__()
        except BaseException as exc:
            self._self_stopped(exc)
            raise
        return self._self_took(item)

    async def __aenter__(self) -> "AsyncStreamProxy":
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            self._self_end()

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_end()

    async def aclose(self) -> None:
        await self.close()


def json_attr(value: Any) -> str:
    """Messages and parts as the JSON string the conventions ask for."""
    return json_dumps(value)


class GenAIInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """What the client instrumentors share: the on/off switch, the list of what
    was wrapped, and unwrapping only what is ours.

    A subclass's ``_instrument`` calls :meth:`_begin` for its tracer and capture
    setting, then :meth:`_wrap` for each method.
    """

    def __init__(self) -> None:
        self._switch = Switch()
        self._wrapped: list[tuple[Any, str]] = []
        self._generation = 0

    def _begin(self, kwargs: Mapping[str, Any], module: str) -> tuple[trace.Tracer, bool]:
        self._switch = Switch()
        self._wrapped = []
        self._generation += 1
        tracer = trace.get_tracer(module, tracer_provider=kwargs.get("tracer_provider"))
        return tracer, capture_content_enabled(kwargs.get("capture_content"))

    def _when_imported(self, module: str, wrap_all: Callable[[], None]) -> None:
        """Run ``wrap_all`` now if ``module`` is imported, else right after the app imports it.

        ``opentelemetry-instrument`` instruments every installed library at
        startup; importing the client libraries then (about 1.8 s for anthropic)
        made every app pay for clients it may never use.
        """
        if module in sys.modules:
            wrap_all()
            return
        generation = self._generation

        def on_import(_module: Any) -> None:
            if self._generation == generation:  # not uninstrumented (or re-instrumented) meanwhile
                try:
                    wrap_all()
                except Exception:  # noqa: BLE001 - an import in the app must never fail because of us
                    logger.warning("could not instrument %s", module, exc_info=True)

        wrapt.register_post_import_hook(on_import, module)

    #: (module, class, method) of what other tracing packages wrap on the client, for :meth:`traced_by_another_package`.
    probes: tuple[tuple[str, str, str], ...] = ()

    def traced_by_another_package(self) -> bool:
        """Whether a known tracing package already wraps the client (seen only once the app imported it)."""
        for module_name, class_name, method in self.probes:
            module = sys.modules.get(module_name)
            owner = getattr(module, class_name, None) if module is not None else None
            attr = owner.__dict__.get(method) if isinstance(owner, type) else None
            if attr is not None and _is_tracing_wrapper(attr):
                return True
        return False

    def _wrap(self, owner: Any, method: str, wrapper: Callable[..., Any]) -> None:
        wrapt.wrap_function_wrapper(owner, method, wrapper)
        self._wrapped.append((owner, method))

    def _uninstrument(self, **kwargs: Any) -> None:
        self._generation += 1  # a hook still waiting for its import does nothing now
        for owner, method in self._wrapped:
            unwrap_own(owner, method, self._switch)
        self._wrapped = []
