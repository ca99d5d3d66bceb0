"""The exporter path: the holding area, its bounds, and delivery inside export()."""

from __future__ import annotations

import time

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

from otel_runs_exporter import RunsSpanExporter



def _spans():
    """Finished spans of root -> mid -> leaf, in the order they ended (children first)."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("root"):
        with tracer.start_as_current_span("mid"):
            with tracer.start_as_current_span("leaf"):
                pass
    return list(memory.get_finished_spans())


def test_children_wait_for_their_parents_across_exports(service):
    exporter = RunsSpanExporter(endpoint=service.url, api_key="k")
    leaf, mid, root = _spans()
    assert exporter.export([leaf]) is SpanExportResult.SUCCESS
    assert exporter.export([mid]) is SpanExportResult.SUCCESS
    assert exporter.stats().held == 2 and service.runs() == []
    assert exporter.export([root]) is SpanExportResult.SUCCESS
    runs = {r["name"]: r for r in service.wait_for_runs(3)}
    assert runs["leaf"]["parent_run_id"] == runs["mid"]["id"] and runs["mid"]["parent_run_id"] == runs["root"]["id"]
    assert exporter.stats().held == 0 and exporter.stats().orphaned == 0
    assert service.violations() == []
    # every run went in one request (after the one GET /info of compression=auto), parents first
    assert [r["path"] for r in service.requests()] == ["/info", "/runs/multipart"]
    exporter.shutdown()


def test_hold_bound_in_spans_sends_orphans_with_their_otel_parent(service):
    exporter = RunsSpanExporter(endpoint=service.url, api_key="k", hold_max_spans=1)
    leaf, mid, root = _spans()
    exporter.export([leaf, mid])  # two held, bound is one: the top of the held chain goes as a root
    runs = {r["name"]: r for r in service.wait_for_runs(2)}
    assert "parent_run_id" not in runs["mid"] and runs["leaf"]["parent_run_id"] == runs["mid"]["id"]
    assert runs["mid"]["extra"]["metadata"]["otel_parent_span_id"] == format(root.context.span_id, "016x")
    assert exporter.stats().orphaned == 1 and exporter.stats().held == 0
    exporter.export([root])
    assert {r["name"] for r in service.wait_for_runs(3)} == {"leaf", "mid", "root"}
    exporter.shutdown()


def test_hold_bound_in_time(service):
    exporter = RunsSpanExporter(endpoint=service.url, api_key="k", hold_max_s=0.1)
    leaf, _mid, _root = _spans()
    exporter.export([leaf])
    assert exporter.stats().held == 1
    time.sleep(0.15)
    exporter.export([])
    assert exporter.stats().orphaned == 1 and service.wait_for_runs(1)[0]["name"] == "leaf"
    exporter.shutdown()


def test_shutdown_delivers_what_is_held(service):
    exporter = RunsSpanExporter(endpoint=service.url, api_key="k")
    leaf, mid, _root = _spans()
    exporter.export([leaf, mid])
    assert service.runs() == []
    exporter.shutdown()
    assert {r["name"] for r in service.wait_for_runs(2)} == {"leaf", "mid"}
    assert exporter.stats().orphaned == 1  # mid went as a root, leaf under it


def _reattached_spans():
    """root -> request, and a log under a propagated copy of root's context (remote, as Logfire writes
    the log that ends a stream), then a span under a parent from another process; in the order they ended."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    propagator = TraceContextTextMapPropagator()
    with tracer.start_as_current_span("root"):
        with tracer.start_as_current_span("request"):
            pass
        carrier: dict[str, str] = {}
        propagator.inject(carrier)
        token = otel_context.attach(propagator.extract(carrier))
        try:
            with tracer.start_as_current_span("log"):
                pass
        finally:
            otel_context.detach(token)
    elsewhere = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    with tracer.start_as_current_span("served", context=trace.set_span_in_context(NonRecordingSpan(elsewhere))):
        pass
    return list(memory.get_finished_spans())


def test_a_remote_parent_that_is_a_local_span_is_that_span(service):
    exporter = RunsSpanExporter(endpoint=service.url, api_key="k")
    request, log, root, served = _reattached_spans()
    assert log.parent.is_remote and log.parent.span_id == root.context.span_id
    exporter.export([request, log, served])
    # The log waits with its sibling for their parent; the span from another process goes at once, a root.
    assert exporter.stats().held == 2
    assert [r["name"] for r in service.wait_for_runs(1)] == ["served"]
    exporter.export([root])
    runs = {r["name"]: r for r in service.wait_for_runs(4)}
    assert runs["log"]["parent_run_id"] == runs["root"]["id"] == runs["log"]["trace_id"]
    assert "parent_run_id" not in runs["served"] and runs["served"]["extra"]["metadata"]["otel_parent_is_remote"]
    # Once its parent is resolved, a span under a reattached copy of its context nests at once too.
    _request2, log2, _root2, _served2 = _reattached_spans()
    exporter2 = RunsSpanExporter(endpoint=service.url, api_key="k")
    exporter2.export([_root2])
    exporter2.export([log2])
    assert exporter2.stats().held == 0
    nested = [r for r in service.wait_for_runs(6) if r["id"] != runs["log"]["id"] and r["name"] == "log"]
    assert nested and nested[0]["parent_run_id"] is not None
    exporter.shutdown()
    exporter2.shutdown()


def test_failed_export_is_kept_and_retried_on_the_next(service):
    service.faults.update(outage=True, retry_after=None)
    exporter = RunsSpanExporter(endpoint=service.url, api_key="k", export_timeout_s=0.2)
    leaf, mid, root = _spans()
    assert exporter.export([leaf, mid, root]) is SpanExportResult.FAILURE
    assert exporter.stats().queued == 3
    service.faults.update(outage=False)
    assert exporter.force_flush(5000)
    assert len(service.wait_for_runs(3)) == 3 and exporter.stats().dropped_total == 0
    exporter.shutdown()


def test_unreachable_service_shutdown_is_bounded():
    exporter = RunsSpanExporter(endpoint="http://127.0.0.1:9", api_key="k", export_timeout_s=0.3)
    exporter.export(_spans())
    began = time.monotonic()
    exporter.shutdown()
    assert time.monotonic() - began < 1.5
    assert exporter.stats().dropped["shutdown"] == 3


def test_zero_argument_constructor_reads_the_environment(service, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_ENDPOINT", service.url)
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_PROJECT", "from-env")
    exporter = RunsSpanExporter()
    exporter.export(_spans())
    assert {r["session_name"] for r in service.wait_for_runs(3)} == {"from-env"}
    exporter.shutdown()


def test_the_resolved_ids_bound_counts_what_an_entry_weighs():
    """The exporter remembers resolved runs for late children within 32 MiB: its estimate of an entry
    (key, ids, strings, map slot) is what tracemalloc sees, so the bound is the memory it says."""
    import gc
    import tracemalloc

    from otel_runs_exporter._ids import SCHEMES, child_ids, root_ids, run_id_str

    exporter = RunsSpanExporter(endpoint="http://127.0.0.1:9", api_key="k")
    try:
        v7, start = SCHEMES["v7"], 1_700_000_000_000_000_000
        gc.collect()
        tracemalloc.start()
        for t in range(500):  # shallow traces, as an app's: a root and nine children
            trace_id = (t + 1) << 64
            root = root_ids(run_id_str(v7, trace_id, 1, start + t), start + t)
            exporter._remember((trace_id, 1), root)
            for s in range(2, 11):
                exporter._remember((trace_id, s), child_ids(root, run_id_str(v7, trace_id, s, start + t + s), start + t + s))
        # What this loop allocated and still holds, wherever it was made (not other threads' work).
        # (RunIds is a NamedTuple: its __new__ is generated code, "<string>".)
        mine = [tracemalloc.Filter(True, p) for p in ("*/_ids.py", "*/_exporter.py", "<string>", __file__)]
        weight = sum(stat.size for stat in tracemalloc.take_snapshot().filter_traces(mine).statistics("filename"))
        tracemalloc.stop()
        estimate = exporter._resolved_bytes
        assert len(exporter._resolved) == 5000
        assert 0.9 < estimate / weight < 1.15, (estimate / 5000, weight / 5000)
    finally:
        exporter.shutdown()
