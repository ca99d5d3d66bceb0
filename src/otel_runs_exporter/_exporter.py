"""``RunsSpanExporter``: for ``OTEL_TRACES_EXPORTER=runs`` and a ``BatchSpanProcessor``.

An exporter sees ended spans, children before their parents, and a span knows
only its parent's OTel ids. A run's dotted_order needs every ancestor's start
time, so spans wait in a holding area until their parent's run ids are known.
The holding area is bounded in spans and in time; past the bound a span is
sent as the root of its own tree with its OTel parent ids in metadata and
counted as ``orphaned``. ``shutdown`` delivers whatever is held. A span
counts as created once it leaves the holding area to be sent.

The span filter (``_select``) judges each span here at its end, whole: a span
left out is resolved to its parent's ids, so its children nest under its
nearest kept ancestor; a root that is not a GenAI span (``spans=genai``) is
sent only when a span held under it is kept. With tail sampling, the runs of
a trace the rate does not keep wait in a ``_hold.TraceHold`` until its root
comes (or an error or a slow run keeps it).

Sending happens inside ``export()``: there is no second queue or thread on top
of the BatchSpanProcessor's. A batch that could not be delivered within the
export timeout is kept (bounded in bytes) and retried on the next export.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections import OrderedDict, deque
from typing import Iterable, Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import _process_end, _registry
from ._arguments import SettingsArguments, Unpack
from ._clock import SYSTEM_CLOCK, Clock, bounded_wait
from ._convert import ConvertOptions, given_ids, log_convert_error, span_ids
from ._delivery import Delivery
from ._encode import encode_run
from ._exit import ExitSequence
from ._fork import renew_in_child
from ._genai_events import EventJoin, ended_run, late_patches
from ._hold import BOUNDS, Decision, TraceHold, span_bytes
from ._ids import RunIds
from ._logging import RateLimitedLog
from ._select import KEEP, ROOT, SpanFilter, TailRule
from ._settings import Settings, check_usable, resolve_for_app, shown_url
from ._stats import ExporterStats, Ledger
from ._transport import Transport

__all__ = ["RunsSpanExporter"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

_RESOLVED_MAX = 100_000
# Resolved ids are also bounded in bytes: each holds its dotted_order, up to ~15 kB at
# _ids.MAX_DEPTH, so 100,000 of those would hold 1.5 GB. 32 MiB keeps 100,000 runs a few
# levels deep, or ~2,000 at the depth limit; a child whose parent was forgotten is
# sent as a root and counted as orphaned.
_RESOLVED_MAX_BYTES = 32 * 1024 * 1024
# The key, the ids, their own strings and the map slot, besides the dotted_order: tracemalloc sees
# ~540 B an entry of a shallow trace, ~110 of them its dotted_order (300 here let 32 MiB hold ~42).
_RESOLVED_ENTRY_BYTES = 430
_Key = tuple[int, int]  # (otel trace id, otel span id)
# What _resolved answers for a span it does not know (None: a span left out with no kept ancestor).
_UNKNOWN = RunIds("", "", None, "", 0)


def _entry_bytes(ids: RunIds | None) -> int:
    """What one entry of the resolved map holds: the ids and the map slot, and the dotted_order."""
    return _RESOLVED_ENTRY_BYTES + (len(ids.dotted_order) if ids is not None else 0)


class RunsSpanExporter(SpanExporter):
    """A ``SpanExporter`` that sends spans as runs; reads its settings from the environment.

    ::

        provider.add_span_processor(BatchSpanProcessor(RunsSpanExporter()))

    Prefer :class:`~otel_runs_exporter.RunsSpanProcessor` for long-lived roots
    (server request spans): here a child waits for its root to end.
    """

    def __init__(
        self, settings: Settings | None = None, *, clock: Clock = SYSTEM_CLOCK, **overrides: Unpack[SettingsArguments]
    ) -> None:
        """``clock`` is a seam for tests (see :class:`~otel_runs_exporter.RunsSpanProcessor`)."""
        self._settings = settings if settings is not None else resolve_for_app(overrides)
        check_usable(self._settings)
        self._opts = ConvertOptions.from_settings(self._settings)
        self._filter = SpanFilter.from_settings(self._settings)
        self._tail = TailRule.from_settings(self._settings)
        self._clock = clock
        # GenAI log events wait here for their span's run (it renews itself after fork).
        self._events = EventJoin() if self._settings.capture_log_events and not self._settings.disabled else None
        self._init_state()
        self._shut = False
        renew_in_child(self)
        if not self._settings.disabled:
            _registry.add_sender(self)
            _process_end.watch(self._settings)  # multiprocessing children, SIGTERM (when asked)
        # At interpreter exit the SDK's batch processor makes its last export() calls before
        # it calls shutdown(); they must follow the exit rule too. atexit runs hooks last
        # registered first, so this one runs before the provider's when the provider was
        # made first (as the SDK's configurator, and most code, make it).
        atexit.register(_at_exit, weakref.ref(self))

    def _init_state(self) -> None:
        self._ledger = Ledger()
        self._lock = threading.Lock()
        # A left-out span's key maps to its nearest kept ancestor's ids (None: it has none).
        self._resolved: OrderedDict[_Key, RunIds | None] = OrderedDict()
        self._resolved_bytes = 0  # written under self._lock only
        # parent key -> {child span id: child}; the deque keeps arrival order for the time bound
        self._held: dict[_Key, dict[int, ReadableSpan]] = {}
        self._held_order: deque[tuple[_Key, int, float]] = deque()
        self._held_parent: dict[_Key, _Key] = {}  # held span -> its parent's key
        self._held_count = 0
        self._hold = TraceHold.from_settings(self._settings)  # traces waiting for their sampling decision
        # OTel trace ids of the local roots placed since the last _sample: their traces are decided
        # there (a span sent as a root only because the hold above ran out of patience is not one).
        self._roots: list[int] = []
        self._delivery = Delivery(self._settings, Transport(self._settings, clock=self._clock))
        self._exit = ExitSequence(self._delivery, self._ledger)
        self._send_lock = threading.Lock()  # export() and force_flush() may race; one sender at a time

    def _after_fork_in_child(self) -> None:
        # Like the SDK's BatchSpanProcessor, whose queue the child starts without:
        # what the parent holds is the parent's to send (else it would arrive twice),
        # and a lock its export thread held at the fork would never be released here.
        self._init_state()

    def __repr__(self) -> str:
        return f"RunsSpanExporter(endpoint={shown_url(self._settings.endpoint)!r}, project={self._settings.project!r})"

    # --- SpanExporter ------------------------------------------------------------

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shut or self._settings.disabled:
            return SpanExportResult.FAILURE if self._shut else SpanExportResult.SUCCESS
        try:
            with self._lock:
                ready = self._place(spans)
                ready.extend(self._release(time.monotonic(), everything=False))
                self._enqueue(self._sample(ready))
                self._enqueue_late()
            ok = self._deliver(self._clock.now() + self._settings.export_timeout_s)
            return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE
        except Exception:  # noqa: BLE001 - an exporter logs and reports failure, it never raises
            logger.exception("could not export %d spans", len(spans))
            return SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Retry what earlier exports could not deliver; held spans keep waiting for their parents.

        False if the time ran out first, or if runs were dropped or spooled meanwhile.
        """
        if self._settings.disabled:
            return True
        try:
            with self._lock:
                self._enqueue_late()
            return self._deliver(self._clock.now() + bounded_wait(timeout_millis / 1000.0))
        except Exception:  # noqa: BLE001
            logger.exception("force_flush failed")
            return False

    def shutdown(self, timeout_millis: int | None = None) -> None:
        """Send everything held and pending, bounded by ``OTEL_BSP_EXPORT_TIMEOUT``; never raises.

        The exit sequence (``_exit``): a service that cannot be reached gets the
        exit budget instead (``Delivery.begin_exit``). What is left then goes to
        the spool (when there is one) or is counted as dropped (``shutdown``),
        reported in one line with the real time waited and how to keep such runs
        next time. Ctrl-C stops the sending at once; what is left still goes to the spool.
        """
        if self._shut:
            return
        self._shut = True
        if self._settings.disabled:
            return
        timeout_s = self._settings.export_timeout_s if timeout_millis is None else bounded_wait(timeout_millis / 1000.0)
        self._exit.run(lambda: self._flush_at_exit(timeout_s), stop=self._delivery.stop_now)
        if self._events is not None:
            self._events.close()

    def _flush_at_exit(self, timeout_s: float) -> None:
        try:
            with self._lock:
                self._enqueue(self._sample(self._release(time.monotonic(), everything=True), closing=True))
                self._enqueue_late()
            self._deliver(self._clock.now() + timeout_s)
        except Exception:  # noqa: BLE001
            logger.exception("shutdown could not deliver the remaining runs")

    def stats(self) -> ExporterStats:
        events = self._events.counts() if self._events is not None else None
        held = self._hold.runs if self._hold is not None else 0
        return self._ledger.snapshot(self._delivery.transport.counts, held=self._held_count, log_events=events,
                                     sampling_held=held)

    # --- the holding area ----------------------------------------------------------

    def _place(self, spans: Iterable[ReadableSpan]) -> list[tuple[ReadableSpan, RunIds]]:
        """Resolve what can be resolved now (parents first); hold the rest."""
        ready: list[tuple[ReadableSpan, RunIds]] = []
        now = time.monotonic()
        for span in spans:
            ctx = span.context
            if ctx is None or not ctx.trace_flags.sampled:
                continue
            parent = span.parent
            if parent is None or not parent.is_valid:
                self._resolve(span, None, ready)
                self._roots.append(ctx.trace_id)
                continue
            key = (ctx.trace_id, parent.span_id)
            parent_ids = self._resolved.get(key, _UNKNOWN)
            if parent_ids is not _UNKNOWN:
                self._resolve(span, parent_ids, ready)
            elif parent.is_remote and key not in self._held:
                # A parent in another process: this span starts its tree here. A "remote"
                # parent this exporter knows as a local span (its run, or local children
                # waiting for it) is that span, as the processor path finds it among its
                # open spans: Logfire re-attaches a propagated copy of the context for
                # the log it writes when a stream ends.
                self._resolve(span, None, ready)
                self._roots.append(ctx.trace_id)
            else:
                self._held.setdefault(key, {})[ctx.span_id] = span
                self._held_order.append((key, ctx.span_id, now))
                self._held_parent[(ctx.trace_id, ctx.span_id)] = key
                self._held_count += 1
        return ready

    def _resolve(self, span: ReadableSpan, parent_ids: RunIds | None, ready: list[tuple[ReadableSpan, RunIds]]) -> None:
        # Iterative, parents before children, so deep trees cannot hit the recursion limit.
        stack = [(span, parent_ids)]
        while stack:
            current, pids = stack.pop()
            ctx = current.context
            key = (ctx.trace_id, ctx.span_id)
            self._held_parent.pop(key, None)
            ids: RunIds | None
            if self._filter is not None and not self._kept(current, pids, key):
                ids = pids  # left out (counted): its children take its place, under its nearest kept ancestor
            else:
                # An exporter sees only ended spans: ids given at any time are honoured, and
                # the children held for this span are placed under whatever it resolves to.
                try:
                    ids = span_ids(current, pids, self._opts.id_scheme, given_ids(current.attributes))
                except Exception as exc:  # noqa: BLE001 - one bad span must not fail the others' export
                    # Its children stay held, and go out as roots when the hold ends (counted as orphans).
                    log_convert_error(current, exc)
                    self._ledger.refuse("convert_error")
                    continue
                ready.append((current, ids))
            self._remember(key, ids)
            children = self._held.pop(key, None)
            if children:
                self._held_count -= len(children)
                stack.extend((child, ids) for child in children.values())

    def _kept(self, span: ReadableSpan, parent_ids: RunIds | None, key: _Key) -> bool:
        """Whether the span filter makes this whole span a run; counts it when not.

        A root that is not a GenAI span (``spans=genai``) is one when a span held under it is.
        """
        assert self._filter is not None
        verdict = self._filter.verdict(span)
        if verdict == KEEP or (verdict == ROOT and parent_ids is None and self._kept_below(key)):
            return True
        self._ledger.filtered()
        return False

    def _kept_below(self, key: _Key) -> bool:
        assert self._filter is not None
        stack = [key]
        while stack:
            children = self._held.get(stack.pop())
            for child in children.values() if children else ():
                if self._filter.verdict(child) == KEEP:
                    return True
                stack.append((child.context.trace_id, child.context.span_id))
        return False

    def _remember(self, key: _Key, ids: RunIds | None) -> None:
        """Keep ``ids`` for children that come later, within the count and byte bounds."""
        resolved = self._resolved
        old = resolved.pop(key, _UNKNOWN)
        if old is not _UNKNOWN:
            self._resolved_bytes -= _entry_bytes(old)
        resolved[key] = ids
        self._resolved_bytes += _entry_bytes(ids)
        while len(resolved) > _RESOLVED_MAX or self._resolved_bytes > _RESOLVED_MAX_BYTES:
            _, gone = resolved.popitem(last=False)
            self._resolved_bytes -= _entry_bytes(gone)

    def _release(self, now: float, everything: bool) -> list[tuple[ReadableSpan, RunIds]]:
        """Send as roots the spans held too long, or too many, or all at shutdown."""
        ready: list[tuple[ReadableSpan, RunIds]] = []
        limit_s = self._settings.hold_max_s
        max_spans = self._settings.hold_max_spans
        order = self._held_order
        while order:
            key, span_id, since = order[0]
            waiting = self._held.get(key)
            if waiting is None or span_id not in waiting:
                order.popleft()  # already resolved through its parent
                continue
            if not (everything or now - since >= limit_s or self._held_count > max_spans):
                break
            # Release the top of the held chain, so the spans under it keep their places.
            while key in self._held_parent:
                span_id, key = key[1], self._held_parent[key]
            waiting = self._held[key]
            span = waiting.pop(span_id)
            if not waiting:
                del self._held[key]
            self._held_count -= 1
            self._ledger.orphan()
            self._resolve(span, None, ready)
        return ready

    # --- tail sampling ---------------------------------------------------------------

    def _sample(self, ready: list[tuple[ReadableSpan, RunIds]], closing: bool = False) -> list[tuple[ReadableSpan, RunIds]]:
        """The runs to send now: a trace the rate does not keep waits for its root (or an error, a slow run)."""
        tail, hold = self._tail, self._hold
        roots, self._roots = self._roots, []
        if tail is None or hold is None:
            return ready
        ledger = self._ledger
        now = time.monotonic()
        send: list[tuple[ReadableSpan, RunIds]] = []
        for span, ids in ready:
            trace_id = span.context.trace_id
            decided = True if tail.rate_keeps(trace_id) else hold.decision(trace_id)
            if decided is True:
                send.append((span, ids))
                continue
            if decided is False or not tail.can_rescue:
                ledger.sampled_out()
                continue
            events = span.events  # the SDK copies them on each read: once for both
            decision = hold.add(trace_id, (span, ids), span_bytes(span, events), now)
            why = tail.rescues(span, events) if decision is None else None
            if why is not None:
                decision = hold.decide(trace_id, True, why)
            if decision is not None:
                self._settle(decision, send)
        # A root decides its trace once the spans held under it, placed with it, are in too.
        for trace_id in roots:
            root_decision = hold.decide(trace_id, False, "root")
            if root_decision is not None:
                self._settle(root_decision, send)
        for decision in hold.close() if closing else hold.expire(now, room=self._delivery.bytes_held):
            self._settle(decision, send)
        return send

    def _settle(self, decision: Decision, send: list[tuple[ReadableSpan, RunIds]]) -> None:
        bound = decision.reason if decision.reason in BOUNDS else None
        self._ledger.decided(len(decision.ended), decision.keep, bound)
        if decision.keep:
            send.extend(decision.ended)

    # --- delivery ------------------------------------------------------------------

    def _enqueue(self, ready: list[tuple[ReadableSpan, RunIds]]) -> None:
        if ready:
            self._ledger.admit(len(ready))  # created: sure to be sent (their parents known, their trace kept)
        limit = self._settings.max_value_chars
        for span, ids in ready:
            try:
                full = ended_run(span, ids, self._opts, self._events, self._ledger)
                encoded = encode_run("post", full, limit, completes=True)
                if ids.depth_limit_parent is not None:
                    self._ledger.depth_limited()
            except Exception as exc:  # noqa: BLE001 - one bad span must not stop the others
                log_convert_error(span, exc)
                self._ledger.drop("convert_error")
                continue
            if not self._delivery.add(encoded):
                self._ledger.drop("queue_bytes_full")

    def _enqueue_late(self) -> None:
        """Patch the runs whose GenAI log events came after they were sent (see ``_genai_events``)."""
        join = self._events
        if join is None or not join.has_late():
            return
        for patch in late_patches(join, self._opts, self._settings.max_value_chars):
            # Not a run: refused at the byte cap, it costs these events' messages only.
            self._delivery.add(patch)

    def _deliver(self, deadline: float) -> bool:
        """Send pending runs in batches until done or the deadline.

        True when nothing is left in memory and nothing was dropped or spooled meanwhile.
        """
        with self._send_lock:
            lost_before = self._ledger.lost()
            delivery = self._delivery
            if delivery.spool is not None:
                # Others' leftovers taken over now and then; what waited past its deadline on disk first.
                for due in (delivery.maintain(), delivery.spool_due()):
                    if due is not None:
                        self._ledger.record(due)
            left = False
            while (outcome := delivery.send_next(deadline)) is not None:
                self._ledger.record(outcome)
                if outcome.retry_later:
                    left = True
                    break
            if not left:
                while self._clock.now() < deadline and (replayed := delivery.replay_next(deadline)) is not None:
                    self._ledger.record(replayed)
                    if replayed.retry_later:
                        break
            return not left and self._ledger.lost() == lost_before


def _at_exit(ref: "weakref.ref[RunsSpanExporter]") -> None:
    """The interpreter is exiting: what the exporter sends from now on follows the exit rule."""
    exporter = ref()
    if exporter is None or exporter._settings.disabled:
        return
    try:
        exporter._exit.begin()
    except Exception:  # noqa: BLE001 - nothing may fail at exit
        logger.debug("could not prepare the exporter for exit", exc_info=True)
