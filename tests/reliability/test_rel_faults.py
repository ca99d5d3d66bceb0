"""Faults survived: each test runs against a real loopback LocalService that misbehaves.

Every test checks the same three things: every run created arrives (completed at
the service), the exporter's ``stats()`` agrees with what the service stored,
and duplicates are zero where the fault happens before the service reads the
request (at-least-once elsewhere: the count is reported).
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any

import pytest

from otel_runs_exporter._clock import FakeClock
from reliability.rel_helpers import assert_accounted, completed_names, processor_provider, report, spans, tally

pytestmark = pytest.mark.heavy(seconds=18)

# The issue asks for a 60-second outage. The env var exists only so CI can
# shorten it when the whole suite would otherwise exceed its time budget
# (see RELIABILITY.md for the measured decision); read at import because the
# test fixtures clear OTEL_* variables.
# 5 s is ten export timeouts (0.5 s) of outage: what the test proves needs many, not a minute.
# RELIABILITY.md's 60 s figure: OTEL_RUNS_REL_OUTAGE_S=60.
OUTAGE_S = float(os.environ.get("OTEL_RUNS_REL_OUTAGE_S", "5"))


def _assert_all_arrived(t, names, service, *, duplicates_allowed: bool) -> None:
    assert completed_names(service) == sorted(names), "a run created by the app did not arrive"
    assert t.dropped == {}, "nothing may be dropped under a retryable fault"
    assert t.posted_incomplete == 0
    # The exporter counts a run's end once, whatever the resends; the service merged by id.
    assert t.stats_completed == t.delivered == t.created
    assert service.violations() == []
    if not duplicates_allowed:
        assert service.duplicate_posts() == {}


@pytest.mark.parametrize("status", [500, 502, 503])
def test_burst_of_5xx_is_retried_until_delivered(svc, status):
    # A burst longer than one backoff step, answered without Retry-After.
    svc.faults.update(status_sequence=[status] * 8, retry_after=None)
    provider, processor = processor_provider(svc.url, max_export_batch_size=50)
    began = time.monotonic()
    names = spans(provider.get_tracer("t"), 300, f"burst{status}")
    assert processor.force_flush(20_000)
    t = tally(f"burst of 8x{status}", len(names), svc, processor.stats(), began)
    report(t)
    _assert_all_arrived(t, names, svc, duplicates_allowed=False)
    assert t.statuses.get(str(status)) == 8
    assert t.retried >= 8
    provider.shutdown()


def test_mixed_5xx_burst(svc):
    svc.faults.update(status_sequence=[500, 502, 503, 504, 503, 502, 500], retry_after=None)
    provider, processor = processor_provider(svc.url, max_export_batch_size=40)
    began = time.monotonic()
    names = spans(provider.get_tracer("t"), 200, "mixed")
    assert processor.force_flush(20_000)
    t = tally("burst 500/502/503/504 mixed", len(names), svc, processor.stats(), began)
    report(t)
    _assert_all_arrived(t, names, svc, duplicates_allowed=False)
    assert sum(t.statuses.get(s, 0) for s in ("500", "502", "503", "504")) == 7


def test_429_with_retry_after_is_honoured(svc):
    # Three 429s each saying "retry after 20 s": the backoff (10 ms in tests) must give
    # way to the service's wish. The waits run on a fake clock, so a minute takes no time.
    svc.faults.update(status_sequence=[429, 429, 429], retry_after=20)
    clock = FakeClock()
    provider, processor = processor_provider(
        svc.url, max_export_batch_size=100, schedule_delay_s=5.0, export_timeout_s=60, clock=clock
    )
    names = spans(provider.get_tracer("t"), 100, "ra")
    began = time.monotonic()
    assert processor.force_flush(120_000)
    t = tally("429 x3 with Retry-After: 20 (fake clock)", len(names), svc, processor.stats(), began, waits=clock.waits)
    report(t)
    _assert_all_arrived(t, names, svc, duplicates_allowed=False)
    assert t.statuses.get("429") == 3
    assert clock.waits == [20.0, 20.0, 20.0], clock.waits  # the header was obeyed, each time


def test_429_without_retry_after_backs_off_and_delivers(svc):
    svc.faults.update(status_sequence=[429] * 10, retry_after=None)
    provider, processor = processor_provider(svc.url, max_export_batch_size=50)
    began = time.monotonic()
    names = spans(provider.get_tracer("t"), 300, "no-ra")
    assert processor.force_flush(20_000)
    t = tally("429 x10 without Retry-After", len(names), svc, processor.stats(), began)
    report(t)
    _assert_all_arrived(t, names, svc, duplicates_allowed=False)
    assert t.statuses.get("429") == 10


def test_connection_dropped_after_read_is_at_least_once(svc):
    # The service stores the request, then closes without answering: the exporter
    # cannot know and resends. Nothing may be lost; duplicates are reported.
    svc.faults.update(rate_drop=0.3, seed=11)
    provider, processor = processor_provider(svc.url, max_export_batch_size=25)
    began = time.monotonic()
    names = spans(provider.get_tracer("t"), 500, "drop-after")
    assert processor.force_flush(30_000)
    svc.faults.clear()
    t = tally("connection dropped after read (30%)", len(names), svc, processor.stats(), began)
    report(t)
    _assert_all_arrived(t, names, svc, duplicates_allowed=True)
    assert t.statuses.get("0", 0) >= 1, "the fault never fired; the test proves nothing"
    # Every duplicate is a resend of a run that is stored once: the merge by id holds.
    assert set(svc.duplicate_posts()) <= {r["id"] for r in svc.runs()}
    assert t.duplicates >= 1


def test_connection_dropped_before_read_never_duplicates(svc):
    svc.faults.update(rate_drop_before_read=0.3, seed=12)
    provider, processor = processor_provider(svc.url, max_export_batch_size=25)
    began = time.monotonic()
    names = spans(provider.get_tracer("t"), 500, "drop-before")
    assert processor.force_flush(30_000)
    svc.faults.clear()
    t = tally("connection dropped before read (30%)", len(names), svc, processor.stats(), began)
    report(t)
    assert t.faults_fired.get("rate_drop_before_read", 0) >= 1
    _assert_all_arrived(t, names, svc, duplicates_allowed=False)
    assert t.duplicates == 0


def test_server_slower_than_the_request_timeout(svc):
    # 30% of answers come 1 s late; the client gives up after 0.25 s. The service
    # still stores a late request after the client left, so a resend may duplicate.
    svc.faults.update(rate_slow=0.3, slow_seconds=1.0, seed=13)
    provider, processor = processor_provider(svc.url, max_export_batch_size=25, timeout_s=0.25)
    began = time.monotonic()
    names = spans(provider.get_tracer("t"), 300, "slow")
    assert processor.force_flush(60_000)
    svc.faults.clear()
    # A late request the client abandoned may land after the flush returned.
    svc.store.wait(lambda: len(completed_names(svc)) >= len(names), 5)
    t = tally("server slower than timeout_s (30% x 1 s, timeout 0.25 s)", len(names), svc, processor.stats(), began)
    report(t)
    assert t.faults_fired.get("rate_slow", 0) >= 1
    _assert_all_arrived(t, names, svc, duplicates_allowed=True)
    provider.shutdown()


def test_outage_then_recovery_delivers_everything(svc):
    """Proves: an outage many export timeouts long loses nothing and never blocks the app.

    The app keeps producing through it; each export cycle gives up at its
    timeout (ten times here) and keeps the runs queued rather than dropping
    them; on recovery one flush delivers them all, with no duplicates.
    """
    provider, processor = processor_provider(svc.url, export_timeout_s=0.5)
    tracer = provider.get_tracer("t")
    began = time.monotonic()
    names = spans(tracer, 100, "before")
    assert processor.force_flush(10_000)
    svc.faults.update(outage=True)  # 503 with Retry-After: 1, as a service in maintenance says
    stop = time.monotonic() + OUTAGE_S
    during: list[str] = []
    while time.monotonic() < stop:
        during += spans(tracer, 20, f"during-{len(during)}")
        time.sleep(0.1)
    stats_during = processor.stats()
    svc.faults.update(outage=False)
    assert processor.force_flush(60_000)
    names += during
    names += spans(tracer, 100, "after")
    assert processor.force_flush(10_000)
    t = tally(
        f"outage {OUTAGE_S:g} s (503 + Retry-After 1) then recovery",
        len(names),
        svc,
        processor.stats(),
        began,
        created_during_outage=len(during),
        queued_at_outage_end=stats_during.queued,
        outage_s=OUTAGE_S,
    )
    report(t)
    assert stats_during.queued > 0, "nothing was held during the outage; the test proves nothing"
    assert t.faults_fired.get("outage", 0) >= 1
    _assert_all_arrived(t, names, svc, duplicates_allowed=False)
    provider.shutdown()


def _collection_timer(collecting: list[float]) -> Any:
    """A ``gc.callbacks`` entry adding each collection's duration to ``collecting[1]``."""

    def timer(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[0] = time.perf_counter()
        else:
            collecting[1] += time.perf_counter() - collecting[0]

    return timer


def test_outage_longer_than_export_timeout_never_blocks_the_app(service_process):
    # Export timeout 0.5 s, outage 4 s: each send gives up several times. The
    # app thread must never wait on the exporter (a blocking check with a generous
    # bound, not a benchmark), and nothing is lost while the caps hold. The service
    # runs in its own process, as a real one does: in this one it shared the GIL with
    # the producer and the worker, and under a loaded machine once answered a 512-run
    # batch after the 0.5 s the export timeout leaves a request, which was then resent.
    svc = service_process
    provider, processor = processor_provider(svc.url, export_timeout_s=0.5, max_queue_size=100_000)
    tracer = provider.get_tracer("t")
    svc.faults(outage=True, retry_after=None)
    began = time.monotonic()
    worst = 0.0
    names: list[str] = []
    stop = began + 4.0
    i = 0
    # A collection of the whole heap this test process built in earlier tests once took 0.6 s
    # inside one span under the full suite: the interpreter's pause, not a wait on the exporter.
    # The heap from before is frozen out of collection; what remains is timed and subtracted.
    collecting = [0.0, 0.0]  # when the current collection began, time collected so far
    gc_callback = _collection_timer(collecting)
    gc.freeze()
    gc.callbacks.append(gc_callback)
    try:
        while time.monotonic() < stop:
            collected_before = collecting[1]
            t0 = time.perf_counter()
            with tracer.start_as_current_span(f"o-{i}", attributes={"input.value": "x" * 200}):
                pass
            worst = max(worst, time.perf_counter() - t0 - (collecting[1] - collected_before))
            names.append(f"o-{i}")
            i += 1
            # A busy service's pace (about 1k spans/s): the worker must get to the
            # sender to meet the outage (test_rel_load covers a producer that never pauses).
            time.sleep(0.001)
    finally:
        gc.callbacks.remove(gc_callback)
        gc.unfreeze()
    stats_during = processor.stats()
    svc.faults(outage=False)
    assert processor.force_flush(60_000)
    stats = processor.stats()
    at = svc.tally(names=True)
    report(
        {
            "case": "outage 4 s > export timeout 0.5 s, app thread timed (service in its own process)",
            "created": len(names),
            "delivered": at["completed"],
            "dropped": dict(stats.dropped),
            "duplicates": at["duplicates"],
            "stats_completed": stats.delivered,
            "retried": stats.retried,
            "requests": stats.requests,
            "elapsed_s": round(time.monotonic() - began, 2),
            "extra": {
                "max_span_start_end_s": round(worst, 4),
                "collected_s": round(collecting[1], 3),
                "retried_during_outage": stats_during.retried,
            },
        }
    )
    assert stats_during.retried >= 3, "the outage never hit the sender"
    assert worst < 0.5, f"a span start+end took {worst:.3f} s on the app thread"
    # What _assert_all_arrived checks, read from the service's own process:
    assert at["completed_names"] == sorted(names), "a run created by the app did not arrive"
    assert dict(stats.dropped) == {}, "nothing may be dropped under a retryable fault"
    assert at["posted"] == at["completed"]
    assert stats.delivered == at["completed"] == len(names)
    assert at["violations"] == 0
    assert at["duplicates"] == 0
    assert_accounted(stats, len(names))
    provider.shutdown()


def test_app_threads_keep_running_when_queue_caps_overflow(svc):
    # Past the byte cap during an outage, runs are dropped and counted, never
    # blocking the app; what the service ends up with plus what was reported
    # dropped accounts for every span created.
    provider, processor = processor_provider(
        svc.url, export_timeout_s=0.3, max_queue_bytes=300_000, max_export_batch_size=100
    )
    tracer = provider.get_tracer("t")
    svc.faults.update(outage=True, retry_after=None)
    began = time.monotonic()
    names: list[str] = []
    worst = 0.0
    # A full collection of this test process's heap (everything earlier tests
    # left behind) can pause any thread for a few hundred ms in a full-suite
    # run; it is not the exporter blocking the app, so it is kept out of the
    # measurement.
    gc.collect()
    gc.disable()
    try:
        for i in range(5000):
            t0 = time.perf_counter()
            span = tracer.start_span(f"cap-{i}", attributes={"input.value": "y" * 300})
            span.end()
            worst = max(worst, time.perf_counter() - t0)
            names.append(f"cap-{i}")
            time.sleep(0.0005)  # paced, so the worker reaches the sender and the outage
    finally:
        gc.enable()
    time.sleep(0.5)  # the worker converts what is queued and meets the cap
    svc.faults.update(outage=False)
    processor.force_flush(60_000)
    t = tally("byte cap overflow during outage (300 kB cap)", len(names), svc, processor.stats(), began,
              max_span_start_end_s=round(worst, 4))
    report(t)
    assert t.dropped.get("queue_bytes_full", 0) > 0, "the cap was never reached; the test proves nothing"
    assert worst < 0.5
    assert t.delivered + t.dropped_total + t.posted_incomplete >= t.created
    # Each drop is one run operation; a run whose merged post was dropped is wholly missing.
    assert t.delivered + t.dropped_total == t.created, (t.delivered, t.dropped, t.posted_incomplete)
    assert svc.duplicate_posts() == {}
    provider.shutdown()
