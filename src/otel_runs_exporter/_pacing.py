"""How long the worker waits between flushes, adapted to a rate limit shared with other processes.

Processes that use one API key share its rate limit (interface 8.1: 6000
multipart requests per 10 s per key) and none of them sees the others. So each
paces itself the way a TCP flow does, from the one signal every one of them
gets: the service's 429. The interval grows multiplicatively when the service
refuses and shrinks additively, in time, while it accepts:

=========================  ============================================================
429, or an answer whose    the interval grows by half, to at least that answer's Retry-After,
rate-limit headers say no  at most ``max_schedule_delay_s``; the next wait is at least
request is left            the Retry-After
a request succeeds         the interval shrinks by 10 ms for each second since the last
                           answer (at most one interval's worth), back towards
                           ``schedule_delay_s``
=========================  ============================================================

A longer interval means fewer, larger requests: what arrives meanwhile fills
the batch (up to ``max_export_batch_size`` runs and ``max_batch_bytes``), and a
full batch never waits. Why these rules:

* At least the Retry-After: a service that turns the key away for R seconds
  has said its window is at least that long, so sending more often than every
  R seconds only collects 429s. Growing alone, against a fixed 10 s window,
  costs a whole window per step: ten of them from 0.2 s to 10 s.
* By half, not double: a fleet that has found its share of the limit
  overshoots it by less after a 429, so runs wait less. Measured with
  ``bench/fleet.py`` (20 processes x 50 spans/s, one key limited to 30 requests
  per 10 s, 40 s of load, six runs each, interleaved): span end to arrival p99
  10.3-15.1 s (median 10.5) against 10.3-15.6 s (median 13.9) doubling, 429s
  after warm-up 0-3.9 % against 0-6.2 %, every run delivered in both.
* Shrinking by time, not by request: the processes of a fleet probe for more
  rate together, and every probe past the limit is a 429. A fixed step per
  request would make a fleet that must send often (a short interval) probe
  much faster than one that sends rarely; its share of 429s grows as 1/interval.
  Shrinking 10 ms per second keeps that share about the same for any fleet
  (a few per cent against a fixed window, by a fluid model: each 429 takes a
  third of one process's share, which the fleet regains at 0.01 s per second). The
  cost: from the 10 s bound back to 0.2 s takes about 16 minutes of accepted
  requests.
* Jitter, so processes refused together do not come back together: after a
  429 the wait is the Retry-After (at least half an interval) plus up to half
  an interval; while adapting, other waits are the interval +/-10 %. At
  ``schedule_delay_s`` the wait is exact, as it always was.

One line is logged when the interval starts to grow and one when it is back
at ``schedule_delay_s``, never one per 429. Pure: no thread, no socket; the
clock and the random source are injectable::

    >>> from ._clock import FakeClock
    >>> clock = FakeClock()
    >>> pacer = Pacer(0.2, 10.0, clock=clock, rng=random.Random(7))
    >>> pacer.on_throttled(4.0)
    >>> pacer.interval
    4.0
    >>> 4.0 <= pacer.next_wait() <= 6.0
    True
    >>> clock.advance(5.0)
    >>> pacer.on_success()  # 4 s counted (one interval at most): 40 ms shorter
    >>> round(pacer.interval, 3)
    3.96
"""

from __future__ import annotations

import logging
import random

from ._clock import SYSTEM_CLOCK, Clock

__all__ = ["Pacer"]

logger = logging.getLogger(__name__)

_GROWTH = 1.5
_SHRINK_PER_S = 0.01  # seconds off the interval per second of accepted requests
_JITTER = 0.1


class Pacer:
    """The flush interval of one worker: ``schedule_delay_s``, or longer while the service refuses.

    ``max_s`` at or below ``base_s`` turns adaptation off: the interval stays
    ``base_s`` and a 429 only delays the next flush by its Retry-After.
    """

    def __init__(
        self, base_s: float, max_s: float, *, clock: Clock = SYSTEM_CLOCK, rng: random.Random | None = None
    ) -> None:
        self.base_s = base_s
        self.max_s = max(base_s, max_s)
        self._clock = clock
        self._rng = rng or random.Random()
        self._interval = base_s
        self._peak = base_s
        self._last = clock.now()  # the last answer that moved the interval
        # Set by a refusal until the next wait is taken: the Retry-After (0 without one) that wait must cover.
        self._owed: float | None = None

    @property
    def interval(self) -> float:
        """The current flush interval in seconds."""
        return self._interval

    @property
    def adapting(self) -> bool:
        """True while the interval is longer than ``base_s``."""
        return self._interval > self.base_s

    @property
    def owes_wait(self) -> bool:
        """True from a refusal until the next wait is taken: that wait covers its Retry-After."""
        return self._owed is not None

    def on_throttled(self, retry_after_s: float | None) -> None:
        """The service refused a request (429), or said none is left; ``retry_after_s`` as it asked."""
        floor = max(0.0, retry_after_s or 0.0)
        self._owed = max(self._owed or 0.0, floor)
        was_adapting = self.adapting
        self._last = self._clock.now()
        self._interval = min(self.max_s, max(self._interval * _GROWTH, floor))
        self._peak = max(self._peak, self._interval)
        if self.adapting and not was_adapting:
            logger.warning(
                "the service is limiting this API key's request rate (429): sending fewer, larger requests, "
                "every %.1f s for now (at most every %.1f s, OTEL_EXPORTER_RUNS_MAX_SCHEDULE_DELAY), "
                "and back to every %.1f s as requests succeed",
                self._interval,
                self.max_s,
                self.base_s,
            )

    def on_success(self) -> None:
        """A request was accepted: 10 ms off the interval per second since the last answer."""
        now = self._clock.now()
        elapsed = min(max(0.0, now - self._last), self._interval)
        self._last = now
        if not self.adapting:
            return
        shorter = self._interval - _SHRINK_PER_S * elapsed
        # Within a microsecond of the base is the base.
        self._interval = shorter if shorter > self.base_s + 1e-6 else self.base_s
        if not self.adapting:
            logger.warning(
                "requests are accepted again: back to sending every %.1f s (the interval had grown to %.1f s)",
                self.base_s,
                self._peak,
            )
            self._peak = self.base_s

    def next_wait(self, spent_s: float = 0.0) -> float:
        """Seconds to wait before the next flush, the last one having taken ``spent_s``.

        The interval runs from the start of one flush to the start of the next
        (as in the SDK's BatchSpanProcessor), so a slow answer does not stretch
        it; a wait owed to a refusal runs from now. Call once per wait: it takes
        what a refusal owed.
        """
        owed, self._owed = self._owed, None
        interval = self._interval
        if owed is not None:
            return max(owed, interval / 2) + self._rng.uniform(0.0, interval / 2)
        if not self.adapting:
            return max(0.0, interval - spent_s)
        return max(0.0, interval * self._rng.uniform(1 - _JITTER, 1 + _JITTER) - spent_s)
