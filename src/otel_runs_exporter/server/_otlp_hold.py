"""Where OTLP spans wait for their parents: the local service's side of the exporter path's hold.

An OTLP exporter sends a span when it ends, so a child nearly always comes before its
parent, often in another request. A run's ``dotted_order`` needs its parent's, so a span
whose parent is not known waits here, bounded by count, bytes and time (``otlp_hold_*``,
30 s by default, like the exporter path's ``hold_max_s``). When its parent's ids become
known, it and every span waiting under it are placed; past a bound, or at shutdown, the
span at the top of a waiting chain is placed as the root of its own tree (the converter
writes its OTel parent ids into its metadata), never dropped.

A parent is known when it was placed here (the ids of placed spans are remembered,
bounded like the exporter's), or when the caller found its run in the store: the caller
asks :meth:`OtlpHold.unknown_parents` before :meth:`~OtlpHold.place`, and
:meth:`~OtlpHold.due_parents` before :meth:`~OtlpHold.release`, so the store is read outside this module and a service restarted, or a second one on the same database,
still nests a child under a parent stored by the other.

Placement follows the exporter's (``RunsSpanExporter._place``): a span with no parent is
a root; a span whose parent is remote and unknown starts its tree here at once; a span
whose parent chain among the waiting spans comes back to it (a parent cycle, which no SDK
makes) is placed as a root at once, with a warning, rather than wait for ever.

Not thread-safe: the caller holds :attr:`OtlpHold.lock` around a request's calls.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .._convert import given_ids, span_ids
from .._ids import SCHEMES, RunIds
from ._otlp_decode import OtlpSpan

__all__ = ["OtlpHold", "Key", "Placed", "OTLP_SCHEME"]

Key = tuple[int, int]
"""``(trace id, span id)`` of a span, as its children name it."""
OTLP_SCHEME = SCHEMES["otlp"]
"""Run ids from OTLP spans: the service's own rule (the span id), as ``RunsSpanExporter(id_scheme="otlp")`` makes them."""

# Remembered ids, as the exporter bounds its own (_exporter._RESOLVED_MAX, _RESOLVED_MAX_BYTES): a dotted_order
# each, up to ~15 kB at the depth limit. A child whose parent was forgotten finds it in the store instead.
_RESOLVED_MAX = 100_000
_RESOLVED_MAX_BYTES = 32 * 1024 * 1024
_RESOLVED_ENTRY_BYTES = 430


@dataclass
class Placed:
    """Spans placed, with their run ids; spans refused (why); spans placed otherwise than asked (why)."""

    ready: list[tuple[OtlpSpan, RunIds]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class OtlpHold:
    """Spans waiting for their parents, and the ids of the spans placed; bounded by count, bytes and time."""

    def __init__(self, max_s: float = 30.0, max_spans: int = 10_000, max_bytes: int = 64 * 1024 * 1024) -> None:
        if max_s <= 0 or max_spans < 1 or max_bytes < 1:
            raise ValueError("otlp_hold_s must be above 0, otlp_hold_spans and otlp_hold_bytes at least 1")
        self.max_s, self.max_spans, self.max_bytes = max_s, max_spans, max_bytes
        self.lock = threading.Lock()
        self._resolved: OrderedDict[Key, RunIds] = OrderedDict()
        self._resolved_bytes = 0
        self._held: dict[Key, dict[int, OtlpSpan]] = {}  # parent key -> span id -> waiting child
        self._order: deque[tuple[Key, int, float]] = deque()  # (parent key, span id, since), oldest first
        self._held_parent: dict[Key, Key] = {}  # waiting span -> its parent
        self.held = 0
        self.held_bytes = 0
        self.orphaned = 0
        """Spans placed as roots because their parent never came within the bounds (or the service stopped)."""

    def unknown_parents(self, spans: Iterable[OtlpSpan]) -> set[Key]:
        """The parents of ``spans`` that are neither placed here, nor waiting here, nor among ``spans``."""
        spans = list(spans)
        among = {span.key for span in spans}
        return {
            key
            for span in spans
            if span.parent is not None
            and (key := (span.context.trace_id, span.parent.span_id)) not in among
            and key not in self._resolved
            and key not in self._held_parent
        }

    def place(self, spans: Iterable[OtlpSpan], stored: Mapping[Key, RunIds], now: float) -> Placed:
        """Place what can be placed (parents first), hold the rest; ``stored`` are parents found in the store."""
        placed = Placed()
        for span in spans:
            parent = span.parent
            if parent is None:
                self._resolve(span, None, placed)
                continue
            key = (span.context.trace_id, parent.span_id)
            known = self._resolved.get(key) or stored.get(key)
            if known is not None:
                self._resolve(span, known, placed)
            elif parent.is_remote and key not in self._held:
                self._resolve(span, None, placed)  # its parent is in another process: its tree starts here
            elif self._loops(span.key, key):
                placed.warnings.append(
                    f"span {span.context.span_id:016x}'s parent chain comes back to it (a parent cycle); "
                    "it was stored as the root of its own tree"
                )
                self._resolve(span, None, placed)
            else:
                waiting = self._held.setdefault(key, {})
                again = waiting.get(span.context.span_id)
                if again is None:
                    self._order.append((key, span.context.span_id, now))
                    self.held += 1
                else:
                    self.held_bytes -= again.size  # a retried request: the span waits once, in its first place in line
                waiting[span.context.span_id] = span
                self._held_parent[span.key] = key
                self.held_bytes += span.size
        return placed

    def due_parents(self, now: float, everything: bool = False) -> set[Key]:
        """The parents of the spans :meth:`release` would place now: for the caller to look up in the store first."""
        over = self.held > self.max_spans or self.held_bytes > self.max_bytes
        out = set()
        for key, span_id, since in self._order:
            if not (everything or over or now - since >= self.max_s):
                break
            if span_id in self._held.get(key, ()):
                out.add(self._top(key, span_id)[1])
        return out

    def release(self, now: float, stored: Mapping[Key, RunIds], placed: Placed, everything: bool = False) -> None:
        """Place the spans past a bound (all of them when ``everything``), each the top of its waiting chain, with
        the spans waiting under it: under its parent when ``stored`` has it, else as the root of its own tree."""
        order = self._order
        while order:
            key, span_id, since = order[0]
            waiting = self._held.get(key)
            if waiting is None or span_id not in waiting:
                order.popleft()  # placed meanwhile, through its parent
                continue
            over = self.held > self.max_spans or self.held_bytes > self.max_bytes
            if not (everything or over or now - since >= self.max_s):
                break
            # The top of the chain, so the spans under it keep their places.
            span_id, key = self._top(key, span_id)
            waiting = self._held[key]
            span = waiting.pop(span_id)
            if not waiting:
                del self._held[key]
            self.held -= 1
            self.held_bytes -= span.size
            parent = stored.get(key)
            if parent is None:
                self.orphaned += 1
            self._resolve(span, parent, placed)

    def _top(self, key: Key, span_id: int) -> tuple[int, Key]:
        """The span at the top of the waiting chain above ``span_id`` (waiting under ``key``), and its parent's key."""
        while key in self._held_parent:
            span_id, key = key[1], self._held_parent[key]
        return span_id, key

    def _loops(self, own: Key, parent: Key) -> bool:
        """Whether the chain of waiting spans above ``parent`` reaches the span ``own`` (or goes round)."""
        seen = set()
        key: Key | None = parent
        while key is not None and key not in seen:
            if key == own:
                return True
            seen.add(key)
            key = self._held_parent.get(key)
        return key is not None

    def _resolve(self, span: OtlpSpan, parent: RunIds | None, placed: Placed) -> None:
        # Iterative, parents before children, so a deep tree cannot hit the recursion limit.
        stack: list[tuple[OtlpSpan, RunIds | None]] = [(span, parent)]
        while stack:
            current, above = stack.pop()
            key = current.key
            self._held_parent.pop(key, None)
            try:
                ids = span_ids(current, above, OTLP_SCHEME, given_ids(current.attributes))
            except Exception as exc:  # noqa: BLE001 - one span that cannot be placed must not fail the others
                # Its waiting children are placed as roots later, when the hold ends.
                placed.rejected.append(f"{current!r} could not be placed ({type(exc).__name__}: {str(exc)[:200]})")
                continue
            placed.ready.append((current, ids))
            self._remember(key, ids)
            children = self._held.pop(key, None)
            if children:
                self.held -= len(children)
                self.held_bytes -= sum(child.size for child in children.values())
                stack.extend((child, ids) for child in children.values())

    def _remember(self, key: Key, ids: RunIds) -> None:
        resolved = self._resolved
        old = resolved.pop(key, None)
        if old is not None:
            self._resolved_bytes -= _RESOLVED_ENTRY_BYTES + len(old.dotted_order)
        resolved[key] = ids
        self._resolved_bytes += _RESOLVED_ENTRY_BYTES + len(ids.dotted_order)
        while len(resolved) > _RESOLVED_MAX or self._resolved_bytes > _RESOLVED_MAX_BYTES:
            _, gone = resolved.popitem(last=False)
            self._resolved_bytes -= _RESOLVED_ENTRY_BYTES + len(gone.dotted_order)

