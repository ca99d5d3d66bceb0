"""Traces held for their tail-sampling decision: what waits, its bounds, and what was decided.

With ``sample_rate`` below 1, a trace the rate would not send may still be
sent whole (an error, a slow run: ``_select.TailRule.rescues``), so its runs
wait here, as the spans they came from, never converted or encoded, until the
trace is decided:

* **kept** as soon as one of its runs ends with an error or too slowly: what is
  held goes out, and the trace's later runs flow as any other;
* **dropped** (sampled out) when its root ends with no such run;
* **decided by the rate alone**, which for a held trace means dropped, when a
  bound is passed: ``sample_hold_max_spans`` spans of one trace,
  ``sample_hold_max_s`` seconds since its first span, or
  ``sample_hold_max_bytes`` (estimated) for all held traces together, oldest
  trace first; or at shutdown. Each such trace is counted by its bound
  (``stats().sampled_at_bound``).

Decisions are remembered for a while, so spans that end after their trace
was decided (a child outliving its root) follow it. A :class:`TraceHold` is a
plain structure: its user serializes the calls (the processor path's
``_choice`` under its lock, the exporter under its own), and acts on each
:class:`Decision` (sends, counts).

    >>> hold = TraceHold(max_spans=2, max_s=60.0, max_bytes=1 << 20)
    >>> hold.add(7, "a", 100, now=0.0) is None, hold.add(7, "b", 100, now=1.0) is None
    (True, True)
    >>> hold.runs, hold.bytes, hold.decision(7) is None
    (2, 200, True)
    >>> decision = hold.add(7, "c", 100, now=1.0)
    >>> decision.keep, decision.ended, decision.reason
    (False, ['a', 'b', 'c'], 'spans')
    >>> hold.runs, hold.bytes, hold.decision(7)
    (0, 0, False)
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, NamedTuple

from ._convert import snapshot_attributes
from ._settings import Settings

__all__ = ["TraceHold", "Decision", "span_bytes"]

# Decisions remembered for spans that end after their trace was decided (~100 B each).
_DECIDED_MAX = 65_536
# What a held ended span costs besides its strings: the SDK span, its context, attribute mapping,
# the hold's entries (a node only for a trace kept): ~3.1 KB for a small span, measured with tracemalloc
# (bench/selection.py, "hold"), as _worker's comment on _OP_BYTES measured for a queued span.
_SPAN_BYTES = 3100
_EVENT_BYTES = 200


def span_bytes(span: Any, events: Any = None) -> int:
    """What holding this ended span costs, estimated: a fixed part plus its string attributes.

    The one estimate for an ended span kept in memory: this hold's, and the GenAI
    log-event join's for the spans it keeps for late events.

    Strings counted at their length, as payloads (prompts, documents) are what make a span large.
    ``events``: the span's events when the caller has read them already.
    """
    size = _SPAN_BYTES + _EVENT_BYTES * len(span.events if events is None else events)
    for value in snapshot_attributes(span).values():
        if type(value) is str:
            size += len(value)
    return size


class Decision(NamedTuple):
    """What was decided for one held trace: ``keep`` it or not, the items that waited, and why.

    ``ended`` are the held ended spans' items; ``open`` those of spans still open
    (the processor path's: sent early when kept, and at their end either way);
    ``reason``: ``error``/``slow`` (kept), ``root`` (its root ended, nothing kept
    it), or the bound that decided it by the rate alone: ``spans``, ``seconds``,
    ``bytes``, ``shutdown``.
    """

    trace_id: int
    keep: bool
    ended: list[Any]
    open: list[Any]
    reason: str


BOUNDS = ("spans", "seconds", "bytes", "shutdown")


class _Held:
    __slots__ = ("since", "ended", "open", "roots", "bytes")

    def __init__(self, since: float) -> None:
        self.since = since
        self.ended: list[Any] = []
        self.open: dict[int, Any] = {}  # span id -> item, while the span is open (processor path)
        # Span ids of the local roots still open (processor path): the trace is decided when the last ends.
        self.roots: set[int] = set()
        self.bytes = 0


class TraceHold:
    """Held traces by OTel trace id, oldest first; ``runs`` and ``bytes`` are what their ended spans hold."""

    def __init__(self, max_spans: int, max_s: float, max_bytes: int) -> None:
        self.max_spans = max_spans
        self.max_s = max_s
        self.max_bytes = max_bytes
        self._traces: OrderedDict[int, _Held] = OrderedDict()
        self._decided: OrderedDict[int, bool] = OrderedDict()
        self.runs = 0
        # Read without a lock by the processor path's worker, as part of max_queue_bytes.
        self.bytes = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> "TraceHold | None":
        """None when nothing is ever held (``sample_rate`` 1)."""
        if settings.sample_rate >= 1:
            return None
        return cls(settings.sample_hold_max_spans, settings.sample_hold_max_s, settings.sample_hold_max_bytes)

    def __len__(self) -> int:
        return len(self._traces)

    def decision(self, trace_id: int) -> bool | None:
        """True (kept) or False (dropped) once decided and still remembered; None while held or unknown."""
        return self._decided.get(trace_id)

    def holds(self, trace_id: int) -> bool:
        return trace_id in self._traces

    def start(self, trace_id: int, span_id: int, item: Any, root: bool, now: float | None = None) -> Decision | None:
        """A span of a held (or newly held) trace started (processor path); ``root``: no parent run here.
        ``now``: the monotonic clock, read here when not given (only a new trace needs it).

        A decision when the trace passes ``max_spans`` with it."""
        held = self._traces.get(trace_id)
        if held is None:
            held = self._traces[trace_id] = _Held(time.monotonic() if now is None else now)
        held.open[span_id] = item
        if root:
            held.roots.add(span_id)
        if len(held.open) + len(held.ended) > self.max_spans:
            return self._decide(trace_id, False, "spans")
        return None

    def end(self, trace_id: int, span_id: int, size: int, keep_item: bool = True) -> bool | None:
        """A span of a held trace ended (processor path), held until the decision unless ``keep_item`` is
        False (a root the span filter left out after all). True when it was the last open local root:
        the trace is to be decided now; None when the trace is not held (decided, or never held)."""
        held = self._traces.get(trace_id)
        if held is None:
            return None
        item = held.open.pop(span_id, None)
        if keep_item and item is not None:
            held.ended.append(item)  # _keep_ended's, inline: this runs on the application thread
            held.bytes += size
            self.runs += 1
            self.bytes += size
        roots = held.roots
        if span_id in roots:
            roots.discard(span_id)
            return not roots
        return False

    def add(self, trace_id: int, item: Any, size: int, now: float) -> Decision | None:
        """An ended span of a held (or newly held) trace (exporter path), kept until decided.

        A decision when the trace passes ``max_spans`` with it."""
        held = self._traces.get(trace_id)
        if held is None:
            held = self._traces[trace_id] = _Held(now)
        self._keep_ended(held, item, size)
        if len(held.ended) > self.max_spans:
            return self._decide(trace_id, False, "spans")
        return None

    def _keep_ended(self, held: _Held, item: Any, size: int) -> None:
        held.ended.append(item)
        held.bytes += size
        self.runs += 1
        self.bytes += size

    def decide(self, trace_id: int, keep: bool, reason: str) -> Decision | None:
        """Decide a held trace now; None if it is not held."""
        if trace_id not in self._traces:
            return None
        return self._decide(trace_id, keep, reason)

    def _decide(self, trace_id: int, keep: bool, reason: str) -> Decision:
        held = self._traces.pop(trace_id)
        self.runs -= len(held.ended)
        self.bytes -= held.bytes
        decided = self._decided
        decided[trace_id] = keep
        if len(decided) > _DECIDED_MAX:
            decided.popitem(last=False)
        return Decision(trace_id, keep, held.ended, list(held.open.values()), reason)

    def over_bytes(self, room: int = 0) -> list[Decision]:
        """Decide the oldest traces by the rate alone while the held bytes pass ``max_bytes - room``."""
        decisions: list[Decision] = []
        while self._traces and self.bytes > self.max_bytes - room:
            decisions.append(self._decide(next(iter(self._traces)), False, "bytes"))
        return decisions

    def expire(self, now: float, room: int = 0) -> list[Decision]:
        """Decide, by the rate alone, the traces held longer than ``max_s``, and the oldest ones
        while the held bytes pass ``max_bytes - room`` (``room``: what else already takes the budget)."""
        decisions: list[Decision] = []
        traces = self._traces
        while traces:
            trace_id, held = next(iter(traces.items()))
            if now - held.since < self.max_s:
                break
            decisions.append(self._decide(trace_id, False, "seconds"))
        decisions.extend(self.over_bytes(room))
        return decisions

    def close(self) -> list[Decision]:
        """Decide every held trace by the rate alone (shutdown)."""
        return [self._decide(trace_id, False, "shutdown") for trace_id in list(self._traces)]
