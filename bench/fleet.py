"""Issue 17's fleet: N real processes sharing one API key against one rate-limited service.

    python bench/fleet.py                    # today's behaviour and the adaptive exporter, 20 processes x 50 spans/s,
                                             # 60 s of load + drain each (~4 min on 2 cores); rewrites the fleet
                                             # block of BENCHMARKS.md and bench/fleet_results.json
    python bench/fleet.py --variants adaptive --load-s 30 --out /tmp/f.md
    python bench/fleet.py --quick --json out.json   # seconds: 4 processes on 2 s windows (what a test runs)

Each process (``--child``) is a ``RunsSpanProcessor`` on its own provider with
default settings and the same API key, producing one span every 1/rate s (a
clock-driven schedule, so a slow process catches up rather than drifting) for
``--load-s`` seconds, then ``force_flush`` (the drain) and ``shutdown``. The
service is ``otel-runs serve --rate-limit-scale K`` (multipart's 6000 / 10 s per
key divided by K: 200 gives 30 / 10 s) with ``--request-log``, so every answer,
429s included, is counted where the limit is enforced.

"today" is the exporter as it was before adaptive batching: ``git archive`` of
``--baseline-ref`` imported through PYTHONPATH (``--baseline-src DIR`` to give a
tree). Both variants meet the same service, built from this tree.

What is reported, per variant, measured at the service: runs delivered against
created (by name; duplicates are extra posts of one id), the share of requests
answered 429 after the first ``--warm-s`` seconds of load, requests accepted per
window as a share of the limit over the same span, span end to arrival (the
arrival of the request that carried the run, from the request log, minus the
run's ``end_time``) and to storage (``first_seen`` in the store: arrival plus
the local service's own time to parse and store the request), the size of
accepted batches, each process's peak RSS, and the machine's CPU while the load
ran. Runs whose start was sent before their end are left out of the latencies
and counted.
Never asserted here: ``tests/reliability/test_rel_fleet.py`` runs ``--quick``
and checks counts only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import signal
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from datetime import datetime
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KEY = "sk-fleet-shared-key"
BASELINE_REF = "143fd32"  # main as merged into this work: the last exporter before adaptive batching
BEGIN, END = "<!-- fleet:begin -->", "<!-- fleet:end -->"
# About what a GenAI span's input and output hold, so batches weigh something.
PAYLOAD = "Summarize the quarterly report for the board in three sentences. " * 2


# --- one process of the fleet ------------------------------------------------------------


def child(cfg: dict[str, Any]) -> None:
    import otel_runs_exporter
    from opentelemetry.sdk.trace import TracerProvider
    from otel_runs_exporter import RunsSpanProcessor

    processor = RunsSpanProcessor(endpoint=cfg["url"], api_key=KEY, project="fleet")
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("fleet")
    index, rate, n = cfg["index"], cfg["rate"], int(cfg["rate"] * cfg["load_s"])
    print("READY", flush=True)
    start = float(sys.stdin.readline())
    samples: list[list[float | None]] = []
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.5):
            s = processor.stats()
            samples.append(
                [round(time.time() - start, 2), s.requests, s.failed, getattr(s, "throttled", None),
                 getattr(s, "interval_s", None), s.queued]
            )

    threading.Thread(target=sample, daemon=True).start()
    time.sleep(max(0.0, start - time.time()))
    began = time.monotonic()
    for i in range(n):
        delay = began + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        with tracer.start_as_current_span(f"f{index}-{i}") as span:
            span.set_attribute("input.value", PAYLOAD)
            span.set_attribute("output.value", PAYLOAD)
    load_end = time.time()
    flushed = processor.force_flush(int(cfg["drain_s"] * 1000))
    drained = time.time()
    stats = processor.stats()
    provider.shutdown()
    sampling.set()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "index": index,
                "module": otel_runs_exporter.__file__,
                "created": n,
                "load_s": round(load_end - start, 3),
                "drain_s": round(drained - load_end, 3),
                "flushed": flushed,
                "stats": {
                    k: getattr(stats, k, None)
                    for k in ("created", "delivered", "queued", "spooled", "requests", "retried", "failed",
                              "throttled", "interval_s")
                }
                | {"dropped": dict(stats.dropped)},
                "peak_rss_mb": _peak_rss_mb(usage),
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                "samples": samples,
            }
        ),
        flush=True,
    )


def _peak_rss_mb(usage: resource.struct_rusage) -> float:
    """This process's peak RSS: VmHWM, not ru_maxrss, which Linux carries over ``exec``
    from the forked parent (a parent holding 80 MB of results made every child "peak" there)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(usage.ru_maxrss / 1024, 1)  # elsewhere: an upper bound


# --- the parent: one variant ------------------------------------------------------------------


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}


def baseline_tree(ref: str, into: str) -> str:
    """``src/`` of ``ref``, extracted from git (not a worktree: nothing to clean up in the repository)."""
    archive = os.path.join(into, "baseline.tar")
    subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", "-o", archive, ref, "src"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(os.path.join(into, "baseline"))  # our own repository's files
    return os.path.join(into, "baseline", "src")


def multipart_limit(scale: float, window_scale: float) -> tuple[int, float]:
    from otel_runs_exporter.server._ratelimit import SPEC_RULES, scaled

    rule = next(r for r in scaled(SPEC_RULES, scale, window_scale) if r.category == "Multipart ingest")
    return rule.count, rule.interval


def run_variant(name: str, src: str | None, a: argparse.Namespace, tmp: str) -> dict[str, Any]:
    db = os.path.join(tmp, f"{name}.db")
    log = os.path.join(tmp, f"{name}-requests.jsonl")
    serve = [sys.executable, "-m", "otel_runs_exporter.cli", "serve", "--port", "0", "--db", db, "--api-key", KEY,
             "--rate-limit-scale", f"{a.scale:g}", "--request-log", log]
    if a.window_scale != 1:
        serve += ["--rate-limit-window-scale", f"{a.window_scale:g}"]
    server = subprocess.Popen(serve, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_clean_env() | {"PYTHONUNBUFFERED": "1"})
    line = server.stdout.readline()  # type: ignore[union-attr]
    if not line.startswith("Listening on "):
        server.kill()
        raise RuntimeError(f"otel-runs serve did not start: {line!r} {server.stderr.read()}")  # type: ignore[union-attr]
    url = line.split()[2]
    env = _clean_env()
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    if a.max_schedule_delay_ms is not None:
        env["OTEL_EXPORTER_RUNS_MAX_SCHEDULE_DELAY"] = str(a.max_schedule_delay_ms)  # read by the adaptive tree only
    procs = []
    errs = []
    for i in range(a.processes):
        cfg = {"url": url, "index": i, "rate": a.rate, "load_s": a.load_s, "drain_s": a.drain_s}
        err = open(os.path.join(tmp, f"{name}-child{i}.err"), "w+")
        errs.append(err)
        procs.append(subprocess.Popen([sys.executable, __file__, "--child", json.dumps(cfg)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=err, text=True, env=env))
    for p in procs:
        ready = p.stdout.readline()  # type: ignore[union-attr]
        if ready.strip() != "READY":
            raise RuntimeError(f"a fleet process did not start: {ready!r}")
    start = time.time() + 1.0
    for p in procs:
        p.stdin.write(f"{start}\n")  # type: ignore[union-attr]
        p.stdin.flush()  # type: ignore[union-attr]
    cpu, load1, rss = _watch(procs, start, a)
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=a.load_s + a.drain_s + 120)
        results.append(json.loads(out.strip().splitlines()[-1]))
    server.send_signal(signal.SIGINT)
    server.communicate(timeout=30)
    warnings = []
    for err in errs:
        err.seek(0)
        warnings.extend(l.strip() for l in err if "WARNING" in l or "warning" in l.lower())
        err.close()
    limit, window = multipart_limit(a.scale, a.window_scale)
    figures = analyse(db, log, start, results, a, limit, window)
    modules = {r["module"] for r in results}
    return {
        "variant": name,
        "module": sorted(modules),
        "processes": a.processes,
        "rate": a.rate,
        "load_s": a.load_s,
        "limit": limit,
        "window_s": window,
        "forced_interval_s": a.processes * window / limit,
        "cpu_percent": cpu,
        "loadavg_1m": load1,
        "peak_rss_mb": sorted(r["peak_rss_mb"] for r in results),
        "rss_sampled_mb": rss,
        "cpu_s_per_process": sorted(r["cpu_s"] for r in results),
        "flushed": sum(1 for r in results if r["flushed"]),
        "stats": [r["stats"] for r in results],
        "drain_s": sorted(r["drain_s"] for r in results),
        "warnings": warnings[:40],
        # Each process's stats every 0.5 s, kept only with --keep (they are most of the file).
        **({"samples": {r["index"]: r["samples"] for r in results}} if a.keep else {}),
        **figures,
    }


def _watch(procs: list[subprocess.Popen], start: float, a: argparse.Namespace) -> tuple[dict, list, dict]:
    """The machine's CPU (percent of all cores), its 1-minute load and each process's RSS while the load runs."""
    try:
        import psutil  # the [bench] extra; without it (a test's --quick run) only the load average
    except ImportError:
        time.sleep(max(0.0, start + a.load_s - time.time()))
        return {}, [round(os.getloadavg()[0], 2)] * 2, {}
    handles = [psutil.Process(p.pid) for p in procs]
    psutil.cpu_percent(None)
    time.sleep(max(0.0, start - time.time()))
    during: list[float] = []
    loads: list[float] = []
    rss: list[float] = []
    while time.time() < start + a.load_s:
        time.sleep(1.0)
        during.append(psutil.cpu_percent(None))
        loads.append(os.getloadavg()[0])
        for h in handles:
            try:
                rss.append(h.memory_info().rss / 2**20)
            except psutil.Error:
                pass
    return (
        {"mean": round(statistics.fmean(during), 1), "max": round(max(during), 1), "cores": psutil.cpu_count()},
        [round(min(loads), 2), round(max(loads), 2)],
        {"median": round(statistics.median(rss), 1), "max": round(max(rss), 1)} if rss else {},
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def analyse(db: str, log: str, start: float, results: list[dict], a: argparse.Namespace, limit: int,
            window: float) -> dict[str, Any]:
    created = sum(r["created"] for r in results)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, name, end_time, first_seen, extra_posts, patched FROM runs").fetchall()
    names = [r[1] for r in rows if r[2] is not None]
    expected = {f"f{i}-{j}" for i in range(a.processes) for j in range(int(a.rate * a.load_s))}
    delivered = len(expected & set(names))
    with open(log) as f:
        entries = [json.loads(line) for line in f]
    multipart = [e for e in entries if e["method"] == "POST" and e["path"].endswith("/runs/multipart")]
    arrived = {run_id: e["at"] for e in multipart for run_id in e.get("run_ids", ())}
    latencies, warm_latencies, stored, split = [], [], [], 0
    for run_id, name, end_time, first_seen, _, patched in rows:
        if end_time is None:
            continue
        if patched:
            split += 1  # its start went out before its end: first_seen is the start's arrival
            continue
        ended = datetime.fromisoformat(end_time).timestamp()
        stored.append(first_seen - ended)
        if run_id in arrived:
            latencies.append(arrived[run_id] - ended)
            if ended >= start + a.warm_s:
                warm_latencies.append(arrived[run_id] - ended)
    load_end = start + a.load_s
    steady = [e for e in multipart if start + a.warm_s <= e["at"] < load_end]
    accepted = [e for e in steady if 200 <= e["status"] < 300]
    refused = [e for e in steady if e["status"] == 429]
    drain = [e for e in multipart if e["at"] >= load_end]
    windows = (a.load_s - a.warm_s) / window
    per_second: dict[int, list[int]] = {}
    for e in multipart:
        second = int(e["at"] - start)
        per_second.setdefault(second, [0, 0])[0 if e["status"] < 300 else 1] += 1
    return {
        "created": created,
        "delivered": delivered,
        "delivered_names": len(names),
        "duplicates": sum(r[4] for r in rows),
        "requests_total": len(multipart),
        "refused_total": sum(1 for e in multipart if e["status"] == 429),
        "steady_requests": len(steady),
        "steady_429_share": len(refused) / len(steady) if steady else None,
        "accepted_per_window": len(accepted) / windows if windows else None,
        "utilization": len(accepted) / windows / limit if windows else None,
        "drain_requests": len(drain),
        "drain_429": sum(1 for e in drain if e["status"] == 429),
        "batch_runs_mean": statistics.fmean(e["runs"] for e in accepted) if accepted else None,
        "batch_runs_max": max((e["runs"] for e in accepted), default=None),
        "batch_kb_mean": statistics.fmean(e["body_bytes"] for e in accepted) / 1024 if accepted else None,
        "latency_p50": _pct(latencies, 0.5) if latencies else None,
        "latency_p99": _pct(latencies, 0.99) if latencies else None,
        "latency_max": max(latencies) if latencies else None,
        "warm_latency_p50": _pct(warm_latencies, 0.5) if warm_latencies else None,
        "warm_latency_p99": _pct(warm_latencies, 0.99) if warm_latencies else None,
        "stored_p50": _pct(stored, 0.5) if stored else None,
        "stored_p99": _pct(stored, 0.99) if stored else None,
        "service_s_per_request_median": statistics.median(e["duration"] for e in accepted) if accepted else None,
        "split_runs": split,
        "per_second": [[s, *per_second[s]] for s in sorted(per_second)],
    }


# --- report ---------------------------------------------------------------------------------


def _f(value: Any, digits: int = 1, pct: bool = False) -> str:
    if value is None:
        return "–"
    if pct:
        return f"{100 * value:.{digits}f} %"
    return f"{value:,.{digits}f}"


def render(results: list[dict], meta: dict) -> str:
    by = {r["variant"]: r for r in results}
    order = [v for v in ("today", "adaptive") if v in by]
    first = by[order[0]]
    forced = first["forced_interval_s"]
    head = (
        f"{first['processes']} processes x {first['rate']:g} spans/s on one API key, {first['load_s']:g} s of load "
        f"then drain, against `otel-runs serve --rate-limit-scale {meta['scale']:g}`"
        + (f" `--rate-limit-window-scale {meta['window_scale']:g}`" if meta["window_scale"] != 1 else "")
        + f": multipart limited to {first['limit']} requests / {first['window_s']:g} s, so each process may send "
        f"one request every {forced:.2f} s (the interval the limit forces). Warm-up: the first {meta['warm_s']:g} s. "
        f"Measured at the service (its request log and store). {meta['when']}, {meta['machine']}."
    )
    rows = [
        ("runs delivered / created", "all", lambda r: f"{r['delivered']:,} / {r['created']:,}"),
        ("duplicates (extra posts of one id)", "0", lambda r: f"{r['duplicates']}"),
        ("requests after warm-up answered 429", "< 5 %",
         lambda r: f"{_f(r['steady_429_share'], 1, True)} ({r['steady_requests'] and round(r['steady_429_share'] * r['steady_requests'])} of {r['steady_requests']})"),
        ("requests accepted per window, share of the limit", ">= 70 %",
         lambda r: f"{_f(r['accepted_per_window'])} of {r['limit']} = {_f(r['utilization'], 0, True)}"),
        ("span end to arrival at the service p50 / p99, all runs", f"p99 < {2 * forced:.1f} s",
         lambda r: f"{_f(r['latency_p50'])} / {_f(r['latency_p99'])} s (max {_f(r['latency_max'])})"),
        ("p99 / forced interval", "< 2x", lambda r: f"{r['latency_p99'] / forced:.2f}x" if r["latency_p99"] else "–"),
        ("the same, runs ended after warm-up", "",
         lambda r: f"{_f(r['warm_latency_p50'])} / {_f(r['warm_latency_p99'])} s"),
        ("span end to stored p50 / p99 (plus the local service's time)", "",
         lambda r: f"{_f(r['stored_p50'])} / {_f(r['stored_p99'])} s"),
        ("local service's time per accepted request, median", "",
         lambda r: f"{_f(r['service_s_per_request_median'])} s"),
        ("runs per accepted request, mean / max", "", lambda r: f"{_f(r['batch_runs_mean'], 0)} / {r['batch_runs_max']}"),
        ("requests in all (429s), drain included", "", lambda r: f"{r['requests_total']} ({r['refused_total']})"),
        ("drain: requests (429s); force_flush true", "",
         lambda r: f"{r['drain_requests']} ({r['drain_429']}); {r['flushed']} of {r['processes']}"),
        ("final interval per process, min-max", "",
         lambda r: _interval_range(r)),
        ("peak RSS per process, median / max", "", lambda r: f"{statistics.median(r['peak_rss_mb']):.0f} / {max(r['peak_rss_mb']):.0f} MB"),
        ("CPU per process over the run, median", "", lambda r: f"{statistics.median(r['cpu_s_per_process']):.1f} s"),
        ("machine CPU during the load, mean / max", "",
         lambda r: f"{r['cpu_percent']['mean']:.0f} / {r['cpu_percent']['max']:.0f} % of {r['cpu_percent']['cores']} cores; load avg {r['loadavg_1m'][0]}-{r['loadavg_1m'][1]}"),
    ]
    lines = [head, "", "| | target | " + " | ".join(order) + " |", "|---|---|" + "---|" * len(order)]
    for label, target, cell in rows:
        lines.append(f"| {label} | {target} | " + " | ".join(cell(by[v]) for v in order) + " |")
    lines.append("")
    lines.append(
        "*today*: `git archive "
        + meta["baseline"]
        + "`, the exporter before adaptive batching; *adaptive*: this tree. Same service, same load; "
        "default settings in both (`schedule_delay_s` 0.2 s, batches of up to 512 runs; adaptive bound 10 s)."
    )
    return "\n".join(lines)


def _interval_range(r: dict) -> str:
    intervals = [s["interval_s"] for s in r["stats"] if s.get("interval_s") is not None]
    if not intervals:
        return "0.2 s (fixed)"
    return f"{min(intervals):.2f}-{max(intervals):.2f} s"


def write_markdown(path: str, block: str) -> None:
    text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
        text = before + BEGIN + "\n" + block + "\n" + END + after
    else:
        text += f"\n## A fleet on one API key\n\n{BEGIN}\n{block}\n{END}\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--variants", default="today,adaptive")
    p.add_argument("--processes", type=int, default=20)
    p.add_argument("--rate", type=float, default=50.0, help="spans per second per process")
    p.add_argument("--load-s", type=float, default=60.0)
    p.add_argument("--drain-s", type=float, default=60.0, help="force_flush timeout after the load")
    p.add_argument("--warm-s", type=float, default=10.0)
    p.add_argument("--scale", type=float, default=200.0, help="--rate-limit-scale of the service")
    p.add_argument("--window-scale", type=float, default=1.0, help="--rate-limit-window-scale of the service")
    p.add_argument("--max-schedule-delay-ms", type=int, default=None, help="the adaptive bound (default: the setting's)")
    p.add_argument("--baseline-ref", default=BASELINE_REF)
    p.add_argument("--baseline-src", default=None, help="import today's exporter from this src/ directory instead")
    p.add_argument("--quick", action="store_true",
                   help="4 processes x 50 spans/s for 8 s on 2 s windows of 6 requests, bound 4 s (a test's run)")
    p.add_argument("--keep", default=None, metavar="DIR", help="keep the databases, request logs and stderr here")
    p.add_argument("--json", default=None, help="results file (default bench/fleet_results.json; none with --quick)")
    p.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"), help="Markdown file whose fleet block is rewritten")
    a = p.parse_args(argv)
    if a.child is not None:
        child(json.loads(a.child))
        return 0
    if a.quick:
        a.processes, a.load_s, a.drain_s, a.warm_s = 4, 8.0, 20.0, 3.0
        a.scale, a.window_scale = 1000.0, 5.0
        a.max_schedule_delay_ms = a.max_schedule_delay_ms or 4000
    variants = [v for v in a.variants.split(",") if v]
    results = []
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fleet-") as scratch:
        tmp = a.keep or scratch
        for name in variants:
            if name == "today":
                src = a.baseline_src or baseline_tree(a.baseline_ref, tmp)
            elif name == "adaptive":
                src = None
            else:
                raise SystemExit(f"unknown variant {name!r}")
            print(f"{name}: {a.processes} processes x {a.rate:g} spans/s for {a.load_s:g} s ...", flush=True)
            began = time.monotonic()
            r = run_variant(name, src, a, tmp)
            r["wall_s"] = round(time.monotonic() - began, 1)
            results.append(r)
            print(
                f"  delivered {r['delivered']}/{r['created']}, duplicates {r['duplicates']}, "
                f"429 after warm-up {_f(r['steady_429_share'], 1, True)}, utilization {_f(r['utilization'], 0, True)}, "
                f"p50/p99 {_f(r['latency_p50'])}/{_f(r['latency_p99'])} s, {r['wall_s']} s",
                flush=True,
            )
    meta = {
        "scale": a.scale,
        "window_scale": a.window_scale,
        "warm_s": a.warm_s,
        "baseline": a.baseline_src or a.baseline_ref,
        "when": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}",
    }
    json_path = a.json or (None if a.quick else os.path.join(HERE, "fleet_results.json"))
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    if not a.quick and a.out:
        write_markdown(a.out, render(results, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
