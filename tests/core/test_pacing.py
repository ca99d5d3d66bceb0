"""The pacing rule alone: no thread, no socket, no clock; a seeded random source."""

from __future__ import annotations

import doctest
import logging
import random

import pytest

from otel_runs_exporter import _pacing
from otel_runs_exporter._pacing import Pacer


def test_doctests():
    assert doctest.testmod(_pacing).failed == 0


def test_at_rest_the_wait_is_the_schedule_delay_exactly():
    pacer = Pacer(0.2, 10.0, rng=random.Random(1))
    assert [pacer.next_wait() for _ in range(3)] == [0.2, 0.2, 0.2]
    pacer.on_success()
    assert pacer.interval == 0.2 and not pacer.adapting


def test_a_429_doubles_the_interval_up_to_the_bound():
    pacer = Pacer(0.2, 10.0, rng=random.Random(1))
    seen = []
    for _ in range(8):
        pacer.on_throttled(None)
        seen.append(round(pacer.interval, 6))
    assert seen == [0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0, 10.0]


def test_retry_after_is_a_floor_for_the_interval_and_for_the_next_wait():
    pacer = Pacer(0.2, 10.0, rng=random.Random(2))
    pacer.on_throttled(7.0)
    assert pacer.interval == 7.0  # not 0.4: the key is refused for 7 s whatever we do
    wait = pacer.next_wait()
    assert 7.0 <= wait <= 7.0 + 7.0 / 2
    # Taken once: the wait after that is the interval with its jitter.
    assert 0.9 * 7.0 <= pacer.next_wait() <= 1.1 * 7.0


def test_retry_after_beyond_the_bound_still_floors_the_wait_but_not_the_interval():
    pacer = Pacer(0.2, 10.0, rng=random.Random(3))
    pacer.on_throttled(25.0)
    assert pacer.interval == 10.0
    assert 25.0 <= pacer.next_wait() <= 30.0


def test_without_retry_after_the_wait_after_a_429_is_half_to_one_interval():
    pacer = Pacer(0.2, 10.0, rng=random.Random(4))
    for _ in range(4):
        pacer.on_throttled(None)
    assert pacer.interval == pytest.approx(3.2)
    waits = []
    for _ in range(200):
        pacer.on_throttled(None)  # at the bound soon; each refusal owes one jittered wait
        waits.append(pacer.next_wait())
    assert all(5.0 <= w <= 10.0 for w in waits[3:])


def test_success_shrinks_additively_back_to_the_schedule_delay_in_200_steps():
    pacer = Pacer(0.2, 10.0, rng=random.Random(5))
    pacer.on_throttled(10.0)
    assert pacer.interval == 10.0
    steps = 0
    while pacer.adapting:
        before = pacer.interval
        pacer.on_success()
        steps += 1
        assert before - pacer.interval == pytest.approx(min(0.049, before - 0.2))
    assert steps == 200 and pacer.interval == 0.2


def test_processes_refused_together_come_back_spread_out():
    # Twenty pacers refused by the same window (Retry-After 3) at a 4 s interval:
    # their next requests spread over the half interval after the Retry-After.
    waits = []
    for seed in range(20):
        pacer = Pacer(0.2, 10.0, rng=random.Random(seed))
        pacer.on_throttled(2.0)
        pacer.on_throttled(3.0)  # interval 4 s
        waits.append(pacer.next_wait())
    assert all(3.0 <= w <= 5.0 for w in waits)
    assert max(waits) - min(waits) > 1.0
    assert len({round(w, 3) for w in waits}) == 20


def test_adapting_waits_are_jittered_around_the_interval():
    pacer = Pacer(0.2, 10.0, rng=random.Random(6))
    pacer.on_throttled(5.0)
    pacer.next_wait()
    waits = [pacer.next_wait() for _ in range(100)]
    assert all(4.5 <= w <= 5.5 for w in waits) and len(set(waits)) == 100


def test_a_bound_at_the_schedule_delay_turns_adaptation_off_but_honours_retry_after():
    pacer = Pacer(0.2, 0.2, rng=random.Random(7))
    pacer.on_throttled(None)
    assert pacer.interval == 0.2 and not pacer.adapting
    assert 0.1 <= pacer.next_wait() <= 0.2
    pacer.on_throttled(3.0)
    assert pacer.interval == 0.2 and 3.0 <= pacer.next_wait() <= 3.1
    assert pacer.next_wait() == 0.2


def test_one_line_when_adapting_starts_and_one_when_it_ends(caplog):
    caplog.set_level(logging.INFO, logger=_pacing.__name__)
    pacer = Pacer(0.2, 1.0, rng=random.Random(8))
    for _ in range(5):  # a storm of 429s: one line
        pacer.on_throttled(None)
    assert len(caplog.records) == 1 and "429" in caplog.records[0].getMessage()
    for _ in range(199):
        pacer.on_success()
    assert len(caplog.records) == 1
    pacer.on_success()
    assert len(caplog.records) == 2
    assert "back to sending every 0.2 s" in caplog.records[1].getMessage()
    assert "grown to 1.0 s" in caplog.records[1].getMessage()
    pacer.on_throttled(None)  # a new episode, a new line
    assert len(caplog.records) == 3
