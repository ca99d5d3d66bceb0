"""Encoded runs awaiting delivery: the backlog, its byte cap, batching, the spool.

Used by both paths: the processor's worker (``_worker``) and the exporter's
``export()``. It knows nothing of spans or counters: the caller hands it
encoded runs, asks it to send the next batch or replay the next spool file,
and gets back an :class:`Outcome` saying what became of the runs, which the
caller records in its :class:`~otel_runs_exporter._stats.Ledger`. Calls go one
way: caller -> delivery -> transport.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass, field

from ._encode import EncodedRun
from ._logging import RateLimitedLog
from ._settings import Settings
from ._spool import Spool
from ._transport import SendResult, Transport

__all__ = ["Delivery", "Outcome"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)


@dataclass
class Outcome:
    """What one delivery step did with the runs it took.

    ``delivered``, ``dropped`` and ``spooled`` are runs that left memory.
    ``retry_later`` means runs were put back in the backlog (the deadline came,
    or ``interrupted``: the caller's wake event cut a backoff wait short).
    ``replayed`` and ``spool_dropped`` count runs (completing operations) on the
    spool's side: delivered from, or lost in, spool files.
    """

    delivered: list[EncodedRun] = field(default_factory=list)
    dropped: dict[str, list[EncodedRun]] = field(default_factory=dict)
    spooled: list[EncodedRun] = field(default_factory=list)
    retry_later: bool = False
    interrupted: bool = False
    replayed: int = 0
    spool_dropped: dict[str, int] = field(default_factory=dict)


class Delivery:
    """A bounded backlog of encoded runs, sent a batch at a time.

    ``add`` refuses a run that would take the backlog past ``max_queue_bytes``
    (the caller counts it). ``send_next`` sends one batch; runs the transport
    hands back because the retry budget ran out go to the spool when one is
    configured, otherwise back to the front of the backlog. ``replay_next``
    sends one spool file.
    """

    def __init__(self, settings: Settings, transport: Transport) -> None:
        self._settings = settings
        self.transport = transport
        self._backlog: deque[EncodedRun] = deque()
        self._bytes = 0
        self._lock = threading.Lock()  # add() may come from another thread than send_next()
        self.spool = Spool(settings.spool_dir, settings.spool_max_bytes) if settings.spool_dir else None
        self._spool_may_have_files = self.spool is not None

    def __len__(self) -> int:
        return len(self._backlog)

    @property
    def bytes_held(self) -> int:
        """Encoded bytes waiting for delivery (read without the lock: an estimate is enough)."""
        return self._bytes

    def add(self, run: EncodedRun) -> bool:
        """Queue one encoded run; False (and one rate-limited warning) past the byte cap."""
        cap = self._settings.max_queue_bytes
        with self._lock:
            if self._bytes + run.size > cap:
                full = True
            else:
                self._backlog.append(run)
                self._bytes += run.size
                full = False
        if full:
            _rl.warning(
                "queue_bytes_full",
                "undelivered runs hold %d bytes, the cap (OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES); dropping new runs",
                cap,
            )
        return not full

    def send_next(self, deadline: float) -> Outcome | None:
        """Send one batch before ``deadline``; None when the backlog is empty."""
        batch = self._take_batch()
        if not batch:
            return None
        result = self.transport.send(batch, deadline)
        outcome = _outcome(result)
        if result.retry:
            if self.spool is not None and not result.interrupted and self._to_spool(result.retry):
                outcome.spooled = result.retry
            else:
                self._put_back(result.retry)
                outcome.retry_later = True
        self._take_spool_losses(outcome)
        return outcome

    def replay_next(self, deadline: float) -> Outcome | None:
        """Send the oldest spool file; None when there is none (or no spool)."""
        spool = self.spool
        if spool is None or not self._spool_may_have_files:
            return None
        claimed = spool.claim()
        if claimed is None:
            self._spool_may_have_files = False
            outcome = Outcome()
            self._take_spool_losses(outcome)
            return outcome if outcome.spool_dropped else None
        path, runs = claimed
        result = self.transport.send(runs, deadline)
        # These runs left memory when they were spooled: their fate is counted on the spool's side.
        outcome = Outcome(replayed=sum(1 for r in result.delivered if r.completes))
        for reason, dropped in result.dropped.items():
            outcome.spool_dropped[reason] = sum(1 for r in dropped if r.completes)
        if result.retry:
            spool.give_back(path, result.retry)
            outcome.retry_later = True
            outcome.interrupted = result.interrupted
        else:
            spool.done(path)
        self._take_spool_losses(outcome)
        return outcome

    def spool_all(self) -> Outcome:
        """Write the whole backlog to the spool (at shutdown, in one log line); what the disk refuses stays."""
        outcome = Outcome()
        if self.spool is None:
            return outcome
        with self._lock:
            runs = list(self._backlog)
            self._backlog.clear()
            self._bytes = 0
        if runs:
            if self._to_spool(runs):
                outcome.spooled = runs
                logger.warning(
                    "shutdown: %d runs could not be delivered in time; written to the spool at %s "
                    "for the next process to send",
                    sum(1 for r in runs if r.completes),
                    self.spool.dir,
                )
            else:
                self._put_back(runs)
        self._take_spool_losses(outcome)
        return outcome

    def take_all(self) -> list[EncodedRun]:
        """Empty the backlog and return what it held (at shutdown, to count what is given up)."""
        with self._lock:
            runs = list(self._backlog)
            self._backlog.clear()
            self._bytes = 0
        return runs

    def close(self) -> None:
        self.transport.close()

    # --- internals -----------------------------------------------------------------

    def _take_batch(self) -> list[EncodedRun]:
        batch: list[EncodedRun] = []
        size = 0
        max_items = self._settings.max_export_batch_size
        max_bytes = self._settings.max_batch_bytes
        with self._lock:
            backlog = self._backlog
            while backlog and len(batch) < max_items:
                run = backlog[0]
                if batch and size + run.size > max_bytes:
                    break
                backlog.popleft()
                batch.append(run)
                size += run.size
            self._bytes -= size
        return batch

    def _put_back(self, runs: list[EncodedRun]) -> None:
        with self._lock:
            for run in reversed(runs):
                self._backlog.appendleft(run)
                self._bytes += run.size

    def _to_spool(self, runs: list[EncodedRun]) -> bool:
        assert self.spool is not None
        if not self.spool.write(runs):
            return False  # the disk refused (logged): the caller keeps them in memory, within the cap
        self._spool_may_have_files = True
        _rl.warning(
            "spooled",
            "the service could not take %d runs within the export timeout; written to the spool at %s",
            len(runs),
            self.spool.dir,
        )
        return True

    def _take_spool_losses(self, outcome: Outcome) -> None:
        if self.spool is not None:
            for reason, runs in self.spool.take_losses().items():
                outcome.spool_dropped[reason] = outcome.spool_dropped.get(reason, 0) + runs


def _outcome(result: SendResult) -> Outcome:
    return Outcome(delivered=result.delivered, dropped=result.dropped, interrupted=result.interrupted)
