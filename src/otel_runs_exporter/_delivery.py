"""Encoded runs awaiting delivery: the backlog, its byte cap, batching, the spool.

Used by both paths: the processor's worker (``_worker``) and the exporter's
``export()``. It knows nothing of spans or counters: the caller hands it
encoded runs, asks it to send the next batch or replay the next spool file,
and gets back an :class:`~otel_runs_exporter._stats.Outcome` saying what became
of the runs, which the caller records in its :class:`~otel_runs_exporter._stats.Ledger`.
Calls and imports go one way: caller -> delivery -> transport -> http, and
``_stats`` (the ledger and the outcome it records) sits below all of them.

While the service cannot take runs (a batch came back to be retried), what
waits is sealed (``_seal``): each batch held as its compressed request body,
~80 bytes a small run instead of ~1.5 KB, and the byte cap counts those real
bytes. New runs are sealed a batch at a time until a send succeeds again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Union, cast
from urllib.parse import urlsplit

from . import environment_variables as ev
from ._codec import memory_codec
from ._encode import EncodedRun, new_boundary
from ._logging import RateLimitedLog, n_runs
from ._seal import SealedBatch, seal
from ._settings import Settings
from ._spool import Spool
from ._stats import Outcome, completing
from ._transport import SendResult, Transport

__all__ = ["Delivery", "Outcome"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)


_Held = Union[EncodedRun, SealedBatch]


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
        self._backlog: deque[_Held] = deque()
        self._bytes = 0
        self._lock = threading.Lock()  # add() may come from another thread than send_next()
        self._codec = memory_codec()
        self._boundary = new_boundary()
        # Set when a batch comes back to be retried, cleared when one is delivered:
        # while set, runs waiting at the back are sealed a batch at a time.
        self._sealing = False
        self._unsealed = 0  # EncodedRuns at the back of the backlog, after the last sealed batch
        self._unsealed_bytes = 0
        self._sealed_count = 0  # SealedBatches in the backlog
        self.spool = (
            Spool(
                settings.spool_dir,
                settings.spool_max_bytes,
                batch_bytes=settings.max_batch_bytes,
                # A file holds a batch, or one run larger than that; no run this process holds is larger
                # than its queue's byte bound, so neither is a file it writes, nor what a replay reads.
                max_file_bytes=max(settings.max_batch_bytes, settings.max_queue_bytes),
            )
            if settings.spool_dir
            else None
        )
        self._spool_may_have_files = self.spool is not None
        self._replayed = 0  # runs replayed from the spool since it was last found empty
        self._exit_began: float | None = None

    def __len__(self) -> int:
        return len(self._backlog)

    @property
    def bytes_held(self) -> int:
        """Encoded bytes waiting for delivery (read without the lock: an estimate is enough)."""
        return self._bytes

    @property
    def sealing(self) -> bool:
        """True while the service is not taking runs (the last batch came back to be retried)."""
        return self._sealing

    def add(self, run: EncodedRun) -> bool:
        """Queue one encoded run; False (and one rate-limited warning) past the byte cap."""
        cap = self._settings.max_queue_bytes
        with self._lock:
            # Past the cap, sealing what waits may make room (a slow service, not only a down one).
            if self._bytes + run.size > cap and not self._seal_tail(cap - run.size):
                full = True
            else:
                self._backlog.append(run)
                self._bytes += run.size
                self._unsealed += 1
                self._unsealed_bytes += run.size
                full = False
                if self._sealing and (
                    self._unsealed >= self._settings.max_export_batch_size
                    or self._unsealed_bytes >= self._settings.max_batch_bytes
                ):
                    self._seal_tail(0)
        if full:
            _rl.warning(
                "queue_bytes_full",
                "undelivered runs hold %d bytes, the cap (OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES); dropping new runs",
                cap,
            )
        return not full

    def send_next(self, deadline: float, *, paced: bool = False) -> Outcome | None:
        """Send one batch before ``deadline``; None when the backlog is empty.

        ``paced``: a 429 puts the batch straight back (``throttled`` in the
        outcome) for the caller to come back later with a larger one.
        """
        batch = self._take_batch()
        if batch is None:
            return None
        if isinstance(batch, SealedBatch):
            result = self.transport.send_sealed(batch, deadline, paced=paced)
        else:
            result = self.transport.send(batch, deadline, paced=paced)
        outcome = _outcome(result)
        if result.delivered or result.delivered_sealed is not None:
            self._sealing = False
        if result.retry_sealed is not None:
            self._sealing = True
            self._put_back_sealed(result.retry_sealed)
            outcome.retry_later = True
        if result.retry and paced and result.throttled:
            # Refused for our rate, not because the service is down: back as runs, neither
            # sealed nor spooled, so the next request carries them with what came since.
            self._put_back_open(result.retry)
            outcome.retry_later = True
        elif result.retry:
            left = result.retry
            if self.spool is not None and not result.interrupted:
                outcome.spooled, left = self._to_spool(result.retry)
            if left:
                self._sealing = True
                self._put_back(left)
                outcome.retry_later = True
        self._take_spool_losses(outcome)
        return outcome

    def full_batch_ready(self) -> bool:
        """Whether the next batch is as large as batches get (a sealed one is sent whole)."""
        with self._lock:
            if not self._backlog:
                return False
            return (
                isinstance(self._backlog[0], SealedBatch)
                or len(self._backlog) >= self._settings.max_export_batch_size
                or self._bytes >= self._settings.max_batch_bytes
            )

    def replay_next(self, deadline: float) -> Outcome | None:
        """Send the oldest spool file; None when there is none (or no spool)."""
        spool = self.spool
        if spool is None or not self._spool_may_have_files:
            return None
        claimed = spool.claim()
        if claimed is None:
            self._spool_may_have_files = False
            if self._replayed:
                logger.info("delivered %s from the spool at %s", n_runs(self._replayed), spool.dir)
                self._replayed = 0
            outcome = Outcome()
            self._take_spool_losses(outcome)
            return outcome if outcome.spool_dropped else None
        path, runs = claimed
        result = self.transport.send(runs, deadline)
        # These runs left memory when they were spooled: their fate is counted on the spool's side.
        outcome = Outcome(
            replayed=sum(1 for r in result.delivered if r.completes),
            throttled=result.throttled,
            retry_after_s=result.retry_after_s,
        )
        self._replayed += outcome.replayed  # said in one line once the spool is empty
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
        """Write the whole backlog to the spool (at shutdown: the exit's one line says so); what the disk refuses stays."""
        outcome = Outcome()
        if self.spool is None:
            return outcome
        held = self._take_held()
        runs = _opened(held)
        if runs:
            written, left = self._to_spool(runs, quiet=True)
            outcome.spooled = written
            if left:
                with self._lock:  # what the disk refused stays: as it was (sealed ones sealed) if nothing went
                    self._backlog.extendleft(reversed(left if written else held))
                    self._recount()
        self._take_spool_losses(outcome)
        return outcome

    def take_all(self) -> list[EncodedRun]:
        """Empty the backlog and return what it held, sealed batches opened (at shutdown)."""
        return _opened(self._take_held())

    def close(self) -> None:
        self.transport.close()

    # --- at exit ---------------------------------------------------------------------

    def begin_exit(self) -> float:
        """Shutdown has begun: the one place of the rule for a service that cannot be reached.

        Nothing listening at the address, a name that does not resolve, a network
        that is unreachable, a TLS certificate refused: none is worth the export
        timeout at exit. With a spool, what is pending is written there at once
        (such a request is not retried); without one, it is retried for
        ``exit_budget_s``, then given up. A service that answers, however slowly,
        or a connection that times out, still gets the whole timeout. The exit
        sequence (``_exit``) calls this first. Returns when the exit began
        (``time.monotonic``, the first call's), for the line that says how long
        was waited.
        """
        if self._exit_began is None:
            self._exit_began = time.monotonic()
            self.transport.at_exit(0.0 if self.spool is not None else self._settings.exit_budget_s)
        return self._exit_began

    def stop_now(self) -> None:
        """Ctrl-C at exit: no request is started or retried from now on (one in flight runs to its answer)."""
        self.transport.stop_now()

    def exit_note(self) -> str:
        """What the shutdown line adds to the runs it gave up: why the service could not be reached, and how to
        keep them next time."""
        note = ""
        cause = self.transport.unreachable
        if cause is not None and cause.startswith("connection refused"):
            parts = urlsplit(self._settings.endpoint)
            host = parts.hostname or ""
            shown = f"[{host}]" if ":" in host else host
            port = f":{parts.port}" if parts.port else ""
            note = f" (nothing is listening at {parts.scheme}://{shown}{port}: connection refused)"
        elif cause is not None:
            note = f" ({cause})"
        if self.spool is None:
            note += f"; set {ev.OTEL_EXPORTER_RUNS_SPOOL_DIR} to keep undelivered runs for the next process to send"
        return note

    # --- internals -----------------------------------------------------------------

    def _take_held(self) -> list[_Held]:
        with self._lock:
            held = list(self._backlog)
            self._backlog.clear()
            self._bytes = self._unsealed = self._unsealed_bytes = self._sealed_count = 0
        return held

    def _recount(self) -> None:
        """Derive the counters from the backlog (under the lock; at shutdown only: it reads it all)."""
        backlog = self._backlog
        self._bytes = sum(item.size for item in backlog)
        self._sealed_count = sum(1 for item in backlog if isinstance(item, SealedBatch))
        tail = 0
        for item in reversed(backlog):
            if isinstance(item, SealedBatch):
                break
            tail += 1
        self._unsealed = tail
        self._unsealed_bytes = sum(backlog[-i].size for i in range(1, tail + 1))

    def _take_batch(self) -> list[EncodedRun] | SealedBatch | None:
        """The next batch: a sealed one whole, else runs up to the batch limits (never past a sealed one)."""
        batch: list[EncodedRun] = []
        size = 0
        max_items = self._settings.max_export_batch_size
        max_bytes = self._settings.max_batch_bytes
        with self._lock:
            backlog = self._backlog
            first = backlog[0] if backlog else None
            if isinstance(first, SealedBatch):
                backlog.popleft()
                sealed = first
                self._bytes -= sealed.size
                self._sealed_count -= 1
                return sealed
            while backlog and len(batch) < max_items:
                run = backlog[0]
                if isinstance(run, SealedBatch) or (batch and size + run.size > max_bytes):
                    break
                backlog.popleft()
                batch.append(run)
                size += run.size
            self._bytes -= size
            if not self._sealed_count:
                self._unsealed = len(backlog)
                self._unsealed_bytes = self._bytes
        return batch or None

    def _put_back(self, runs: list[EncodedRun]) -> None:
        """Runs to retry go back to the front, sealed: they wait for a service that is down."""
        if not runs:
            return
        sealed = seal(runs, self._boundary, self._codec)
        self._put_back_sealed(sealed)

    def _put_back_open(self, runs: list[EncodedRun]) -> None:
        with self._lock:
            for run in reversed(runs):
                self._backlog.appendleft(run)
                self._bytes += run.size
            if not self._sealed_count:
                self._unsealed += len(runs)
                self._unsealed_bytes += sum(r.size for r in runs)

    def _put_back_sealed(self, sealed: SealedBatch) -> None:
        with self._lock:
            self._backlog.appendleft(sealed)
            self._bytes += sealed.size
            self._sealed_count += 1

    def _seal_tail(self, room_for: int) -> bool:
        """Seal the runs at the back of the backlog, a batch at a time (under the lock).

        True when the backlog then holds at most ``room_for`` bytes (always, with 0).
        """
        n = self._unsealed
        if n:
            backlog = self._backlog
            runs = cast("list[EncodedRun]", [backlog.pop() for _ in range(n)])  # all EncodedRuns: the unsealed tail
            runs.reverse()
            max_items = self._settings.max_export_batch_size
            max_bytes = self._settings.max_batch_bytes
            start = size = 0
            for i, run in enumerate(runs):
                if i > start and (i - start >= max_items or size + run.size > max_bytes):
                    self._append_sealed(runs[start:i])
                    start, size = i, 0
                size += run.size
            self._append_sealed(runs[start:])
            self._bytes -= self._unsealed_bytes
            self._unsealed = self._unsealed_bytes = 0
        return room_for <= 0 or self._bytes <= room_for

    def _append_sealed(self, runs: list[EncodedRun]) -> None:
        sealed = seal(runs, self._boundary, self._codec)
        self._backlog.append(sealed)
        self._bytes += sealed.size
        self._sealed_count += 1

    def _to_spool(self, runs: list[EncodedRun], quiet: bool = False) -> tuple[list[EncodedRun], list[EncodedRun]]:
        """``runs`` to the spool: (written, left). What is left (the disk refused, logged) the caller keeps.
        ``quiet``: the caller says it (the exit's one line)."""
        assert self.spool is not None
        left = self.spool.write(runs)
        if left:
            kept = {id(r) for r in left}
            written = [r for r in runs if id(r) not in kept]
        else:
            written = runs
        if written:
            self._spool_may_have_files = True
        if written and not quiet and self._exit_began is None:  # at exit, the exit's one line says it
            _rl.warning(
                "spooled",
                "%s could not be delivered %s; written to the spool at %s",
                n_runs(completing(written)),
                f"({self.transport.unreachable})" if self.transport.unreachable else "within the export timeout",
                self.spool.dir,
            )
        return written, left

    def _take_spool_losses(self, outcome: Outcome) -> None:
        if self.spool is not None:
            for reason, runs in self.spool.take_losses().items():
                outcome.spool_dropped[reason] = outcome.spool_dropped.get(reason, 0) + runs


def _opened(held: list[_Held]) -> list[EncodedRun]:
    runs: list[EncodedRun] = []
    for item in held:
        runs.extend(item.open() if isinstance(item, SealedBatch) else (item,))
    return runs


def _outcome(result: SendResult) -> Outcome:
    sealed = [result.delivered_sealed] if result.delivered_sealed is not None else []
    return Outcome(
        delivered=result.delivered,
        dropped=result.dropped,
        interrupted=result.interrupted,
        delivered_sealed=sealed,
        throttled=result.throttled,
        retry_after_s=result.retry_after_s,
    )
