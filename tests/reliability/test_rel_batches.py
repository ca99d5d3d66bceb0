"""Answers about the batch itself: 413 (too large) and 422 (one poison run in 500)."""

from __future__ import annotations

import logging
import time

from otel_runs_exporter._convert import span_ids

from reliability.rel_helpers import completed_names, processor_provider, report, tally


def test_413_splits_large_batches_until_delivered(make_service):
    # 64 kB per request at most; 500 runs of ~1 kB each arrive in one batch of
    # ~600 kB, so the exporter must halve it several times.
    svc = make_service(max_body_bytes=64 * 1024)
    provider, processor = processor_provider(svc.url, schedule_delay_s=30.0, max_export_batch_size=500)
    tracer = provider.get_tracer("t")
    began = time.monotonic()
    names = [f"big-{i}" for i in range(500)]
    for name in names:
        with tracer.start_as_current_span(name, attributes={"input.value": "z" * 1000}):
            pass
    assert processor.force_flush(30_000)
    t = tally("413: 500 runs x 1 kB, max_body_bytes 64 kB", len(names), svc, processor.stats(), began)
    report(t)
    assert t.statuses.get("413", 0) >= 1, "no 413 was ever answered; the test proves nothing"
    assert completed_names(svc) == sorted(names)
    assert t.dropped == {}
    assert t.stats_completed == t.delivered == 500
    assert svc.duplicate_posts() == {}
    provider.shutdown()


def test_413_one_run_too_large_alone_is_dropped_and_reported(make_service, caplog):
    svc = make_service(max_body_bytes=64 * 1024)
    provider, processor = processor_provider(
        svc.url, schedule_delay_s=30.0, max_export_batch_size=200, max_value_chars=0
    )
    tracer = provider.get_tracer("t")
    began = time.monotonic()
    names = [f"ok-{i}" for i in range(199)]
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        for name in names[:100]:
            with tracer.start_as_current_span(name):
                pass
        with tracer.start_as_current_span("huge", attributes={"input.value": "h" * 200_000}) as huge:
            pass
        for name in names[100:]:
            with tracer.start_as_current_span(name):
                pass
        assert processor.force_flush(30_000) is False  # a run was dropped: the flush says so
    huge_id = span_ids(huge, None).run_id
    t = tally("413: one 200 kB run among 200, max_body_bytes 64 kB", 200, svc, processor.stats(), began)
    report(t)
    assert completed_names(svc) == sorted(names)
    assert t.dropped == {"too_large": 1}
    assert t.delivered + t.dropped_total == t.created
    assert any(huge_id in r.getMessage() and "too large" in r.getMessage() for r in caplog.records)
    provider.shutdown()


def test_poison_run_in_a_batch_of_500(svc, caplog):
    # The service refuses one run (422, the whole request stored nothing); the
    # exporter bisects and delivers the other 499.
    provider, processor = processor_provider(svc.url, schedule_delay_s=30.0, max_export_batch_size=500)
    tracer = provider.get_tracer("t")
    began = time.monotonic()
    spans_ = []
    for i in range(500):
        with tracer.start_as_current_span(f"p-{i}") as span:
            pass
        spans_.append(span)
    poison = spans_[317]
    poison_id = span_ids(poison, None).run_id
    svc.faults.update(reject_run_ids={poison_id})
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        processor.force_flush(30_000)
    t = tally("422 poison run in a batch of 500", 500, svc, processor.stats(), began, poison=poison_id)
    report(t)
    assert svc.get_run(poison_id) is None
    assert completed_names(svc) == sorted(f"p-{i}" for i in range(500) if i != 317)
    assert t.dropped == {"rejected": 1}
    assert t.stats_completed == t.delivered == 499
    assert t.statuses.get("422", 0) >= 1
    assert svc.duplicate_posts() == {}
    logged = [r.getMessage() for r in caplog.records if poison_id in r.getMessage()]
    assert logged and "rejected" in logged[0], "the dropped run is not named in the log"
    provider.shutdown()
