"""Time as the sending path sees it: a reading and an interruptible wait.

One seam, passed down from the processor or exporter to the HTTP client, so a
test can run backoff and ``Retry-After`` waits on :class:`FakeClock` instead of
sleeping, while every deadline is computed on the same clock.
"""

from __future__ import annotations

import threading
import time

__all__ = ["Clock", "FakeClock", "SYSTEM_CLOCK", "LONGEST_WAIT_S", "bounded_wait"]

LONGEST_WAIT_S = 10_000_000.0
"""The longest any wait or deadline of ours is (~116 days): past ``threading.TIMEOUT_MAX``
(~292 years) a wait raises ``OverflowError``, and a longer one means "for ever" anyway."""


def bounded_wait(seconds: float) -> float:
    """``seconds``, at most :data:`LONGEST_WAIT_S` (NaN stays NaN: its callers refuse it).

    >>> bounded_wait(float("inf")), bounded_wait(2.5)
    (10000000.0, 2.5)
    """
    return min(seconds, LONGEST_WAIT_S)


class Clock:
    """The real clock: ``time.monotonic`` and ``Event.wait``."""

    def now(self) -> float:
        return time.monotonic()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait up to ``seconds`` for ``event``; True if it was set (the wait was cut short)."""
        return event.wait(seconds)


SYSTEM_CLOCK = Clock()


class FakeClock(Clock):
    """A clock that only moves when something waits on it (or :meth:`advance` is called).

    A wait returns at once, having moved time forward by the wait; an event
    already set cuts it short as the real one would. ``waits`` records every
    wait asked for, so a test can check a backoff or ``Retry-After`` was honoured::

        >>> clock = FakeClock()
        >>> clock.wait(threading.Event(), 2.5)
        False
        >>> clock.now(), clock.waits
        (2.5, [2.5])
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.waits: list[float] = []

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def wait(self, event: threading.Event, seconds: float) -> bool:
        if event.is_set():
            return True
        with self._lock:
            self.waits.append(seconds)
            self._now += max(0.0, seconds)
        time.sleep(0)  # let other threads run, as a real wait would
        return event.is_set()
