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

With a spool, what waits is on disk when it matters:

* **Its own deadline.** A batch's export timeout runs from when its oldest run
  began to wait, not from the start of the cycle that sends it: new work that
  cuts a retry wait short (``wake``) never restarts it. Past it, a batch that
  could not be delivered goes to the spool, sent or not yet (:meth:`Delivery.spool_due`),
  so a ``kill -9`` during an outage loses at most what arrived in the last export timeout.
* **The byte cap.** Past ``max_queue_bytes``, the oldest batches go to the spool
  while it has room (its own cap, never made by evicting older files), instead of
  new runs being dropped; during an outage the backlog is kept under half the cap
  that way, so the application's spans keep their room.
* **Write-ahead** (``spool_write_ahead``): each batch is written to the spool
  before it is sent and removed once the service answered (``Spool.write_ahead``).
* **Replay** sends a file a request at a time and marks each one answered
  (``Spool.mark``): a replayer killed midway sends again one request at most.
* **Other processes' leftovers**: now and then (:meth:`Delivery.maintain`) the
  files and open runs (``_journal``) of processes proven dead are taken over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Union, cast
from urllib.parse import urlsplit

from . import environment_variables as ev
from ._codec import memory_codec
from ._encode import EncodedRun, new_boundary
from ._logging import RateLimitedLog, n_runs
from ._seal import SealedBatch, seal
from ._settings import Settings
from ._journal import Journal, close_dead_owners_runs, done_closing
from ._spool import Spool
from ._spool_format import groups
from ._stats import Outcome, completing
from ._transport import SendResult, Transport

__all__ = ["Delivery", "Outcome"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)


_Held = Union[EncodedRun, SealedBatch]
# How often other processes' leftovers in a shared spool are looked for (Delivery.maintain).
_MAINTAIN_EVERY_S = 60.0


class Delivery:
    """A bounded backlog of encoded runs, sent a batch at a time.

    ``add`` refuses a run that would take the backlog past ``max_queue_bytes``
    (the caller counts it) unless the spool takes the oldest batches instead.
    ``send_next`` sends one batch; runs the transport hands back because their
    deadline came go to the spool when one is configured, otherwise back to the
    front of the backlog. ``replay_next`` sends one spool file. Runs written to
    the spool outside ``send_next`` (at the byte cap, past their deadline) are
    reported by :meth:`take_spooled`, for the caller to count.
    """

    def __init__(self, settings: Settings, transport: Transport, *, journal: bool = False) -> None:
        """``journal``: keep the list of this process's open runs beside the spool (the processor path)."""
        self._settings = settings
        self.transport = transport
        self._clock = transport.clock
        self._backlog: deque[_Held] = deque()
        #: Encoded bytes waiting for delivery, written by this class alone, read without the lock
        #: (an estimate is enough). Plain attributes, as ``sealing``: the app thread reads them per span.
        self.bytes_held = 0
        self._lock = threading.Lock()  # add() may come from another thread than send_next()
        self._codec = memory_codec()
        self._boundary = new_boundary()
        # Set when a batch comes back to be retried, cleared when one is delivered:
        # while set, runs waiting at the back are sealed a batch at a time.
        #: True while the service is not taking runs (the last batch came back to be retried).
        self.sealing = False
        self._unsealed = 0  # EncodedRuns at the back of the backlog, after the last sealed batch
        self._unsealed_bytes = 0
        self._unsealed_since = 0.0  # when the oldest of them began to wait (read only while _unsealed)
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
        self._write_ahead = self.spool is not None and settings.spool_write_ahead
        #: This process's open runs, listed beside the spool for whoever outlives it (``_journal``).
        self.journal = Journal(self.spool.dir, self.spool.owner) if self.spool is not None and journal else None
        self._spooled: list[EncodedRun] = []  # written outside send_next, for take_spooled()
        self._said_spilled = False
        self._spool_refuses = False  # its disk refused the last write: runs then wait in memory as without one
        self._holding = 0  # write-ahead files and claimed spool files of this process in the directory
        self._spool_may_have_files = self.spool is not None
        self._replayed = 0  # runs replayed from the spool since it was last found empty
        self._exit_began: float | None = None
        # None: due at the worker's first wake (its exit at the latest), so that a process, however short it
        # lives, closes the runs a dead one left open; the spool took its claims back as it opened.
        self._maintained: float | None = None

    def __len__(self) -> int:
        return len(self._backlog)

    def add(self, run: EncodedRun) -> bool:
        """Queue one encoded run; False (and one rate-limited warning) past the byte cap.

        Past the cap, sealing what waits may make room (a slow service, not only
        a down one), and then the spool: the oldest batches go there while it has room.
        """
        cap = self._settings.max_queue_bytes
        with self._lock:
            if self.bytes_held + run.size > cap and not self._seal_tail(cap - run.size) and not self._spill(cap - run.size):
                full = True
            else:
                if not self._unsealed:
                    self._unsealed_since = self._clock.now()
                self._backlog.append(run)
                self.bytes_held += run.size
                self._unsealed += 1
                self._unsealed_bytes += run.size
                full = False
                if self.sealing and (
                    self._unsealed >= self._settings.max_export_batch_size
                    or self._unsealed_bytes >= self._settings.max_batch_bytes
                ):
                    self._seal_tail(0)
        if full:
            _rl.warning(
                "queue_bytes_full",
                "undelivered runs hold %d bytes, the cap (OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES)%s; dropping new runs",
                cap,
                " and the spool has no room for more" if self.spool is not None else "",
            )
        return not full

    def send_next(self, deadline: float, *, paced: bool = False) -> Outcome | None:
        """Send one batch before ``deadline`` (or its own, with a spool); None when the backlog is empty.

        ``paced``: a 429 puts the batch straight back (``throttled`` in the
        outcome) for the caller to come back later with a larger one.
        """
        if self.journal is not None:
            self.journal.flush()  # the open runs this batch's posts and ends change are on disk first
        batch, since = self._take_batch()
        if batch is None:
            return None
        spool = self.spool
        wal = cast("Path | None", batch.wal) if isinstance(batch, SealedBatch) else None
        if spool is not None and not self._spool_refuses and (self.sealing or isinstance(batch, SealedBatch)):
            # Tried before, or waiting behind runs that were: its deadline is its own, whatever the cycle's.
            # (A batch first tried while the service takes runs has the cycle's: it gets its chance. While
            # the spool's disk refuses, the cycle's too: the runs wait in memory, sent when they can be.)
            own = since + self._settings.export_timeout_s
            if own > self._clock.now():
                deadline = min(deadline, own)
            else:
                # Past it already: on disk first. What the spool cannot take is sent as any batch is.
                written, left = self._to_spool(batch.open() if isinstance(batch, SealedBatch) else batch, wal=wal)
                if not left:
                    outcome = Outcome(spooled=written, retry_later=bool(self._backlog))
                    self._take_spool_losses(outcome)
                    return outcome
                batch = left
                if written:
                    wal = None  # (a write-ahead file either joined the spool whole or stayed with all its runs)
        wal = self._written_ahead(batch, wal)
        if isinstance(batch, SealedBatch):
            result = self.transport.send_sealed(batch, deadline, paced=paced)
        else:
            result = self.transport.send(batch, deadline, paced=paced)
        outcome = _outcome(result)
        if result.delivered or result.delivered_sealed is not None:
            self.sealing = False
        # Handed back at the batch's own deadline (or cut short by new work past it): to the spool.
        due = spool is not None and (not result.interrupted or self._clock.now() >= deadline)
        reopened = bool(result.retry) and paced and result.throttled
        ops = batch.ops if isinstance(batch, SealedBatch) else len(batch)
        whole = result.retry_sealed is not None or len(result.retry) == ops
        if wal is not None and (reopened or not whole):
            self._forget(wal)  # answered for, or going back open to join a larger batch (written ahead anew)
            wal = None
        if result.retry_sealed is not None:
            self.sealing = True
            back = result.retry_sealed
            if due:
                outcome.spooled, left = self._to_spool(back.open(), wal=wal)
                if left:
                    self._put_back(left, since, wal)
                    outcome.retry_later = True
            else:
                back.since, back.wal = since, wal
                self._put_back_sealed(back)
                outcome.retry_later = True
        elif reopened:
            # Refused for our rate, not because the service is down: back as runs, neither
            # sealed nor spooled, so the next request carries them with what came since.
            self._put_back_open(result.retry, since)
            outcome.retry_later = True
        elif result.retry:
            left = result.retry
            if due:
                outcome.spooled, left = self._to_spool(result.retry, wal=wal)
            if left:
                self.sealing = True
                self._put_back(left, since, wal)
                outcome.retry_later = True
        elif wal is not None:
            self._forget(wal)
        self._take_spool_losses(outcome)
        return outcome

    def spool_due(self) -> Outcome | None:
        """With a spool: what is past its deadline, or past half the byte cap while the service is down,
        goes there now, oldest first; with what :meth:`add` sent there at the byte cap (None when nothing
        did). Called between sends."""
        if self.spool is None:
            return None
        if not self.sealing:
            return self.take_spooled()  # what add() spilled at the byte cap
        now = self._clock.now()
        timeout = self._settings.export_timeout_s
        half = self._settings.max_queue_bytes // 2
        with self._lock:
            if self._unsealed and (self._unsealed_since + timeout <= now or self.bytes_held > half):
                self._seal_tail(0)
            while self._backlog:
                first = self._backlog[0]
                if not isinstance(first, SealedBatch) or (first.since + timeout > now and self.bytes_held <= half):
                    break  # (runs at the front are back open after a 429: the service is up)
                self._backlog.popleft()
                self.bytes_held -= first.size
                self._sealed_count -= 1
                written, left = self._to_spool(first.open(), wal=cast("Path | None", first.wal), quiet=True)
                self._spooled.extend(written)
                if left:
                    self._backlog.appendleft(first)  # the disk refused (said once): kept as it was
                    self.bytes_held += first.size
                    self._sealed_count += 1
                    break
        return self.take_spooled()

    def take_spooled(self) -> Outcome | None:
        """Runs written to the spool since the last call outside :meth:`send_next` (at the byte cap,
        past their deadline), with the spool's own losses; None when there are none."""
        with self._lock:
            spooled, self._spooled = self._spooled, []
        outcome = Outcome(spooled=spooled)
        self._take_spool_losses(outcome)
        return outcome if spooled or outcome.spool_dropped else None

    def full_batch_ready(self) -> bool:
        """Whether the next batch is as large as batches get (a sealed one is sent whole)."""
        with self._lock:
            if not self._backlog:
                return False
            return (
                isinstance(self._backlog[0], SealedBatch)
                or len(self._backlog) >= self._settings.max_export_batch_size
                or self.bytes_held >= self._settings.max_batch_bytes
            )

    def replay_next(self, deadline: float) -> Outcome | None:
        """Send the oldest spool file, a request at a time; None when there is none (or no spool).

        After each request answered the file's progress is marked (``Spool.mark``),
        so a replayer killed midway sends again at most the request it was waiting on.
        """
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
        self._holding += 1
        # These runs left memory when they were spooled: their fate is counted on the spool's side.
        outcome = Outcome()
        requests = self._requests(runs)
        settled = 0
        for i, request in enumerate(requests):
            result = self.transport.send(request, deadline)
            outcome.replayed += sum(1 for r in result.delivered if r.completes)
            outcome.throttled |= result.throttled
            outcome.retry_after_s = result.retry_after_s or outcome.retry_after_s
            for reason, dropped in result.dropped.items():
                outcome.spool_dropped[reason] = outcome.spool_dropped.get(reason, 0) + completing(dropped)
            if result.retry or (i + 1 < len(requests) and self._clock.now() >= deadline):
                spool.give_back(path, [*result.retry, *(r for rest in requests[i + 1 :] for r in rest)])
                outcome.retry_later = True
                outcome.interrupted = result.interrupted
                break
            settled += len(request)
            if i + 1 < len(requests):
                spool.mark(path, settled)
        else:
            spool.done(path)
        self._holding -= 1
        self._replayed += outcome.replayed  # said in one line once the spool is empty
        self._take_spool_losses(outcome)
        return outcome

    def spool_all(self) -> Outcome:
        """Write the whole backlog to the spool (at shutdown: the exit's one line says so); what the disk refuses stays.

        A batch written ahead joins the spool as its file; the rest is written in batch-sized files.
        """
        outcome = Outcome()
        if self.spool is None:
            return outcome
        held = self._take_held()
        kept: list[_Held] = []
        plain = [item for item in held if not (isinstance(item, SealedBatch) and item.wal is not None)]
        for item in held:
            if isinstance(item, SealedBatch) and item.wal is not None:
                written, left = self._to_spool(item.open(), wal=cast(Path, item.wal), quiet=True)
                outcome.spooled.extend(written)
                if left:
                    kept.append(item)
        runs = _opened(plain)
        if runs:
            written, left = self._to_spool(runs, quiet=True)
            outcome.spooled.extend(written)
            if left:  # what the disk refused stays: as it was (sealed ones sealed) if nothing went
                kept.extend(left if written else plain)
        if kept:
            with self._lock:
                self._backlog.extendleft(reversed(kept))
                self._recount()
        self._take_spool_losses(outcome)
        return outcome

    def take_all(self) -> list[EncodedRun]:
        """Empty the backlog and return what it held, sealed batches opened (at shutdown)."""
        return _opened(self._take_held())

    def maintain(self) -> Outcome | None:
        """Now and then: take over what processes proven dead left in a shared spool (their claims and
        write-ahead files; their open runs, closed with a patch each), and mark this process's list of open
        runs as alive. Cheap when not due; None unless the spool lost something meanwhile."""
        spool = self.spool
        if spool is None:
            return None
        if self.journal is not None:
            self.journal.touch()
        now = self._clock.now()
        if self._maintained is not None and now - self._maintained < _MAINTAIN_EVERY_S:
            return None
        self._maintained = now
        if spool.recover():
            self._spool_may_have_files = True
        patches = close_dead_owners_runs(spool.dir, spool.dead, spool.owner.token, self._settings.max_value_chars)
        if patches:
            spool.write(patches)
            done_closing(spool.dir, spool.owner.token)
            self._spool_may_have_files = True
        outcome = Outcome()
        self._take_spool_losses(outcome)
        return outcome if outcome.spool_dropped else None

    @property
    def spool_refused(self) -> str | None:
        """Why the spool's disk last refused a write (None when it took the last one): for the exit line."""
        return self.spool.write_error if self.spool is not None else None

    def close(self) -> None:
        """At the end of the exit: this process's list of open runs goes (they were closed, or left open
        on purpose), and its lock in the spool when it holds nothing there any more."""
        self.transport.close()
        if self.journal is not None:
            self.journal.remove()
        if self.spool is not None and not self._holding:
            self.spool.owner.release()

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
        keep them next time (or why the spool did not)."""
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
        elif self.spool_refused is not None:
            # Else the line blames only the service, and a spool that was configured seems ignored.
            note += f"; the spool at {self.spool.dir} could not keep them ({self.spool_refused})"
        return note

    # --- internals -----------------------------------------------------------------

    def _take_held(self) -> list[_Held]:
        with self._lock:
            held = list(self._backlog)
            self._backlog.clear()
            self.bytes_held = self._unsealed = self._unsealed_bytes = self._sealed_count = 0
        return held

    def _recount(self) -> None:
        """Derive the counters from the backlog (under the lock; at shutdown only: it reads it all)."""
        backlog = self._backlog
        self.bytes_held = sum(item.size for item in backlog)
        self._sealed_count = sum(1 for item in backlog if isinstance(item, SealedBatch))
        tail = 0
        for item in reversed(backlog):
            if isinstance(item, SealedBatch):
                break
            tail += 1
        self._unsealed = tail
        self._unsealed_bytes = sum(backlog[-i].size for i in range(1, tail + 1))

    def _take_batch(self) -> tuple[list[EncodedRun] | SealedBatch | None, float]:
        """The next batch: a sealed one whole, else runs up to the batch limits (never past a sealed one);
        with when its oldest run began to wait."""
        batch: list[EncodedRun] = []
        size = 0
        max_items = self._settings.max_export_batch_size
        max_bytes = self._settings.max_batch_bytes
        with self._lock:
            backlog = self._backlog
            first = backlog[0] if backlog else None
            if isinstance(first, SealedBatch):
                backlog.popleft()
                self.bytes_held -= first.size
                self._sealed_count -= 1
                return first, first.since
            since = self._unsealed_since if self._unsealed else self._clock.now()
            while backlog and len(batch) < max_items:
                run = backlog[0]
                if isinstance(run, SealedBatch) or (batch and size + run.size > max_bytes):
                    break
                backlog.popleft()
                batch.append(run)
                size += run.size
            self.bytes_held -= size
            if not self._sealed_count:
                self._unsealed = len(backlog)
                self._unsealed_bytes = self.bytes_held
        return batch or None, since

    def _written_ahead(self, batch: list[EncodedRun] | SealedBatch, wal: Path | None) -> Path | None:
        """With write-ahead, the batch's file in the spool: ``wal`` if it has one, else written now (None: off,
        or the disk refused, said once: the batch is sent all the same)."""
        if wal is not None or not self._write_ahead:
            return wal
        assert self.spool is not None
        runs = batch.open() if isinstance(batch, SealedBatch) else batch
        wal = self.spool.write_ahead(runs)
        if wal is not None:
            self._holding += 1
        return wal

    def _requests(self, runs: list[EncodedRun]) -> list[list[EncodedRun]]:
        """A spool file's runs cut as they will be sent: one request each (one operation each in basic
        mode, which sends a request per operation), so replay can mark each one answered."""
        if self.transport.mode == "basic":
            return [[run] for run in runs]
        return groups(runs, self._settings.max_batch_bytes, self._settings.max_export_batch_size)

    def _forget(self, wal: Path) -> None:
        assert self.spool is not None
        self.spool.forget(wal)
        self._holding -= 1

    def _put_back(self, runs: list[EncodedRun], since: float, wal: Path | None = None) -> None:
        """Runs to retry go back to the front, sealed: they wait for a service that is down."""
        if not runs:
            return
        sealed = seal(runs, self._boundary, self._codec)
        sealed.since, sealed.wal = since, wal
        self._put_back_sealed(sealed)

    def _put_back_open(self, runs: list[EncodedRun], since: float) -> None:
        with self._lock:
            for run in reversed(runs):
                self._backlog.appendleft(run)
                self.bytes_held += run.size
            if not self._sealed_count:
                if not self._unsealed or since < self._unsealed_since:
                    self._unsealed_since = since
                self._unsealed += len(runs)
                self._unsealed_bytes += sum(r.size for r in runs)

    def _put_back_sealed(self, sealed: SealedBatch) -> None:
        with self._lock:
            self._backlog.appendleft(sealed)
            self.bytes_held += sealed.size
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
            self.bytes_held -= self._unsealed_bytes
            self._unsealed = self._unsealed_bytes = 0
        return room_for <= 0 or self.bytes_held <= room_for

    def _append_sealed(self, runs: list[EncodedRun]) -> None:
        sealed = seal(runs, self._boundary, self._codec)
        sealed.since = self._unsealed_since
        self._backlog.append(sealed)
        self.bytes_held += sealed.size
        self._sealed_count += 1

    def _spill(self, room_for: int) -> bool:
        """With a spool (under the lock): the oldest batches go there, while it has room without dropping
        any of its files, until the backlog holds at most ``room_for`` bytes. Whether it then does."""
        if self.spool is None:
            return False
        backlog = self._backlog
        while self.bytes_held > room_for and backlog and isinstance(backlog[0], SealedBatch):
            first = cast(SealedBatch, backlog.popleft())
            self.bytes_held -= first.size
            self._sealed_count -= 1
            written, left = self._to_spool(first.open(), wal=first.wal, evict=False, quiet=True)
            self._spooled.extend(written)
            if left:
                backlog.appendleft(first)  # the spool is full too (or the disk refused): kept as it was
                self.bytes_held += first.size
                self._sealed_count += 1
                return False
            if written and not self._said_spilled:
                self._said_spilled = True
                logger.warning(
                    "undelivered runs reached the cap (OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES, %d bytes): the oldest "
                    "go to the spool at %s while it has room, instead of new runs being dropped (said once)",
                    self._settings.max_queue_bytes,
                    self.spool.dir,
                )
        return self.bytes_held <= room_for

    def _to_spool(
        self, runs: list[EncodedRun], *, wal: Path | None = None, evict: bool = True, quiet: bool = False
    ) -> tuple[list[EncodedRun], list[EncodedRun]]:
        """``runs`` to the spool: (written, left). What is left (the disk refused, said once) the caller keeps.
        ``wal``: the runs' write-ahead file, which joins the spool instead of a new one being written.
        ``evict``: the spool may drop its oldest files to make room. ``quiet``: the caller says it."""
        assert self.spool is not None
        if wal is not None:
            if self.spool.release(wal, evict=evict):
                self._holding -= 1
                left: list[EncodedRun] = []
            else:
                left = runs
        else:
            left = self.spool.write(runs, evict=evict)
        if left:
            kept = {id(r) for r in left}
            written = [r for r in runs if id(r) not in kept]
        else:
            written = runs
        if evict:  # (without evict, no room is no refusal: the spool is full by its own rule)
            self._spool_refuses = bool(left)
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
