"""``RunsSpanProcessor``: the preferred path.

``on_start`` links the span to its parent's node (known from the parent's own
``on_start``) and queues a post; ``on_end`` queues a patch. The run ids and
dotted_order are computed from those links on the worker thread.
Everything else happens on the worker thread (see ``_batcher``). Because ids are
fixed at start, a long-lived root (a server request span) is visible at the
service while it is still running, and children never wait for their parents.
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from typing import Any, Callable

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from ._batcher import Batcher
from ._convert import RunNode
from ._ids import RunIds
from ._logging import RateLimitedLog
from ._settings import Settings, resolve, warn_if_unusable
from ._stats import ExporterStats

__all__ = ["RunsSpanProcessor"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

_RECENT_MAX = 16_384  # ended spans remembered for children that start after their parent ended

# Hook for the propagator: given the parent context of a span whose parent is
# remote, return the remote run's ids (or None). Installed by the propagator module.
remote_parent_lookup: Callable[[Context | None], RunIds | None] | None = None

_live: "weakref.WeakSet[RunsSpanProcessor]" = weakref.WeakSet()


def run_ids_for(span_id: int) -> RunIds | None:
    """The run ids a live processor gave the span ``span_id`` (open or recently ended)."""
    for processor in list(_live):
        node = processor._open.get(span_id) or processor._recent.get(span_id)
        if node is not None:
            return node.resolve(processor._settings.id_scheme)
    return None


class RunsSpanProcessor(SpanProcessor):
    """Sends every sampled span to the service as a run, from a background thread.

    Keyword arguments override environment variables; see the README for the
    full list (``endpoint``, ``api_key``, ``project``, ``schedule_delay_s`` ...)::

        provider.add_span_processor(RunsSpanProcessor(project="my-app"))
    """

    def __init__(self, settings: Settings | None = None, **overrides: Any) -> None:
        self._settings = settings if settings is not None else resolve(overrides)
        warn_if_unusable(self._settings)
        self._open: dict[int, RunNode] = {}
        self._recent: OrderedDict[int, RunNode] = OrderedDict()
        self._batcher: Batcher | None = None if self._settings.disabled else Batcher(self._settings)
        if self._batcher is not None:
            _live.add(self)

    def __repr__(self) -> str:
        return f"RunsSpanProcessor(endpoint={self._settings.endpoint!r}, project={self._settings.project!r})"

    @property
    def settings(self) -> Settings:
        return self._settings

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        batcher = self._batcher
        if batcher is None:
            return
        try:
            ctx = span.get_span_context()
            if not ctx.trace_flags.sampled:
                return  # sampling keeps or drops whole traces; never export what was not sampled
            parent_node = remote = None
            parent = span.parent
            if parent is not None:
                key = parent.span_id
                parent_node = self._open.get(key) or self._recent.get(key)
                if parent_node is None and parent.is_remote and remote_parent_lookup is not None:
                    remote = remote_parent_lookup(parent_context)
            # Only a link to the parent here: ids are computed on the worker thread.
            node = RunNode(span, parent_node, remote)
            self._open[ctx.span_id] = node
            batcher.submit("post", span, node)
        except Exception:  # noqa: BLE001 - never raise into the application
            _rl.error("on_start", "could not record the start of span %r", getattr(span, "name", "?"), exc_info=True)

    def on_end(self, span: ReadableSpan) -> None:
        batcher = self._batcher
        if batcher is None:
            return
        try:
            span_id = span.context.span_id
            node = self._open.pop(span_id, None)
            if node is None:
                return  # not sampled, or started before this processor was added
            recent = self._recent
            recent[span_id] = node
            if len(recent) > _RECENT_MAX:
                try:
                    recent.popitem(last=False)
                except KeyError:
                    pass
            batcher.submit("patch", span, node)
        except Exception:  # noqa: BLE001
            _rl.error("on_end", "could not record the end of span %r", getattr(span, "name", "?"), exc_info=True)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Deliver what is queued; False if ``timeout_millis`` ran out first or delivery failed."""
        if self._batcher is None:
            return True
        return self._batcher.force_flush(timeout_millis / 1000.0)

    def shutdown(self, timeout_millis: int | None = None) -> None:
        """Final bounded delivery; by default bounded by ``OTEL_BSP_EXPORT_TIMEOUT``."""
        if self._batcher is None:
            return
        timeout_s = self._settings.export_timeout_s if timeout_millis is None else timeout_millis / 1000.0
        _live.discard(self)
        self._batcher.shutdown(timeout_s)

    def stats(self) -> ExporterStats:
        """A snapshot of what was queued, sent, retried and dropped."""
        if self._batcher is None:
            return ExporterStats()
        return self._batcher.stats()
