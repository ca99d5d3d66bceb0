"""``RunsSpanProcessor``: the preferred path.

``on_start`` links the span to its parent's node (known from the parent's own
``on_start``), keeps the span's ``langsmith.*`` id attributes as they are at
start, and queues a post; ``on_end`` queues a patch. The run ids and
dotted_order are computed from those on the worker thread; id attributes set
after the start are ignored (with one warning per process), since children may
already hold ids computed without them.
Everything else happens on the worker thread (see ``_worker``). Because ids are
fixed at start, a long-lived root (a server request span) is visible at the
service while it is still running, and children never wait for their parents.
"""

from __future__ import annotations

import logging
import sys
from collections import OrderedDict
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import TraceFlags

from . import _process_end, _registry, _sdk_bridge
from ._arguments import SettingsArguments, Unpack
from ._choice import Choice
from ._clock import SYSTEM_CLOCK, Clock
from ._convert import RunNode
from ._ids import RunIds
from ._logging import RateLimitedLog
from ._settings import Settings, check_usable, resolve_for_app, shown_url
from ._stats import ExporterStats
from ._worker import Worker

__all__ = ["RunsSpanProcessor"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

_SAMPLED = TraceFlags.SAMPLED
# A SpanContext is a tuple (the API's own definition); its fields read by index on the hot path,
# where each property read is a Python call (a test in tests/core/test_processor.py pins the layout).
_TRACE_ID, _SPAN_ID, _IS_REMOTE, _FLAGS = 0, 1, 2, 3
_RUN_HELPERS = "langsmith.run_helpers"  # the SDK module the bridge reads, never imported here
_RECENT_MAX = 16_384  # ended spans remembered for children that start after their parent ended
# Deeper ended runs are remembered apart, fewer of them: each holds its dotted_order, up to
# ~15 kB at _ids.MAX_DEPTH, so 16,384 of those would hold 250 MB. Two maps rather than a byte
# count: on_end runs on many app threads at once, and a shared counter would need a lock.
_RECENT_DEEP = 32  # runs deeper than this go to the second map (~2 kB of dotted_order)
_RECENT_DEEP_MAX = 1_024  # ~16 MB at the depth limit; the shallow map ~40 MB at most


class RunsSpanProcessor(SpanProcessor):
    """Sends every sampled span to the service as a run, from a background thread.

    Keyword arguments override environment variables; see docs/settings.md for the
    full list (``endpoint``, ``api_key``, ``project``, ``schedule_delay_s`` ...)::

        provider.add_span_processor(RunsSpanProcessor(project="my-app"))
    """

    def __init__(
        self, settings: Settings | None = None, *, clock: Clock = SYSTEM_CLOCK, **overrides: Unpack[SettingsArguments]
    ) -> None:
        """``clock`` is a seam for tests (a :class:`~otel_runs_exporter.testing.FakeClock` runs
        backoff and Retry-After waits without sleeping); leave it alone otherwise."""
        self._settings = settings if settings is not None else resolve_for_app(overrides)
        check_usable(self._settings)
        s = self._settings
        # Mixed trees with the langsmith SDK; off when it sends through OTel itself (we would see its runs twice).
        self._bridge = s.langsmith_bridge and not s.langsmith_otel_enabled and not s.disabled
        self._hooked: Any = None
        self._open: dict[int, RunNode] = {}
        self._recent: OrderedDict[int, RunNode] = OrderedDict()
        self._recent_deep: OrderedDict[int, RunNode] = OrderedDict()
        self._worker: Worker | None = None if self._settings.disabled else Worker(self._settings, clock=clock)
        # The span filter and tail sampling (_choice); None, and never asked, when every span is sent.
        self._choice = (
            Choice.for_settings(self._settings, self._worker, self._open, self._node)
            if self._worker is not None else None
        )
        if self._worker is not None:
            _registry.register(self)
            _process_end.watch(self._settings)  # multiprocessing children, SIGTERM (when asked)

    def __repr__(self) -> str:
        return f"RunsSpanProcessor(endpoint={shown_url(self._settings.endpoint)!r}, project={self._settings.project!r})"

    @property
    def settings(self) -> Settings:
        return self._settings

    def run_ids(self, span_id: int) -> RunIds | None:
        """The run ids this processor gave the open or recently ended span ``span_id``, or None.

        ``project`` is always filled in for a named project: whoever nests a run under
        this one (the langsmith SDK bridge) must put it in the same project, and None
        would leave it to pick its own.
        """
        batcher = self._worker
        node = self._node(span_id)
        ids = None
        if self._choice is not None:
            # A span left out hands on its nearest kept ancestor's run (or the remote run above it).
            node, ids = self._choice.handed_on(span_id, node)
        if batcher is None:
            return None
        if node is not None:
            try:
                ids = node.resolve(batcher.options.id_scheme)
            except Exception:  # noqa: BLE001 - asked from the app thread (an outgoing request's header)
                # A start time no calendar holds (year 10000: ns taken for us): the worker counts the
                # run as convert_error; whoever asked goes on without its ids.
                _rl.warning("run_ids", "could not compute the run ids of span %#x; it is not handed on", span_id,
                            exc_info=True)
                return None
        if ids is None:
            return None
        if ids.project is None and ids.project_id is None and not self._settings.project_id:
            ids = ids._replace(project=self._settings.project)
        return ids

    def _node(self, span_id: int) -> RunNode | None:
        """The node of an open or recently ended run of this processor."""
        return self._open.get(span_id) or self._recent.get(span_id) or self._recent_deep.get(span_id)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        batcher = self._worker
        if batcher is None:
            return
        try:
            ctx: Any  # a SpanContext, read by index
            parent: Any
            try:
                # The SDK's own fields: get_span_context() and .parent are Python calls.
                ctx, parent = span._context, span._parent
            except AttributeError:
                ctx, parent = span.get_span_context(), span.parent
            if not ctx[_FLAGS] & _SAMPLED:  # the flag itself: ``.sampled`` is a Python property
                return  # sampling keeps or drops whole traces; never export what was not sampled
            choice = self._choice
            sdk = self._sdk_run() if self._bridge and _RUN_HELPERS in sys.modules else None
            if sdk is None and choice is not None and choice.lean and choice.hold_start(span, ctx, parent_context):
                return  # held with its trace, or sampled out: no node yet, maybe never
            parent_node = remote = None
            if parent is not None:
                key = parent[_SPAN_ID]
                # _node's lookup, written out: this runs for every span, and the call would cost ~70 ns.
                parent_node = self._open.get(key) or self._recent.get(key) or self._recent_deep.get(key)
                if parent_node is None and choice is not None:
                    parent_node, remote = choice.spliced(key)  # a parent left out: its nearest kept ancestor
                if parent_node is None and parent[_IS_REMOTE]:
                    remote = _registry.remote_run(parent_context)
            if sdk is not None:
                # The SDK's current run, when it is nested deeper than the span's OTel parent.
                here = parent_node.resolve(batcher.options.id_scheme) if parent_node is not None else remote
                if _sdk_bridge.innermost(here, sdk) is sdk:
                    parent_node, remote = None, sdk
            if choice is not None:
                kept = choice.started(span, ctx[_SPAN_ID], ctx[_TRACE_ID], parent_node, remote)
                if kept is not None:
                    self._open[ctx[_SPAN_ID]] = kept
                return
            # Only a link to the parent here: ids are computed on the worker thread.
            node = RunNode(span, parent_node, remote)
            if batcher.post(span, node):
                self._open[ctx[_SPAN_ID]] = node
            # else dropped at the byte bound (counted): the span has no run, its children start their own trees
        except Exception:  # noqa: BLE001 - never raise into the application
            _rl.error("on_start", "could not record the start of span %r", getattr(span, "name", "?"), exc_info=True)

    def _sdk_run(self) -> RunIds | None:
        """The langsmith SDK's current run, when the app uses the SDK alongside (the bridge)."""
        run_helpers = sys.modules.get(_RUN_HELPERS)  # never imports it
        if run_helpers is None:
            return None
        if self._hooked is not run_helpers:
            # First span since the app imported the SDK: let its runs nest under ours too.
            _sdk_bridge.install_parent_hook(run_helpers)
            self._hooked = run_helpers
        return _sdk_bridge.current_sdk_run(run_helpers)

    def on_end(self, span: ReadableSpan) -> None:
        batcher = self._worker
        if batcher is None:
            return
        try:
            ctx: Any  # a SpanContext, read by index
            try:
                ctx = span._context
            except AttributeError:
                ctx = span.context
            span_id = ctx[_SPAN_ID]
            node = self._open.pop(span_id, None)
            choice = self._choice
            if node is None:
                # Not sampled, started before this processor was added, dropped at its start, left out,
                # held, or sampled out; or held, and its trace kept as it ran (a node made at the keep).
                node = choice.ended_without_run(span, ctx) if choice is not None else None
                if node is None:
                    return
            elif choice is not None and not choice.ended(span, node):
                return  # left out, or sampled out
            ids = node.ids
            if (ids.depth if ids is not None else node.depth) <= _RECENT_DEEP:
                recent, most = self._recent, _RECENT_MAX
            else:
                recent, most = self._recent_deep, _RECENT_DEEP_MAX
            recent[span_id] = node
            if len(recent) > most:
                try:
                    recent.popitem(last=False)
                except KeyError:
                    pass
            batcher.end(span, node)
        except Exception:  # noqa: BLE001
            _rl.error("on_end", "could not record the end of span %r", getattr(span, "name", "?"), exc_info=True)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Deliver what is queued, retrying through failures until ``timeout_millis``.

        False if the time ran out first, or if runs were dropped (a refused key,
        a rejected run, ...) or spooled instead of delivered; ``stats()`` says which.
        """
        if self._worker is None:
            return True
        if self._choice is not None:
            self._choice.expire()
        return self._worker.force_flush(timeout_millis / 1000.0)

    def shutdown(self, timeout_millis: int | None = None) -> None:
        """Final bounded delivery; by default bounded by ``OTEL_BSP_EXPORT_TIMEOUT``."""
        if self._worker is None:
            return
        timeout_s = self._settings.export_timeout_s if timeout_millis is None else timeout_millis / 1000.0
        _registry.unregister(self)
        if self._choice is not None:
            self._choice.close()
        self._worker.shutdown(timeout_s)

    def stats(self) -> ExporterStats:
        """A snapshot of what was queued, sent, retried and dropped."""
        if self._worker is None:
            return ExporterStats()
        return self._worker.stats()
