"""Deep run trees on both paths: the depth limit end to end, and open runs inside the byte bound.

Each run carries every ancestor's dotted_order entry, so a chain costs the square
of its depth. Past ``_ids.MAX_DEPTH`` a run starts a new trace that names its real
parent, so the exporter never sends what its local service refuses; and what open
runs hold counts against ``max_queue_bytes``. (Peak memory is measured in a
subprocess by ``tests/reliability/test_rel_deep.py``; the big versions are in
``bench/deep_trees.py``.)
"""

from __future__ import annotations

import pytest
from opentelemetry import trace

from otel_runs_exporter._ids import MAX_DEPTH

from core.helpers import exporter_provider, processor_provider


def _open_chain(tracer, depth: int, name: str = "s", every=None) -> list:
    """``depth`` spans, each the child of the one before, left open; ``every(i)`` after each."""
    spans, context = [], None
    for i in range(depth):
        span = tracer.start_span(f"{name}{i}", context=context)
        context = trace.set_span_in_context(span)
        spans.append(span)
        if every is not None:
            every(i)
    return spans


def _end(spans: list) -> None:
    for span in reversed(spans):  # innermost first, as code nests them
        span.end()


@pytest.mark.parametrize("path", ["processor", "exporter"])
def test_a_chain_past_the_depth_limit_arrives_whole_as_linked_traces(service, path):
    make = processor_provider if path == "processor" else exporter_provider
    provider, counted = make(service.url)
    depth = 2 * MAX_DEPTH + 10
    _end(_open_chain(provider.get_tracer("t"), depth))
    provider.force_flush(30_000)
    stats = counted.stats()
    assert stats.created == depth == stats.delivered and stats.dropped_total == 0
    assert stats.depth_limited == 2
    runs = service.wait_for_runs(depth)
    assert service.violations() == []  # nothing the local service refuses
    assert max(r["dotted_order"].count(".") + 1 for r in runs) == MAX_DEPTH
    by_id = {r["id"]: r for r in runs}
    roots = sorted((r for r in runs if not r.get("parent_run_id")), key=lambda r: int(r["name"][1:]))
    assert [r["name"] for r in roots] == ["s0", f"s{MAX_DEPTH}", f"s{2 * MAX_DEPTH}"]
    for root in roots[1:]:
        meta = root["extra"]["metadata"]
        parent = by_id[meta["depth_limit_parent_run_id"]]
        assert parent["name"] == f"s{int(root['name'][1:]) - 1}" and meta["depth_limit_trace_id"] == parent["trace_id"]
    # Following parent_run_id, then the metadata link at each trace's root, walks the whole chain.
    run, seen = next(r for r in runs if r["name"] == f"s{depth - 1}"), 1
    while True:
        up = run.get("parent_run_id") or run["extra"]["metadata"].get("depth_limit_parent_run_id")
        if up is None:
            break
        run, seen = by_id[up], seen + 1
    assert run["name"] == "s0" and seen == depth


def test_open_runs_count_against_the_byte_bound(service):
    provider, processor = processor_provider(service.url, max_queue_bytes=400_000)
    tracer = provider.get_tracer("t")

    def flush_every_ten(i: int) -> None:
        if i % 10 == 9:
            processor.force_flush(5_000)  # their early posts go out: those runs are now open

    # Open runs hold their ids, dotted_order included: ~59 bytes an ancestor. 200 nested hold
    # ~1.3 MB, past the 400 kB bound, though nothing waits to be sent.
    spans = _open_chain(tracer, 200, every=flush_every_ten)
    _end(spans)
    processor.force_flush(10_000)
    stats = processor.stats()
    dropped = stats.dropped.get("queue_bytes_full", 0)
    assert 0 < dropped < 200 and stats.created == 200 == stats.delivered + dropped
    # Once the bound was reached every deeper span was dropped at its start, counted once, never posted.
    names = sorted((r["name"] for r in service.runs()), key=lambda n: int(n[1:]))
    assert names == [f"s{i}" for i in range(stats.delivered)]
    assert service.check()["never_completed"] == [] and service.violations() == []
    # Ended, they hold nothing: a second chain as deep as the first got is delivered whole.
    worker = processor._worker
    assert worker._open.bytes == 0 and not len(worker._open)
    before = stats.delivered
    _end(_open_chain(tracer, before, "t", every=flush_every_ten))
    processor.force_flush(10_000)
    assert processor.stats().delivered == 2 * before and processor.stats().dropped == stats.dropped


def test_an_open_run_whose_end_is_refused_stops_counting_as_open(service):
    provider, processor = processor_provider(service.url, max_queue_size=4, schedule_delay_s=30.0)
    tracer = provider.get_tracer("t")
    held = tracer.start_span("held")
    processor.force_flush(5_000)  # its early post went out: open, counted in the byte bound
    worker = processor._worker
    assert worker._open.bytes > 0
    for i in range(2):  # two short spans fill the four-operation queue
        tracer.start_span(f"short{i}").end()
    held.end()  # its end is refused (queue_full) and counted: the run is lost...
    processor.force_flush(5_000)
    assert processor.stats().dropped == {"queue_full": 1}
    assert worker._open.bytes == 0 and not len(worker._open)  # ...and its early post no longer held
