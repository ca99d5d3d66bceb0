"""The pacing rule alone: no thread, no socket; a fake clock and a seeded random source."""

from __future__ import annotations

import doctest
import logging
import random

import pytest

from otel_runs_exporter import _pacing
from otel_runs_exporter._clock import FakeClock
from otel_runs_exporter._pacing import Pacer


def pacer(base: float = 0.2, bound: float = 10.0, seed: int = 1) -> tuple[Pacer, FakeClock]:
    clock = FakeClock()
    return Pacer(base, bound, clock=clock, rng=random.Random(seed)), clock


def test_doctests():
    assert doctest.testmod(_pacing).failed == 0


def test_at_rest_the_wait_is_the_schedule_delay_exactly():
    p, clock = pacer()
    assert [p.next_wait() for _ in range(3)] == [0.2, 0.2, 0.2]
    clock.advance(60)
    p.on_success()
    assert p.interval == 0.2 and not p.adapting


def test_a_429_grows_the_interval_by_half_up_to_the_bound():
    p, _ = pacer()
    seen = []
    for _ in range(12):
        p.on_throttled(None)
        seen.append(round(p.interval, 4))
    assert seen == [0.3, 0.45, 0.675, 1.0125, 1.5188, 2.2781, 3.4172, 5.1258, 7.6887, 10.0, 10.0, 10.0]


def test_retry_after_is_a_floor_for_the_interval_and_for_the_next_wait():
    p, _ = pacer(seed=2)
    p.on_throttled(7.0)
    assert p.interval == 7.0  # not 0.4: the key is refused for 7 s whatever we do
    assert 7.0 <= p.next_wait() <= 7.0 + 7.0 / 2
    # Owed once: the wait after that is the interval with its jitter.
    assert 0.9 * 7.0 <= p.next_wait() <= 1.1 * 7.0


def test_a_refusal_is_owed_until_the_next_wait_is_taken():
    p, _ = pacer(seed=11)
    assert not p.owes_wait
    p.on_throttled(2.0)
    assert p.owes_wait
    p.next_wait()
    assert not p.owes_wait


def test_retry_after_beyond_the_bound_still_floors_the_wait_but_not_the_interval():
    p, _ = pacer(seed=3)
    p.on_throttled(25.0)
    assert p.interval == 10.0
    assert 25.0 <= p.next_wait() <= 30.0


def test_without_retry_after_the_wait_after_a_429_is_half_to_one_interval():
    p, _ = pacer(seed=4)
    waits = []
    for _ in range(200):
        p.on_throttled(None)  # at the bound after ten; each refusal owes one jittered wait
        waits.append(p.next_wait())
    assert all(5.0 <= w <= 10.0 for w in waits[10:])
    assert min(waits[10:]) < 6.0 and max(waits[10:]) > 9.0


def test_success_shrinks_the_interval_by_10_ms_per_second_of_time():
    p, clock = pacer(seed=5)
    p.on_throttled(10.0)
    clock.advance(10.0)
    p.on_success()
    assert p.interval == pytest.approx(9.9)
    clock.advance(2.0)  # a full batch sooner than the interval: a smaller step
    p.on_success()
    assert p.interval == pytest.approx(9.88)
    clock.advance(3600.0)  # idle for an hour: one interval's worth at most
    p.on_success()
    assert p.interval == pytest.approx(9.88 - 0.0988)


def test_back_at_the_schedule_delay_after_about_980_seconds_of_accepted_requests():
    p, clock = pacer(seed=6)
    p.on_throttled(10.0)
    elapsed = 0.0
    while p.adapting:
        wait = p.interval
        clock.advance(wait)
        elapsed += wait
        p.on_success()
    assert p.interval == 0.2
    assert 950 <= elapsed <= 1000


def test_the_interval_runs_from_flush_start_to_flush_start_but_an_owed_wait_from_now():
    p, _ = pacer(seed=10)
    assert p.next_wait(0.05) == pytest.approx(0.15)
    assert p.next_wait(0.5) == 0.0  # a slow flush: the next one is due at once
    p.on_throttled(4.0)
    assert 4.0 <= p.next_wait(3.0) <= 6.0  # the Retry-After counts from the refusal
    assert 0.9 * 4.0 - 3.0 <= p.next_wait(3.0) <= 1.1 * 4.0 - 3.0


def test_processes_refused_together_come_back_spread_out():
    # Twenty pacers refused by the same window (Retry-After 3) at a 4 s interval:
    # their next requests spread over the half interval after the Retry-After.
    waits = []
    for seed in range(20):
        p, _ = pacer(seed=seed)
        p.on_throttled(2.0)
        p.on_throttled(3.0)  # interval 4 s
        waits.append(p.next_wait())
    assert all(3.0 <= w <= 5.0 for w in waits)
    assert max(waits) - min(waits) > 1.0
    assert len({round(w, 3) for w in waits}) == 20


def test_adapting_waits_are_jittered_around_the_interval():
    p, _ = pacer(seed=7)
    p.on_throttled(5.0)
    p.next_wait()
    waits = [p.next_wait() for _ in range(100)]
    assert all(4.5 <= w <= 5.5 for w in waits) and len(set(waits)) == 100


def test_a_bound_at_the_schedule_delay_turns_adaptation_off_but_honours_retry_after():
    p, _ = pacer(0.2, 0.2, seed=8)
    p.on_throttled(None)
    assert p.interval == 0.2 and not p.adapting
    assert 0.1 <= p.next_wait() <= 0.2
    p.on_throttled(3.0)
    assert p.interval == 0.2 and 3.0 <= p.next_wait() <= 3.1
    assert p.next_wait() == 0.2


def test_one_line_when_adapting_starts_and_one_when_it_ends(caplog):
    caplog.set_level(logging.INFO, logger=_pacing.__name__)
    p, clock = pacer(0.2, 1.0, seed=9)
    for _ in range(5):  # a storm of 429s: one line
        p.on_throttled(None)
    assert len(caplog.records) == 1 and "429" in caplog.records[0].getMessage()
    while p.adapting:
        clock.advance(p.interval)
        p.on_success()
    assert len(caplog.records) == 2
    assert "back to sending every 0.2 s" in caplog.records[1].getMessage()
    assert "grown to 1.0 s" in caplog.records[1].getMessage()
    p.on_throttled(None)  # a new episode, a new line
    assert len(caplog.records) == 3
