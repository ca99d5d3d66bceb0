"""The processor path end to end: real SDK provider, real local service."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import threading
import time
import tracemalloc
import weakref
from concurrent.futures import ThreadPoolExecutor

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, TraceIdRatioBased

from otel_runs_exporter import ExporterStats, RunsSpanProcessor

from core.helpers import exporter_provider, processor_provider, tree



def _workload(tracer):
    """A small nested workload: threads, asyncio tasks, children ending before parents."""
    with tracer.start_as_current_span("root", attributes={"input.value": '{"question": "why"}'}) as root:
        ctx = contextvars.copy_context()

        def in_thread(i):
            with tracer.start_as_current_span(f"thread-{i}"):
                with tracer.start_as_current_span(f"thread-{i}-leaf"):
                    pass

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda i: ctx.copy().run(in_thread, i), range(3)))

        async def task(i):
            with tracer.start_as_current_span(f"task-{i}"):
                await asyncio.sleep(0.01)
                with tracer.start_as_current_span(f"task-{i}-leaf"):
                    await asyncio.sleep(0)

        async def main():
            await asyncio.gather(*(task(i) for i in range(2)))

        asyncio.run(main())
        root.set_attribute("output.value", '{"answer": 42}')
    return 11


def _shape(runs):
    """Parent name of each run name: the tree, independent of ids and times."""
    by_id = {r["id"]: r for r in runs}
    return {r["name"]: by_id[r["parent_run_id"]]["name"] if r.get("parent_run_id") else None for r in runs}


def test_processor_delivers_correct_trees(service):
    provider, processor = processor_provider(service.url)
    n = _workload(provider.get_tracer("t"))
    assert processor.force_flush(5000)
    runs = service.wait_for_runs(n)
    assert service.violations() == []
    shape = _shape(runs)
    assert shape["root"] is None and shape["thread-2-leaf"] == "thread-2" and shape["task-1-leaf"] == "task-1"
    assert {shape[f"thread-{i}"] for i in range(3)} == {"root"}
    root = next(r for r in runs if r["name"] == "root")
    assert root["inputs"] == {"question": "why"} and root["outputs"] == {"answer": 42}
    assert all(r["trace_id"] == root["id"] for r in runs)
    stats = processor.stats()
    assert isinstance(stats, ExporterStats) and stats.delivered == n and stats.dropped_total == 0
    provider.shutdown()


def test_exporter_and_processor_paths_deliver_the_same_trees(service):
    provider, processor = processor_provider(service.url)
    _workload(provider.get_tracer("t"))
    provider.shutdown()
    via_processor = service.wait_for_runs(11)
    service.reset()
    provider, exporter = exporter_provider(service.url)
    _workload(provider.get_tracer("t"))
    provider.shutdown()
    via_exporter = service.wait_for_runs(11)
    assert _shape(via_processor) == _shape(via_exporter)
    assert [n for _, n in tree(via_processor)][:1] == ["root"]
    assert service.violations() == []
    for a, b in ((via_processor, via_exporter),):
        ra = next(r for r in a if r["name"] == "root")
        rb = next(r for r in b if r["name"] == "root")
        assert (ra["inputs"], ra["outputs"], ra["run_type"]) == (rb["inputs"], rb["outputs"], rb["run_type"])


def test_long_running_root_is_posted_before_it_ends(service):
    provider, processor = processor_provider(service.url)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("server-request", attributes={"input.value": "GET /"}):
        with tracer.start_as_current_span("quick-child"):
            pass
        deadline = time.monotonic() + 5
        while len(service.runs()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        open_root = next(r for r in service.runs() if r["name"] == "server-request")
        assert open_root.get("end_time") is None and open_root["inputs"] == {"input": "GET /"}
    processor.force_flush(5000)
    runs = service.wait_for_runs(2)
    root = next(r for r in runs if r["name"] == "server-request")
    assert root["end_time"] and root["inputs"] == {"input": "GET /"}
    parts = [p for req in service.requests() for p in req.get("part_names") or []]
    assert any(p.startswith("patch.") for p in parts) and not any(p.startswith("patch.") and p.endswith(".inputs") for p in parts)
    assert service.violations() == [] and service.check()["never_completed"] == []
    provider.shutdown()


def test_queue_full_drops_newest_and_counts_them(service, caplog):
    provider, processor = processor_provider(
        service.url, max_queue_size=10, schedule_delay_s=30.0, max_export_batch_size=1000
    )
    tracer = provider.get_tracer("t")
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        for i in range(20):
            with tracer.start_as_current_span(f"s{i}"):
                pass
    stats = processor.stats()
    assert stats.dropped["queue_full"] == 15  # 20 spans = 40 operations, 10 fit: 5 runs whole, 15 patches refused
    assert len([r for r in caplog.records if "queue is full" in r.getMessage()]) == 1
    assert processor.force_flush(5000)
    stats = processor.stats()
    assert stats.delivered + stats.dropped_total == 20  # each span delivered whole or counted once
    assert len(service.wait_for_runs(5)) == 5
    provider.shutdown()


def test_outage_longer_than_the_export_timeout_loses_nothing(service):
    service.faults.update(outage=True)
    provider, processor = processor_provider(service.url, export_timeout_s=0.3)
    tracer = provider.get_tracer("t")
    stop = time.monotonic() + 1.5
    count = 0
    while time.monotonic() < stop:
        with tracer.start_as_current_span("during-outage"):
            count += 1
        time.sleep(0.002)
    assert processor.force_flush(300) is False  # the service is still down
    service.faults.update(outage=False)
    assert processor.force_flush(10_000)
    assert len(service.wait_for_runs(count)) == count
    stats = processor.stats()
    assert stats.dropped_total == 0 and stats.delivered == count and stats.retried > 0
    provider.shutdown()


def test_force_flush_honours_its_timeout():
    provider, processor = processor_provider("http://127.0.0.1:9")
    with provider.get_tracer("t").start_as_current_span("s"):
        pass
    began = time.monotonic()
    assert processor.force_flush(500) is False
    assert time.monotonic() - began < 1.5
    processor.shutdown(timeout_millis=200)


def test_shutdown_is_bounded_and_reports_what_it_gave_up(caplog):
    provider, processor = processor_provider("http://127.0.0.1:9", export_timeout_s=0.5)
    for _ in range(3):
        with provider.get_tracer("t").start_as_current_span("s"):
            pass
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        provider.shutdown()
    assert time.monotonic() - began < 2.0
    lines = [r.getMessage() for r in caplog.records if "gave up" in r.getMessage()]
    assert len(lines) == 1 and "gave up 3 runs" in lines[0]
    assert processor.stats().dropped["shutdown"] == 3


def test_unsampled_traces_are_never_exported(service):
    processor = RunsSpanProcessor(endpoint=service.url, api_key="k", schedule_delay_s=0.05)
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.5)))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    sampled = 0
    for _ in range(40):
        with tracer.start_as_current_span("root") as root:
            with tracer.start_as_current_span("child"):
                pass
            sampled += root.get_span_context().trace_flags.sampled
    assert processor.force_flush(5000)
    time.sleep(0.1)
    runs = service.runs()
    assert len(runs) == 2 * sampled and 0 < sampled < 40
    assert service.check()["missing_parents"] == []
    provider.shutdown()
    off = TracerProvider(sampler=ALWAYS_OFF)
    p2 = RunsSpanProcessor(endpoint=service.url, api_key="k")
    off.add_span_processor(p2)
    with off.get_tracer("t").start_as_current_span("never"):
        pass
    off.shutdown()
    assert p2.stats().sent == 0


def test_sdk_disabled_means_no_worker_and_nothing_sent(service, monkeypatch):
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    before = {t.name for t in threading.enumerate()}
    processor = RunsSpanProcessor(endpoint=service.url)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    with provider.get_tracer("t").start_as_current_span("s"):
        pass
    assert processor.force_flush(100)
    assert {t.name for t in threading.enumerate()} - before == set()
    assert service.requests() == []


def test_span_ending_after_its_parent_still_nests(service):
    provider, processor = processor_provider(service.url)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("parent"):
        late = tracer.start_span("late-child")
    time.sleep(0.1)
    token = otel_context.attach(otel_context.get_current())
    late.end()
    otel_context.detach(token)
    processor.force_flush(5000)
    runs = service.wait_for_runs(2)
    assert _shape(runs) == {"parent": None, "late-child": "parent"}
    assert service.violations() == []
    provider.shutdown()


def test_app_never_sees_our_errors(service, monkeypatch):
    provider, processor = processor_provider(service.url)

    def broken(*args, **kwargs):
        raise RuntimeError("bug in conversion")

    # Both ways the worker converts: an early post (its own call) and an ended run (the one the exporter shares).
    monkeypatch.setattr("otel_runs_exporter._worker.span_to_run", broken)
    monkeypatch.setattr("otel_runs_exporter._genai_events.span_to_run", broken)
    with provider.get_tracer("t").start_as_current_span("fine"):
        pass
    processor.force_flush(2000)
    stats = processor.stats()
    # Whichever way it failed (an early post, then its end; or one post carrying the end), one run, one count.
    assert stats.dropped == {"convert_error": 1} and stats.created == 1 and stats.queued == 0, stats
    provider.shutdown()


def test_byte_cap_counts_spans_waiting_in_the_queue(service):
    # 16 kB at ~1.6 kB per queued operation: the 11th operation is past the cap.
    provider, processor = processor_provider(
        service.url, max_queue_bytes=16_000, schedule_delay_s=30.0, max_export_batch_size=1000
    )
    tracer = provider.get_tracer("t")
    for i in range(20):
        with tracer.start_as_current_span(f"s{i}"):
            pass
    stats = processor.stats()
    assert stats.dropped["queue_bytes_full"] == 15 and "queue_full" not in stats.dropped
    assert processor.force_flush(5000)
    assert len(service.wait_for_runs(5)) == 5
    provider.shutdown()


def test_a_span_that_never_ends_is_let_go_once_its_early_post_is_made(service):
    """An app that loses spans without ending them (an abandoned stream, an error path) must not have
    them kept alive by the exporter: after the early post only the run's ids are held. Before, the
    node kept the live span for an end that never came: 20,000 of them held 69 MB, now 13.7 MB."""
    import weakref

    provider, processor = processor_provider(service.url)
    tracer = provider.get_tracer("t")
    refs = []
    for i in range(50):
        span = tracer.start_span(f"abandoned {i}", attributes={"output.value": "x" * 10_000})
        refs.append(weakref.ref(span))
        del span  # never ended
    assert processor.force_flush(5000)  # the early posts are made
    assert len(service.wait_for_runs(50, completed=False)) == 50  # posted, open
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []
    with tracer.start_as_current_span("later"):  # and the processor goes on as before
        pass
    assert processor.force_flush(5000)
    provider.shutdown()


def test_a_run_whose_end_is_refused_after_its_post_was_queued_lets_its_span_go(service):
    """The post queued, its end refused at a full queue (counted): once the post is skipped, nothing
    converts the span again, so the node remembered for late children must not keep it."""
    import weakref

    provider, processor = processor_provider(service.url, max_queue_size=2, schedule_delay_s=30.0)
    tracer = provider.get_tracer("t")
    first = tracer.start_span("refused at its end", attributes={"output.value": "x" * 10_000})
    other = tracer.start_span("fills the queue")
    first.end()  # the queue holds both posts: this end is refused
    ref = weakref.ref(first)
    del first
    processor.force_flush(5000)  # the worker skips the dropped run's post
    gc.collect()
    assert processor.stats().dropped["queue_full"] == 1
    assert ref() is None
    other.end()
    provider.shutdown()


def test_a_run_dropped_at_its_end_lets_its_span_go(service):
    """Ends refused at a full queue (an outage) are counted, and their spans are not kept for children that
    may come: the processor remembers such a run by its ids (~0.3 KB), not its span with its payload."""
    service.faults.update(outage=True)
    provider, processor = processor_provider(service.url, max_queue_size=16, schedule_delay_s=30.0)
    tracer = provider.get_tracer("t")
    spans, payload = 400, 64 * 1024
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(spans):
            with tracer.start_as_current_span(f"s{i}") as span:
                span.set_attribute("output.value", "x" * payload + str(i))  # a payload only at the end
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert processor.stats().dropped["queue_full"] > spans // 2
    # Kept, the refused spans alone would hold ~25 MB; the queue holds at most 16 operations.
    assert grown < 8 * 2**20, f"{grown / 2**20:.1f} MiB held after {spans} spans of {payload // 1024} KB"
    service.faults.update(outage=False)
    provider.shutdown()


def test_a_queued_end_holds_the_sdks_snapshot_not_the_live_span(service):
    """An end queued before the worker took the start: the post is converted from the end, so the node
    must not keep the live span (a fourteenth object per queued span for the collector to walk, ~15 %
    more than OTLP's queue holds); the run stored is the whole one all the same."""
    provider, processor = processor_provider(service.url, schedule_delay_s=30.0, max_export_batch_size=10_000)
    tracer = provider.get_tracer("t")
    span = tracer.start_span("ended before the worker looked", attributes={"input.value": "q"})
    span.set_attribute("output.value", "a")
    span.end()
    live = weakref.ref(span)
    del span
    gc.collect()
    assert len(processor._worker._queue) == 2  # its post and its end, both still queued
    assert live() is None
    assert processor.force_flush(10_000)
    (run,) = service.wait_for_runs(1)
    assert run["name"] == "ended before the worker looked" and run["end_time"]
    assert run["inputs"] == {"input": "q"} and run["outputs"] == {"output": "a"}
    provider.shutdown()


def test_the_hooks_read_the_sdks_span_fields_and_any_other_span_through_its_public_api(service):
    """``on_start`` and ``on_end`` read the SDK span's ``_context`` and ``_parent`` and index its
    SpanContext (each property is a Python call on every span); the SDK's shapes are pinned here, and
    a span type without those fields (a wrapper) still becomes the same runs through the public API."""
    from opentelemetry.trace import SpanContext

    sdk_span = TracerProvider().get_tracer("t").start_span("s")
    ctx = sdk_span._context
    assert ctx is sdk_span.get_span_context() and sdk_span._parent is sdk_span.parent is None
    assert isinstance(ctx, tuple) and issubclass(SpanContext, tuple)
    assert (ctx[0], ctx[1], ctx[2], ctx[3]) == (ctx.trace_id, ctx.span_id, ctx.is_remote, ctx.trace_flags)

    class Wrapped:
        """Every attribute of the SDK span but its private fields, as another span type would."""

        def __init__(self, span):
            object.__setattr__(self, "_span", span)

        def __getattr__(self, name):
            if name in ("_context", "_parent"):
                raise AttributeError(name)
            return getattr(object.__getattribute__(self, "_span"), name)

    class Wrapping(RunsSpanProcessor):
        def on_start(self, span, parent_context=None):
            super().on_start(Wrapped(span), parent_context)

        def on_end(self, span):
            super().on_end(Wrapped(span))

    shapes = []
    for make in (RunsSpanProcessor, Wrapping):
        service.reset()
        provider = TracerProvider()
        processor = make(endpoint=service.url, api_key="test-key", schedule_delay_s=0.05)
        provider.add_span_processor(processor)
        n = _workload(provider.get_tracer("t"))
        assert processor.force_flush(10_000)
        runs = service.wait_for_runs(n)
        provider.shutdown()
        assert len(runs) == n and processor.stats().dropped_total == 0 and service.violations() == [], make
        root = next(r for r in runs if r["name"] == "root")
        assert root["outputs"] == {"answer": 42} and all(r["trace_id"] == root["id"] for r in runs)
        shapes.append(_shape(runs))
    assert shapes[0] == shapes[1] and shapes[0]["thread-0-leaf"] == "thread-0" and shapes[0]["thread-0"] == "root"
