"""One contender, one workload, one mode: run in a fresh process by ``run.py``.

    python bench/contenders.py --contender ours-processor --workload genai-deep-8 \\
        --spans 4000 --sink http://127.0.0.1:PORT --mode throughput

prints one JSON line with the measurements. A fresh process per run keeps the
OTel global state, langsmith's client and its threads, and RSS from leaking
between contenders.

Contenders (``CONTENDERS``):

* ``floor``            SDK ``TracerProvider`` with no span processor;
* ``otlp``             ``BatchSpanProcessor`` + ``OTLPSpanExporter`` (HTTP/protobuf) to ``/otel/v1/traces``;
* ``langsmith``        langsmith ``RunTree`` post()/end()/patch() per span, multipart, compression off;
* ``langsmith-zstd``   the same with langsmith's run compression (zstd) on;
* ``ours-processor``   ``RunsSpanProcessor``;
* ``ours-processor-mypyc``  the same, with the compiled modules (``run.py`` builds them and puts them on
  ``PYTHONPATH``; refuses to run if the pure ones are imported instead);
* ``ours-exporter``    ``BatchSpanProcessor`` + ``RunsSpanExporter``.

Modes:

* ``throughput``  producers trace as fast as they can; per-span app-thread time
  (start + end, perf_counter_ns on the producer thread while the pipeline
  runs), process CPU until the sink has every span, sink bytes;
* ``latency``     one producer at low load (a trace every ``--interval`` s), no
  flush: the sink measures span end to arrival;
* ``memory``      sink down (503), a burst of spans, peak RSS growth over the idle
  process; then the sink comes back and what was held is delivered and counted.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import threading
import time
import urllib.request
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from workloads import SPANS_PER_TRACE, Variant, Workload, plan, variants  # noqa: E402

CONTENDERS = ("floor", "otlp", "langsmith", "langsmith-zstd", "ours-processor", "ours-processor-mypyc", "ours-exporter")
COMPILED = "ours-processor-mypyc"
DELIVERING = tuple(c for c in CONTENDERS if c != "floor")


def _sink(url: str, path: str, timeout: float = 120.0) -> dict:
    method = "POST" if path.startswith("/_bench/reset") else "GET"
    req = urllib.request.Request(url + path, data=b"" if method == "POST" else None, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"{}")


def _rss_kb(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak_rss() -> bool:
    # Linux >= 4.0: writing 5 to clear_refs resets VmHWM, so the peak we read is the burst's.
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class Tracing:
    """A contender's two operations, ``start(parent, i) -> handle`` and ``end(handle, i)``, plus flush."""

    def __init__(self, name: str, sink: str, mode: str, spans: int, cap_bytes: int | None) -> None:
        self.name = name
        self.sink = sink
        self.provider: Any = None
        self.processor: Any = None
        self.client: Any = None
        self.pool: list[Variant] = []
        if name.startswith("langsmith"):
            self._setup_langsmith(name, sink)
        else:
            self._setup_otel(name, sink, mode, spans, cap_bytes)

    # --- OTel contenders ---------------------------------------------------------

    def _setup_otel(self, name: str, sink: str, mode: str, spans: int, cap_bytes: int | None) -> None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import set_span_in_context

        # Throughput runs size every queue to hold the whole run, so no contender's
        # drop policy hides work (each must deliver every span); the latency and
        # memory runs keep each contender's defaults, which is what users get.
        throughput = mode == "throughput"
        bsp_kw: dict[str, Any] = {"max_queue_size": spans + 1024} if throughput else {}
        provider = TracerProvider()
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=sink + "/otel/v1/traces"), **bsp_kw))
        elif name in ("ours-processor", COMPILED):
            import otel_runs_exporter
            from otel_runs_exporter import RunsSpanProcessor

            if name == COMPILED and not otel_runs_exporter.build_info()["compiled"]:
                # A figure labelled compiled must not come from the pure modules.
                raise SystemExit(f"{name}: the compiled modules are not the ones imported: {otel_runs_exporter.build_info()}")

            kw: dict[str, Any] = {"endpoint": sink, "api_key": "x"}
            if throughput:
                kw["max_queue_size"] = 2 * spans + 1024  # two operations (start, end) a span
            if cap_bytes:
                kw["max_queue_bytes"] = cap_bytes
            self.processor = RunsSpanProcessor(**kw)
            provider.add_span_processor(self.processor)
        elif name == "ours-exporter":
            from otel_runs_exporter import RunsSpanExporter

            kw = {"endpoint": sink, "api_key": "x"}
            if cap_bytes:
                kw["max_queue_bytes"] = cap_bytes
            self.processor = RunsSpanExporter(**kw)
            provider.add_span_processor(BatchSpanProcessor(self.processor, **bsp_kw))
        elif name != "floor":
            raise ValueError(f"unknown contender {name!r}")
        self.provider = provider
        tracer = provider.get_tracer("bench")
        start_span = tracer.start_span
        in_context = set_span_in_context

        def start(parent: Any, v: Variant) -> Any:
            ctx = None if parent is None else in_context(parent)
            return start_span(v.name, context=ctx, attributes=v.start_attrs)

        def end(span: Any, v: Variant) -> None:
            span.set_attributes(v.end_attrs)
            span.end()

        self.start: Callable[[Any, Variant], Any] = start
        self.end: Callable[[Any, Variant], None] = end

    # --- langsmith ----------------------------------------------------------------

    def _setup_langsmith(self, name: str, sink: str) -> None:
        # Read by langsmith's tracing thread when it starts: must be set before the Client.
        if name == "langsmith":
            os.environ["LANGSMITH_DISABLE_RUN_COMPRESSION"] = "true"
        else:
            os.environ.pop("LANGSMITH_DISABLE_RUN_COMPRESSION", None)
        os.environ.pop("LANGSMITH_OTEL_ENABLED", None)
        from langsmith import Client
        from langsmith.run_trees import RunTree

        client = Client(api_url=sink, api_key="x")
        self.client = client

        def start(parent: Any, v: Variant) -> Any:
            # What @traceable / trace() do per call: a RunTree, posted at start.
            if parent is None:
                rt = RunTree(
                    name=v.name,
                    run_type=v.run_type,
                    inputs=v.ls_inputs,
                    extra={"metadata": v.ls_metadata},
                    project_name="default",
                    ls_client=client,
                )
            else:
                rt = parent.create_child(v.name, v.run_type, inputs=v.ls_inputs, extra={"metadata": v.ls_metadata})
            rt.post()
            return rt

        def end(rt: Any, v: Variant) -> None:
            rt.end(outputs=v.ls_outputs)
            rt.patch()

        self.start = start
        self.end = end

    # --- common ---------------------------------------------------------------------

    def flush(self, timeout_s: float = 60.0) -> None:
        if self.client is not None:
            self.client.flush(timeout=timeout_s)
        elif self.provider is not None:
            self.provider.force_flush(int(timeout_s * 1000))

    def stats(self) -> dict | None:
        if self.processor is not None and hasattr(self.processor, "stats"):
            s = self.processor.stats()
            # `completed` (an alias of `delivered` since the ledger) reads the same on older trees (--src).
            return {"queued": s.queued, "sent": s.sent, "completed": s.completed, "dropped": dict(s.dropped), "requests": s.requests}
        return None


def _trace_many(t: Tracing, shape: str, pool: list[Variant], first: int, traces: int, out: list[int] | None) -> None:
    """Trace ``traces`` trees; append each span's start+end app-thread time (ns) to ``out``."""
    ops = plan(shape)
    n = SPANS_PER_TRACE[shape]
    start, end = t.start, t.end
    pc = time.perf_counter_ns
    npool = len(pool)
    for k in range(first, first + traces):
        handles: list[Any] = [None] * n
        spent = [0] * n
        stack: list[Any] = []
        base = k * n
        for op, i in ops:
            v = pool[(base + i) % npool]
            if op == "start":
                parent = stack[-1] if stack else None
                t0 = pc()
                h = start(parent, v)
                t1 = pc()
                spent[i] = t1 - t0
                handles[i] = h
                stack.append(h)
            else:
                h = stack.pop()
                t0 = pc()
                end(h, v)
                t1 = pc()
                spent[i] += t1 - t0
        if out is not None:
            out.extend(spent)


WARMUP_SPANS = 200  # --warmup; the smoke run uses fewer


def _warm_up(t: Tracing, wl: Workload, pool: list[Variant], sink: str) -> None:
    # Not measured: first connection, langsmith's GET /info, lazily built state,
    # and enough spans for allocator pools and caches to reach their steady state.
    n = wl.spans_per_trace
    traces = max(1, WARMUP_SPANS // n)
    _trace_many(t, wl.shape, pool, 0, traces, None)
    t.flush()
    if t.name != "floor":
        _sink(sink, f"/_bench/wait?n={traces * n}&timeout=30")


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _waker(stop: threading.Event, lateness: list[float]) -> None:
    """Another thread of the app: sleeps 1 ms, over and over; how late it wakes is what the pipeline costs it.

    Started once the producers are done, while the pipeline delivers what they queued.
    """
    while not stop.is_set():
        t0 = time.perf_counter()
        time.sleep(0.001)
        lateness.append(time.perf_counter() - t0 - 0.001)


def throughput(t: Tracing, wl: Workload, spans: int, sink: str, waker: bool = False) -> dict:
    pool = variants(wl.payload)
    n = wl.spans_per_trace
    _warm_up(t, wl, pool, sink)
    _sink(sink, "/_bench/reset")
    gc.collect()

    traces = max(wl.threads, spans // n)
    per_thread = [traces // wl.threads + (1 if i < traces % wl.threads else 0) for i in range(wl.threads)]
    total = sum(per_thread) * n
    outs: list[list[int]] = [[] for _ in range(wl.threads)]
    barrier = threading.Barrier(wl.threads + 1)

    def producer(idx: int) -> None:
        barrier.wait()
        _trace_many(t, wl.shape, pool, 10 + sum(per_thread[:idx]), per_thread[idx], outs[idx])

    threads = [threading.Thread(target=producer, args=(i,), name=f"producer-{i}") for i in range(wl.threads)]
    lateness: list[float] = []
    stop_waker = threading.Event()
    waker_thread = threading.Thread(target=_waker, args=(stop_waker, lateness), name="waker") if waker else None
    for th in threads:
        th.start()
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    barrier.wait()
    for th in threads:
        th.join()
    produce_wall = time.perf_counter() - wall0
    produce_cpu = time.process_time() - cpu0
    if waker_thread is not None:
        # From here the exporter works flat out on what the producer queued, and
        # another thread of the app (sleeping 1 ms at a time) wants the interpreter too.
        waker_thread.start()
    if t.name != "floor":
        t.flush(120.0)
        got = _sink(sink, f"/_bench/wait?n={total}&timeout=120")
    else:
        got = {"delivered": total}
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    stop_waker.set()
    if waker_thread is not None:
        waker_thread.join()
    per_span = [x for o in outs for x in o]
    extra: dict = {}
    if lateness:
        extra = {
            "waker_wakes": len(lateness),
            "waker_late_p50_ms": statistics.median(lateness) * 1000,
            "waker_late_p99_ms": _pct(lateness, 0.99) * 1000,
            "waker_late_max_ms": max(lateness) * 1000,
        }
    return {
        **extra,
        "spans": total,
        "delivered": got["delivered"],
        "cpu_s": cpu,
        "wall_s": wall,
        "produce_cpu_s": produce_cpu,
        "produce_wall_s": produce_wall,
        "app_median_us": statistics.median(per_span) / 1000,
        "app_p99_us": _pct(per_span, 0.99) / 1000,
        "app_mean_us": statistics.fmean(per_span) / 1000,
        "stats": t.stats(),
    }


def latency(t: Tracing, wl: Workload, spans: int, sink: str, interval: float) -> dict:
    pool = variants(wl.payload)
    n = wl.spans_per_trace
    _warm_up(t, wl, pool, sink)
    _sink(sink, "/_bench/reset?latency=1")
    traces = max(1, spans // n)
    per_span: list[int] = []
    next_at = time.perf_counter()
    for k in range(traces):
        _trace_many(t, wl.shape, pool, 10 + k, 1, per_span)
        next_at += interval
        time.sleep(max(0.0, next_at - time.perf_counter()))
    # No flush: latency is what the schedule gives, so wait for delivery as it comes.
    got = _sink(sink, f"/_bench/wait?n={traces * n}&timeout=30") if t.name != "floor" else {"delivered": traces * n}
    lat = _sink_list(sink, "/_bench/latencies") if t.name != "floor" else []
    return {
        "spans": traces * n,
        "delivered": got["delivered"],
        "lat_p50_ms": _pct(lat, 0.50),
        "lat_p99_ms": _pct(lat, 0.99),
        "lat_max_ms": max(lat) if lat else float("nan"),
        "lat_samples": len(lat),
        "app_median_us": statistics.median(per_span) / 1000,
        "app_p99_us": _pct(per_span, 0.99) / 1000,
    }


def _sink_list(sink: str, path: str) -> list[float]:
    with urllib.request.urlopen(sink + path, timeout=30) as resp:
        return json.loads(resp.read())


def memory(t: Tracing, wl: Workload, spans: int, sink: str, settle_s: float) -> dict:
    pool = variants(wl.payload)
    n = wl.spans_per_trace
    _warm_up(t, wl, pool, sink)
    _sink(sink, "/_bench/reset?down=503")
    gc.collect()
    time.sleep(0.3)
    idle_kb = _rss_kb()
    exact_peak = _reset_peak_rss()
    sampled_peak = idle_kb
    stop = threading.Event()

    def sample() -> None:
        # Fallback when VmHWM cannot be reset; coarse, but it sees the burst.
        nonlocal sampled_peak
        while not stop.wait(0.02):
            sampled_peak = max(sampled_peak, _rss_kb())

    sampler = None
    if not exact_peak:
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
    traces = max(1, spans // n)
    wall0 = time.perf_counter()
    _trace_many(t, wl.shape, pool, 10, traces, None)
    burst_s = time.perf_counter() - wall0
    # Let the pipeline take in the burst (convert, hold, retry) before reading the peak.
    last = -1
    deadline = time.monotonic() + settle_s
    stable = 0
    while time.monotonic() < deadline and stable < 8:
        time.sleep(0.25)
        cur = _rss_kb()
        stable = stable + 1 if abs(cur - last) < 512 else 0
        last = cur
    stop.set()
    if sampler is not None:
        sampler.join()
    peak_kb = _rss_kb("VmHWM") if exact_peak else sampled_peak
    held_stats = t.stats()
    # The outage ends: what was held is delivered, and counted by the sink.
    _sink(sink, "/_bench/reset")
    delivered = {"delivered": 0, "raw_bytes": 0}
    if t.name != "floor":
        t.flush(60.0)
        delivered = _sink(sink, f"/_bench/wait?n={traces * n}&timeout=10")
    return {
        "spans": traces * n,
        "burst_s": burst_s,
        "idle_rss_mb": idle_kb / 1024,
        "peak_rss_mb": peak_kb / 1024,
        "growth_mb": (peak_kb - idle_kb) / 1024,
        "peak_exact": exact_peak,
        "held_delivered": delivered["delivered"],
        "held_raw_bytes": delivered.get("raw_bytes", 0),
        "stats_after_burst": held_stats,
        "stats_after_recovery": t.stats(),
    }


def main(argv: list[str] | None = None) -> int:
    global WARMUP_SPANS
    p = argparse.ArgumentParser(description="one benchmark contender in this process")
    p.add_argument("--contender", choices=CONTENDERS, required=True)
    p.add_argument("--workload", required=True, help="<small|genai|64k>-<shallow|deep>-<threads>")
    p.add_argument("--spans", type=int, required=True)
    p.add_argument("--sink", required=True)
    p.add_argument("--mode", choices=("throughput", "latency", "memory"), default="throughput")
    p.add_argument("--interval", type=float, default=0.25, help="latency mode: seconds between traces")
    p.add_argument("--cap-bytes", type=int, default=None, help="memory mode: our max_queue_bytes")
    p.add_argument("--settle", type=float, default=20.0, help="memory mode: longest wait for the pipeline after the burst")
    p.add_argument("--warmup", type=int, default=WARMUP_SPANS, help="spans traced and delivered before measuring")
    p.add_argument("--waker", action="store_true", help="throughput mode: a thread sleeping 1 ms at a time records how late it wakes")
    a = p.parse_args(argv)
    WARMUP_SPANS = a.warmup
    wl = Workload.parse(a.workload)
    t = Tracing(a.contender, a.sink.rstrip("/"), a.mode, a.spans, a.cap_bytes)
    if a.mode == "throughput":
        result = throughput(t, wl, a.spans, a.sink, waker=a.waker)
    elif a.mode == "latency":
        result = latency(t, wl, a.spans, a.sink, a.interval)
    else:
        result = memory(t, wl, a.spans, a.sink, a.settle)
    result.update(contender=a.contender, workload=wl.name, mode=a.mode)
    print(json.dumps(result), flush=True)
    # Exit now: a contender's atexit flush to a sink that may be down must not stall the run.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
