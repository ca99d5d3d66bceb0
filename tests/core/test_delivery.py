"""``_delivery.Delivery`` on its own: batching, the byte cap, sealing, the spool, and each Outcome.

The transport under it is the real one, over a scripted network
(``core.network.RunsService``: no socket) and a fake clock, so every retry
schedule runs in no time. What the real local service makes of the same
requests is in ``test_wire.py``.
"""

from __future__ import annotations

import base64
import logging
import random
import threading

import pytest

from core.network import RunsService, ScriptedNetwork
from core.test_transport import make_runs
from otel_runs_exporter._clock import FakeClock
from otel_runs_exporter._delivery import Delivery
from otel_runs_exporter._settings import resolve
from otel_runs_exporter._spool import serialize
from otel_runs_exporter._stats import Ledger, Outcome
from otel_runs_exporter._transport import Transport


class Setup:
    """A Delivery over a Transport over a scripted service, on a fake clock.

    Each send has the export timeout (10 s) as its deadline, as the worker's cycles
    do. The HTTP client keeps its backoff between sends, so after an outage a test
    lets time pass (:meth:`later`, the worker's next cycle) before the next one.
    """

    def __init__(self, *, wake: threading.Event | None = None, **settings) -> None:
        settings.setdefault("compression", "none")  # RunsService reads plain bodies
        settings.setdefault("export_timeout_s", 10.0)
        self.settings = resolve({"endpoint": "http://runs.test", "api_key": "k", **settings}, env={})
        self.clock = FakeClock()
        self.service = RunsService()
        self.network = ScriptedNetwork(self.service)
        transport = Transport(self.settings, clock=self.clock, wake=wake, network=self.network)
        self.delivery = Delivery(self.settings, transport)

    def deadline(self) -> float:
        return self.clock.now() + self.settings.export_timeout_s

    def send(self, *, paced: bool = False) -> Outcome | None:
        return self.delivery.send_next(self.deadline(), paced=paced)

    def later(self, seconds: float = 1.0) -> None:
        self.clock.advance(seconds)

    def send_all(self, most: int = 20) -> list[Outcome]:
        """Send until the backlog is empty (at most ``most`` sends: a test that loops fails instead)."""
        outcomes = []
        while (outcome := self.send()) is not None:
            outcomes.append(outcome)
            assert len(outcomes) <= most, outcomes[-1]
        return outcomes

    def add(self, runs) -> list[bool]:
        return [self.delivery.add(run) for run in runs]

    def held(self) -> list[str]:
        return [type(item).__name__ for item in self.delivery._backlog]


def _ids(runs) -> list[str]:
    return [r.run_id for r in runs]


# --- batching ---------------------------------------------------------------------------


def test_runs_leave_in_order_in_batches_of_at_most_max_export_batch_size():
    s = Setup(max_export_batch_size=3)
    runs = make_runs(7)
    assert s.add(runs) == [True] * 7
    assert len(s.delivery) == 7 and s.delivery.full_batch_ready()
    outcomes = s.send_all()
    assert [len(o.delivered) for o in outcomes] == [3, 3, 1]
    assert all(not o.dropped and not o.retry_later and not o.spooled for o in outcomes)
    assert s.service.batches == [_ids(runs[:3]), _ids(runs[3:6]), _ids(runs[6:])]
    assert len(s.delivery) == 0 and s.delivery.bytes_held == 0 and not s.delivery.full_batch_ready()
    assert s.send() is None


def test_a_batch_stops_at_max_batch_bytes_and_a_run_larger_than_that_goes_alone():
    runs = make_runs(5, payload="x" * 2000)
    big = make_runs(1, payload="y" * 20_000, trace=2)[0]
    s = Setup(max_batch_bytes=int(runs[1].size * 2.5))
    s.add(runs + [big])
    assert s.delivery.full_batch_ready()  # the bytes, not the count, make it full
    assert [len(o.delivered) for o in s.send_all()] == [2, 2, 1, 1]
    assert s.service.stored == _ids(runs + [big])


# --- the byte cap -----------------------------------------------------------------------


def _incompressible_runs(n: int) -> list:
    noise = random.Random(7)
    return [make_runs(1, payload=base64.b64encode(noise.randbytes(2250)).decode(), trace=i + 1)[0] for i in range(n)]


def test_past_the_byte_cap_a_run_is_refused_when_sealing_cannot_make_room(caplog):
    runs = _incompressible_runs(5)
    cap = 2 * max(r.size for r in runs)
    s = Setup(max_queue_bytes=cap)
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        accepted = s.add(runs)
    # Two fit; sealing them (random text compresses by a quarter at best) leaves no room for a third.
    assert accepted == [True, True, False, False, False]
    assert s.delivery.bytes_held <= cap and s.held() == ["SealedBatch"]
    assert sum("OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES" in r.getMessage() for r in caplog.records) == 1  # said once
    assert _ids(s.send().delivered_sealed[0].open()) == _ids(runs[:2])


def test_past_the_byte_cap_runs_that_compress_are_sealed_to_make_room():
    runs = make_runs(30, payload="the same words again " * 20)
    cap = sum(r.size for r in runs[:10])
    s = Setup(max_queue_bytes=cap, max_export_batch_size=10)
    assert s.add(runs) == [True] * 30  # three times the cap, all held
    assert s.delivery.bytes_held <= cap and not s.delivery.sealing  # room was made; the service was never down
    assert s.service.batches == []
    s.send_all()
    assert s.service.stored == _ids(runs)


# --- an outage: sealing -----------------------------------------------------------------


def test_during_an_outage_what_waits_is_sealed_a_batch_at_a_time_and_sent_whole_after():
    s = Setup(max_export_batch_size=5)
    runs = make_runs(12, payload="some text that repeats " * 8)
    s.service.down = True
    s.add(runs[:5])
    outcome = s.send()
    assert outcome.retry_later and not outcome.interrupted
    assert not (outcome.delivered or outcome.dropped or outcome.spooled or outcome.delivered_sealed)
    assert s.delivery.sealing and s.held() == ["SealedBatch"]
    assert s.clock.waits and sum(s.clock.waits) <= 10  # retried until the deadline, on the clock
    s.add(runs[5:])
    assert s.held() == ["SealedBatch", "SealedBatch", "EncodedRun", "EncodedRun"]  # sealed as each batch filled
    assert s.delivery.bytes_held < sum(r.size for r in runs) / 3
    s.service.down = False
    s.later()
    outcomes = s.send_all()
    # The sealed batches go as they are, counted by their operations without being opened.
    assert [[b.ops for b in o.delivered_sealed] for o in outcomes] == [[5], [5], []]
    assert [len(o.delivered) for o in outcomes] == [0, 0, 2]
    assert not s.delivery.sealing and s.delivery.bytes_held == 0
    assert s.service.stored == _ids(runs)  # each once, in order


def test_a_sealed_batch_refused_in_part_is_opened_and_only_the_rejected_run_dropped():
    s = Setup(max_export_batch_size=8)
    runs = make_runs(8)
    s.service.down = True
    s.add(runs)
    assert s.send().retry_later and s.held() == ["SealedBatch"]
    s.service.down = False
    s.later()
    s.service.reject = {runs[5].run_id}
    outcome = s.send()
    assert list(outcome.dropped) == ["rejected"] and not outcome.delivered_sealed
    assert _ids(outcome.dropped["rejected"]) == [runs[5].run_id]
    assert sorted(_ids(outcome.delivered)) == sorted(_ids(runs[:5] + runs[6:]))
    assert not s.delivery.sealing


def test_a_send_cut_short_by_the_wake_event_keeps_its_runs_in_memory_not_in_the_spool(tmp_path):
    wake = threading.Event()
    s = Setup(wake=wake, spool_dir=str(tmp_path))
    s.service.down = True
    s.add(make_runs(3))
    wake.set()  # new work, or shutdown: the backoff wait ends at once
    outcome = s.send()
    assert outcome.retry_later and outcome.interrupted and not outcome.spooled
    assert s.held() == ["SealedBatch"] and s.delivery.spool.pending() == 0


# --- the spool --------------------------------------------------------------------------


def test_runs_the_deadline_hands_back_go_to_the_spool_and_are_replayed_from_it(tmp_path):
    s = Setup(spool_dir=str(tmp_path))
    runs = make_runs(4)
    s.service.down = True
    s.add(runs)
    outcome = s.send()
    assert outcome.spooled == runs and not outcome.retry_later  # they left memory
    assert len(s.delivery) == 0 and not s.delivery.sealing and s.delivery.spool.pending() == 1
    s.later()
    replay = s.delivery.replay_next(s.deadline())
    assert replay.retry_later and replay.replayed == 0 and s.delivery.spool.pending() == 1  # still down: kept
    s.service.down = False
    s.later()
    replay = s.delivery.replay_next(s.deadline())
    assert replay.replayed == 4 and not replay.retry_later and not replay.delivered  # counted on the spool's side
    assert s.delivery.replay_next(s.deadline()) is None
    assert s.service.stored == _ids(runs)


def test_a_full_spool_drops_its_oldest_file_and_the_outcome_says_so(tmp_path):
    first, second = make_runs(3), make_runs(3, trace=2)
    s = Setup(spool_dir=str(tmp_path), spool_max_bytes=int(len(serialize(first)) * 1.5))
    s.service.down = True
    s.add(first)
    assert s.send().spooled == first
    s.later()
    s.add(second)
    outcome = s.send()
    assert outcome.spooled == second and outcome.spool_dropped == {"spool_full": 3}
    assert s.delivery.spool.pending() == 1


def test_at_shutdown_the_whole_backlog_goes_to_the_spool_sealed_batches_opened(tmp_path):
    wake = threading.Event()
    s = Setup(wake=wake, spool_dir=str(tmp_path), max_export_batch_size=4)
    runs = make_runs(6)
    s.service.down = True
    s.add(runs[:4])
    wake.set()  # cut short: kept in memory, sealed
    assert s.send().interrupted
    s.add(runs[4:])
    assert s.held() == ["SealedBatch", "EncodedRun", "EncodedRun"]
    outcome = s.delivery.spool_all()
    assert [(r.run_id, r.parts) for r in outcome.spooled] == [(r.run_id, r.parts) for r in runs]
    assert len(s.delivery) == 0 and s.delivery.bytes_held == 0 and s.delivery.spool.pending() == 1


def test_take_all_empties_the_backlog_with_sealed_batches_opened():
    s = Setup(max_export_batch_size=2)
    runs = make_runs(5)
    s.service.down = True
    s.add(runs[:2])
    s.send()
    s.add(runs[2:])
    assert s.held() == ["SealedBatch", "SealedBatch", "EncodedRun"]
    taken = s.delivery.take_all()
    assert [(r.run_id, r.parts, r.completes) for r in taken] == [(r.run_id, r.parts, r.completes) for r in runs]
    assert len(s.delivery) == 0 and s.delivery.bytes_held == 0


# --- what each answer makes of the batch --------------------------------------------------


@pytest.mark.parametrize(
    "status, reason", [(401, "unauthorized"), (403, "unauthorized"), (404, "not_found"), (418, "http_418")]
)
def test_an_answer_that_drops_the_batch_says_why(status, reason):
    s = Setup(mode="multipart")
    runs = make_runs(3)
    s.service.statuses = [status]
    s.add(runs)
    outcome = s.send()
    assert outcome.dropped == {reason: runs}
    assert not (outcome.delivered or outcome.retry_later or outcome.spooled) and len(s.delivery) == 0


def test_after_the_key_is_refused_nothing_more_is_sent():
    s = Setup()
    s.service.statuses = [401]
    s.add(make_runs(2))
    assert list(s.send().dropped) == ["unauthorized"]
    later = make_runs(2, trace=2)
    s.add(later)
    assert s.send().dropped == {"unauthorized": later} and len(s.network.requests) == 1


def test_a_run_too_large_alone_is_dropped_and_the_rest_of_its_batch_delivered():
    runs = make_runs(4)
    big = make_runs(1, payload="y" * 20_000, trace=2)[0]
    s = Setup()
    s.service.max_body = 5000
    s.add(runs + [big])
    outcome = s.send()
    assert outcome.dropped == {"too_large": [big]}
    assert sorted(_ids(outcome.delivered)) == sorted(_ids(runs))


def test_a_429_on_a_paced_send_puts_the_batch_back_open_for_the_pacer():
    s = Setup()
    runs = make_runs(3)
    s.service.statuses, s.service.retry_after = [429], 7
    s.add(runs)
    outcome = s.send(paced=True)
    assert outcome.retry_later and outcome.throttled and outcome.retry_after_s == 7.0 and not outcome.interrupted
    assert s.held() == ["EncodedRun"] * 3 and not s.delivery.sealing  # not an outage: nothing sealed
    assert s.clock.waits == []  # the pacer decides when to come back
    more = make_runs(2, trace=2)
    s.add(more)
    assert len(s.send().delivered) == 5  # the refused runs ride with what came since
    assert s.clock.waits == [7.0]  # not before the Retry-After


def test_a_429_on_a_flush_is_waited_out_and_the_outcome_says_the_service_slowed_us():
    s = Setup()
    runs = make_runs(2)
    s.service.statuses, s.service.retry_after = [429], 1
    s.add(runs)
    outcome = s.send()
    assert outcome.delivered == runs and outcome.throttled and outcome.retry_after_s == 1.0
    assert s.clock.waits == [1.0]


def test_every_outcome_adds_up_in_the_ledger(tmp_path):
    s = Setup(spool_dir=str(tmp_path), max_export_batch_size=4)
    runs = make_runs(12)
    ledger = Ledger()
    ledger.admit(len(runs))
    s.add(runs)
    s.service.reject = {runs[1].run_id}
    ledger.record(s.send())  # 3 delivered, 1 rejected
    s.service.down = True
    ledger.record(s.send())  # 4 spooled
    s.service.down = False
    s.later()
    ledger.record(s.send())  # 4 delivered
    ledger.record(s.delivery.replay_next(s.deadline()))  # the 4 spooled, replayed
    stats = ledger.snapshot(s.delivery.transport.counts)
    assert (stats.created, stats.delivered, stats.spooled, stats.replayed) == (12, 7, 4, 4)
    assert dict(stats.dropped) == {"rejected": 1} and stats.settled()
    assert sorted(s.service.stored) == sorted(_ids(runs[:1] + runs[2:]))
    assert stats.requests == len(s.network.requests)
