"""OTLP/HTTP trace bodies to spans the converter reads: protobuf and JSON, every field checked.

``POST /otel/v1/traces`` takes an ``ExportTraceServiceRequest`` as ``application/x-protobuf``
(parsed by ``opentelemetry-proto``, the ``otlp`` extra) or ``application/json`` (OTLP's JSON
mapping, read here without protobuf: ids in hex, 64-bit integers as numbers or strings, enums
as numbers or names, field names in lowerCamelCase or as in the ``.proto``).

Both become :class:`OtlpSpan` objects, which read like the OTel SDK's ``ReadableSpan`` where
``_convert`` reads one, so a span sent over OTLP is converted by the same code as one the
exporter sees. Nothing from outside is trusted by size or shape: a body whose structure is
not OTLP's is a 400 (:class:`~._reply.Refuse`), a span that cannot be a run (an id of the
wrong length, a trace id of zeros, no end, an end before its start, values nested past
:data:`MAX_VALUE_DEPTH`) is rejected alone, with its reason (:class:`Decoded`), and more than
:data:`MAX_SPANS` spans in one request is a 413 before any span is built.

>>> body = {"resourceSpans": [{"scopeSpans": [{"spans": [{
...     "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "chat",
...     "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": 1700000001000000000,
...     "attributes": [{"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}}]}]}]}]}
>>> decoded = decode_json(orjson.dumps(body), "tests")
>>> span = decoded.spans[0]
>>> (span.name, span.attributes, span.end_time - span.start_time, decoded.rejected)
('chat', {'gen_ai.usage.input_tokens': 12}, 1000000000, [])
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ._jsonio import parse
from ._once import once_a_minute
from ._reply import Refuse, detail
from ._validate import json_depth_exceeds

__all__ = [
    "MAX_SPANS",
    "MAX_VALUE_DEPTH",
    "PROTOBUF",
    "JSON",
    "INSTALL_OTLP",
    "OtlpSpan",
    "OtlpEvent",
    "Decoded",
    "decode",
    "decode_json",
    "decode_protobuf",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
MAX_SPANS = 20_000
"""Spans in one request at most (the Collector's batch processor sends 8,192; the SDKs' batches 512)."""
MAX_VALUE_DEPTH = 32
"""How deep arrays and key-value lists may nest in one attribute value."""
INSTALL_OTLP = "pip install 'otel-runs-exporter[otlp]'"

logger = logging.getLogger(__name__)

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
# OTLP's SpanKind numbers (0 is unspecified: the SDKs' default, internal) to the OTel API's.
_KINDS = {
    0: SpanKind.INTERNAL, 1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT, 4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
_KIND_NAMES = {f"SPAN_KIND_{name}": number for number, name in
               enumerate(("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"))}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
# Span.flags: whether the parent's context says if it is remote, and if so, whether it is.
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
_SPAN_OVERHEAD = 600  # the span's objects and its context, besides its attributes and events: what holding it costs


class OtlpEvent(NamedTuple):
    """A span event as ``_convert`` reads one (the SDK's ``Event``)."""

    name: str
    attributes: dict[str, Any]
    timestamp: int


@dataclass(frozen=True, eq=False)
class Origin:
    """A resource or an instrumentation scope: one object per ``resourceSpans`` / ``scopeSpans`` of a request."""

    attributes: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    version: str | None = None


class OtlpSpan:
    """One span of a request, read through the names of the SDK's ``ReadableSpan`` that the converter uses.

    ``project`` is the project its request named (``Langsmith-Project``; None: the default); ``size`` what holding
    it costs, in bytes.
    """

    __slots__ = (
        "name", "context", "parent", "kind", "start_time", "end_time", "status", "attributes", "events", "resource",
        "instrumentation_scope", "project", "size",
    )

    def __init__(
        self, name: str, context: SpanContext, parent: SpanContext | None, kind: SpanKind, start_time: int,
        end_time: int, status: Status, attributes: dict[str, Any], events: tuple[OtlpEvent, ...], resource: Origin,
        scope: Origin, project: str | None, size: int,
    ) -> None:
        self.name = name
        self.context = context
        self.parent = parent
        self.kind = kind
        self.start_time = start_time
        self.end_time = end_time
        self.status = status
        self.attributes = attributes
        self.events = events
        self.resource = resource
        self.instrumentation_scope = scope
        self.project = project
        self.size = size

    def get_span_context(self) -> SpanContext:
        return self.context

    @property
    def key(self) -> tuple[int, int]:
        """``(trace id, span id)``: how its children name it."""
        return self.context.trace_id, self.context.span_id

    def __repr__(self) -> str:
        return f"OtlpSpan({self.name[:60]!r}, {self.context.trace_id:032x}/{self.context.span_id:016x})"


@dataclass
class Decoded:
    """What a request carried: the spans that can be runs, and each one rejected with why (``rejected``)."""

    spans: list[OtlpSpan] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


class _Bad(Exception):
    """One span cannot be a run; the message says why (it goes into the answer's partial_success)."""


def decode(data: bytes, content_type: str | None, project: str | None) -> Decoded:
    """The spans of an OTLP request body, by its ``Content-Type``; 415 for another type, 400 for a broken body."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media == PROTOBUF:
        return decode_protobuf(data, project)
    if media == JSON:
        return decode_json(data, project)
    raise Refuse(
        415,
        detail(f"Content-Type {(content_type or 'none')[:100]!r} is not OTLP; send {PROTOBUF} or {JSON} "
               "(compressed, if at all, with Content-Encoding gzip)", accepted_content_types=[PROTOBUF, JSON]),
    )


def _broken(what: str) -> Refuse:
    return Refuse(400, detail(f"the body is not an OTLP ExportTraceServiceRequest: {what}; nothing was stored"))


def _too_many(count: int) -> Refuse:
    return Refuse(
        413,
        detail(f"{count} spans in one request; at most {MAX_SPANS} are taken: send smaller batches (the Collector's "
               "batch processor: send_batch_max_size; an SDK's BatchSpanProcessor: max_export_batch_size)",
               max_spans=MAX_SPANS),
    )


# --- JSON --------------------------------------------------------------------------------------


def _field(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _list(obj: Mapping[str, Any], camel: str, snake: str, what: str) -> list[Any]:
    value = _field(obj, camel, snake)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _broken(f"{what} is {type(value).__name__}, not a list")
    return value


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _broken(f"{what} is {type(value).__name__}, not an object")
    return value


def decode_json(data: bytes, project: str | None) -> Decoded:
    """An ``ExportTraceServiceRequest`` in OTLP's JSON mapping; no protobuf involved."""
    try:
        body = parse(data)
    except RecursionError:
        raise _broken("JSON nested too deep") from None
    except ValueError as exc:
        raise _broken(f"not JSON ({exc})") from None
    if json_depth_exceeds(body):
        raise _broken("JSON nested too deep")
    body = _object(body, "the body")
    blocks = []
    for i, resource_spans in enumerate(_list(body, "resourceSpans", "resource_spans", "resourceSpans")):
        resource_spans = _object(resource_spans, f"resourceSpans[{i}]")
        resource = _object(resource_spans.get("resource") or {}, f"resourceSpans[{i}].resource")
        for j, scope_spans in enumerate(_list(resource_spans, "scopeSpans", "scope_spans", f"resourceSpans[{i}].scopeSpans")):
            scope_spans = _object(scope_spans, f"resourceSpans[{i}].scopeSpans[{j}]")
            spans = _list(scope_spans, "spans", "spans", f"resourceSpans[{i}].scopeSpans[{j}].spans")
            blocks.append((resource, _object(scope_spans.get("scope") or {}, "scope"), spans))
    count = sum(len(spans) for _, _, spans in blocks)
    if count > MAX_SPANS:
        raise _too_many(count)
    out = Decoded()
    for resource_json, scope_json, spans in blocks:
        try:
            origin = Origin(_json_attributes(_field(resource_json, "attributes", "attributes")))
            scope = Origin(
                _json_attributes(scope_json.get("attributes")), _text(scope_json.get("name"), "scope name"),
                _text(scope_json.get("version"), "scope version") or None,
            )
        except _Bad as exc:
            out.rejected.extend(f"resource or scope: {exc}" for _ in spans)
            continue
        for span in spans:
            try:
                out.spans.append(_json_span(_object(span, "a span"), origin, scope, project))
            except _Bad as exc:
                out.rejected.append(str(exc))
    return out


def _json_span(span: dict[str, Any], resource: Origin, scope: Origin, project: str | None) -> OtlpSpan:
    trace_id = _hex_id(_field(span, "traceId", "trace_id"), 16, "trace_id")
    span_id = _hex_id(_field(span, "spanId", "span_id"), 8, "span_id")
    parent = _field(span, "parentSpanId", "parent_span_id")
    parent_id = _hex_id(parent, 8, "parent_span_id", zero_ok=True) if parent else 0
    status = _object(span.get("status") or {}, "status")
    events = []
    for event in _field(span, "events", "events") or ():
        if not isinstance(event, dict):
            raise _Bad(f"span {span_id:016x}: an event is not an object")
        events.append((
            _text(event.get("name"), "event name"), _int(_field(event, "timeUnixNano", "time_unix_nano"), "event time"),
            _json_attributes(event.get("attributes")),
        ))
    return _span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        flags=_int(span.get("flags"), "flags"),
        name=_text(span.get("name"), "name"),
        kind=_enum(span.get("kind"), _KIND_NAMES, "kind"),
        start=_int(_field(span, "startTimeUnixNano", "start_time_unix_nano"), "start_time_unix_nano"),
        end=_int(_field(span, "endTimeUnixNano", "end_time_unix_nano"), "end_time_unix_nano"),
        attributes=_json_attributes(span.get("attributes")),
        events=events,
        status_code=_enum(status.get("code"), _STATUS_NAMES, "status code"),
        status_message=_text(status.get("message"), "status message"),
        resource=resource,
        scope=scope,
        project=project,
    )


def _hex_id(value: Any, size: int, what: str, zero_ok: bool = False) -> int:
    if not isinstance(value, str) or len(value) != 2 * size:
        raise _Bad(f"{what} {str(value)[:40]!r} is not {size} bytes in hex ({2 * size} hex digits)")
    try:
        number = int(value, 16)
    except ValueError:
        raise _Bad(f"{what} {value[:40]!r} is not hex") from None
    if number == 0 and not zero_ok:
        raise _Bad(f"{what} is all zeros, which names no {what.split('_')[0]}")
    return number


def _int(value: Any, what: str) -> int:
    """A 64-bit integer as OTLP's JSON writes one: a number or a decimal string (absent: 0)."""
    if value is None:
        return 0
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) <= 21:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 63) <= value < 1 << 64:
        raise _Bad(f"{what} {str(value)[:40]!r} is not a 64-bit integer")
    return value


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Bad(f"{what} is {type(value).__name__}, not a string")
    return value


def _enum(value: Any, names: Mapping[str, int], what: str) -> int:
    if isinstance(value, str) and value in names:
        return names[value]
    return _int(value, what)


def _json_attributes(values: Any) -> dict[str, Any]:
    if values is None:
        return {}
    if not isinstance(values, list):
        raise _Bad(f"attributes are {type(values).__name__}, not a list")
    out: dict[str, Any] = {}
    for pair in values:
        if not isinstance(pair, dict) or not isinstance(pair.get("key"), str):
            raise _Bad("an attribute is not a {key, value} object")
        out[pair["key"]] = _json_value(pair.get("value"), 0)
    return out


def _json_value(value: Any, depth: int) -> Any:
    """One AnyValue: arrays become tuples, as the SDK keeps sequences; key-value lists dicts; empty is None."""
    if value is None or value == {}:
        return None
    if depth > MAX_VALUE_DEPTH:
        raise _Bad(f"an attribute value nests more than {MAX_VALUE_DEPTH} arrays or key-value lists")
    if not isinstance(value, dict) or len(value) != 1:
        raise _Bad("an attribute value is not an AnyValue (one of stringValue, intValue, ...)")
    ((kind, inner),) = value.items()
    if kind in ("stringValue", "string_value"):
        return _text(inner, "a stringValue")
    if kind in ("boolValue", "bool_value") and isinstance(inner, bool):
        return inner
    if kind in ("intValue", "int_value"):
        return _int(inner, "an intValue")
    if kind in ("doubleValue", "double_value"):
        return _double(inner)
    if kind in ("bytesValue", "bytes_value") and isinstance(inner, str):
        try:
            return base64.b64decode(inner, validate=True)
        except binascii.Error:
            raise _Bad("a bytesValue is not base64") from None
    if kind in ("arrayValue", "array_value") and isinstance(inner, dict):
        return tuple(_json_value(item, depth + 1) for item in inner.get("values") or ())
    if kind in ("kvlistValue", "kvlist_value") and isinstance(inner, dict):
        return {pair["key"]: _json_value(pair.get("value"), depth + 1) for pair in _pairs(inner.get("values"))}
    raise _Bad(f"an attribute value of kind {kind[:40]!r} holds {type(inner).__name__}")


def _pairs(values: Any) -> Iterable[dict[str, Any]]:
    if not isinstance(values, list) or not all(isinstance(p, dict) and isinstance(p.get("key"), str) for p in values):
        raise _Bad("a kvlistValue's values are not {key, value} objects")
    return values


def _double(value: Any) -> float:
    # JSON has no NaN or infinities: OTLP's mapping writes them as these strings.
    special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
    if isinstance(value, str) and value in special:
        return special[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad(f"a doubleValue {str(value)[:40]!r} is not a number")
    return float(value)


# --- protobuf ----------------------------------------------------------------------------------


def decode_protobuf(data: bytes, project: str | None) -> Decoded:
    """An ``ExportTraceServiceRequest`` in protobuf; 415 naming the extra without ``opentelemetry-proto``."""
    try:
        from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:
        _say_no_proto()
        raise Refuse(
            415,
            detail(f"a protobuf body needs the optional opentelemetry-proto package: {INSTALL_OTLP}; or send OTLP "
                   f"as {JSON} (OTEL_EXPORTER_OTLP_PROTOCOL=http/json)", accepted_content_types=[JSON]),
        ) from None
    try:
        request = ExportTraceServiceRequest.FromString(data)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise _broken(f"not protobuf ({str(exc)[:200]})") from None
    count = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
    if count > MAX_SPANS:
        raise _too_many(count)
    out = Decoded()
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            try:
                resource = Origin(_pb_attributes(resource_spans.resource.attributes))
                scope = Origin(
                    _pb_attributes(scope_spans.scope.attributes), scope_spans.scope.name,
                    scope_spans.scope.version or None,
                )
            except _Bad as exc:
                out.rejected.extend(f"resource or scope: {exc}" for _ in scope_spans.spans)
                continue
            for span in scope_spans.spans:
                try:
                    out.spans.append(_pb_span(span, resource, scope, project))
                except _Bad as exc:
                    out.rejected.append(str(exc))
    return out


def _pb_id(value: bytes, size: int, what: str, zero_ok: bool = False) -> int:
    if len(value) != size:
        raise _Bad(f"{what} is {len(value)} bytes, not {size}")
    number = int.from_bytes(value, "big")
    if number == 0 and not zero_ok:
        raise _Bad(f"{what} is all zeros, which names no {what.split('_')[0]}")
    return number


def _pb_span(span: Any, resource: Origin, scope: Origin, project: str | None) -> OtlpSpan:
    trace_id = _pb_id(span.trace_id, 16, "trace_id")
    span_id = _pb_id(span.span_id, 8, "span_id")
    parent_id = _pb_id(span.parent_span_id, 8, "parent_span_id", zero_ok=True) if span.parent_span_id else 0
    return _span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        flags=span.flags,
        name=span.name,
        kind=span.kind,
        start=span.start_time_unix_nano,
        end=span.end_time_unix_nano,
        attributes=_pb_attributes(span.attributes),
        events=[(e.name, e.time_unix_nano, _pb_attributes(e.attributes)) for e in span.events],
        status_code=span.status.code,
        status_message=span.status.message,
        resource=resource,
        scope=scope,
        project=project,
    )


def _say_no_proto() -> None:
    """Log why protobuf is refused, once a minute: exporters in other languages show a 415 as "Unsupported Media
    Type" without its body, so the service's log is where a user learns why nothing was stored."""
    if once_a_minute("no_otlp_proto"):
        logger.warning(
            "refused an OTLP protobuf body (415 Unsupported Media Type): reading protobuf needs the otlp extra "
            "(opentelemetry-proto), which is not installed: %s, or have the exporter send JSON "
            "(OTEL_EXPORTER_OTLP_PROTOCOL=http/json) (said once a minute)",
            INSTALL_OTLP,
        )


def _pb_attributes(values: Iterable[Any]) -> dict[str, Any]:
    return {pair.key: _pb_value(pair.value, 0) for pair in values}


_PB_SCALARS: dict[str, Callable[[Any], Any]] = {
    "string_value": lambda v: v.string_value,
    "bool_value": lambda v: v.bool_value,
    "int_value": lambda v: v.int_value,
    "double_value": lambda v: v.double_value,
    "bytes_value": lambda v: bytes(v.bytes_value),
}


def _pb_value(value: Any, depth: int) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    scalar = _PB_SCALARS.get(kind)
    if scalar is not None:
        return scalar(value)
    if depth > MAX_VALUE_DEPTH:
        raise _Bad(f"an attribute value nests more than {MAX_VALUE_DEPTH} arrays or key-value lists")
    if kind == "array_value":
        return tuple(_pb_value(item, depth + 1) for item in value.array_value.values)
    return {pair.key: _pb_value(pair.value, depth + 1) for pair in value.kvlist_value.values}


# --- one span, whichever the encoding ----------------------------------------------------------


def _span(
    *, trace_id: int, span_id: int, parent_id: int, flags: int, name: str, kind: int, start: int, end: int,
    attributes: dict[str, Any], events: list[tuple[str, int, dict[str, Any]]], status_code: int, status_message: str,
    resource: Origin, scope: Origin, project: str | None,
) -> OtlpSpan:
    where = f"span {span_id:016x} of trace {trace_id:032x}"
    if start <= 0:
        raise _Bad(f"{where}: start_time_unix_nano is {start}; a span's start is a time since 1970 in nanoseconds")
    if end <= 0:
        raise _Bad(f"{where}: end_time_unix_nano is {end}: only ended spans become runs")
    if end < start:
        raise _Bad(f"{where}: ends ({end}) before it starts ({start})")
    if parent_id == span_id:
        raise _Bad(f"{where}: parent_span_id is the span's own id; a span cannot be its own parent")
    context = SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED)
    parent = None
    if parent_id:
        remote = bool(flags & _HAS_IS_REMOTE) and bool(flags & _IS_REMOTE)
        parent = SpanContext(trace_id, parent_id, is_remote=remote, trace_flags=_SAMPLED)
    code = StatusCode.ERROR if status_code == 2 else StatusCode.OK if status_code == 1 else StatusCode.UNSET
    # The SDK keeps a description only with ERROR (and warns otherwise): so do we, without the warning.
    status = Status(code, status_message or None) if code is StatusCode.ERROR else Status(code)
    size = _SPAN_OVERHEAD + len(name) + _size(attributes)
    kept_events = []
    for event_name, time_ns, event_attributes in events:
        kept_events.append(OtlpEvent(event_name, event_attributes, time_ns))
        size += 100 + len(event_name) + _size(event_attributes)
    return OtlpSpan(
        name, context, parent, _KINDS.get(kind, SpanKind.INTERNAL), start, end, status, attributes,
        tuple(kept_events), resource, scope, project, size,
    )


def _size(value: Any) -> int:
    """About what a decoded value holds in memory, in bytes (iterative: any depth the decoder let through)."""
    total, stack = 0, [value]
    while stack:
        current = stack.pop()
        if isinstance(current, (str, bytes)):
            total += 50 + len(current)
        elif isinstance(current, dict):
            total += 100 + 60 * len(current)
            stack.extend(current.keys())
            stack.extend(current.values())
        elif isinstance(current, tuple):
            total += 60 + 8 * len(current)
            stack.extend(current)
        else:
            total += 32
    return total
