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
before its end. A span of a trace already sampled out, or that nothing could
keep (``keep_errors`` off and no slowness rule), gets no node at all.
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


def _remember(ended: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """Keep ``value`` for what starts after it ended, the oldest forgotten past ``_ENDED_MAX``."""
    ended[key] = value
    if len(ended) > _ENDED_MAX:
        ended.popitem(last=False)


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
        # Nodes of held runs that ended, then of kept ones, by span id, for children that start later.
        # The processor does not remember these: a node of a run never converted keeps its span alive,
        # which for a trace sampled out would be memory held past its decision.
        self._held_nodes: dict[int, RunNode] = {}
        self._kept_ended: OrderedDict[int, RunNode] = OrderedDict()
        self._ended = 0  # held runs ended, to look at the hold's ages every so many
        renew_in_child(self)

    @classmethod
    def for_settings(cls, settings: Settings, worker: Worker) -> "Choice | None":
        """None when every span is a run and every trace is sent: the processor then asks nothing."""
        if SpanFilter.from_settings(settings) is None and TailRule.from_settings(settings) is None:
            return None
        return cls(settings, worker)

    def _after_fork_in_child(self) -> None:
        # The worker's hold starts empty in the child (the parent's held runs are the parent's to send).
        self._lock = threading.Lock()
        self._held_nodes.clear()
        self._refused.clear()

    # --- on_start -------------------------------------------------------------------

    def spliced(self, span_id: int) -> tuple[RunNode | None, RunIds | None]:
        """Where a child of ``span_id`` goes when the processor does not know that span as a run:
        a left-out span's place, or a held (or just kept) run that ended; (None, None) otherwise."""
        place = self._skipped.get(span_id) or self._skipped_ended.get(span_id)
        if place is not None:
            return place
        node = self._held_nodes.get(span_id) or self._kept_ended.get(span_id)
        return (node, None) if node is not None else _NOWHERE

    def started(self, span: Any, span_id: int, trace_id: int, parent: RunNode | None, remote: RunIds | None) -> RunNode | None:
        """Decide a starting span; its node for the processor to keep, or None when it has no run.

        ``parent``/``remote``: where the processor placed it (after splicing and the SDK bridge).
        """
        verdict = KEEP if self._filter is None else self._filter.verdict(span)
        if verdict == SKIP or (verdict == ROOT and parent is not None):
            # Left out: its children take its place, under its nearest kept ancestor.
            self._skipped[span_id] = (parent, remote)
            return None
        tail = self._tail
        # Held: a trace the rate does not keep, which an error or a slow run may still keep.
        held = tail is not None and not tail.rate_keeps(trace_id)
        if held and self._out(trace_id):
            return None  # its trace is not sent: no node, no work (sampled out at its end)
        if parent is not None and (self._waiting or self._left_out):
            entry = self._waiting.get(parent) or self._left_out.get(parent)
            if entry is not None and not self._keep_waiting(entry, parent):
                parent, remote = None, entry.remote  # its root was left out: this run starts the tree here
        node = RunNode(span, parent, remote)
        root = verdict == ROOT
        if root:
            self._waiting[node] = _Waiting(span, remote)  # its post waits for a kept descendant
        if not held:
            return node if root or self._worker.submit("post", span, node) else None
        hold = self._worker.hold
        assert hold is not None  # made with the tail rule, from the same setting
        with self._lock:
            decided = hold.decision(trace_id)
            if decided is None:
                decision = hold.start(trace_id, span_id, (span, node, span_id), root or parent is None)
                if decision is not None:
                    self._apply(decision)
            elif decided and not root and not self._worker.submit("post", span, node):
                return None  # kept meanwhile, and refused at the byte bound (counted there)
        return node

    def _out(self, trace_id: int) -> bool:
        """For a trace the rate does not keep: whether it is sure not to be sent (nothing could keep it,
        or it was decided)."""
        assert self._tail is not None
        hold = self._worker.hold
        return hold is None or not self._tail.can_rescue or hold.decision(trace_id) is False

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

    # --- on_end ---------------------------------------------------------------------

    def ended_without_run(self, span: Any) -> None:
        """A span with no node ended: one left out or sampled out at its start is counted."""
        ctx = span.context
        span_id = ctx.span_id
        place = self._skipped.pop(span_id, None)
        if place is not None:
            _remember(self._skipped_ended, span_id, place)
            self._worker.ledger.filtered()
            return
        tail = self._tail
        if tail is not None and ctx.trace_flags.sampled and not tail.rate_keeps(ctx.trace_id) and self._out(ctx.trace_id):
            self._worker.ledger.sampled_out()
        # else: not sampled, started before the processor, or refused at the door (counted there)

    def ended(self, span: Any, node: RunNode) -> bool:
        """A span with a node ended: True when it is a run to remember and whose end is queued now
        (the processor's patch); False when it is left out, held, or sampled out."""
        if self._waiting:
            entry = self._waiting.get(node)
            if entry is not None and self._leave_out(entry, node, span.context.span_id):
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
        hold = self._worker.hold
        assert hold is not None  # made with the tail rule, from the same setting
        span_id = ctx.span_id
        events = span.events
        why = tail.rescues(span, events)
        size = span_bytes(span, events)
        with self._lock:
            last_root = hold.end(trace_id, span_id, size)
            if last_root is None:  # its trace was decided without it
                if hold.decision(trace_id) is True:
                    return True
                self._worker.ledger.sampled_out()
                return False
            self._held_nodes[span_id] = node
            if why is not None or last_root:
                self._apply(hold.decide(trace_id, why is not None, why or "root"))
            self._ended += 1
            if not self._ended & 255 or hold.bytes > hold.max_bytes:
                # Ages are looked at every 256 ends (and at each flush): the bound is minutes.
                for expired in hold.expire(time.monotonic()):
                    self._apply(expired)
        return False

    def _leave_out(self, entry: _Waiting, node: RunNode, span_id: int) -> bool:
        """A waiting root ended: with no kept descendant it is left out (True); else it is a run (False)."""
        with self._lock:
            if entry.state == _Waiting.KEPT:
                return False
            self._waiting.pop(node, None)
            # For children that start after it ended: those that found its node, and those that will not.
            _remember(self._left_out, node, entry)
            _remember(self._skipped_ended, span_id, (None, entry.remote))
            if entry.state == _Waiting.REFUSED:
                return True  # counted as dropped when its post was refused
            entry.state = _Waiting.LEFT_OUT
            self._worker.ledger.filtered()
            hold = self._worker.hold
            trace_id = entry.span.get_span_context().trace_id
            if hold is not None and hold.holds(trace_id) and hold.end(trace_id, span_id, 0, keep_item=False):
                decision = hold.decide(trace_id, False, "root")
                if decision is not None:
                    self._apply(decision)
            return True

    # --- decisions ------------------------------------------------------------------

    def _apply(self, decision: Decision | None) -> None:
        """Count a held trace's decision, and queue it when kept. Called under the lock."""
        if decision is None:
            return
        worker = self._worker
        held_nodes = self._held_nodes
        worker.ledger.decided(len(decision.ended), decision.keep, decision.reason if decision.reason in BOUNDS else None)
        if not decision.keep:
            for _, _, span_id in decision.ended:
                held_nodes.pop(span_id, None)
            return  # open runs of the trace are sampled out at their end
        for span, node, _ in decision.open:
            # Early, as their held children are about to arrive under them; a root still waiting is
            # posted when a kept descendant comes.
            if node not in self._waiting and not worker.submit("post", span, node):
                self._refused.add(node)
        # Parents first: a run whose post never went out goes whole, with its end.
        for span, node, span_id in sorted(decision.ended, key=lambda item: item[0].start_time or 0):
            worker.submit("patch", span, node)
            held_nodes.pop(span_id, None)
            _remember(self._kept_ended, span_id, node)

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
