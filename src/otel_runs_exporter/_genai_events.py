"""GenAI events written as OTel log records, joined to the run of the span they were written under.

Some producers put the conversation in log events rather than on the span:
openai-v2 with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only``
(or ``span_and_event``) emits one ``gen_ai.client.inference.operation.details``
record per call, whose attributes hold the messages; older GenAI producers emit
``gen_ai.user.message`` ... ``gen_ai.choice`` records with the message in the
body. A span processor or exporter never sees them, so without this module such
runs have ``inputs: {}``. Each record carries the ids of the span that was current
when it was emitted (its context); this module brings it to that span's run.

Three pieces, calls going one way (the log processor offers to the joins; the
paths ask their join when they convert):

* :class:`GenAIEventProcessor`, a ``LogRecordProcessor`` on the global
  ``LoggerProvider`` (:func:`install_log_processor`, called by ``configure()`` and
  the ``runs`` configurator when ``capture_log_events`` is on). On the
  application thread, for a record named ``gen_ai.*`` only: one plain copy of it
  as a :class:`~otel_runs_exporter.mapping.SpanEvent` (the body, if any, under
  ``body``, where the mapping's event rows read it), its size, and one offer to
  each live :class:`EventJoin`. Any other record costs a string test.
* :class:`EventJoin`, one per path (the processor's worker, each
  ``RunsSpanExporter``): each converts the span itself, at its own moment, so
  each holds its own references to the shared events.
* The seam is the conversion, not the span: a path asks its join for the
  span's events (:meth:`EventJoin.take`) when it converts the run's completing
  operation (the patch, or a post that already carries the end), and hands them
  to ``span_to_run(log_events=...)``, which reads them after the span's own events
  through the same mapping rows. The events are never added to the span: it
  belongs to the app and to every other processor (an OTLP exporter would then
  send each message twice), and an ended span refuses events. An event emitted
  while its span is open (openai-v2 emits just before ``span.end()``) is thus in
  the run on both paths whatever the flush moment: an early post never carries
  events (only what is fixed at start), the completing operation carries all.

An event's life in one join::

    offer ─┬─ run not converted yet ──> pending ──take()──> in the run ........ joined
           │                              └─ HOLD_S passed, caps full ....... dropped (unmatched,
           │                                                                   events_full, events_bytes_full)
           └─ run converted < LATE_S ago ──> late() ──> a patch: the run as it is now,
                                                        with all its events so far ........... joined
    no span ids: dropped (no_span); unsampled trace: dropped (not_sampled); pending at shutdown: (shutdown)

A join cannot tell at once whether an event's span will come: the exporter
path sees a span only after it has ended and its batch is exported. So an event
waits for its span's run up to ``HOLD_S``; one that no run took by then is
dropped as ``unmatched``: its span was never seen by this path (another
provider, dropped before conversion), or its run was converted so long ago that
it is no longer kept for a late patch. To patch runs with late events, a join
that has seen any GenAI event keeps the spans of the GenAI runs it converts
(a span with ``gen_ai.operation.name``, ``gen_ai.provider.name`` or
``gen_ai.system``, or one that got events) for ``LATE_S``. On the exporter path
a late patch goes out with the next export (or at shutdown); the processor's
worker sends it with its next flush.

Bounds, per join: ``MAX_EVENTS`` pending events and ``MAX_BYTES`` of them (their
JSON size); past either, new events are dropped and counted. At most
``LATE_SPANS`` kept spans and ``LATE_BYTES`` (estimated), the oldest forgotten
first. The counts are the path's ``stats().log_events_*``, outside the runs'
identity (an event lost leaves its run without those messages; no run is lost).
Nothing here raises into the app or logs an event's content; after ``fork`` a
join starts empty (what the parent held is the parent's to send).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import orjson
from opentelemetry import _logs
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.trace import TraceFlags

from ._convert import ConvertOptions, patch_fields, span_to_run
from ._cost import stamp_cost
from ._encode import EncodedRun, encode_run
from ._fork import ForkSafeLock, WeakRegistry, renew_in_child
from ._hold import span_bytes
from ._ids import RunIds
from ._logging import RateLimitedLog
from .mapping import GENAI_EVENT_PREFIX, SpanEvent
from ._stats import Ledger, LogEventCounts

__all__ = ["GenAIEventProcessor", "EventJoin", "install_log_processor", "ended_run", "late_patches"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

#: Seconds an event waits for its span's run; long enough for a streamed call that
#: emits at its start and ends minutes later, on the exporter path.
HOLD_S = 600.0
MAX_EVENTS = 10_000
MAX_BYTES = 32 * 1024 * 1024
#: Seconds a converted GenAI run's span is kept, so that events arriving after it still reach it.
LATE_S = 60.0
LATE_SPANS = 1024
LATE_BYTES = 16 * 1024 * 1024

# Beyond the JSON of its values: the SpanEvent, its dict, the list slot (tracemalloc, ~200 B).
_EVENT_OVERHEAD = 200
#: Attributes every GenAI semconv span carries (one of them): the runs worth keeping for late events.
_GENAI_SPAN_KEYS = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.system")

_Key = tuple[int, int]  # (otel trace id, otel span id)


@dataclass
class _Pending:
    since: float
    events: list[SpanEvent] = field(default_factory=list)
    size: int = 0


@dataclass
class _Kept:
    span: Any
    ids: RunIds
    since: float
    events: list[SpanEvent]
    size: int
    new: int = 0  # events since its last conversion


class EventJoin:
    """One path's holding place for GenAI log events, by span, until the span's run takes them.

    The log processor calls :meth:`offer` (application threads); the path calls
    :meth:`take` as it converts a run's completing operation, and :meth:`late`
    for the runs that got events after that (see the module docstring)::

        join = EventJoin()
        events = join.take(span, ids)                  # the run's events, to span_to_run(log_events=...)
        patches = late_patches(join, opts, limit)      # the runs whose events came too late for that
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        """``clock`` is a seam for tests (monotonic seconds), to age events without waiting."""
        self._clock = clock
        self._closed = False
        self._init_state()
        renew_in_child(self)
        _joins.add(self)

    def _init_state(self) -> None:
        self._lock = threading.Lock()
        self._pending: OrderedDict[_Key, _Pending] = OrderedDict()
        self._pending_events = 0
        self._pending_bytes = 0
        self._kept: OrderedDict[_Key, _Kept] = OrderedDict()
        self._kept_bytes = 0
        self._late: list[_Key] = []
        self._seen_any = False  # no GenAI event yet: nothing is kept for late ones (most apps)
        self._joined = 0
        self._dropped: dict[str, int] = {}

    def _after_fork_in_child(self) -> None:
        self._init_state()

    # --- the log processor (application threads) ----------------------------------

    def offer(self, key: _Key, event: SpanEvent, size: int) -> None:
        """Hold ``event`` for the run of span ``key``, or queue a late patch if that run was converted."""
        now = self._clock()
        with self._lock:
            if self._closed:
                return
            self._seen_any = True
            self._expire(now)
            kept = self._kept.get(key)
            if kept is not None:
                kept.events.append(event)
                kept.size += size
                self._kept_bytes += size
                kept.new += 1
                if kept.new == 1:
                    self._late.append(key)
                self._trim_kept(now)
                return
            if self._pending_events >= MAX_EVENTS:
                self._drop("events_full", 1)
                return
            if self._pending_bytes + size > MAX_BYTES:
                self._drop("events_bytes_full", 1)
                return
            entry = self._pending.get(key)
            if entry is None:
                entry = self._pending[key] = _Pending(now)
            entry.events.append(event)
            entry.size += size
            self._pending_events += 1
            self._pending_bytes += size

    def refuse(self, reason: str) -> None:
        """An event that cannot belong to any run here (no span, an unsampled trace)."""
        with self._lock:
            if not self._closed:
                self._drop(reason, 1)

    # --- the path (its converting thread) ------------------------------------------

    def take(self, span: Any, ids: RunIds) -> list[SpanEvent]:
        """The events waiting for ``span``'s run, as its completing operation is converted.

        From now on, an event for this span goes into a late patch (:meth:`late`)
        while the span is kept (GenAI runs only, for ``LATE_S``).
        """
        ctx = span.context
        key = (ctx.trace_id, ctx.span_id)
        now = self._clock()
        with self._lock:
            if not self._seen_any or self._closed:
                return []
            self._expire(now)
            entry = self._pending.pop(key, None)
            events = entry.events if entry is not None else []
            if entry is not None:
                self._pending_events -= len(events)
                self._pending_bytes -= entry.size
                self._joined += len(events)
            if events or _is_genai_span(span):
                old = self._kept.pop(key, None)  # the same span converted twice: the later one counts
                if old is not None:
                    self._kept_bytes -= old.size
                size = span_bytes(span) + (entry.size if entry is not None else 0)
                self._kept[key] = _Kept(span, ids, now, list(events), size)
                self._kept_bytes += size
                self._trim_kept(now)
            return events

    def has_late(self) -> bool:
        """Whether :meth:`late` has anything (a racy read: a miss is seen at the next call)."""
        return bool(self._late)

    def late(self) -> list[tuple[Any, RunIds, list[SpanEvent]]]:
        """``(span, ids, all its events)`` for each converted run that got events since."""
        with self._lock:
            keys, self._late = self._late, []
            out: list[tuple[Any, RunIds, list[SpanEvent]]] = []
            for key in keys:
                kept = self._kept.get(key)
                if kept is None or not kept.new:
                    continue  # forgotten meanwhile: counted by _trim_kept
                self._joined += kept.new
                kept.new = 0
                out.append((kept.span, kept.ids, list(kept.events)))
            return out

    def counts(self) -> LogEventCounts:
        with self._lock:
            self._expire(self._clock())
            return LogEventCounts(self._joined, dict(self._dropped), self._pending_events)

    def close(self) -> None:
        """Stop taking events (the path shut down, having converted every run it could).

        What still waits for a run is ``unmatched``: no run of this path took it (its
        span was never seen here, or never ended), which a short-lived app finds out
        only now, not after :data:`HOLD_S`. Events of converted runs whose late patch
        was not sent are ``shutdown``.
        """
        _joins.discard(self)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._pending_events:
                self._drop("unmatched", self._pending_events, at_shutdown=True)
            late = sum(kept.new for kept in self._kept.values())
            if late:
                self._drop("shutdown", late)
            self._pending.clear()
            self._kept.clear()
            self._late = []
            self._pending_events = self._pending_bytes = self._kept_bytes = 0

    # --- under the lock ----------------------------------------------------------------

    def _drop(self, reason: str, n: int, at_shutdown: bool = False) -> None:
        self._dropped[reason] = self._dropped.get(reason, 0) + n
        if reason in ("events_full", "events_bytes_full"):
            _rl.warning(
                reason,
                "GenAI log events waiting for their runs reached the cap (%d events, %d bytes); dropping new ones",
                MAX_EVENTS,
                MAX_BYTES,
            )
        elif reason == "unmatched" and at_shutdown:
            _rl.warning(
                "unmatched_at_shutdown",
                "%d GenAI log events dropped at shutdown: no run took them (their span was not seen by this path, "
                "or had not ended)",
                n,
            )
        elif reason == "unmatched":
            _rl.warning(
                reason,
                "%d GenAI log events dropped: no run took them within %d s (their span was not seen by this "
                "path, or its run was converted more than %d s earlier)",
                n,
                int(HOLD_S),
                int(LATE_S),
            )

    def _expire(self, now: float) -> None:
        pending = self._pending
        while pending:
            key = next(iter(pending))
            entry = pending[key]
            if now - entry.since < HOLD_S:
                break
            del pending[key]
            self._pending_events -= len(entry.events)
            self._pending_bytes -= entry.size
            self._drop("unmatched", len(entry.events))
        self._trim_kept(now)

    def _trim_kept(self, now: float) -> None:
        kept = self._kept
        while kept:
            key = next(iter(kept))
            oldest = kept[key]
            if now - oldest.since < LATE_S and len(kept) <= LATE_SPANS and self._kept_bytes <= LATE_BYTES:
                break
            del kept[key]
            self._kept_bytes -= oldest.size
            if oldest.new:
                self._drop("unmatched", oldest.new)  # came late, and its run was forgotten before the patch


def _is_genai_span(span: Any) -> bool:
    attributes = span.attributes
    return bool(attributes) and any(key in attributes for key in _GENAI_SPAN_KEYS)


def _event_size(attributes: Mapping[str, Any]) -> int:
    try:
        return _EVENT_OVERHEAD + len(orjson.dumps(attributes, default=str, option=orjson.OPT_NON_STR_KEYS))
    except (TypeError, orjson.JSONEncodeError):
        return _EVENT_OVERHEAD + 256 * len(attributes)


# --- the joins of this process ----------------------------------------------------------

# A path that is gone is not kept alive (nor offered events) by being registered.
_joins: WeakRegistry[EventJoin] = WeakRegistry()


# --- the log record processor -------------------------------------------------------------


class GenAIEventProcessor(LogRecordProcessor):
    """Brings GenAI events written as log records to their span's run, on both paths.

    ``configure()`` and the ``runs`` configurator install it (see
    :func:`install_log_processor`); with a ``RunsSpanProcessor`` or
    ``RunsSpanExporter`` set up by hand, add it to the logger provider yourself::

        from otel_runs_exporter import GenAIEventProcessor
        logger_provider.add_log_record_processor(GenAIEventProcessor())
    """

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        try:
            record = log_record.log_record
            attributes = record.attributes
            name: Any = record.event_name
            if not name and attributes:
                name = attributes.get("event.name")  # the older Events API names its records here
            if not isinstance(name, str) or not name.startswith(GENAI_EVENT_PREFIX):
                return
            joins = _joins.live()
            if not joins:
                return
            trace_id, span_id, flags = record.trace_id, record.span_id, record.trace_flags
            reason = None
            if not trace_id or not span_id:
                reason = "no_span"
            elif flags is not None and not TraceFlags(flags).sampled:
                reason = "not_sampled"
            if reason is not None:
                for join in joins:
                    join.refuse(reason)
                return
            plain: dict[str, Any] = dict(attributes) if attributes else {}
            plain.pop("event.name", None)
            if record.body is not None:
                plain["body"] = record.body
            event = SpanEvent(name, plain, record.timestamp or record.observed_timestamp or 0)
            size = _event_size(plain)
            for join in joins:
                join.offer((trace_id, span_id), event, size)
        except Exception:  # noqa: BLE001 - never raise into the application's logging
            _rl.error("on_emit", "could not keep a GenAI log event for its run", exc_info=True)

    def shutdown(self) -> None:
        """Nothing to release: the joins belong to the paths, which close them at their own shutdown."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_install_lock = ForkSafeLock()

# Providers that already have our processor (weak: a provider that is gone is forgotten).
_installed: "weakref.WeakKeyDictionary[LoggerProvider, GenAIEventProcessor]" = weakref.WeakKeyDictionary()


def install_log_processor() -> GenAIEventProcessor | None:
    """Add a :class:`GenAIEventProcessor` to the global SDK ``LoggerProvider``, once.

    When no provider is set, an SDK one is created and set as the global one
    (instrumentors that asked for a logger before get it through OTel's proxy).
    Returns the processor, or None when the global provider is not the SDK's.
    """
    with _install_lock:
        provider = _logs.get_logger_provider()
        if not isinstance(provider, LoggerProvider):
            _logs.set_logger_provider(LoggerProvider())
            provider = _logs.get_logger_provider()
            if not isinstance(provider, LoggerProvider):
                logger.warning(
                    "the global logger provider is %r, not the SDK's; GenAI log events will not reach their runs",
                    provider,
                )
                return None
        processor = _installed.get(provider)
        if processor is None:
            processor = GenAIEventProcessor()
            provider.add_log_record_processor(processor)
            _installed[provider] = processor
        return processor


# --- ended runs and late patches ---------------------------------------------------------------


def ended_run(span: Any, ids: RunIds, opts: ConvertOptions, join: EventJoin | None, ledger: Ledger) -> dict[str, Any]:
    """The run of an ended span, with the log events joined to it so far; attributes kept as text counted.

    The one way both paths (the worker's and the exporter's) turn an ended span into
    the run they complete, so a run as stored does not depend on which path sent it.
    """
    malformed: list[str] = []
    events = join.take(span, ids) if join is not None else []
    run = span_to_run(span, ids, opts, malformed=malformed, log_events=events)
    ledger.malformed(len(malformed))
    if opts.prices is not None:
        stamp_cost(run, opts.prices)
    return run


def late_patches(join: EventJoin, opts: ConvertOptions, max_value_chars: int) -> list[EncodedRun]:
    """A patch for each run that got events after it was converted: the run as it is now, every event in.

    Not a completing operation (the run was counted when its end was converted):
    a patch that is lost costs these events' messages, not a run.
    """
    out: list[EncodedRun] = []
    for span, ids, events in join.late():
        try:
            full = span_to_run(span, ids, opts, log_events=events)
            if opts.prices is not None:
                stamp_cost(full, opts.prices)  # a patch's outputs replace the post's whole: their costs too
            # Its inputs too, when it has any: what its post carried is not known here.
            patch = patch_fields(full, (full["name"], full["run_type"], None))
            out.append(encode_run("patch", patch, max_value_chars))
        except Exception:  # noqa: BLE001 - one bad span must not stop the others
            logger.exception("could not patch the run of span %r with its late GenAI events", getattr(span, "name", "?"))
    return out
