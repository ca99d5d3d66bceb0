"""The processor path's span filter and tail sampling: what ``on_start`` and ``on_end`` ask when one is on.

``RunsSpanProcessor`` keeps none of this when ``spans=all``, nothing is blocked,
there is no ``should_export`` and ``sample_rate`` is 1: then its hooks are never
called. The rules are ``_select``'s; this module applies them where the
processor decides, at span start, from the span as it is then.

**Splicing.** A span left out has no run, but its children must not be left
without a parent: the span's place (its nearest kept ancestor's node, or the
remote run it hangs under) is remembered under its span id, and a child whose
parent is not a run takes that place instead (:meth:`Choice.spliced`), so its
``parent_run_id``, ``trace_id`` and ``dotted_order`` come from that ancestor.
The ``runs`` propagator and the langsmith SDK bridge ask the same way.

**Waiting roots** (``spans=genai``). A root that is not a GenAI span is a run
only if a descendant is kept. Its node exists (children link to it) but its
post waits: the first kept descendant to start queues it, just before its own
post (:meth:`Choice.started`), and a root that ends with none is left out.
Handing its run to another process (the propagator) keeps it too. The state
of each waiting root moves under one lock, so a child that starts as its root
ends is placed under it only if it is sent, else under the root's own parent.

**Holding traces** (``sample_rate`` below 1). A trace the rate keeps flows as
any other, early posts included. One it does not is held (``_hold``): its
runs get nodes but no early post, and its ended spans wait, unconverted, until
an error or a slow run keeps it (everything held is queued at once, the
trace's open runs as early posts) or its last local root ends (sampled out).
Queued under the same lock as the decision, so a run's post is always queued
before its end.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from ._convert import RunNode
from ._fork import renew_in_child
from ._hold import BOUNDS, Decision, span_bytes
from ._ids import RunIds
from ._select import KEEP, ROOT, SKIP, SpanFilter, TailRule
from ._settings import Settings
from ._worker import Worker

__all__ = ["Choice"]

_NOWHERE: tuple[RunNode | None, RunIds | None] = (None, None)
# Left-out spans remembered after they end, for children that start later (as the processor's _recent).
_ENDED_MAX = 16_384


class _Waiting:
    """A root waiting for a kept descendant: its span, the remote run it hangs under, and where it stands."""

    __slots__ = ("span", "remote", "state")

    WAITING = 0
    KEPT = 1  # a kept descendant (or a propagated child) came: it is a run
    LEFT_OUT = 2  # it ended with none: its children go where it would have gone
    REFUSED = 3  # its post was refused at the byte bound (counted there)

    def __init__(self, span: Any, remote: RunIds | None) -> None:
        self.span = span
        self.remote = remote
        self.state = _Waiting.WAITING


class Choice:
    """The span filter and the trace hold of one processor; built by :meth:`for_settings`."""

    def __init__(self, settings: Settings, worker: Worker) -> None:
        self._worker = worker
        self._filter = SpanFilter.from_settings(settings)
        self._tail = TailRule.from_settings(settings)
        self._lock = threading.Lock()
        # span id of a left-out span -> the place its children take (kept ancestor's node, remote run)
        self._skipped: dict[int, tuple[RunNode | None, RunIds | None]] = {}
        self._skipped_ended: OrderedDict[int, tuple[RunNode | None, RunIds | None]] = OrderedDict()
        self._waiting: dict[RunNode, _Waiting] = {}
        self._left_out: OrderedDict[RunNode, _Waiting] = OrderedDict()  # roots left out, for late children
        # Open runs of a kept trace whose early post was refused at the byte bound (counted there):
        # like a span refused at its start, their end is not queued.
        self._refused: set[RunNode] = set()
        renew_in_child(self)

    @classmethod
    def for_settings(cls, settings: Settings, worker: Worker) -> "Choice | None":
        """None when every span is a run and every trace is sent: the processor then asks nothing."""
        if SpanFilter.from_settings(settings) is None and TailRule.from_settings(settings) is None:
            return None
        return cls(settings, worker)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    # --- on_start -------------------------------------------------------------------

    def spliced(self, span_id: int) -> tuple[RunNode | None, RunIds | None]:
        """The place a child of ``span_id`` takes when that span was left out; (None, None) otherwise."""
        return self._skipped.get(span_id) or self._skipped_ended.get(span_id) or _NOWHERE

    def started(self, span: Any, span_id: int, trace_id: int, parent: RunNode | None, remote: RunIds | None) -> RunNode | None:
        """Decide a starting span; its node for the processor to keep, or None when it has no run.

        ``parent``/``remote``: where the processor placed it (after splicing and the SDK bridge).
        """
        verdict = KEEP if self._filter is None else self._filter.verdict(span)
        if verdict == SKIP or (verdict == ROOT and parent is not None):
            # Left out: its children take its place, under its nearest kept ancestor.
            self._skipped[span_id] = (parent, remote)
            return None
        if parent is not None and (self._waiting or self._left_out):
            entry = self._waiting.get(parent) or self._left_out.get(parent)
            if entry is not None and not self._keep_waiting(entry, parent):
                parent, remote = None, entry.remote  # its root was left out: this run starts the tree here
        node = RunNode(span, parent, remote)
        if verdict == ROOT:
            self._waiting[node] = _Waiting(span, remote)
            self._hold_start(span, span_id, trace_id, node, root=True, post=False)
            return node
        return node if self._hold_start(span, span_id, trace_id, node, root=parent is None, post=True) else None

    def _keep_waiting(self, entry: _Waiting, node: RunNode) -> bool:
        """A kept run is about to hang under a waiting root: queue the root's post first. False when the
        root is not a run (left out, or refused), so the child must hang where the root would have."""
        if entry.state == _Waiting.WAITING:
            with self._lock:
                if entry.state == _Waiting.WAITING:
                    if self._post_now(entry.span.get_span_context().trace_id):
                        # Refused at the byte bound (counted there), it stays here, so its end is not queued either.
                        sent = self._worker.submit("post", entry.span, node)
                        entry.state = _Waiting.KEPT if sent else _Waiting.REFUSED
                    else:
                        entry.state = _Waiting.KEPT  # held with its trace: its end is held, or sampled out
                    if entry.state == _Waiting.KEPT:
                        self._waiting.pop(node, None)
        return entry.state == _Waiting.KEPT

    def _post_now(self, trace_id: int) -> bool:
        """Whether a run of this trace is posted at once (else it is held, or its trace was dropped)."""
        tail = self._tail
        if tail is None or tail.rate_keeps(trace_id):
            return True
        hold = self._worker.hold
        return hold is not None and hold.decision(trace_id) is True

    def _hold_start(self, span: Any, span_id: int, trace_id: int, node: RunNode, root: bool, post: bool) -> bool:
        """Queue the run's early post (``post``), or hold it with its trace. False: refused at the byte bound."""
        tail = self._tail
        if tail is None or tail.rate_keeps(trace_id):
            return self._worker.submit("post", span, node) if post else True
        hold = self._worker.hold
        if hold is None or not tail.can_rescue:
            return True  # dropped by the rate, and nothing could keep it: sampled out at its end
        with self._lock:
            decided = hold.decision(trace_id)
            if decided is True:
                return self._worker.submit("post", span, node) if post else True
            if decided is None:
                decision = hold.start(trace_id, span_id, (span, node), root, time.monotonic())
                if decision is not None:
                    self._apply(decision)
        return True

    # --- on_end ---------------------------------------------------------------------

    def ended_without_run(self, span: Any) -> None:
        """A span with no node ended: one left out is counted, and remembered for late children."""
        span_id = span.context.span_id
        place = self._skipped.pop(span_id, None)
        if place is None:
            return  # not sampled, started before the processor, or refused at the door (counted there)
        ended = self._skipped_ended
        ended[span_id] = place
        if len(ended) > _ENDED_MAX:
            ended.popitem(last=False)
        self._worker.ledger.filtered()

    def ended(self, span: Any, node: RunNode) -> bool:
        """A span with a node ended: True when its end is to be queued now (the processor's patch)."""
        if self._waiting:
            entry = self._waiting.get(node)
            if entry is not None and self._leave_out(entry, node):
                return False
        if self._refused and node in self._refused:
            self._refused.discard(node)
            return False
        tail = self._tail
        if tail is None:
            return True
        ctx = span.context
        trace_id = ctx.trace_id
        if tail.rate_keeps(trace_id):
            return True
        ledger = self._worker.ledger
        hold = self._worker.hold
        if hold is None or not tail.can_rescue:
            ledger.sampled_out()
            return False
        why = tail.rescues(span)
        size = span_bytes(span)
        with self._lock:
            decided = hold.decision(trace_id)
            if decided is not None or not hold.holds(trace_id):
                if decided is True:
                    return True
                ledger.sampled_out()  # its trace was decided without it (or before this processor knew it)
                return False
            last_root = hold.end(trace_id, ctx.span_id, size)
            ledger.hold()
            if why is not None:
                decision = hold.decide(trace_id, True, why)
            else:
                decision = hold.decide(trace_id, False, "root") if last_root else None
            if decision is not None:
                self._apply(decision)
            for expired in hold.expire(time.monotonic()):
                self._apply(expired)
        return False

    def _leave_out(self, entry: _Waiting, node: RunNode) -> bool:
        """A waiting root ended: with no kept descendant it is left out (True); else it is a run (False)."""
        with self._lock:
            if entry.state == _Waiting.KEPT:
                return False
            self._waiting.pop(node, None)
            left = self._left_out
            left[node] = entry  # for children that start after it ended
            if len(left) > _ENDED_MAX:
                left.popitem(last=False)
            if entry.state == _Waiting.REFUSED:
                return True  # counted as dropped when its post was refused
            entry.state = _Waiting.LEFT_OUT
            self._worker.ledger.filtered()
            hold = self._worker.hold
            ctx = entry.span.get_span_context()
            if hold is not None and hold.holds(ctx.trace_id) and hold.end(ctx.trace_id, ctx.span_id, 0, keep_item=False):
                decision = hold.decide(ctx.trace_id, False, "root")
                if decision is not None:
                    self._apply(decision)
            return True

    # --- decisions ------------------------------------------------------------------

    def _apply(self, decision: Decision) -> None:
        """Count a held trace's decision, and queue it when kept. Called under the lock."""
        worker = self._worker
        worker.ledger.decided(len(decision.ended), decision.keep, decision.reason if decision.reason in BOUNDS else None)
        if not decision.keep:
            return  # open runs of the trace are sampled out at their end
        for span, node in decision.open:
            # Early, as their held children are about to arrive under them; a root still waiting is
            # posted when a kept descendant comes.
            if node not in self._waiting and not worker.submit("post", span, node):
                self._refused.add(node)
        # Parents first: a run whose post never went out goes whole, with its end.
        for span, node in sorted(decision.ended, key=lambda item: item[0].start_time or 0):
            worker.submit("patch", span, node)

    def handed_on(self, span_id: int, node: RunNode | None) -> tuple[RunNode | None, RunIds | None]:
        """The run a child of ``span_id`` in another process (or of the langsmith SDK) hangs under.

        A left-out span hands on its place; a waiting root is kept, since its run now has a child.
        """
        if node is None:
            node, remote = self.spliced(span_id)
            if node is None:
                return None, remote
        entry = self._waiting.get(node) or self._left_out.get(node)
        if entry is not None and not self._keep_waiting(entry, node):
            return None, entry.remote
        return node, None

    def expire(self) -> None:
        """Decide the held traces past their time bound (a flush of an otherwise idle app)."""
        hold = self._worker.hold
        if hold is not None and len(hold):
            with self._lock:
                for decision in hold.expire(time.monotonic()):
                    self._apply(decision)

    def close(self) -> None:
        """At shutdown every held trace is decided by the rate alone."""
        hold = self._worker.hold
        if hold is not None and len(hold):
            with self._lock:
                for decision in hold.close():
                    self._apply(decision)
