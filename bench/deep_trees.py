"""Deep run trees end to end: the exporter's peak memory, the local service's database.

Each run carries every ancestor's dotted_order entry, so before ``_ids.MAX_DEPTH``
a chain of d runs cost ~59·d²/2 bytes wherever it was held. These are the big
versions of the suite's small checks (``tests/reliability/test_rel_deep.py``)::

    python bench/deep_trees.py exporter --spans 5000            # both paths
    python bench/deep_trees.py exporter --max-rss-mb 400        # CI's check: exit 1 past 400 MB or a span uncounted
    python bench/deep_trees.py service --trees 2000,2000,1000

``exporter``: a local service in its own process (``otel-runs serve``, in memory);
each path nests ``--spans`` spans, each the child of the one before, in a fresh
child process, ends them innermost first and flushes. The child reports its peak
RSS (``VmHWM``), the time and its ``stats()``; every span must be delivered or
counted as dropped.

``service``: ``otel-runs serve --db <tmp>/runs.db`` in its own process; this
process builds the chains with the processor (one chain at a time, each span
ended innermost first) and flushes. Reported: the time from the first span to
the end of ``force_flush``, the database's size (with its WAL) once the service
stopped, the runs stored and the longest dotted_order.

Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from typing import Any

# The script is its own child: ``_nest`` is the measured process.
_CHILD = "_nest"


def _serve(db: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "otel_runs_exporter.cli", "serve", "--port", "0", "--db", db],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"(http://\S+)", line)
    if match is None:
        proc.kill()
        raise RuntimeError(f"otel-runs serve did not start: {line!r}")
    return proc, match.group(1)


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _chain(tracer: Any, depth: int, name: str) -> None:
    """``depth`` spans, each the child of the one before, ended innermost first."""
    from opentelemetry import trace

    spans = []
    context = None
    for i in range(depth):
        span = tracer.start_span(f"{name}-{i}", context=context)
        context = trace.set_span_in_context(span)
        spans.append(span)
    for span in reversed(spans):
        span.end()


def _provider(path: str, url: str) -> tuple[Any, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from otel_runs_exporter import RunsSpanExporter, RunsSpanProcessor

    provider = TracerProvider()
    if path == "processor":
        counted: Any = RunsSpanProcessor(endpoint=url, api_key="bench", schedule_delay_s=0.05)
        provider.add_span_processor(counted)
    else:
        counted = RunsSpanExporter(endpoint=url, api_key="bench")
        provider.add_span_processor(BatchSpanProcessor(counted, max_queue_size=1_000_000, schedule_delay_millis=50))
    return provider, counted


def _stats(counted: Any) -> dict[str, Any]:
    s = counted.stats()
    return {
        "created": s.created,
        "delivered": s.delivered,
        "dropped": dict(s.dropped),
        "depth_limited": getattr(s, "depth_limited", None),  # None before the depth limit
        "orphaned": s.orphaned,
    }


def _nest(path: str, spans: int, url: str) -> None:
    baseline = _peak_rss_mb()
    provider, counted = _provider(path, url)
    began = time.monotonic()
    _chain(provider.get_tracer("deep"), spans, "s")
    provider.force_flush(600_000)
    # OTel's BatchSpanProcessor flushes its queue into export() but never asks the exporter to flush:
    # runs an export could not deliver within its timeout (a loaded machine) wait for the exporter's own.
    counted.force_flush(600_000)
    elapsed = time.monotonic() - began
    out = {"path": path, "spans": spans, "peak_rss_mb": round(_peak_rss_mb(), 1), "baseline_mb": round(baseline, 1),
           "elapsed_s": round(elapsed, 2), **_stats(counted)}
    provider.shutdown()
    print(json.dumps(out), flush=True)


def exporter(spans: int, paths: list[str], max_rss_mb: float | None = None) -> bool:
    """Each path's figures; False when a path failed, lost a span uncounted or peaked past ``max_rss_mb``."""
    good = True
    proc, url = _serve(":memory:")
    try:
        for path in paths:
            done = subprocess.run(
                [sys.executable, __file__, _CHILD, path, str(spans), url], capture_output=True, text=True, check=False
            )
            result = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
            if done.returncode != 0 or not result:
                print(json.dumps({"path": path, "error": done.stderr[-2000:]}))
                good = False
                continue
            out = json.loads(result)
            out["accounted"] = out["created"] == spans == out["delivered"] + sum(out["dropped"].values())
            good = good and out["accounted"] and (max_rss_mb is None or out["peak_rss_mb"] <= max_rss_mb)
            print(json.dumps(out), flush=True)
    finally:
        _stop(proc)
    return good


def service(trees: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "runs.db")
        proc, url = _serve(db)
        try:
            provider, counted = _provider("processor", url)
            tracer = provider.get_tracer("deep")
            began = time.monotonic()
            for index, depth in enumerate(trees):
                _chain(tracer, depth, f"tree{index}")
            ended = time.monotonic()
            flushed = provider.force_flush(3_600_000)
            done = time.monotonic()
            stats = _stats(counted)
            provider.shutdown()
        finally:
            _stop(proc)
        size = sum(os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p))
        conn = sqlite3.connect(db)
        stored, longest, traces = conn.execute(
            "SELECT COUNT(*), MAX(LENGTH(dotted_order)), COUNT(DISTINCT trace_id) FROM runs"
        ).fetchone()
        violations = conn.execute("SELECT COUNT(*) FROM violations").fetchone()[0]
        conn.close()
        print(json.dumps({
            "trees": trees, "flushed": flushed, "elapsed_s": round(done - began, 1),
            "flush_s": round(done - ended, 1), "db_mb": round(size / 2**20, 1), "runs_stored": stored,
            "traces": traces, "longest_dotted_order": longest, "violations": violations, **stats,
        }), flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == _CHILD:
        _nest(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    e = sub.add_parser("exporter", help="peak RSS of the exporter nesting --spans spans")
    e.add_argument("--spans", type=int, default=5000)
    e.add_argument("--path", choices=("processor", "exporter", "both"), default="both")
    e.add_argument("--max-rss-mb", type=float, help="exit 1 if a path peaks past this (CI: 400, issue 23's bound)")
    s = sub.add_parser("service", help="database size and time for chains of the given depths")
    s.add_argument("--trees", default="2000,2000,1000", help="comma-separated chain depths")
    args = parser.parse_args()
    if args.what == "exporter":
        paths = ["processor", "exporter"] if args.path == "both" else [args.path]
        if not exporter(args.spans, paths, args.max_rss_mb):
            sys.exit(1)
    else:
        service([int(d) for d in args.trees.split(",")])


if __name__ == "__main__":
    main()
