"""The queue and the worker thread of the processor path.

Application threads only append ``(kind, span, node)`` to a bounded deque and,
when a batch is ready, set an Event. The named daemon worker does the rest:
it converts spans to runs (merging a post with its patch when the span ended
before its post was converted), hands the encoded runs to :class:`Delivery`,
asks it to send, and records each :class:`Outcome` in the :class:`Ledger`.
Calls go one way: worker -> delivery -> transport.

Lifecycle: started in the constructor; woken by the Event or when the
:class:`~otel_runs_exporter._pacing.Pacer`'s interval has passed (the schedule
delay, longer while the service answers 429: fewer, larger requests, each
outcome telling the pacer how the service answered); ``force_flush`` queues a
flush request and waits for it, never for a grown interval; ``shutdown``
makes a last bounded attempt (a service that refuses the connection gets the
short exit budget, ``Delivery.begin_exit``), then spools or gives up what is
left and reports it in one line; after ``fork`` the child gets an empty queue, a new worker and
a new HTTP session, so nothing is sent twice.

Memory is bounded twice: the queue of span operations in items
(``OTEL_BSP_MAX_QUEUE_SIZE``), and everything waiting in bytes
(``OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES``): the queued operations at an estimated
size each, the open runs (early post sent, end not yet converted) at an
estimated size each plus their dotted_order, and the encoded backlog awaiting
delivery (which also holds what failed and waits to be retried) at its exact
size, and the traces held for their tail-sampling decision (``_hold``) at their
estimated size. Past either bound the newest are dropped and counted. Open runs count
against new spans, not against their own ends: converting an end frees more than
it queues; they keep counting until they pass the never-ended bound
(``open_runs_max`` by count, ``open_run_max_age_s`` by age), past which they are
released from the byte cap (``stats().open_runs_released``) and still patched
when their spans end, so spans that never end cannot starve later traffic. At a
normal exit the runs still open are closed (``close_open_runs_at_exit``). While
the service is down everything queued is
converted at once and sealed by :class:`Delivery` into compressed batches, so a
long outage holds ~80 bytes a small run rather than its SDK span; with a spool,
what waited past the export timeout (or past half the byte cap) is on disk.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context

from ._clock import SYSTEM_CLOCK, Clock, bounded_wait
from ._convert import (
    ConvertOptions,
    EndedSpan,
    RunNode,
    early_post_summary,
    log_convert_error,
    patch_fields,
    span_to_run,
    warn_if_ids_set_late,
)
from ._delivery import Delivery
from ._encode import EncodedRun, encode_run
from ._exit import ExitSequence
from ._fork import renew_in_child
from ._genai_events import EventJoin, ended_run, late_patches
from ._hold import TraceHold
from ._ids import RunIds
from ._logging import RateLimitedLog
from ._open_runs import OpenRuns
from ._pacing import Pacer
from ._settings import Settings
from ._stats import ExporterStats, Ledger, Outcome
from ._transport import Transport, suppressed_context

__all__ = ["Worker"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

# After Ctrl-C at exit: how long the worker may take to leave a conversion before what it holds is spooled.
_STOP_GRACE_S = 0.5

_YIELD_EVERY_S = 0.002
# Past this many batches of queued operations the producer is outpacing us: stop yielding early.
_CATCH_UP_BATCHES = 8
# What one queued span operation holds in memory, estimated: a small SDK span with
# its ReadableSpan measured ~3.1 KB for its two operations (tracemalloc, SDK 1.45).
# The estimate keeps the hot path to one multiplication; payload strings are
# counted exactly once encoded. An end queued in an outage holds an EndedSpan
# instead (~620 B measured the same way), so the bound errs on the safe side then.
_OP_BYTES = 1600
# What an open run holds besides its dotted_order once its early post is sent: its
# node, ids and map entry in the processor, its summary here (~470 B measured with
# tracemalloc, 2,000 open spans). Its dotted_order is counted at its length, up to
# ~15 kB at _ids.MAX_DEPTH, so deep trees fill the byte bound as fast as they fill memory.
_OPEN_RUN_BYTES = 500


@dataclass
class _FlushRequest:
    deadline: float
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False


class _Cycle(enum.Enum):
    DONE = "done"  # nothing left in memory
    LATER = "later"  # the deadline came (or will, before the next retry)
    INTERRUPTED = "interrupted"  # the wake event cut a backoff wait short


class Worker:
    """Bounded queue + worker thread; the engine behind ``RunsSpanProcessor``."""

    def __init__(self, settings: Settings, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._settings = settings
        self._opts = ConvertOptions.from_settings(settings)
        self._clock = clock
        # GenAI log events wait here for their span's run (it renews itself after fork).
        self._events = EventJoin() if settings.capture_log_events else None
        self._init_state()
        renew_in_child(self)
        self._start_worker()

    @property
    def options(self) -> ConvertOptions:
        """What conversion takes from the settings, resolved once; the processor resolves ids with its ``id_scheme`` too."""
        return self._opts

    def _init_state(self) -> None:
        #: The counts; the processor adds what it decides above the queue (spans filtered, traces held).
        self.ledger = Ledger()
        # A node per queued operation: its first is its post, its second its end (RunNode.pending, .ended).
        self._queue: deque[RunNode] = deque()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._flush_requests: list[_FlushRequest] = []
        self._now = self._clock.now()  # read once per conversion round
        # Nodes whose end was refused at the door: the worker forgets their early post.
        self._released: deque[RunNode] = deque()
        # Traces held for their tail-sampling decision (the processor's _choice fills it):
        # what they hold counts against max_queue_bytes with the rest. None: no sampling.
        self.hold = TraceHold.from_settings(self._settings)
        self._stopping = False
        self._stopped = False
        self._finished = threading.Event()  # the worker's last cycle is over
        self._stop_deadline = 0.0
        # The worker's requests run to their answer (finish_in_flight): nobody waits on
        # them but force_flush and shutdown, which keep their own deadlines.
        transport = Transport(self._settings, wake=self._wake, clock=self._clock, finish_in_flight=True)
        # With a spool, this process's open runs are listed beside it for whoever outlives it (_journal).
        self._delivery = Delivery(self._settings, transport, journal=True)
        # Runs whose early post went out and whose end is not converted yet (only the worker
        # thread writes them; post() reads what they hold).
        self._open = OpenRuns(self._settings, self.ledger, self._delivery.journal)
        self._exit = ExitSequence(self._delivery, self.ledger)
        self._pacer = Pacer(self._settings.schedule_delay_s, self._settings.max_schedule_delay_s, clock=self._clock)
        # Queued operations that make a full batch: a span's start and end are two operations
        # that make one run when it ended before conversion, and runs left waiting count too.
        self._wake_at = 2 * self._settings.max_export_batch_size
        self._max_items = self._settings.max_queue_size
        self._max_bytes = self._settings.max_queue_bytes
        self._worker: threading.Thread | None = None

    def _start_worker(self) -> None:
        self._worker = threading.Thread(target=self._run, name="otel-runs-exporter", daemon=True)
        self._worker.start()

    def _after_fork_in_child(self) -> None:
        # The parent's queue is the parent's to send; the child starts clean.
        if self._stopping:
            return
        self._init_state()
        self._start_worker()

    # --- application threads -----------------------------------------------------

    # The two hooks below run on the application thread for every span: each attribute they
    # read and each call they make is paid in the app's request latency (bench/app_thread.py).

    def post(self, span: Any, node: RunNode) -> bool:
        """Queue a started span's early post; never blocks, never raises.

        False when refused at the byte bound: the run is dropped (counted,
        ``queue_bytes_full``) and the caller forgets the node, since what open runs
        hold is part of that bound. A post refused while the queue is full of items
        is not counted (True): its end carries the whole run later.
        """
        if self._stopping:
            return True
        queue = self._queue
        waiting = len(queue)
        if waiting >= self._max_items:
            self._warn_queue_full()
            return True
        # Open runs count against new spans, not against their own ends: converting an end
        # frees more than it queues.
        if self._held_with(waiting) + self._open.bytes > self._max_bytes:
            self._refuse_at_bytes()
            return False
        node.pending = span
        queue.append(node)
        if len(queue) >= self._wake_at and not self._wake.is_set():
            self._wake.set()
        return True

    def end(self, span: Any, node: RunNode) -> None:
        """Queue an ended span's run; never blocks, never raises. A refused end is counted.

        While the service takes runs, the span is queued as the SDK gave it, even with the
        worker behind: it is converted and sent soon, and the byte bound's estimate per queued
        operation (``_OP_BYTES``) is the SDK's span's. While it does not (an outage), what
        waits is what the app's memory holds until recovery, so a span that will wait is
        copied into an ``EndedSpan`` (~620 B for ~3.1 KB of the SDK's objects). The copy costs
        this thread ~2.7 µs: paid on every span while the worker was behind, it made the
        app thread's added p50 18.7 µs where OTLP's is 5.9 (bench/app_thread.py); paid only
        in an outage, a run held through the memory benchmark's outage costs 277-305 B at the
        peak (3 runs; 510-549 B never copying).
        """
        queue = self._queue
        waiting = len(queue)
        if self._stopping:
            self.ledger.refuse("after_shutdown")
            return
        if waiting >= self._max_items:
            self.ledger.refuse("queue_full")
            self._release(node)
            self._warn_queue_full()
            return
        if self._held_with(waiting) > self._max_bytes:
            self._refuse_at_bytes()
            self._release(node)
            return
        if waiting >= self._wake_at and self._delivery.sealing:
            span = EndedSpan(span)  # an outage, and this span will wait: let the SDK's objects go now
        if node.ids is None:
            # Not placed yet: place it by the ended span, so the live one is not kept for that
            # (the worker clears it once the run is complete, should it be placed meanwhile).
            node.span = span
        self.ledger.admit_end()
        node.ended = span
        # Only now may the worker merge the post with the end: the end is sure to be queued.
        node.state = RunNode.ENDED
        # A post still queued converts the end now, so the live span may go with the app's last
        # reference: queued ends then hold the SDK's snapshot alone (11 objects for the collector
        # to walk, as OTLP's queue holds, not 14). Cleared after the state, and the worker reads
        # pending before the state, so it never takes this None for a span.
        node.pending = None
        queue.append(node)
        if len(queue) >= self._wake_at and not self._wake.is_set():
            self._wake.set()

    def _held_with(self, waiting: int) -> int:
        """One budget for memory: spans waiting to be converted (estimated), encoded runs
        waiting to be sent (exact) and traces held for sampling; the post adds open runs."""
        held = (waiting + 1) * _OP_BYTES + self._delivery.bytes_held
        hold = self.hold
        return held if hold is None else held + hold.bytes

    def _warn_queue_full(self) -> None:
        _rl.warning(
            "queue_full",
            "the run queue is full (%d); dropping new runs (raise OTEL_BSP_MAX_QUEUE_SIZE or check delivery)",
            self._max_items,
        )

    def _refuse_at_bytes(self) -> None:
        self.ledger.refuse("queue_bytes_full")
        _rl.warning(
            "queue_bytes_full",
            "runs waiting for delivery or for their end hold about %d bytes, the cap "
            "(OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES); dropping new runs",
            self._max_bytes,
        )

    def _release(self, node: RunNode) -> None:
        """A run's end was refused (counted): its early post, sent or not, must stop holding memory."""
        node.state = RunNode.DROPPED  # a post still queued is skipped
        if node.ids is None:
            # Placed now, here, so that the processor's memory of ended runs (and any child linked to
            # it) holds its ids (~0.3 KB) and not its live span: under the byte cap, refused ends
            # would otherwise keep their spans, payloads and all, past the cap (64 KB outputs: ~50 MB
            # with a 2 MiB cap). Costs this thread a few µs, only for a run dropped at its end.
            try:
                node.resolve(self._opts.id_scheme)
            except Exception:  # noqa: BLE001 - never raise into the app; the span is let go with the node
                pass
        self._released.append(node)  # one sent already: the worker forgets it (a deque append is atomic)

    def force_flush(self, timeout_s: float) -> bool:
        """Deliver everything queued so far.

        Keeps sending through retryable failures until everything is delivered
        or ``timeout_s`` runs out. False when the timeout ran out first, or when
        runs were dropped or spooled instead of delivered meanwhile.
        """
        if self._stopped or self._worker is None or not self._worker.is_alive():
            return self.ledger.queued == 0 and not self._queue
        timeout_s = bounded_wait(timeout_s)  # force_flush(sys.maxsize) is "as long as it takes"
        request = _FlushRequest(self._clock.now() + timeout_s)
        with self._lock:
            self._flush_requests.append(request)
        self._wake.set()
        return request.done.wait(timeout_s) and request.ok

    def shutdown(self, timeout_s: float) -> None:
        """Last delivery attempt, bounded by ``timeout_s``; never raises.

        The exit sequence (``_exit``): a service that cannot be reached is not
        waited for that long (``Delivery.begin_exit`` says how long instead);
        what could not be delivered goes to the spool (when there is one) or is
        counted as dropped (``shutdown``), and is reported in one line with the
        real time waited and how to keep such runs next time. Ctrl-C while
        waiting stops the wait at once, with the same one line and no traceback,
        and what is left still goes to the spool.
        """
        if self._stopping:
            return
        timeout_s = bounded_wait(timeout_s)
        self._exit.run(lambda: self._flush_at_exit(timeout_s), stop=self._stop_at_once, gather=self._gather)
        self._stopped = True
        if self._events is not None:
            self._events.close()

    def _flush_at_exit(self, timeout_s: float) -> None:
        """The worker's last flush, until the deadline; the margin of the join lets it finish its cycle."""
        self._stop_deadline = self._clock.now() + timeout_s
        self._stopping = True
        self._wake.set()
        worker = self._worker
        if worker is not None and worker.is_alive() and worker is not threading.current_thread():
            worker.join(timeout_s + 0.5)

    def _stop_at_once(self) -> None:
        """Ctrl-C: the worker starts no request from now on; it is given a moment to hand back what it holds.

        Waited for on an event of ours: a ``join`` that Ctrl-C interrupted leaves the
        thread marked as stopped while it still runs (CPython's bpo-45274 handling).
        """
        self._stop_deadline = self._clock.now()
        self._stopping = True
        self._delivery.stop_now()
        if self._worker is not None and self._worker is not threading.current_thread():
            self._finished.wait(_STOP_GRACE_S)

    def stats(self) -> ExporterStats:
        events = self._events.counts() if self._events is not None else None
        return self.ledger.snapshot(self._delivery.transport.counts, interval_s=self._pacer.interval,
                                     log_events=events, sampling_held=self.hold.runs if self.hold is not None else 0)

    # --- shutdown ------------------------------------------------------------------

    def _gather(self) -> None:
        """At exit, what the worker has not sent: converted and handed to the delivery for the spool.

        The worker is done, or stuck in a request past the deadline (a service that
        never answers), blocked on its socket: it converts nothing meanwhile. The
        batch in flight is counted as given up, and moved back out of that count by
        the ledger if it is delivered after all. Without a spool nothing is
        converted: what is queued is counted, in runs, once (``Ledger.give_up``).
        """
        if self._delivery.spool is not None:
            self._convert_some(everything=True)
            self._close_open_runs()
        self._queue.clear()

    def _finish(self) -> None:
        """The worker's last cycle: the runs still open closed, then send until the deadline; what is left
        is the exit sequence's."""
        self._convert_some(everything=True)  # early posts made now are closed with the rest
        self._close_open_runs()
        self._cycle(self._stop_deadline)
        with self._lock:
            requests, self._flush_requests = self._flush_requests, []
        for r in requests:
            r.ok = False
            r.done.set()

    # --- the worker --------------------------------------------------------------

    def _run(self) -> None:
        otel_context.attach(suppressed_context())
        spent = 0.0
        spool = self._delivery.spool
        while True:
            woken = self._wake.wait(self._pacer.next_wait(spent))
            self._wake.clear()
            began = time.monotonic()
            try:
                if spool is not None:
                    self._record_some(self._delivery.maintain())
                if self._stopping:
                    try:
                        self._finish()
                    finally:
                        self._finished.set()
                    return
                with self._lock:
                    requests, self._flush_requests = self._flush_requests, []
                if requests:
                    ok = self._flush(min(r.deadline for r in requests))
                    for r in requests:
                        r.ok = ok
                        r.done.set()
                else:
                    self._cycle(self._clock.now() + self._settings.export_timeout_s, paced=True, early=woken)
                    # A full batch never waits for the interval, counting the runs a flush left
                    # waiting; not the runs just refused, which wait out their Retry-After.
                    delivery, pacer = self._delivery, self._pacer
                    left = len(delivery) if pacer.adapting and not pacer.owes_wait and not delivery.sealing else 0
                    self._wake_at = 2 * max(1, self._settings.max_export_batch_size - left)
            except Exception:  # noqa: BLE001 - the worker must survive any bug of ours
                logger.exception("unexpected error in the export worker; continuing")
            spent = time.monotonic() - began

    def _flush(self, deadline: float) -> bool:
        """Send until nothing is left or the deadline; False also when runs were lost meanwhile."""
        lost_before = self.ledger.lost()
        while True:
            result = self._cycle(deadline)
            if result is not _Cycle.INTERRUPTED or self._stopping or self._clock.now() >= deadline:
                break
            # New work woke a backoff wait: the flush goes on until its own deadline.
            self._wake.clear()
        return result is _Cycle.DONE and self.ledger.lost() == lost_before

    def _cycle(self, deadline: float, paced: bool = False, early: bool = False) -> _Cycle:
        """Convert what is queued and send it, batch by batch, until nothing is left or the deadline.

        ``paced`` (the regular flush, not ``force_flush`` or shutdown): a 429 ends
        the cycle at once. While the pacer has lengthened the interval, a flush
        sends what waited for it, in as few requests as the batch limits allow,
        and nothing that arrives meanwhile; ``early`` (woken by a full batch
        before the interval was over) it sends only full batches.
        """
        delivery = self._delivery
        adapting = paced and self._pacer.adapting
        # While the service is down, convert everything at once: a converted run is
        # sealed into a compressed batch (~80 B), a queued span holds its SDK objects (~3 KB).
        self._convert_some(everything=delivery.sealing or adapting)
        if delivery.spool is not None:
            self._record_some(delivery.spool_due())  # what waited past its deadline is on disk first
        while True:
            if adapting and early and not delivery.full_batch_ready():
                return _Cycle.LATER
            outcome = delivery.send_next(deadline, paced=paced)
            if outcome is None:
                if not self._queue or adapting:
                    break
                self._convert_some()
                continue
            self._record(outcome)
            if outcome.retry_later:
                return _Cycle.INTERRUPTED if outcome.interrupted else _Cycle.LATER
            if self._clock.now() >= deadline:
                return _Cycle.LATER
            if not adapting:
                # Take what arrived meanwhile, a batch at a time, so a fast producer
                # is sent alongside instead of after.
                self._convert_some()
        if not adapting:
            # Under a rate limit the key's requests go to new runs first; the spool waits its turn.
            self._replay(deadline)
        return _Cycle.DONE if not self._queue and not len(delivery) else _Cycle.LATER

    def _replay(self, deadline: float) -> None:
        """Send spool files while there is time and no new work: old runs never crowd out new ones."""
        batch = self._settings.max_export_batch_size
        while self._clock.now() < deadline and len(self._queue) < batch:
            outcome = self._delivery.replay_next(deadline)
            if outcome is None:
                return
            self._record(outcome)
            if outcome.retry_later:
                return

    def _record_some(self, outcome: Outcome | None) -> None:
        if outcome is not None:
            self.ledger.record(outcome)

    def _record(self, outcome: Outcome) -> None:
        self.ledger.record(outcome)
        if outcome.throttled:
            self._pacer.on_throttled(outcome.retry_after_s)
        elif outcome.delivered or outcome.delivered_sealed or outcome.replayed:
            self._pacer.on_success()
        for runs in outcome.dropped.values():
            for run in runs:
                if not run.completes:
                    # The service never got this early post: its patch must carry the whole run.
                    self._open.forget(run.run_id)

    def _convert_some(self, everything: bool = False) -> None:
        """Convert up to one batch of queued operations (all of them with ``everything``).

        Bounded so that a producer faster than conversion cannot keep the worker
        converting forever without sending.
        """
        queue = self._queue
        released = self._released
        self._now = self._clock.now()
        while released:
            ids = released.popleft().ids
            if ids is not None:
                self._open.forget(ids.run_id)
        self._open.release_never_ended(now=self._now)
        join = self._events
        if join is not None and join.has_late():
            for patch in late_patches(join, self._opts, self._settings.max_value_chars):
                # After its run's completing operation, which was converted earlier. Refused
                # (the byte cap), it costs these events' messages, not the run: not counted here.
                self._delivery.add(patch)
        # Two operations per run, as post() and end() queue them: a batch of runs.
        budget = len(queue) if everything else min(len(queue), 2 * self._settings.max_export_batch_size)
        last_yield = time.perf_counter()
        catch_up = _CATCH_UP_BATCHES * self._settings.max_export_batch_size
        for _ in range(budget):
            try:
                node = queue.popleft()
            except IndexError:  # emptied by a shutdown that could not wait for us
                return
            first = not node.posted
            node.posted = True
            # Its end, once queued (set before the state says so); else the live span its post converts.
            # pending first: end() clears it after setting the state, on another thread.
            pending = node.pending
            span = pending if node.state == RunNode.OPEN else node.ended
            try:
                encoded = self._convert(first, span, node)
            except Exception as exc:  # noqa: BLE001 - one bad span must not stop the others
                log_convert_error(span, exc)
                if node.state == RunNode.ENDED:
                    # Its end was queued: the run is lost, counted once; a second operation is skipped.
                    node.state = RunNode.DROPPED
                    node.span = node.pending = node.ended = None
                    self.ledger.drop("convert_error")
                continue
            if encoded is not None and not self._delivery.add(encoded):
                if encoded.completes:
                    self.ledger.drop("queue_bytes_full")
                else:
                    # The early post did not fit: forget it, so the patch goes out as a whole post.
                    self._open.forget(encoded.run_id)
            now = time.perf_counter()
            if now - last_yield > _YIELD_EVERY_S and len(queue) < catch_up:
                # Let application threads waiting for the GIL in, instead of after the
                # 5 ms switch interval (their p99). Not after every span: under a
                # producer that never pauses, each yield costs the worker a whole
                # switch interval, and per-span yields starved sending entirely.
                # Not while the queue is long: then the producer is outpacing us, and
                # each queued span holds ~3 KB of SDK objects until converted (~80 B
                # once sealed in an outage). Yielding every 2 ms, the worker got ~11 %
                # of the interpreter in a 100k-span burst with the service down: +224 MB
                # and 17 % dropped at the queue's bound; every 4-4.5 ms, +99 to +164 MB;
                # not at all (the interpreter still switches every 5 ms), +49 to +55 MB
                # and nothing dropped (two runs each on a loaded machine; BENCHMARKS.md (c) has the clean figure).
                time.sleep(0)
                last_yield = time.perf_counter()
        if self._delivery.spool is not None:
            self._record_some(self._delivery.take_spooled())  # the byte cap sent the oldest there

    def _close_open_runs(self) -> None:
        """At exit: the runs still open are closed (``OpenRuns.close_all``) and queued like any other."""
        for patch in self._open.close_all():
            if not self._delivery.add(patch):
                self.ledger.drop("queue_bytes_full")

    def _completed(self, ids: RunIds) -> None:
        """Count what a run's completing operation says about its place."""
        if ids.depth_limit_parent is not None:
            self.ledger.depth_limited()

    def _convert(self, first: bool, span: Any, node: RunNode) -> EncodedRun | None:
        """A node's queued operation: its first is its post, its second (if any) its end.

        A post whose end is queued already carries the whole run, and the end is then
        skipped; a run whose post never got into the queue (refused while it was full,
        or held for sampling) has only its end queued, which is then its first.
        """
        state = node.state
        if state == RunNode.DROPPED or state == RunNode.MERGED:
            # Its end was refused and counted, or the post carried the whole run: nothing converts
            # the span again, and the node, remembered for late children, must not keep it.
            node.pending = None
            return None
        limit = self._settings.max_value_chars
        ids = node.resolve(self._opts.id_scheme)
        if first and state == RunNode.OPEN:
            # Open, as far as counting knows (the span may have ended a moment ago, its end not
            # queued yet): only the end carries it, so a refused end is a run lost.
            run = span_to_run(span, ids, self._opts, as_open=True)
            self._open.remember(ids, early_post_summary(run), _OPEN_RUN_BYTES + len(ids.dotted_order), now=self._now)
            # Made: nothing converts the live span again (its end comes as node.ended), so the node
            # lets go of it (end() may have already).
            node.pending = None
            return encode_run("post", run, limit)
        # The span has ended: the last chance to see ids set after its start, once per span.
        warn_if_ids_set_late(span, node.given)
        summary = None if first else self._open.forget(ids.run_id)
        full = ended_run(span, ids, self._opts, self._events, self.ledger)
        if summary is None:
            # One post carries the whole run: its end is queued (merged), or its post never went out
            # (refused, dropped on the way, or held): the end is then skipped.
            encoded = encode_run("post", full, limit, completes=True)
        else:
            encoded = encode_run("patch", patch_fields(full, summary), limit, completes=True)
        # Marked only once encoded: a failure above is counted by the caller, once.
        node.state = RunNode.MERGED
        node.span = node.pending = node.ended = None
        self._completed(ids)
        return encoded

