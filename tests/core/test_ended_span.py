"""A span's end taken as an ``EndedSpan`` (an outage, the worker's queue a batch behind) converts as the SDK's span does.

``Worker.end`` copies an ended span into an ``EndedSpan`` when the span will wait
in the queue while the service takes no runs, so the SDK's objects are let go at
once. A stored run must not depend on that: the same spans, converted from
either, give the same run.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

from core.helpers import processor_provider
from otel_runs_exporter import _worker
from otel_runs_exporter._convert import ConvertOptions, EndedSpan, span_ids, span_to_run
from otel_runs_exporter._delivery import Delivery
from otel_runs_exporter._genai_events import ended_run
from otel_runs_exporter._settings import resolve
from otel_runs_exporter._stats import Ledger

_KEYS = [
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.request.model", "gen_ai.response.model",
    "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.operation.name", "gen_ai.prompt.0.content",
    "gen_ai.completion.0.content", "input.value", "input.mime_type", "output.value", "openinference.span.kind",
    "llm.input_messages.0.message.content", "llm.input_messages.0.message.role", "traceloop.entity.input",
    "langsmith.span.kind", "langsmith.metadata.user", "app.route", "app.items",
]
_text = st.text(max_size=12)
_scalar = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | _text
_json = st.recursive(_scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(_text, c, max_size=3), max_leaves=6)
_value = _text | st.integers(-(2**40), 2**40) | st.booleans() | _json.map(lambda v: orjson.dumps(v).decode())
_event = st.tuples(
    st.sampled_from(["gen_ai.user.message", "gen_ai.choice", "exception", "new_token", "custom"]),
    st.dictionaries(st.sampled_from(["content", "role", "exception.type", "exception.message", "index"]), _text, max_size=3),
)


class _Keep(SpanProcessor):
    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


def _same(run: dict[str, Any]) -> bytes:
    return orjson.dumps(run, option=orjson.OPT_SORT_KEYS, default=repr)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    attributes=st.dictionaries(st.sampled_from(_KEYS), _value, max_size=6),
    later=st.dictionaries(st.sampled_from(_KEYS), _value, max_size=3),
    events=st.lists(_event, max_size=3),
    kind=st.sampled_from(list(SpanKind)),
    status=st.sampled_from([None, StatusCode.OK, StatusCode.ERROR]),
    child=st.booleans(),
)
def test_an_ended_span_converts_as_the_sdk_span(attributes, later, events, kind, status, child):
    keep = _Keep()
    provider = TracerProvider()
    provider.add_span_processor(keep)
    tracer = provider.get_tracer("scope", "1.0")
    parent = tracer.start_span("parent")
    span = tracer.start_span("work", set_span_in_context(parent) if child else None, kind, attributes)
    span.set_attributes(later)
    for name, event_attributes in events:
        span.add_event(name, event_attributes)
    if status is not None:
        span.set_status(Status(status, "went wrong" if status is StatusCode.ERROR else None))
    span.end()
    parent.end()
    readable = keep.ended[0]
    copied = EndedSpan(readable)
    opts = ConvertOptions.from_settings(resolve({"api_key": "k"}, env={}))
    ids = span_ids(readable, None, opts.id_scheme)
    assert span_ids(copied, None, opts.id_scheme) == ids
    assert _same(ended_run(copied, ids, opts, None, Ledger())) == _same(ended_run(readable, ids, opts, None, Ledger()))
    assert _same(span_to_run(copied, ids, opts, as_open=True)) == _same(span_to_run(readable, ids, opts, as_open=True))
    assert copied.attributes == dict(readable.attributes) and copied.attributes is not readable.attributes


def _trace(provider: TracerProvider) -> None:
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("agent", attributes={"openinference.span.kind": "AGENT", "input.value": '{"q": 1}', "input.mime_type": "application/json"}):
        with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}) as chat:
            chat.add_event("gen_ai.user.message", {"content": "hi"})
            chat.set_attributes({"gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 5})
        try:
            with tracer.start_as_current_span("tool"):
                raise ValueError("no such city")
        except ValueError:
            pass


class _AlwaysSealing(Delivery):
    sealing = property(lambda self: True, lambda self, value: None)  # type: ignore[assignment]


def _stored(service: Any, always_copy: bool, monkeypatch: Any) -> list[bytes]:
    service.reset()
    provider, processor = processor_provider(service.url)
    with monkeypatch.context() as patch:
        if always_copy:
            # Every end as if the worker were behind in an outage: each is an EndedSpan.
            processor._worker._wake_at = 0
            # The delivery as in an outage throughout: it seals what waits, and a delivered batch does not clear it.
            patch.setattr(processor._worker._delivery, "__class__", _AlwaysSealing)
            copies = []
            patch.setattr(_worker, "EndedSpan", lambda span: copies.append(span) or EndedSpan(span))
        _trace(provider)
    if always_copy:
        assert len(copies) == 3
    assert processor.force_flush(10_000)
    runs = service.wait_for_runs(3)
    provider.shutdown()
    drop = {"id", "trace_id", "parent_run_id", "dotted_order", "start_time", "end_time", "otel_span_id", "otel_trace_id", "otel_parent_span_id"}

    def shape(run: dict[str, Any]) -> bytes:
        kept = {k: v for k, v in run.items() if k not in drop}
        extra = dict(kept.get("extra") or {})
        extra["metadata"] = {k: v for k, v in (extra.get("metadata") or {}).items() if k not in drop}
        kept["extra"] = extra
        kept["events"] = [{k: v for k, v in e.items() if k != "time"} for e in kept.get("events") or []]
        return _same(kept)

    return sorted(shape(r) for r in runs)


def test_the_pipeline_stores_the_same_runs_whether_ends_are_copied_or_not(service, monkeypatch):
    assert _stored(service, True, monkeypatch) == _stored(service, False, monkeypatch)


def test_ends_are_copied_only_while_the_service_takes_no_runs(service, monkeypatch):
    """Behind with the service up, an end is queued as the SDK gave it (the copy would cost the app
    thread ~2.7 µs a span); behind in an outage, it is copied, so the SDK's objects go at once."""
    provider, processor = processor_provider(service.url)
    processor._worker._wake_at = 0  # every end finds the worker behind
    tracer = provider.get_tracer("t")
    copies: list[Any] = []
    monkeypatch.setattr(_worker, "EndedSpan", lambda span: copies.append(span) or EndedSpan(span))

    def trace(prefix: str) -> None:
        for i in range(5):
            with tracer.start_as_current_span(f"{prefix} {i}"):
                pass

    trace("up")
    assert processor.force_flush(10_000) and copies == []
    service.faults.update(outage=True)
    trace("down")
    assert not processor.force_flush(500)  # the batch came back: the service takes no runs
    assert copies == []  # ended before any batch came back
    trace("held")
    assert [span.name for span in copies] == [f"held {i}" for i in range(5)]
    service.faults.update(outage=False)
    assert processor.force_flush(10_000)
    assert len(service.wait_for_runs(15)) == 15
    provider.shutdown()
