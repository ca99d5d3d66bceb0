"""The queue and the worker thread of the processor path.

Application threads only append ``(kind, span, ids)`` to a bounded deque and,
when a batch is ready, set an Event. The named daemon worker does the rest:
it converts spans to runs, merges a post with its patch when the span ended
before its post was sent, encodes, and hands batches to the transport.

Lifecycle: started in the constructor; woken by the Event or every schedule
delay; ``force_flush`` queues a flush request and waits for it; ``shutdown``
makes a last bounded attempt and reports what it gave up; after ``fork`` the
child gets an empty queue, a new worker and a new HTTP session, so nothing is
sent twice.

Two bounds keep memory in check: the queue of span operations (items,
``OTEL_BSP_MAX_QUEUE_SIZE``) and the encoded backlog awaiting delivery, which
also holds what failed and waits to be retried (bytes,
``OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES``). Past either, the newest are dropped and
counted.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from opentelemetry import context as otel_context

from ._convert import ConvertOptions, early_post_summary, patch_fields, span_to_run
from ._encode import EncodedRun, encode_run
from ._ids import RunIds
from ._logging import RateLimitedLog
from ._settings import Settings
from ._stats import Counters, ExporterStats
from ._transport import SendResult, Transport, suppressed_context

__all__ = ["Batcher"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

_MAX_PENDING_IDS = 100_000  # runs awaiting their patch; a span that never ends must not grow this forever


@dataclass
class _FlushRequest:
    deadline: float
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False


class Batcher:
    """Bounded queue + worker thread + delivery; the engine behind ``RunsSpanProcessor``."""

    def __init__(
        self,
        settings: Settings,
        *,
        transport_factory: Callable[[Settings, threading.Event], Transport] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._opts = ConvertOptions(session=settings.session, id_scheme=settings.id_scheme)
        self._transport_factory = transport_factory or (lambda s, wake: Transport(s, wake=wake))
        self._clock = clock
        self._counters = Counters()
        self._init_state()
        _register_fork_handler(self)
        self._start_worker()

    def _init_state(self) -> None:
        self._queue: deque[tuple[str, Any, RunIds]] = deque()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._flush_requests: list[_FlushRequest] = []
        self._backlog: deque[EncodedRun] = deque()
        self._backlog_bytes = 0
        self._early: dict[str, tuple[str, str, bool]] = {}
        self._merged: dict[str, None] = {}
        self._stopping = False
        self._stopped = False
        self._stop_deadline = 0.0
        self._transport = self._transport_factory(self._settings, self._wake)
        self._worker: threading.Thread | None = None

    def _start_worker(self) -> None:
        self._worker = threading.Thread(target=self._run, name="otel-runs-exporter", daemon=True)
        self._worker.start()

    def _after_fork_in_child(self) -> None:
        # The parent's queue is the parent's to send; the child starts clean.
        if self._stopping:
            return
        self._counters = Counters()
        self._init_state()
        self._start_worker()

    # --- application threads -----------------------------------------------------

    def submit(self, kind: str, span: Any, ids: RunIds) -> None:
        """Queue a span operation; never blocks, never raises."""
        if self._stopping:
            self._counters.drop("after_shutdown")
            return
        queue = self._queue
        if len(queue) >= self._settings.max_queue_size:
            self._counters.drop("queue_full")
            _rl.warning(
                "queue_full",
                "the run queue is full (%d); dropping new runs (raise OTEL_BSP_MAX_QUEUE_SIZE or check delivery)",
                self._settings.max_queue_size,
            )
            return
        queue.append((kind, span, ids))
        if len(queue) >= self._settings.max_export_batch_size and not self._wake.is_set():
            self._wake.set()

    def force_flush(self, timeout_s: float) -> bool:
        """Deliver everything queued so far; False when ``timeout_s`` runs out first or delivery failed."""
        if self._stopped or self._worker is None or not self._worker.is_alive():
            return not self._queue and not self._backlog
        request = _FlushRequest(self._clock() + timeout_s)
        with self._lock:
            self._flush_requests.append(request)
        self._wake.set()
        return request.done.wait(timeout_s) and request.ok

    def shutdown(self, timeout_s: float) -> None:
        """Last bounded delivery attempt; reports what it gave up in one log line."""
        if self._stopping:
            return
        self._stop_deadline = self._clock() + timeout_s
        self._stopping = True
        self._wake.set()
        worker = self._worker
        if worker is not None and worker.is_alive() and worker is not threading.current_thread():
            worker.join(timeout_s + 0.5)
        self._stopped = True
        left = len(self._queue) + len(self._backlog)
        if left:
            self._counters.drop("shutdown", left)
            runs = {ids.run_id for _, _, ids in self._queue} | {r.run_id for r in self._backlog}
            logger.warning(
                "shutdown: gave up %d runs (%d operations) that could not be delivered within %.1f s",
                len(runs),
                left,
                timeout_s,
            )
            self._queue.clear()
            self._backlog.clear()
        self._transport.close()

    def stats(self) -> ExporterStats:
        c = self._counters
        t = self._transport
        return ExporterStats(
            queued=len(self._queue) + len(self._backlog),
            sent=c.sent,
            completed=c.completed,
            retried=t.retried,
            failed=t.failed,
            requests=t.requests,
            dropped=c.dropped(),
        )

    @property
    def transport(self) -> Transport:
        return self._transport

    # --- the worker --------------------------------------------------------------

    def _run(self) -> None:
        otel_context.attach(suppressed_context())
        delay = self._settings.schedule_delay_s
        while True:
            self._wake.wait(delay)
            self._wake.clear()
            try:
                if self._stopping:
                    self._cycle(self._stop_deadline)
                    self._finish_flush_requests()
                    return
                with self._lock:
                    requests, self._flush_requests = self._flush_requests, []
                if requests:
                    deadline = min(r.deadline for r in requests)
                    ok = self._cycle(deadline)
                    for r in requests:
                        r.ok = ok
                        r.done.set()
                else:
                    self._cycle(self._clock() + self._settings.export_timeout_s)
            except Exception:  # noqa: BLE001 - the worker must survive any bug of ours
                logger.exception("unexpected error in the export worker; continuing")

    def _finish_flush_requests(self) -> None:
        with self._lock:
            requests, self._flush_requests = self._flush_requests, []
        for r in requests:
            r.ok = not self._queue and not self._backlog
            r.done.set()

    def _cycle(self, deadline: float) -> bool:
        """Convert what is queued and send it all; True when nothing is left."""
        self._convert_queued()
        while self._backlog:
            batch = self._take_batch()
            result = self._transport.send(batch, deadline)
            self._account(result)
            if result.retry:
                for run in reversed(result.retry):
                    self._backlog.appendleft(run)
                    self._backlog_bytes += run.size
                return False
            self._convert_queued()
        return not self._queue

    def _take_batch(self) -> list[EncodedRun]:
        batch: list[EncodedRun] = []
        size = 0
        max_items = self._settings.max_export_batch_size
        max_bytes = self._settings.max_batch_bytes
        backlog = self._backlog
        while backlog and len(batch) < max_items:
            run = backlog[0]
            if batch and size + run.size > max_bytes:
                break
            backlog.popleft()
            batch.append(run)
            size += run.size
        self._backlog_bytes -= size
        return batch

    def _account(self, result: SendResult) -> None:
        if result.delivered:
            self._counters.delivered(len(result.delivered), sum(1 for r in result.delivered if r.completes))
        for reason, runs in result.dropped.items():
            self._counters.drop(reason, len(runs))

    def _convert_queued(self) -> None:
        queue = self._queue
        cap = self._settings.max_queue_bytes
        while queue:
            kind, span, ids = queue.popleft()
            try:
                encoded = self._convert(kind, span, ids)
            except Exception:  # noqa: BLE001 - one bad span must not stop the others
                logger.exception("could not convert span %r; dropped", getattr(span, "name", "?"))
                self._counters.drop("convert_error")
                continue
            if encoded is None:
                continue
            if self._backlog_bytes + encoded.size > cap:
                self._counters.drop("queue_bytes_full")
                _rl.warning(
                    "queue_bytes_full",
                    "undelivered runs hold %d bytes, the cap (OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES); dropping new runs",
                    cap,
                )
                continue
            self._backlog.append(encoded)
            self._backlog_bytes += encoded.size

    def _convert(self, kind: str, span: Any, ids: RunIds) -> EncodedRun | None:
        limit = self._settings.max_value_chars
        if kind == "post":
            run = span_to_run(span, ids, self._opts)
            if span.end_time is not None:
                # Ended before its post left: one post carries the whole run, its patch is skipped.
                _bounded_put(self._merged, ids.run_id, None)
                return encode_run("post", run, limit, completes=True)
            _bounded_put(self._early, ids.run_id, early_post_summary(run))
            return encode_run("post", run, limit)
        if self._merged.pop(ids.run_id, 0) is None:
            return None
        early = self._early.pop(ids.run_id, None)
        full = span_to_run(span, ids, self._opts)
        if early is None:
            # Its post never went out (dropped while the queue was full): send the whole run.
            return encode_run("post", full, limit, completes=True)
        return encode_run("patch", patch_fields(full, early), limit, completes=True)


def _bounded_put(mapping: dict[str, Any], key: str, value: Any) -> None:
    if len(mapping) >= _MAX_PENDING_IDS:
        mapping.pop(next(iter(mapping)))
    mapping[key] = value


_batchers: "weakref.WeakSet[Batcher]" = weakref.WeakSet()


def _after_fork() -> None:
    for batcher in list(_batchers):
        batcher._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _register_fork_handler(batcher: Batcher) -> None:
    _batchers.add(batcher)
