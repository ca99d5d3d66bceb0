"""The queue and the worker thread of the processor path.

Application threads only append ``(kind, span, node)`` to a bounded deque and,
when a batch is ready, set an Event. The named daemon worker does the rest:
it converts spans to runs, merges a post with its patch when the span ended
before its post was sent, encodes, and hands batches to the transport.

Lifecycle: started in the constructor; woken by the Event or every schedule
delay; ``force_flush`` queues a flush request and waits for it; ``shutdown``
makes a last bounded attempt and reports what it gave up; after ``fork`` the
child gets an empty queue, a new worker and a new HTTP session, so nothing is
sent twice.

Memory is bounded twice: the queue of span operations in items
(``OTEL_BSP_MAX_QUEUE_SIZE``), and everything waiting in bytes
(``OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES``): the queued operations at an estimated
size each plus the encoded backlog awaiting delivery (which also holds what
failed and waits to be retried) at its exact size. Past either bound the newest
are dropped and counted.
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

from ._convert import ConvertOptions, RunNode, early_post_summary, patch_fields, span_to_run
from ._delivery import Delivery
from ._encode import EncodedRun, encode_run
from ._logging import RateLimitedLog
from ._settings import Settings
from ._stats import Counters, ExporterStats
from ._transport import Transport, suppressed_context

__all__ = ["Batcher"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

_MAX_PENDING_IDS = 100_000
_YIELD_EVERY_S = 0.002
# What one queued span operation holds in memory, estimated: a small SDK span with
# its ReadableSpan measured ~3.1 KB for its two operations (tracemalloc, SDK 1.45).
# The estimate keeps the hot path to one multiplication; payload strings are
# counted exactly once encoded.
_OP_BYTES = 1600  # runs awaiting their patch; a span that never ends must not grow this forever


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
        self._opts = ConvertOptions.from_settings(settings)
        self._transport_factory = transport_factory or (lambda s, wake: Transport(s, wake=wake))
        self._clock = clock
        self._counters = Counters()
        self._init_state()
        _register_fork_handler(self)
        self._start_worker()

    def _init_state(self) -> None:
        self._queue: deque[tuple[str, Any, RunNode]] = deque()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._flush_requests: list[_FlushRequest] = []
        self._early: dict[str, tuple[str, str, bool]] = {}
        self._merged: dict[str, None] = {}
        self._stopping = False
        self._stopped = False
        self._stop_deadline = 0.0
        self._transport = self._transport_factory(self._settings, self._wake)
        self._delivery = Delivery(self._settings, self._transport, lambda: self._counters, self._clock)
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

    def submit(self, kind: str, span: Any, node: RunNode) -> None:
        """Queue a span operation; never blocks, never raises."""
        if self._stopping:
            self._counters.drop("after_shutdown")
            return
        queue = self._queue
        settings = self._settings
        waiting = len(queue)
        # A refused post is not counted: its patch, if admitted, sends the whole run
        # (see _convert); a refused patch is, so each lost run is counted once.
        if waiting >= settings.max_queue_size:
            if kind == "patch":
                self._counters.drop("queue_full")
            _rl.warning(
                "queue_full",
                "the run queue is full (%d); dropping new runs (raise OTEL_BSP_MAX_QUEUE_SIZE or check delivery)",
                settings.max_queue_size,
            )
            return
        if (waiting + 1) * _OP_BYTES + self._delivery.bytes_held > settings.max_queue_bytes:
            # One budget for memory: spans waiting to be converted (estimated) plus
            # encoded runs waiting to be sent (exact) stay under the byte cap.
            if kind == "patch":
                self._counters.drop("queue_bytes_full")
            _rl.warning(
                "queue_bytes_full",
                "runs waiting for delivery hold about %d bytes, the cap (OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES); "
                "dropping new runs",
                settings.max_queue_bytes,
            )
            return
        queue.append((kind, span, node))
        if len(queue) >= self._settings.max_export_batch_size and not self._wake.is_set():
            self._wake.set()

    def force_flush(self, timeout_s: float) -> bool:
        """Deliver everything queued so far; False when ``timeout_s`` runs out first or delivery failed."""
        if self._stopped or self._worker is None or not self._worker.is_alive():
            return not self._queue and not len(self._delivery)
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
        left = len(self._queue) + len(self._delivery)
        if left:
            # Only when the worker did not finish (stuck in a request past the timeout).
            runs = {node.resolve(self._settings.id_scheme).run_id for _, _, node in self._queue}
            runs |= self._delivery.run_ids()
            self._counters.drop("shutdown", left)
            logger.warning(
                "shutdown: gave up %d runs (%d operations) that could not be delivered within %.1f s",
                len(runs),
                left,
                timeout_s,
            )
            self._queue.clear()
            self._delivery.clear()
        self._transport.close()

    def stats(self) -> ExporterStats:
        c = self._counters
        t = self._transport
        return ExporterStats(
            queued=len(self._queue) + len(self._delivery),
            sent=c.sent,
            completed=c.completed,
            spooled=c.spooled,
            replayed=c.replayed,
            retried=t.retried,
            failed=t.failed,
            requests=t.requests,
            dropped=c.dropped(),
        )

    # --- the worker --------------------------------------------------------------

    def _run(self) -> None:
        otel_context.attach(suppressed_context())
        delay = self._settings.schedule_delay_s
        while True:
            self._wake.wait(delay)
            self._wake.clear()
            try:
                if self._stopping:
                    if not self._cycle(self._stop_deadline):
                        self._spool_leftovers()
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
            r.ok = not self._queue and not len(self._delivery)
            r.done.set()

    def _spool_leftovers(self) -> None:
        """At shutdown, what could not be delivered goes to the spool (when there is one)."""
        if self._delivery.spool is None:
            return
        self._convert_queued(everything=True)
        runs = self._delivery.run_ids()
        spooled = self._delivery.spool_everything()
        if spooled:
            logger.warning(
                "shutdown: %d runs (%d operations) could not be delivered in time; written to the spool at %s "
                "for the next process to send",
                len(runs),
                spooled,
                self._delivery.spool.dir,
            )

    def _cycle(self, deadline: float) -> bool:
        """Convert what is queued and send it all; True when nothing is left."""
        self._convert_queued()
        batch = self._settings.max_export_batch_size
        busy = lambda: len(self._queue) >= batch  # noqa: E731
        return self._delivery.deliver(deadline, between=self._convert_queued, busy=busy) and not self._queue

    def _convert_queued(self, everything: bool = False) -> None:
        """Convert up to one batch of queued operations (all of them with ``everything``).

        Bounded so that a producer faster than conversion cannot keep the worker
        converting forever without sending.
        """
        queue = self._queue
        budget = len(queue) if everything else min(len(queue), self._settings.max_export_batch_size)
        last_yield = time.perf_counter()
        for _ in range(budget):
            kind, span, node = queue.popleft()
            try:
                encoded = self._convert(kind, span, node.resolve(self._settings.id_scheme))
            except Exception:  # noqa: BLE001 - one bad span must not stop the others
                logger.exception("could not convert span %r; dropped", getattr(span, "name", "?"))
                self._counters.drop("convert_error")
                continue
            if encoded is not None and not self._delivery.add(encoded) and not encoded.completes:
                # The early post did not fit: forget it, so the patch goes out as a whole post.
                self._early.pop(encoded.run_id, None)
            now = time.perf_counter()
            if now - last_yield > _YIELD_EVERY_S:
                # Let application threads waiting for the GIL in, instead of after the
                # 5 ms switch interval (their p99). Not after every span: under a
                # producer that never pauses, each yield costs the worker a whole
                # switch interval, and per-span yields starved sending entirely.
                time.sleep(0)
                last_yield = time.perf_counter()

    def _convert(self, kind: str, span: Any, ids: Any) -> EncodedRun | None:
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
