"""Delivery counters: the one owner of what was created, delivered, spooled and lost.

Every count is in runs, and a run is counted when its *completing* operation
(the one carrying its end: a patch, or a post that already has the end) moves.
An early post (sent while the span is still open) never changes a count: if it
is lost, the run's completing operation carries everything again.

The identity, true at any moment because each move is one step under one lock::

    created == delivered + sum(dropped.values()) + spooled + queued

and, once everything has settled (after ``force_flush`` or ``shutdown``),
``queued == 0``. A run is created when it is sure to be sent: a span the span
filter leaves out is never one (``filtered``), and with tail sampling a run
waits outside the identity (``sampling_held``) until its trace is decided:
kept, it is created then; not, it is ``sampled_out``. So beside the identity,
every ended span is exactly one of created, sampling_held, sampled_out or
filtered, and none of these three is ever a loss. What happens to runs after they reach the spool is counted on
the spool's side: ``replayed`` (delivered from spool files by this process,
whoever wrote them) and ``spool_dropped`` (files evicted from a full spool,
``spool_full``; entries set aside unread or unreplayable, ``spool_corrupt``,
``spool_symlink``, ``spool_not_regular``, ``spool_too_large``,
``spool_crash_loop``: the runs their names say they held).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ._encode import EncodedRun
from ._logging import n_runs
from ._seal import SealedBatch

__all__ = ["ExporterStats", "Ledger", "Outcome", "RequestCounts", "LogEventCounts", "completing"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExporterStats:
    """A snapshot of an exporter's or processor's delivery counters (all in runs but the request counts).

    ``created`` counts runs whose end reached the exporter; ``delivered`` those
    whose end reached the service; ``dropped`` maps a reason (``queue_full``,
    ``queue_bytes_full``, ``rejected``, ``too_large``, ``unauthorized``,
    ``not_found``, ``shutdown``, ...) to runs lost; ``spooled`` counts runs
    written to the durable spool; ``queued`` those still in memory. So
    ``created == delivered + dropped_total + spooled + queued`` always.

    ``sent`` counts operations delivered (an early post and its patch are two);
    ``requests``, ``retried`` and ``failed`` count HTTP requests, ``throttled``
    those the service answered 429. ``held`` and ``orphaned`` are the exporter
    path's spans waiting for their parents and spans sent as roots because their
    parents never came. ``interval_s`` is the processor's current time between
    flushes: ``schedule_delay_s``, longer while it adapts to 429s (``_pacing``);
    None on the exporter path, where the SDK's batch processor keeps the time.
    ``depth_limited`` counts runs whose parent run was ``_ids.MAX_DEPTH`` deep:
    each was sent as the root of a new trace naming that parent in its metadata
    (delivered like any other run, so not among the drops).
    ``malformed`` counts producer attributes a convention could not read
    (malformed JSON, a wrong type), kept as text in their run's metadata: no run
    is lost for them, so they are not among the drops.

    ``filtered`` counts spans the span filter left out (``spans``,
    ``blocked_scopes``, ``should_export``), spliced out of their trees: not runs,
    so not in ``created``. With tail sampling (``sample_rate`` below 1),
    ``sampling_held`` counts runs that ended and wait for their trace's decision,
    ``sampled_out`` runs of traces not sent, and ``sampled_at_bound`` maps a hold
    bound (``spans``, ``seconds``, ``bytes``, ``shutdown``) to the traces it
    decided by the rate alone; none of these is in ``created`` (a held run enters
    it when its trace is kept), and none is a loss.

    ``log_events_joined`` counts GenAI events written as OTel log records that
    reached their span's run (``_genai_events``); ``log_events_dropped`` maps a
    reason (``no_span``, ``not_sampled``, ``unmatched``, ``events_full``,
    ``events_bytes_full``, ``shutdown``) to events that did not;
    ``log_events_held`` those waiting for their span's run. Events are not runs:
    a dropped event leaves its run without those messages but does not lose it,
    so these counts stay out of the identity above.

    ``closed_at_exit`` counts runs whose spans had not ended when the process
    exited normally, closed then with an error saying so (processor path,
    ``close_open_runs_at_exit``); each is also a run created, delivered or not
    like any other. ``open_runs_released`` counts open runs that passed the
    never-ended bound (``open_runs_max``, ``open_run_max_age_s``) and stopped
    counting against ``max_queue_bytes``; they are still patched when their
    spans end, and are not a loss.
    """

    created: int = 0
    delivered: int = 0
    queued: int = 0
    dropped: Mapping[str, int] = field(default_factory=dict)
    spooled: int = 0
    replayed: int = 0
    spool_dropped: Mapping[str, int] = field(default_factory=dict)
    sent: int = 0
    requests: int = 0
    retried: int = 0
    failed: int = 0
    throttled: int = 0
    held: int = 0
    orphaned: int = 0
    interval_s: float | None = None
    malformed: int = 0
    depth_limited: int = 0
    filtered: int = 0
    sampled_out: int = 0
    sampling_held: int = 0
    sampled_at_bound: Mapping[str, int] = field(default_factory=dict)
    log_events_joined: int = 0
    log_events_dropped: Mapping[str, int] = field(default_factory=dict)
    log_events_held: int = 0
    closed_at_exit: int = 0
    open_runs_released: int = 0

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    @property
    def completed(self) -> int:
        """Alias of ``delivered`` (its name in 0.1.0)."""
        return self.delivered

    def settled(self) -> bool:
        """True when every created run is accounted for (nothing queued) and the identity holds."""
        return self.queued == 0 and self.created == self.delivered + self.dropped_total + self.spooled


@dataclass
class RequestCounts:
    """HTTP requests made, retried, failed and refused with 429; kept by the HTTP client, read by :class:`Ledger`."""

    requests: int = 0
    retried: int = 0
    failed: int = 0
    throttled: int = 0


@dataclass(frozen=True)
class LogEventCounts:
    """GenAI log events joined, dropped and held; kept by ``_genai_events.EventJoin``, read by :class:`Ledger`."""

    joined: int = 0
    dropped: Mapping[str, int] = field(default_factory=dict)
    held: int = 0


@dataclass
class Outcome:
    """What one delivery step did with the runs it took; :meth:`Ledger.record` counts it.

    Made by ``_delivery``, recorded here: it lives with the ledger so that
    imports go one way (delivery -> stats), never back up.

    ``delivered``, ``dropped`` and ``spooled`` are runs that left memory.
    ``retry_later`` means runs were put back in the backlog (the deadline came,
    or ``interrupted``: the caller's wake event cut a backoff wait short).
    ``replayed`` and ``spool_dropped`` count runs (completing operations) on the
    spool's side: delivered from, or lost in, spool files. ``throttled``: the
    service told us to slow down meanwhile (a 429, or no request left in its
    window), ``retry_after_s`` the wait it asked for; the worker's pacer reads both.
    """

    delivered: list[EncodedRun] = field(default_factory=list)
    dropped: dict[str, list[EncodedRun]] = field(default_factory=dict)
    spooled: list[EncodedRun] = field(default_factory=list)
    retry_later: bool = False
    interrupted: bool = False
    replayed: int = 0
    spool_dropped: dict[str, int] = field(default_factory=dict)
    # Sealed batches delivered whole: counted by their operations, never opened.
    delivered_sealed: list[SealedBatch] = field(default_factory=list)
    throttled: bool = False
    retry_after_s: float | None = None


class Ledger:
    """The one counting API: every move of a run goes through here, under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._created = 0
        self._delivered = 0
        self._queued = 0
        self._spooled = 0
        self._replayed = 0
        self._sent = 0
        self._orphaned = 0
        self._malformed = 0
        self._depth_limited = 0
        self._filtered = 0
        self._sampled_out = 0
        self._sampled_at_bound: dict[str, int] = {}
        self._dropped: dict[str, int] = {}
        self._spool_dropped: dict[str, int] = {}
        self._gave_up: str | None = None  # the reason, once give_up() has run
        self._closed_at_exit = 0
        self._left_open_at_exit = 0  # for the exit line only: no run moved
        self._open_runs_released = 0
        # Ends admitted on application threads (admit_end), counted without the lock: next() on a
        # count is one C call, which the GIL makes atomic. Reading it calls next() too, always under
        # the lock, so what was admitted is its value less the reads before (_fold).
        self._ends = itertools.count()
        #: One run's end accepted into memory, on the application thread that ended its span: the
        #: count's own ``__next__``, called with no Python frame in between. The lock would cost that
        #: thread ~0.4 µs a span, and wait for the worker whenever the interpreter switched threads
        #: while the worker held it.
        self.admit_end: Callable[[], int] = self._ends.__next__
        self._ends_reads = 0
        self._ends_folded = 0

    # --- runs entering ---------------------------------------------------------

    def admit(self, runs: int = 1) -> None:
        """Runs whose end was accepted into memory."""
        with self._lock:
            self._fold()
            self._created += runs
            self._queued += runs

    def _fold(self) -> None:
        """Move the ends admitted since the last fold into ``created`` and ``queued`` (the lock is held)."""
        admitted = next(self._ends) - self._ends_reads
        self._ends_reads += 1
        new = admitted - self._ends_folded
        if new:
            self._ends_folded = admitted
            self._created += new
            self._queued += new

    def refuse(self, reason: str, runs: int = 1) -> None:
        """Runs whose end arrived but was refused at the door (never queued)."""
        if runs:
            with self._lock:
                self._fold()
                self._created += runs
                self._dropped[reason] = self._dropped.get(reason, 0) + runs

    # --- runs leaving memory ---------------------------------------------------

    def drop(self, reason: str, runs: int = 1) -> None:
        """Queued runs lost, with the reason."""
        if runs:
            with self._lock:
                self._fold()
                self._queued -= runs
                self._dropped[reason] = self._dropped.get(reason, 0) + runs

    def give_up(
        self,
        waited_s: float,
        interrupted: bool = False,
        reason: str = "shutdown",
        note: str = "",
        spooled: int = 0,
        spool_dir: str | None = None,
    ) -> int:
        """Count every run still queued as lost (a shutdown that could not wait) and say so in one line.

        Returns how many. ``note`` ends the line (why, and how to keep them next
        time: ``Delivery.exit_note``). ``spooled`` runs written to the spool at
        ``spool_dir`` at this exit are said in the same line (or make it, when
        none was lost). A send still in flight may finish later: runs it
        delivers or spools are then moved back out of ``reason``, so nothing is
        counted twice.
        """
        with self._lock:
            self._fold()
            n = self._queued
            if n:
                self._dropped[reason] = self._dropped.get(reason, 0) + n
                self._queued = 0
            self._gave_up = reason
            closed, left = self._closed_at_exit, self._left_open_at_exit
        stopped = "shutdown interrupted" if interrupted else "shutdown"
        # Runs whose spans had not ended, closed now or left running on purpose: said whatever else the line says.
        if closed:
            open_ones = f"{n_runs(closed)} still open (their spans had not ended) closed with an error saying so"
        elif left:
            open_ones = (
                f"{n_runs(left)} still open (their spans had not ended) left running at the service "
                "(OTEL_EXPORTER_RUNS_CLOSE_OPEN_RUNS_AT_EXIT is false)"
            )
        else:
            open_ones = ""
        if n or (interrupted and not spooled):
            kept = f"; {n_runs(spooled)} written to the spool at {spool_dir}" if spooled else ""
            logger.warning(
                "%s: gave up %s that could not be delivered in %.1f s%s%s%s",
                stopped, n_runs(n), waited_s, note if n else "", kept, f"; {open_ones}" if open_ones else "",
            )
        elif spooled:
            # The spool keeps them: why they could not be sent now, and no hint about keeping them.
            logger.warning(
                "%s: %s could not be delivered in %.1f s%s; written to the spool at %s for the next process to send%s",
                stopped, n_runs(spooled), waited_s, note.split(";", 1)[0], spool_dir, f"; {open_ones}" if open_ones else "",
            )
        elif closed:
            logger.warning(
                "%s: %s (set OTEL_EXPORTER_RUNS_CLOSE_OPEN_RUNS_AT_EXIT=false to leave them running)", stopped, open_ones
            )
        elif left:
            logger.warning("%s: %s", stopped, open_ones)
        return n

    def record(self, outcome: Outcome) -> None:
        """Apply what one delivery step reports; only completing operations move runs."""
        delivered = completing(outcome.delivered) + sum(b.completing for b in outcome.delivered_sealed)
        spooled = completing(outcome.spooled)
        dropped = {reason: completing(runs) for reason, runs in outcome.dropped.items()}
        with self._lock:
            self._fold()
            self._sent += len(outcome.delivered) + sum(b.ops for b in outcome.delivered_sealed)
            self._delivered += delivered
            self._spooled += spooled
            if self._gave_up is None:
                self._queued -= delivered + spooled
                for reason, n in dropped.items():
                    if n:
                        self._queued -= n
                        self._dropped[reason] = self._dropped.get(reason, 0) + n
            else:
                # After give_up() these runs were already counted as lost; they were not.
                self._dropped[self._gave_up] -= delivered + spooled
            self._replayed += outcome.replayed
            for reason, n in outcome.spool_dropped.items():
                self._spool_dropped[reason] = self._spool_dropped.get(reason, 0) + n

    def orphan(self, spans: int = 1) -> None:
        with self._lock:
            self._orphaned += spans

    def malformed(self, attributes: int) -> None:
        """Producer attributes kept as text because a convention could not read them."""
        if attributes:
            with self._lock:
                self._malformed += attributes

    def closed_at_exit(self, runs: int) -> None:
        """Runs closed at exit because their spans had not ended: created now, queued like any other."""
        if runs:
            with self._lock:
                self._fold()
                self._closed_at_exit += runs
                self._created += runs
                self._queued += runs

    def left_open_at_exit(self, runs: int) -> None:
        """Runs still open at exit, left running at the service (``close_open_runs_at_exit`` off): said in the
        exit line; no run moves (each was never created, as a run is at its end)."""
        with self._lock:
            self._left_open_at_exit += runs

    def open_runs_released(self, runs: int) -> None:
        """Open runs past the never-ended bound: no longer counted against the byte cap."""
        with self._lock:
            self._open_runs_released += runs

    def depth_limited(self, runs: int = 1) -> None:
        """Runs sent as the root of a new trace because their parent was ``MAX_DEPTH`` deep."""
        with self._lock:
            self._depth_limited += runs

    # --- spans that are not runs, runs that wait for their trace's decision ------

    def filtered(self, spans: int = 1) -> None:
        """Spans the span filter left out: never runs, never in ``created``."""
        with self._lock:
            self._filtered += spans

    def decided(self, held: int, keep: bool, bound: str | None = None) -> None:
        """A held trace was decided (its runs were counted as held by the hold, ``_hold``). Kept, each
        run is created as it is queued (``admit``); not, they are sampled out. ``bound``: the hold
        bound that decided it by the rate alone."""
        with self._lock:
            if not keep:
                self._sampled_out += held
            if bound is not None:
                self._sampled_at_bound[bound] = self._sampled_at_bound.get(bound, 0) + 1

    def sampled_out(self, runs: int = 1) -> None:
        """Runs that ended after their trace was decided not to be sent."""
        with self._lock:
            self._sampled_out += runs

    # --- reading ---------------------------------------------------------------

    @property
    def queued(self) -> int:
        with self._lock:
            self._fold()
            return self._queued

    @property
    def spooled(self) -> int:
        """Runs written to the spool so far."""
        with self._lock:
            return self._spooled

    def lost(self) -> int:
        """Runs that left memory without being delivered (dropped or spooled): a flush compares it before and after."""
        with self._lock:
            return sum(self._dropped.values()) + self._spooled

    def snapshot(
        self,
        requests: RequestCounts | None = None,
        held: int = 0,
        interval_s: float | None = None,
        sampling_held: int = 0,
        log_events: LogEventCounts | None = None,
    ) -> ExporterStats:
        """The one place an :class:`ExporterStats` is built."""
        r = requests or RequestCounts()
        e = log_events or LogEventCounts()
        with self._lock:
            self._fold()
            return ExporterStats(
                created=self._created,
                delivered=self._delivered,
                queued=self._queued,
                dropped=MappingProxyType(dict(self._dropped)),
                spooled=self._spooled,
                replayed=self._replayed,
                spool_dropped=MappingProxyType(dict(self._spool_dropped)),
                sent=self._sent,
                requests=r.requests,
                retried=r.retried,
                failed=r.failed,
                throttled=r.throttled,
                held=held,
                orphaned=self._orphaned,
                interval_s=interval_s,
                malformed=self._malformed,
                depth_limited=self._depth_limited,
                filtered=self._filtered,
                sampled_out=self._sampled_out,
                sampling_held=sampling_held,
                sampled_at_bound=MappingProxyType(dict(self._sampled_at_bound)),
                log_events_joined=e.joined,
                log_events_dropped=MappingProxyType(dict(e.dropped)),
                log_events_held=e.held,
                closed_at_exit=self._closed_at_exit,
                open_runs_released=self._open_runs_released,
            )


def completing(runs: Iterable[object]) -> int:
    """How many runs these operations are: only a run's completing operation counts it (see above)."""
    return sum(1 for r in runs if getattr(r, "completes", False))
