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

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

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
        self.provider: TracerProvider | None = None
        if own_provider:
            self.provider = TracerProvider()
            for span_processor in self.span_processors:
                self.provider.add_span_processor(span_processor)
            trace.set_tracer_provider(self.provider)
        if log_events:
            install_log_processor()  # as configure() does
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
        print("MATRIX " + json.dumps(line), flush=True)
        sys.exit(0 if ok else 3)


def _stats(stats: Any) -> dict[str, Any]:
    return {f.name: (dict(v) if isinstance(v := getattr(stats, f.name), Mapping) else v)
            for f in dataclasses.fields(stats)}


def start(log_events: bool = False, own_provider: bool = True) -> Harness:
    """Set up both paths; call before instrumenting, as an app calls ``configure()`` first."""
    return Harness(log_events, own_provider)
