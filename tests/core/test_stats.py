"""The ledger: one counting API, in runs, whose identity holds at every step (pure, no threads)."""

from __future__ import annotations

import threading

from otel_runs_exporter._encode import encode_run
from otel_runs_exporter._stats import Ledger, Outcome, RequestCounts


def _run(i: int, completes: bool = True):
    return encode_run("patch" if completes else "post", {"id": f"r{i}"}, completes=completes)


def _identity(ledger: Ledger) -> bool:
    s = ledger.snapshot()
    return s.created == s.delivered + s.dropped_total + s.spooled + s.queued


def test_each_move_keeps_the_identity_and_counts_runs_not_operations():
    ledger = Ledger()
    ledger.admit(5)
    ledger.refuse("queue_full")  # arrived, never queued
    assert _identity(ledger)
    early = [_run(i, completes=False) for i in range(3)]
    ledger.record(Outcome(delivered=early + [_run(0), _run(1)]))  # early posts move no run
    ledger.record(Outcome(dropped={"rejected": [_run(2), _run(9, completes=False)]}))
    ledger.record(Outcome(spooled=[_run(3)]))
    assert _identity(ledger)
    s = ledger.snapshot(RequestCounts(requests=4, retried=1, failed=1))
    assert (s.created, s.delivered, s.queued, s.spooled, s.sent) == (6, 2, 1, 1, 5)
    assert dict(s.dropped) == {"queue_full": 1, "rejected": 1}
    assert (s.requests, s.retried, s.failed) == (4, 1, 1)
    assert not s.settled()
    ledger.drop("shutdown")
    assert ledger.snapshot().settled()


def test_give_up_counts_what_is_queued_and_a_late_delivery_moves_back():
    ledger = Ledger()
    ledger.admit(4)
    ledger.record(Outcome(delivered=[_run(0)]))
    assert ledger.give_up(1.0) == 3
    assert ledger.snapshot().settled()
    # The send that was in flight when shutdown gave up finishes after all.
    ledger.record(Outcome(delivered=[_run(1)], spooled=[_run(2)]))
    s = ledger.snapshot()
    assert s.settled() and (s.delivered, s.spooled, dict(s.dropped)) == (2, 1, {"shutdown": 1})


def test_spool_side_counts_stay_out_of_the_identity():
    ledger = Ledger()
    ledger.record(Outcome(replayed=7, spool_dropped={"spool_full": 2}))
    s = ledger.snapshot()
    assert (s.replayed, dict(s.spool_dropped)) == (7, {"spool_full": 2}) and s.settled()


def test_concurrent_moves_lose_no_count():
    ledger = Ledger()

    def work():
        for i in range(2000):
            ledger.admit()
            if i % 2:
                ledger.record(Outcome(delivered=[_run(i)]))
            else:
                ledger.drop("rejected")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = ledger.snapshot()
    assert s.settled() and (s.created, s.delivered, s.dropped["rejected"]) == (8000, 4000, 4000)


def test_ends_admitted_without_the_lock_are_all_counted_while_others_read_and_move_runs():
    """``admit_end`` (every span's end, on app threads) takes no lock; readers fold it in. Four threads
    admit while two read snapshots and ``queued`` and the worker's moves run: no count is lost or doubled,
    and no reading ever shows more runs moved than admitted."""
    ledger = Ledger()
    stop = threading.Event()
    seen: list[str] = []

    def admit():
        for _ in range(2_500):
            ledger.admit_end()

    def move():
        moved = 0
        while moved < 5_000:
            s = ledger.snapshot()
            if s.created - moved > 0:
                ledger.record(Outcome(delivered=[_run(moved)]))
                moved += 1

    def read():
        while not stop.is_set():
            s = ledger.snapshot()
            if not _identity(ledger) or s.queued < 0 or ledger.queued < 0:
                seen.append(repr(s))

    threads = [threading.Thread(target=admit) for _ in range(4)] + [threading.Thread(target=move)]
    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in threads + readers:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    ledger.admit_end()
    ledger.drop("rejected")
    s = ledger.snapshot()
    assert not seen
    assert (s.created, s.delivered, s.dropped["rejected"], s.queued) == (10_001, 5_000, 1, 5_000)
