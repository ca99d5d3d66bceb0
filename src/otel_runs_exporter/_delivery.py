"""Encoded runs awaiting delivery: the backlog, its byte cap, batching, the spool.

Shared by the processor path (the batcher's worker calls it) and the exporter
path (``export()`` calls it), so both bound memory, batch, count and spool the
same way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Callable

from ._encode import EncodedRun
from ._logging import RateLimitedLog
from ._settings import Settings
from ._spool import Spool
from ._stats import Counters
from ._transport import SendResult, Transport

__all__ = ["Delivery"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)


class Delivery:
    """A bounded backlog of encoded runs and the loop that sends it.

    ``add`` refuses (and counts) a run that would take the backlog past
    ``max_queue_bytes``. ``deliver`` sends batches until the backlog is empty
    or the transport hands runs back; runs handed back because the retry
    budget ran out go to the spool when one is configured, otherwise they stay
    for the next call. With the backlog empty, ``deliver`` replays the spool.
    """

    def __init__(
        self,
        settings: Settings,
        transport: Transport,
        counters: Callable[[], Counters],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._transport = transport
        self._counters = counters
        self._clock = clock
        self._backlog: deque[EncodedRun] = deque()
        self._bytes = 0
        self._lock = threading.Lock()  # add() may come from another thread than deliver()
        self._spool = (
            Spool(settings.spool_dir, settings.spool_max_bytes, lambda reason, n: self._counters().drop(reason, n))
            if settings.spool_dir
            else None
        )
        self._spool_may_have_files = self._spool is not None

    def __len__(self) -> int:
        return len(self._backlog)

    @property
    def bytes_held(self) -> int:
        """Encoded bytes waiting for delivery (read without the lock: an estimate is enough)."""
        return self._bytes

    @property
    def spool(self) -> Spool | None:
        return self._spool

    def run_ids(self) -> set[str]:
        return {r.run_id for r in list(self._backlog)}

    def add(self, run: EncodedRun) -> bool:
        """Queue one encoded run; False past the byte cap.

        A refused run that completes its run is counted as ``queue_bytes_full``.
        A refused early post is not: the run's completing operation will carry
        everything (the batcher sends it as a whole post), and is counted if it
        is refused too, so each lost run is counted exactly once.
        """
        cap = self._settings.max_queue_bytes
        with self._lock:
            if self._bytes + run.size > cap:
                full = True
            else:
                self._backlog.append(run)
                self._bytes += run.size
                full = False
        if full:
            if run.completes:
                self._counters().drop("queue_bytes_full")
            _rl.warning(
                "queue_bytes_full",
                "undelivered runs hold %d bytes, the cap (OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES); dropping new runs",
                cap,
            )
        return not full

    def deliver(
        self,
        deadline: float,
        between: Callable[[], None] | None = None,
        busy: Callable[[], bool] | None = None,
    ) -> bool:
        """Send everything before ``deadline``; True when nothing is left in memory.

        ``between`` runs after each successful batch (the batcher converts newly
        queued spans there, so one cycle also takes what arrived meanwhile).
        Spool replay stops early while ``busy()`` says new work is waiting, so
        old runs never crowd out new ones.
        """
        while self._backlog:
            batch = self._take_batch()
            result = self._transport.send(batch, deadline)
            self._account(result)
            if result.retry:
                if self._spool is not None and not result.interrupted:
                    self._to_spool(result.retry)
                    continue
                self._put_back(result.retry)
                return False
            if between is not None:
                between()
        if self._spool_may_have_files:
            self._replay(deadline, busy)
        return True

    def spool_everything(self) -> int:
        """Write the whole backlog to the spool (at shutdown); returns how many runs went there."""
        if self._spool is None or not self._backlog:
            return 0
        with self._lock:
            runs = list(self._backlog)
            self._backlog.clear()
            self._bytes = 0
        return len(runs) if self._to_spool(runs) else 0

    def clear(self) -> int:
        with self._lock:
            n = len(self._backlog)
            self._backlog.clear()
            self._bytes = 0
        return n

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

    def _account(self, result: SendResult) -> None:
        counters = self._counters()
        if result.delivered:
            counters.delivered(len(result.delivered), sum(1 for r in result.delivered if r.completes))
        for reason, runs in result.dropped.items():
            counters.drop(reason, len(runs))

    def _to_spool(self, runs: list[EncodedRun]) -> bool:
        assert self._spool is not None
        if self._spool.write(runs):
            self._counters().spooled += len(runs)
            self._spool_may_have_files = True
            _rl.warning(
                "spooled",
                "the service could not take %d runs within the export timeout; written to the spool at %s",
                len(runs),
                self._spool.dir,
            )
            return True
        self._put_back(runs)  # the disk refused: keep them in memory, within the cap
        return False

    def _replay(self, deadline: float, busy: Callable[[], bool] | None) -> None:
        assert self._spool is not None
        while self._clock() < deadline and not (busy is not None and busy()):
            claimed = self._spool.claim()
            if claimed is None:
                self._spool_may_have_files = False
                return
            path, runs = claimed
            result = self._transport.send(runs, deadline)
            self._account(result)
            self._counters().replayed += len(result.delivered)
            if result.retry:
                self._spool.give_back(path, result.retry)
                return
            self._spool.done(path)
