"""What a producer app (``tests/producers/apps/*.py``) runs in its own process.

The app instruments its client library as that producer's docs say, then calls
:func:`main` with its scenario. One tracer provider feeds both of our paths
from the same spans:

* the processor path (``RunsSpanProcessor``) to the service at ``MATRIX_PROCESSOR_URL``;
* the exporter path (``BatchSpanProcessor(RunsSpanExporter())``) to ``MATRIX_EXPORTER_URL``.

The scenario runs once per flush plan, so the processor path posts runs at
different moments of their lives while the exporter path always sends them
whole:

* ``start``: a flush as every span starts, so each early post sees only the
  attributes the span was started with (the earliest possible post);
* ``random``: a flush after a random share of the attribute writes, events and
  starts (seeded by ``MATRIX_SEED``), so posts see spans half-way through.

Each plan's runs sit under a root span named ``plan:<name>``. The processor's
own schedule is an hour long: only these flushes (and the final one) convert
and send, so a given seed always posts at the same moments.

The app prints one JSON line at the end: the seed and both paths' stats.

``start(log_events=True)`` also installs what ``configure()`` installs beside its
span processor: the log record processor that joins GenAI log events to their
runs (``_genai_events``), which reaches both paths.

``MATRIX_DUMP_SPANS=<path>`` also keeps every span the app made in memory and
writes them to that JSON file at the end, as the SDK's ``ReadableSpan`` carries
them (``dump_spans.py`` runs an app that way), and with ``log_events`` the log
records too: the raw material a mapping row is written from.

``start(own_provider=False)`` is for a producer that makes its own tracer
provider and takes extra span processors (Logfire's ``additional_span_processors``):
the harness sets no provider, the app hands ``harness.span_processors`` to the
producer, and the harness flushes and shuts down those processors itself.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import sys
import threading
from typing import Any, Callable, Mapping

from opentelemetry import _logs, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_runs_exporter import RunsSpanExporter, RunsSpanProcessor
from otel_runs_exporter._genai_events import install_log_processor

PLANS = ("start", "random")


class _FlushAtStart(SpanProcessor):
    """Added after ours: by the time it runs, the span's post is queued; flushing converts it now."""

    def __init__(self, processor: RunsSpanProcessor, active: Callable[[], bool]) -> None:
        self._processor = processor
        self._active = active

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self._active():
            self._processor.force_flush(10_000)


class _Plan:
    def __init__(self, processor: RunsSpanProcessor, seed: int) -> None:
        self.processor = processor
        self.name = ""
        self.rng = random.Random(seed)
        self.flushing = threading.local()

    def maybe_flush(self) -> None:
        if self.name == "random" and self.rng.random() < 0.35 and not getattr(self.flushing, "on", False):
            self.flushing.on = True
            try:
                self.processor.force_flush(10_000)
            finally:
                self.flushing.on = False


def _hook_span_writes(plan: _Plan) -> None:
    """After each write to a span, maybe flush: the posts of open spans are converted mid-way."""
    for name in ("set_attribute", "set_attributes", "add_event", "update_name", "set_status"):
        original = getattr(Span, name)

        def hooked(self: Span, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            result = __original(self, *args, **kwargs)
            plan.maybe_flush()
            return result

        setattr(Span, name, hooked)


class Harness:
    """Both paths on one tracer provider (ours, made global, or the producer's own).

    Made before the producer instruments anything.
    """

    def __init__(self, log_events: bool = False, own_provider: bool = True) -> None:
        self.seed = int(os.environ.get("MATRIX_SEED", "0"))
        self.processor = RunsSpanProcessor(
            endpoint=os.environ["MATRIX_PROCESSOR_URL"], api_key="test-key", project="matrix", schedule_delay_s=3600
        )
        self.exporter = RunsSpanExporter(
            endpoint=os.environ["MATRIX_EXPORTER_URL"], api_key="test-key", project="matrix"
        )
        self.plan = _Plan(self.processor, self.seed)
        #: In this order: the flush at a span's start must run after our processor saw the start.
        self.span_processors: list[SpanProcessor] = [
            self.processor,
            _FlushAtStart(self.processor, lambda: self.plan.name == "start"),
            BatchSpanProcessor(self.exporter, schedule_delay_millis=50),
        ]
        self.dump_path = os.environ.get("MATRIX_DUMP_SPANS")
        self.memory = InMemorySpanExporter()
        if self.dump_path:
            self.span_processors.append(SimpleSpanProcessor(self.memory))
        self.provider: TracerProvider | None = None
        if own_provider:
            self.provider = TracerProvider()
            for span_processor in self.span_processors:
                self.provider.add_span_processor(span_processor)
            trace.set_tracer_provider(self.provider)
        self.log_records: list[Any] = []
        if log_events:
            install_log_processor()  # as configure() does
            if self.dump_path:
                _logs.get_logger_provider().add_log_record_processor(_KeepLogs(self.log_records))
        _hook_span_writes(self.plan)

    def run(self, scenario: Callable[[], Any]) -> None:
        """Run ``scenario`` under each flush plan, deliver everything, print the report line, exit."""
        tracer = trace.get_tracer("matrix")
        for name in PLANS:
            self.plan.name = name
            with tracer.start_as_current_span(f"plan:{name}"):
                scenario()
            self.plan.name = ""
        if self.provider is not None:
            ok = self.provider.force_flush(30_000)
        else:
            ok = all([p.force_flush(30_000) for p in self.span_processors])
        line = {
            "seed": self.seed,
            "flushed": ok,
            "processor": _stats(self.processor.stats()),
            "exporter": _stats(self.exporter.stats()),
        }
        if self.provider is not None:
            self.provider.shutdown()
        else:
            for span_processor in self.span_processors:
                span_processor.shutdown()
        if self.dump_path:
            raw = [_raw(span) for span in self.memory.get_finished_spans()] + [_raw_log(r) for r in self.log_records]
            with open(self.dump_path, "w", encoding="utf-8") as out:
                json.dump(raw, out, indent=1, default=repr)
        print("MATRIX " + json.dumps(line), flush=True)
        sys.exit(0 if ok else 3)


def _stats(stats: Any) -> dict[str, Any]:
    return {f.name: (dict(v) if isinstance(v := getattr(stats, f.name), Mapping) else v)
            for f in dataclasses.fields(stats)}


def _raw(span: Any) -> dict[str, Any]:
    """A finished span as the SDK holds it, attributes and event attributes unchanged."""
    parent = span.parent
    return {
        "name": span.name,
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
        "kind": span.kind.name,
        "span_id": format(span.context.span_id, "016x"),
        "parent_span_id": format(parent.span_id, "016x") if parent else None,
        "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()},
        "events": [
            {"name": e.name, "attributes": {k: list(v) if isinstance(v, tuple) else v
                                            for k, v in (e.attributes or {}).items()}}
            for e in span.events
        ],
        "status": {"code": span.status.status_code.name, "description": span.status.description},
    }


class _KeepLogs:
    """A log record processor that keeps each record (for ``MATRIX_DUMP_SPANS``)."""

    def __init__(self, records: list[Any]) -> None:
        self._records = records

    def on_emit(self, log_data: Any) -> None:
        self._records.append(getattr(log_data, "log_record", log_data))

    emit = on_emit

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _raw_log(record: Any) -> dict[str, Any]:
    """A log record as the SDK holds it: event name, the span it was emitted in, body and attributes."""
    return {
        "log_record": getattr(record, "event_name", None),
        "span_id": format(record.span_id, "016x") if record.span_id else None,
        "body": record.body,
        "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in (record.attributes or {}).items()},
    }


def start(log_events: bool = False, own_provider: bool = True) -> Harness:
    """Set up both paths; call before instrumenting, as an app calls ``configure()`` first."""
    return Harness(log_events, own_provider)
