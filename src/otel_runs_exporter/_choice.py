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
Handing its run to another process keeps it too: through the propagator, or
by forking inside it (the child inherits the forking thread's context, and
what it keeps there this process never sees). In a forked child, the roots
it inherited still waiting are the parent's to decide: they stand left out,
so a run the child keeps under one starts its own tree. The state
of each waiting root moves under one lock, so a child that starts as its root
ends is placed under it only if it is sent, else under the root's own parent.

**Holding traces** (``sample_rate`` below 1). A trace the rate keeps flows as
any other, early posts included. One it does not is held (``_hold``): its
spans wait, as the spans they are (``_HeldSpan``), with no early post and
nothing converted, until an error or a slow run keeps it (everything held is
queued at once, the trace's open runs as early posts) or its last local root
ends (sampled out). A held span gets its node (its place in the run tree) only
when something needs it: its trace is kept, a child's place or its run id is
asked for (the propagator), or the span filter placed it at its start. Most
held traces are sampled out, so most held spans never get one: holding a span
costs the application thread little more than the hold's own entries.
Decisions, and the nodes they make, are taken under one lock, so a run's post
is always queued before its end, and a span that ends as its trace is kept
finds the node the keep gave it. A span of a trace already sampled out, or
that nothing could keep (``keep_errors`` off and no slowness rule), gets no
node and no entry at all.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context

from . import _registry
from ._convert import RunNode, given_ids
from ._fork import prepare_in_parent, renew_in_child
from ._hold import BOUNDS, Decision, span_bytes
from ._ids import GivenIds, RunIds
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


# A span of a held trace, as the hold keeps it: (span, span id, the remote run it hangs under, its
# ``langsmith.*`` ids as they were at its start), what placing it later needs. A tuple: one is made per
# held span on the application thread. Its node, once made, is in Choice._made.
_HeldSpan = tuple[Any, int, RunIds | None, GivenIds | None]


class Choice:
    """The span filter and the trace hold of one processor; built by :meth:`for_settings`.

    ``nodes``: the processor's open runs by span id, where a held span's node goes
    when its trace is decided while it runs (its end is then the processor's, as
    any run's); ``find``: the processor's own node for a span id, if any.
    """

    def __init__(self, settings: Settings, worker: Worker, nodes: dict[int, RunNode],
                 find: Callable[[int], RunNode | None]) -> None:
        self._worker = worker
        self._nodes = nodes
        self._find = find
        self._filter = SpanFilter.from_settings(settings)
        self._tail = TailRule.from_settings(settings)
        # With no span filter, a held span needs nothing at its start but its entry (hold_start).
        self.lean = self._filter is None and self._tail is not None
        self._lock = threading.Lock()
        # span id of a left-out span -> the place its children take (kept ancestor's node, remote run)
        self._skipped: dict[int, tuple[RunNode | None, RunIds | None]] = {}
        self._skipped_ended: OrderedDict[int, tuple[RunNode | None, RunIds | None]] = OrderedDict()
        self._waiting: dict[RunNode, _Waiting] = {}
        self._left_out: OrderedDict[RunNode, _Waiting] = OrderedDict()  # roots left out, for late children
        # Open runs of a kept trace whose early post was refused at the byte bound (counted there):
        # like a span refused at its start, their end is not queued.
        self._refused: set[RunNode] = set()
        # The spans of held traces, open or ended, by span id, until their trace is decided, and the
        # nodes made for some of them (a held span gets one only when something needs it).
        self._held: dict[int, _HeldSpan] = {}
        self._made: dict[int, RunNode] = {}
        # Nodes of held runs kept after they ended, by span id, for children that start later.
        self._kept_ended: OrderedDict[int, RunNode] = OrderedDict()
        self._ended = 0  # held runs ended, to look at the hold's ages every so many
        renew_in_child(self)
        prepare_in_parent(self)

    @classmethod
    def for_settings(cls, settings: Settings, worker: Worker, nodes: dict[int, RunNode],
                     find: Callable[[int], RunNode | None]) -> "Choice | None":
        """None when every span is a run and every trace is sent: the processor then asks nothing."""
        if SpanFilter.from_settings(settings) is None and TailRule.from_settings(settings) is None:
            return None
        return cls(settings, worker, nodes, find)

    def _before_fork(self) -> None:
        # The child runs on in this thread's context, and may keep a run under the root waiting
        # there; only this process can post that root and end it, so it is kept now.
        if self._waiting:
            span_id = trace.get_current_span().get_span_context().span_id
            if span_id:
                self.handed_on(span_id, self._find(span_id))

    def _after_fork_in_child(self) -> None:
        # The worker's hold starts empty in the child (the parent's held runs are the parent's to send).
        self._lock = threading.Lock()
        self._held.clear()
        self._made.clear()
        self._refused.clear()
        # Roots still waiting are the parent's to post or leave out, and it never learns what the
        # child keeps: here they stand left out, as _leave_out leaves one (not counted: the parent
        # counts its own), and a child that ends one (unwinding what it was forked in) sends nothing.
        for node, entry in self._waiting.items():
            entry.state = _Waiting.LEFT_OUT
            span = entry.span  # None only if the fork came in the middle of _leave_out
            span_id = span.get_span_context().span_id if span is not None else None
            self._remember_left_out(node, entry, span_id)
            if span_id is not None:
                self._nodes.pop(span_id, None)
        self._waiting.clear()

    # --- on_start -------------------------------------------------------------------

    def hold_start(self, span: Any, ctx: Any, parent_context: Context | None) -> bool:
        """The processor's first question when there is no span filter: True when this span is
        the hold's (held with its trace, or sampled out, counted at its end), False when its trace
        is sent and the processor places it as any other.

        A held span gets an entry and nothing else: no node, no parent looked up.
        """
        tail = self._tail
        assert tail is not None  # lean: made with a tail rule
        trace_id = ctx.trace_id
        if tail.rate_keeps(trace_id):
            return False
        hold = self._worker.hold
        assert hold is not None  # made with the tail rule, from the same setting
        decided = hold.decision(trace_id)
        if decided is not None or not tail.can_rescue:
            return decided is not True
        parent = span.parent
        span_id = ctx.span_id
        remote = _registry.remote_run(parent_context) if parent is not None and parent.is_remote else None
        item = (span, span_id, remote, given_ids(span.attributes))
        held = self._held
        with self._lock:
            decided = hold.decision(trace_id)
            if decided is None:
                held[span_id] = item
                # A local root: no parent here (a remote one, or none); its trace is decided when the last ends.
                decision = hold.start(trace_id, span_id, item, parent is None or parent.span_id not in held)
                if decision is not None:
                    self._apply(decision)
                return True
        return decided is False

    def spliced(self, span_id: int) -> tuple[RunNode | None, RunIds | None]:
        """Where a child of ``span_id`` goes when the processor does not know that span as a run:
        a left-out span's place, a held span (given its node now), or a held run kept after it ended;
        (None, None) otherwise."""
        item = self._held.get(span_id)
        if item is not None:
            with self._lock:
                return self._place(item), None
        return self._known(span_id)

    def _known(self, span_id: int) -> tuple[RunNode | None, RunIds | None]:
        """What stands for ``span_id`` outside the hold: a left-out span's place, a held run kept after
        it ended, or the processor's own node."""
        place = self._skipped.get(span_id) or self._skipped_ended.get(span_id)
        if place is not None:
            return place
        node = self._kept_ended.get(span_id) or self._find(span_id)
        return (node, None) if node is not None else _NOWHERE

    def _place(self, item: _HeldSpan) -> RunNode:
        """The node of a held span, made now if it has none (with those of its held ancestors that have
        none). Under the lock, so two threads never give one span two nodes (two runs)."""
        made = self._made
        node: RunNode | None = None
        chain: list[_HeldSpan] = []
        found: _HeldSpan | None = item
        while found is not None:
            node = made.get(found[1])
            if node is not None:
                break
            chain.append(found)
            parent = found[0].parent
            found = self._held.get(parent.span_id) if parent is not None and found[2] is None else None
        for span, span_id, remote, given in reversed(chain):  # from the highest ancestor without one down
            parent_node = node
            if parent_node is None and remote is None and span.parent is not None:
                parent_node, remote = self._known(span.parent.span_id)
            node = made[span_id] = RunNode(span, parent_node, remote, given=given)
        assert node is not None
        return node

    def started(self, span: Any, span_id: int, trace_id: int, parent: RunNode | None, remote: RunIds | None) -> RunNode | None:
        """Decide a starting span; its node for the processor to keep, or None when it has no run
        (left out, refused, or held: then the hold keeps it).

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
            entry = self._root_entry(parent)
            if entry is not None and not self._keep_waiting(entry, parent):
                parent, remote = None, entry.remote  # its root was left out: this run starts the tree here
        node = RunNode(span, parent, remote)
        root = verdict == ROOT
        if root:
            self._waiting[node] = _Waiting(span, remote)  # its post waits for a kept descendant
        if not held:
            return node if root or self._worker.post(span, node) else None
        hold = self._worker.hold
        assert hold is not None  # made with the tail rule, from the same setting
        with self._lock:
            decided = hold.decision(trace_id)
            if decided is None:
                # Placed now (the filter's rules need its parent's node), held as any span of its trace.
                item = self._held[span_id] = (span, span_id, remote, node.given)
                self._made[span_id] = node
                self._apply(hold.start(trace_id, span_id, item, root or parent is None))
                return None
            if decided and not root and not self._worker.post(span, node):
                return None  # kept meanwhile, and refused at the byte bound (counted there)
        return node

    def _out(self, trace_id: int) -> bool:
        """For a trace the rate does not keep: whether it is sure not to be sent (nothing could keep it,
        or it was decided)."""
        assert self._tail is not None
        hold = self._worker.hold
        return hold is None or not self._tail.can_rescue or hold.decision(trace_id) is False

    def _root_entry(self, node: RunNode) -> _Waiting | None:
        """The entry of the root whose node this is, when it waits or was left out; None otherwise.

        A root left out so long ago that its entry was forgotten (past ``_ENDED_MAX``) is still known:
        its node let go of its span and never got ids. It stands left out, so nothing hangs under it.
        """
        entry = self._waiting.get(node) or self._left_out.get(node)
        if entry is None and node.span is None and node.ids is None:
            entry = _Waiting(None, node.remote)
            entry.state = _Waiting.LEFT_OUT
        return entry

    def _keep_waiting(self, entry: _Waiting, node: RunNode) -> bool:
        """A kept run is about to hang under a waiting root: queue the root's post first. False when the
        root is not a run (left out, or refused), so the child must hang where the root would have."""
        if entry.state == _Waiting.WAITING:
            with self._lock:
                if entry.state == _Waiting.WAITING:
                    if self._post_now(entry.span.get_span_context().trace_id):
                        # Refused at the byte bound (counted there), it stays here, so its end is not queued either.
                        sent = self._worker.post(entry.span, node)
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

    def ended_without_run(self, span: Any, ctx: Any) -> RunNode | None:
        """A span the processor has no node for ended (``ctx``: its context): one left out, held or
        sampled out is settled here. A node when its trace was kept while it ran: the node the keep
        gave it, whose end the processor queues as any run's."""
        span_id = ctx.span_id
        trace_id = ctx.trace_id
        if span_id in self._held and not self._held_ended(span, trace_id, span_id):
            return None  # the commonest case under sampling first: held, and still undecided
        if self._skipped:
            place = self._skipped.pop(span_id, None)
            if place is not None:
                _remember(self._skipped_ended, span_id, place)
                self._worker.ledger.filtered()
                return None
        tail = self._tail
        if tail is None or not ctx.trace_flags.sampled or tail.rate_keeps(trace_id):
            return None  # not sampled, started before the processor, or refused at the door (counted there)
        hold = self._worker.hold
        assert hold is not None  # made with the tail rule, from the same setting
        decided = hold.decision(trace_id)  # set before a decision takes its spans from the hold
        if decided is not None:
            # A decision taken while this span ran may have handed its node to the processor, under
            # this lock, after the processor looked: kept, its end is queued; not, it is counted.
            with self._lock:
                node = self._nodes.pop(span_id, None)
            if node is not None:
                return node if self.ended(span, node) else None
        if decided is False or (decided is None and not tail.can_rescue):
            self._worker.ledger.sampled_out()
        # else: a kept trace's span with no run (refused at its start, counted there), or one never held
        return None

    def _held_ended(self, span: Any, trace_id: int, span_id: int) -> bool:
        """A held span ended: it waits with its trace, or decides it (an error, a slow run, its last
        root). True only when its trace was decided while it ran: the caller settles it then, as any
        span of a decided trace."""
        if self._waiting:
            node = self._made.get(span_id)  # a waiting root got its node at its start
            if node is not None:
                entry = self._waiting.get(node)
                if entry is not None and self._leave_out(entry, node, span_id):
                    return False
        tail = self._tail
        hold = self._worker.hold
        assert tail is not None and hold is not None  # held only with a tail rule
        events = span.events
        why = tail.rescues(span, events)
        size = span_bytes(span, events)
        with self._lock:
            last_root = hold.end(trace_id, span_id, size)
            if last_root is None:  # its trace was decided while it ran (the decision took its entries)
                return True
            if why is not None or last_root:
                self._apply(hold.decide(trace_id, why is not None, why or "root"))
            self._ended += 1
            if not self._ended & 255 or hold.bytes > hold.max_bytes:
                # Ages are looked at every 256 ends (and at each flush): the bound is minutes.
                for expired in hold.expire(time.monotonic()):
                    self._apply(expired)
        return False

    def ended(self, span: Any, node: RunNode) -> bool:
        """A span with a node ended: True when it is a run to remember and whose end is queued now
        (the processor's patch); False when it is left out, or sampled out."""
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
        trace_id = span.context.trace_id
        hold = self._worker.hold
        if tail.rate_keeps(trace_id) or (hold is not None and hold.decision(trace_id) is True):
            return True
        self._worker.ledger.sampled_out()  # its trace was decided, not to be sent, while it ran
        return False

    def _leave_out(self, entry: _Waiting, node: RunNode, span_id: int) -> bool:
        """A waiting root ended: with no kept descendant it is left out (True); else it is a run (False)."""
        with self._lock:
            if entry.state == _Waiting.KEPT:
                return False
            # Remembered before it leaves _waiting: a child starting meanwhile looks there without the lock.
            span = entry.span
            self._remember_left_out(node, entry, span_id)
            self._waiting.pop(node, None)
            self._held.pop(span_id, None)
            self._made.pop(span_id, None)
            if entry.state == _Waiting.REFUSED:
                return True  # counted as dropped when its post was refused
            entry.state = _Waiting.LEFT_OUT
            self._worker.ledger.filtered()
            hold = self._worker.hold
            trace_id = span.get_span_context().trace_id
            if hold is not None and hold.holds(trace_id) and hold.end(trace_id, span_id, 0, keep_item=False):
                decision = hold.decide(trace_id, False, "root")
                if decision is not None:
                    self._apply(decision)
            return True

    def _remember_left_out(self, node: RunNode, entry: _Waiting, span_id: int | None) -> None:
        """What a root left out leaves, for children that start after: those that found its node
        (its entry), and those that will not (its place by span id). Remembered as a key and a remote
        run only: it is never a run, so neither its entry nor its node may keep the SDK's span alive
        (~3 KB each, 16,384 of them, a walk for the collector)."""
        _remember(self._left_out, node, entry)
        if span_id is not None:
            _remember(self._skipped_ended, span_id, (None, entry.remote))
        entry.span = node.span = None

    # --- decisions ------------------------------------------------------------------

    def _apply(self, decision: Decision | None) -> None:
        """Count a held trace's decision, and queue it when kept. Called under the lock."""
        if decision is None:
            return
        worker = self._worker
        held = self._held
        worker.ledger.decided(len(decision.ended), decision.keep, decision.reason if decision.reason in BOUNDS else None)
        opened: list[_HeldSpan] = decision.open
        ended: list[_HeldSpan] = decision.ended
        items = opened + ended
        made = self._made
        # Nodes before the entries go: kept, every span gets one (a parent may be any of them);
        # not, an open span that has one (a waiting root's) hands it to the processor.
        nodes = [self._place(item) for item in items] if decision.keep else []
        handed = [] if decision.keep or not made else [(span_id, made[span_id]) for _, span_id, _, _ in opened if span_id in made]
        for _, span_id, _, _ in items:
            held.pop(span_id, None)
        if made:  # empty but for spans placed early (the span filter's, or asked for): most traces
            for _, span_id, _, _ in items:
                made.pop(span_id, None)
        if not decision.keep:
            for span_id, node in handed:
                self._nodes[span_id] = node  # its end is the processor's, counted as sampled out
            return
        for (span, span_id, _, _), node in zip(opened, nodes):
            # Early, as their held children are about to arrive under them; a root still waiting is
            # posted when a kept descendant comes. Their end is the processor's, as any run's.
            self._nodes[span_id] = node
            if node not in self._waiting and not worker.post(span, node):
                self._refused.add(node)
        # Parents first: a run whose post never went out goes whole, with its end.
        for (span, span_id, _, _), node in sorted(zip(ended, nodes[len(opened):]), key=lambda pair: pair[0][0].start_time or 0):
            worker.end(span, node)
            _remember(self._kept_ended, span_id, node)

    def handed_on(self, span_id: int, node: RunNode | None) -> tuple[RunNode | None, RunIds | None]:
        """The run a child of ``span_id`` in another process (or of the langsmith SDK) hangs under.

        A left-out span hands on its place; a waiting root is kept, since its run now has a child.
        """
        if node is None:
            node, remote = self.spliced(span_id)
            if node is None:
                return None, remote
        entry = self._root_entry(node)
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
