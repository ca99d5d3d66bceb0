"""The side-by-side benchmark of issue 5, in one command.

    python bench/run.py                     # full run (~12 min on 2 cores), rewrites the results in BENCHMARKS.md
    python bench/run.py --smoke             # seconds: every installed contender, tiny counts, no charts
    python bench/run.py --out other.md --json results.json --scale 0.5
    python bench/run.py --rounds 3 --skip latency,memory,waker   # interleaved rounds: every headline with its spread

Starts the sink (``sink.py``) as its own process, checks it can absorb more
than any contender produces, computes the "limit" row, then runs every
contender on every workload in a fresh process each (``contenders.py``),
then the low-load latency runs and the outage/memory runs. Results go to a
JSON file and to the block between ``<!-- results:begin -->`` and
``<!-- results:end -->`` in the ``--out`` Markdown file (text outside it is
kept); charts go to ``docs/`` (matplotlib, imported only then).
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
import urllib.request
from importlib import metadata
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from contenders import COMPILED, CONTENDERS  # noqa: E402
from workloads import PAYLOADS, Workload, all_workloads  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "build_support"))
import otel_runs_build  # noqa: E402

# Spans per throughput run, by payload: large enough for stable medians and CPU
# totals, small enough that the full run stays near 12 minutes on 2 cores.
FULL_SPANS = {"small": 20_000, "genai": 6_000, "64k": 1_000}
SMOKE_SPANS = {"small": 200, "genai": 100, "64k": 40}
BURST_SPANS = 100_000  # memory run (c): performance round 2 measures 100k small spans held through an outage
# Ours run the memory burst with the default byte cap (128 MiB: everything held), and once
# more with this small cap, to show growth stays within the cap + 20 MB when the cap is what binds.
MEMORY_CAP_CHECK_BYTES = 8 * 1024 * 1024
WAKER_WORKLOAD = "small-shallow-1"  # a thread sleeping 1 ms at a time beside a producer going flat out
LATENCY_WORKLOAD = "genai-shallow-1"
LATENCY_INTERVAL_S = 0.25  # a 10-span trace every 250 ms: 40 spans/s, low load
MEMORY_WORKLOAD = "small-shallow-1"

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def installed(contender: str) -> bool:
    if contender == COMPILED:
        return otel_runs_build.missing_toolchain() is None
    need = {
        "otlp": "opentelemetry.exporter.otlp.proto.http",
        "langsmith": "langsmith",
        "langsmith-zstd": "zstandard",
    }.get(contender)
    if contender == "langsmith-zstd" and importlib.util.find_spec("langsmith") is None:
        return False
    if need is None:
        return True
    try:
        return importlib.util.find_spec(need) is not None
    except ModuleNotFoundError:
        return False


# --- the sink process -------------------------------------------------------------


class SinkProcess:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "sink.py"), "--port", "0"],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline().strip() if self.proc.stdout else ""
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"sink did not start: {line!r}")
        self.url = line.split()[-1]
        self.port = int(self.url.rsplit(":", 1)[1])

    def call(self, path: str) -> dict:
        method = "POST" if path.startswith("/_bench/reset") else "GET"
        req = urllib.request.Request(self.url + path, data=b"" if method == "POST" else None, method=method)
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read() or b"{}")

    def cpu_s(self) -> float:
        # utime + stime of the sink, to show it was never the busy one.
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def sink_capacity(sink: SinkProcess, seconds: float) -> dict[str, float]:
    """Runs/s the sink absorbs per payload: pre-built 512-run bodies from 2 connections."""
    from limit import encode_batch
    from workloads import run_dicts

    out: dict[str, float] = {}
    for payload in PAYLOADS:
        body = encode_batch(run_dicts(payload, 512))
        headers = {"Content-Type": "multipart/form-data; boundary=0123456789abcdef0123456789abcdef"}
        sink.call("/_bench/reset")
        stop = time.monotonic() + seconds
        sent = [0, 0]

        def blast(i: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", sink.port, timeout=30)
            while time.monotonic() < stop:
                conn.request("POST", "/runs/multipart", body=body, headers=headers)
                conn.getresponse().read()
                sent[i] += 1
            conn.close()

        t0 = time.perf_counter()
        threads = [threading.Thread(target=blast, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.perf_counter() - t0
        got = sink.call("/_bench/stats")
        assert got["completed"] == 512 * sum(sent), got
        out[payload] = got["completed"] / elapsed
    sink.call("/_bench/reset")
    return out


# --- running contenders -------------------------------------------------------------


def run_one(sink: SinkProcess, contender: str, workload: str, spans: int, mode: str, extra: list[str] | None = None, timeout: float = 600) -> dict:
    sink.call("/_bench/reset")
    cmd = [
        sys.executable,
        os.path.join(HERE, "contenders.py"),
        "--contender", contender,
        "--workload", workload,
        "--spans", str(spans),
        "--sink", sink.url,
        "--mode", mode,
    ] + (["--warmup", "20"] if SMOKE else []) + (extra or [])
    cpu0 = sink.cpu_s()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_child_env(contender))
    wall = time.perf_counter() - t0
    sink_cpu = sink.cpu_s() - cpu0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{contender} {workload} {mode} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    result = json.loads(lines[-1])
    result["sink"] = sink.call("/_bench/stats")
    result["sink_cpu_s"] = sink_cpu
    result["process_wall_s"] = wall
    if proc.stderr.strip():
        result["stderr_tail"] = proc.stderr.strip()[-600:]
    return result


SMOKE = False  # --smoke: shorter warm-ups too
SRC_OVERRIDE: str | None = None  # --src: the otel_runs_exporter source the contenders import
COMPILED_DIR: str | None = None  # the compiled copy of that source, for the mypyc contender


def _child_env(contender: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    first = COMPILED_DIR if contender == COMPILED else SRC_OVERRIDE
    if first:
        env["PYTHONPATH"] = first + os.pathsep + env.get("PYTHONPATH", "")
    return env


def build_compiled(dest: str) -> str | None:
    """Compile the measured source's hot modules into ``dest`` (cached); the reason when that fails."""
    global COMPILED_DIR
    src = SRC_OVERRIDE or os.path.join(ROOT, "src")
    try:
        # The smoke run checks that the compiled contender works; the build it measures is -O3, as installed.
        level = otel_runs_build.CHECK_OPT_LEVEL if SMOKE else "3"
        COMPILED_DIR = otel_runs_build.compiled_tree(src, dest, log=lambda m: print(m, flush=True), opt_level=level)
    except (RuntimeError, OSError) as exc:
        return f"the compiled build failed: {str(exc).strip().splitlines()[-1][:300]}"
    return None


def measured_code() -> dict[str, Any]:
    """Which otel_runs_exporter the contenders import, and the commit it came from, so a result names its code."""
    where = subprocess.run(
        [sys.executable, "-c", "import otel_runs_exporter, os; print(os.path.dirname(otel_runs_exporter.__file__))"],
        capture_output=True, text=True, env=_child_env(),
    ).stdout.strip()

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True).stdout.strip()

    info = {"module": where, "head": git("rev-parse", "--short", "HEAD")}
    if COMPILED_DIR:
        info["compiled"] = COMPILED_DIR
    if SRC_OVERRIDE:
        info["note"] = f"--src {SRC_OVERRIDE}"
    else:
        info["dirty_src"] = bool(git("status", "--porcelain", "--", "src"))
    return info


def machine() -> dict[str, Any]:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        pass
    versions = {}
    for dist in ("opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http", "langsmith", "orjson", "requests", "zstandard", "protobuf", "otel-runs-exporter"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="tiny counts, one workload per contender, no charts (seconds)")
    p.add_argument("--out", default=None, help="Markdown file whose results block is rewritten (default: BENCHMARKS.md unless --smoke)")
    p.add_argument("--json", default=None, help="where to write all measurements (default: bench/results.json unless --smoke)")
    p.add_argument("--scale", type=float, default=1.0, help="multiply span counts (e.g. 0.25 for a quicker look)")
    p.add_argument("--rounds", type=int, default=1,
                   help="throughput rounds, interleaved: each round runs every workload's contenders in turn, in an order "
                        "rotated per round, so a slow spell of the machine falls on all of them; ratios are taken within a "
                        "round and reported as the median and spread over rounds")
    p.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated subset")
    p.add_argument("--workloads", default=None, help="comma-separated subset of throughput workloads")
    p.add_argument("--skip", default="", help="comma-separated phases to skip: throughput,latency,memory,waker")
    p.add_argument("--no-charts", action="store_true")
    p.add_argument("--src", default=None, help="import otel_runs_exporter from this directory (e.g. a clean `git archive` of a commit)")
    p.add_argument("--from-json", default=None, help="only re-render --out and the charts from a results file")
    a = p.parse_args(argv)
    if a.from_json:
        with open(a.from_json) as f:
            saved = json.load(f)
        _write_outputs(saved, a.out or os.path.join(ROOT, "BENCHMARKS.md"), not a.no_charts)
        return 0
    global SRC_OVERRIDE, SMOKE
    SMOKE = a.smoke
    SRC_OVERRIDE = os.path.abspath(a.src) if a.src else None

    contenders = [c for c in a.contenders.split(",") if c]
    missing = [c for c in contenders if not installed(c)]
    why_missing = {c: "not installed" for c in missing}
    if COMPILED in missing:
        why_missing[COMPILED] = f"cannot be built here: {otel_runs_build.missing_toolchain()}"
    if COMPILED in contenders and COMPILED not in missing:
        # Built (or taken from the cache) before anything is timed, in a directory of this run's.
        import tempfile

        failed = build_compiled(tempfile.mkdtemp(prefix="bench-compiled-"))
        if failed:
            missing.append(COMPILED)
            why_missing[COMPILED] = failed
    contenders = [c for c in contenders if c not in missing]
    skip = set(filter(None, a.skip.split(",")))
    out_md = a.out if a.out is not None else (None if a.smoke else os.path.join(ROOT, "BENCHMARKS.md"))
    out_json = a.json if a.json is not None else (None if a.smoke else os.path.join(HERE, "results.json"))

    sizes = SMOKE_SPANS if a.smoke else FULL_SPANS
    sizes = {k: max(40, int(v * a.scale)) for k, v in sizes.items()}
    if a.workloads:
        workloads = [Workload.parse(w) for w in a.workloads.split(",")]
    else:
        workloads = all_workloads()

    t_start = time.perf_counter()
    results: dict[str, Any] = {
        "machine": machine(),
        "code": measured_code(),
        "command": "python bench/run.py" + (" --smoke" if a.smoke else "") + (f" --scale {a.scale}" if a.scale != 1.0 else "")
        + (f" --rounds {a.rounds}" if a.rounds != 1 else "") + (f" --skip {a.skip}" if a.skip else "")
        + (f" --workloads {a.workloads}" if a.workloads else "") + (f" --contenders {a.contenders}" if a.contenders != ",".join(CONTENDERS) else ""),
        "rounds": max(1, a.rounds),
        "spans": sizes,
        "missing": missing,
        "missing_why": why_missing,
        "throughput": [],
        "latency": [],
        "memory": [],
        "limit": [],
    }
    sink = SinkProcess()
    try:
        print(f"sink at {sink.url}; contenders: {', '.join(contenders)}", flush=True)
        for c, why in why_missing.items():
            print(f"skipped {c}: {why}", flush=True)
        if not a.smoke:
            results["sink_capacity_runs_per_s"] = sink_capacity(sink, 2.0)
            print(f"sink capacity (runs/s): {results['sink_capacity_runs_per_s']}", flush=True)
            from limit import measure

            for payload in PAYLOADS:
                results["limit"].append(measure(payload, min(2000, sizes[payload] * 2)))
                if payload == "64k":
                    results["limit"].append(measure(payload, min(2000, sizes[payload] * 2), fragment=True))

        if "throughput" not in skip:
            if a.smoke:
                # Every contender once, rotating through payloads, shapes and thread counts.
                plan = [(c, workloads[(i * 5) % len(workloads)]) for i, c in enumerate(contenders)]
            else:
                plan = []
                for rnd in range(max(1, a.rounds)):
                    turn = contenders[rnd % len(contenders):] + contenders[: rnd % len(contenders)]
                    plan += [(c, w, rnd) for w in workloads for c in turn]
            for c, w, *rnd in plan:
                r = run_one(sink, c, w.name, sizes[w.payload], "throughput")
                r["round"] = rnd[0] if rnd else 0
                results["throughput"].append(r)
                print(f"r{r['round']} " + _line(r), flush=True)

        delivering = [c for c in contenders if c != "floor"]
        if "latency" not in skip:
            # Smoke: one contender whose schedule is short (ours-processor, 0.2 s), not a 5 s BatchSpanProcessor.
            lat_plan = delivering if not a.smoke else [c for c in delivering if c == "ours-processor"] or delivering[:1]
            spans = 400 if not a.smoke else 20
            interval = LATENCY_INTERVAL_S if not a.smoke else 0.02
            for c in lat_plan:
                r = run_one(sink, c, LATENCY_WORKLOAD, spans, "latency", ["--interval", str(interval)])
                results["latency"].append(r)
                print(f"latency {c}: p50 {r['lat_p50_ms']:.1f} ms p99 {r['lat_p99_ms']:.1f} ms ({r['delivered']}/{r['spans']})", flush=True)

        if "memory" not in skip:
            mem_plan = contenders if not a.smoke else [c for c in contenders if c == "ours-processor"]
            burst = BURST_SPANS if not a.smoke else 2000
            settle = ["--settle", "20" if not a.smoke else "2"]
            runs = [(c, None) for c in mem_plan] + [(c, MEMORY_CAP_CHECK_BYTES) for c in mem_plan if c == "ours-processor"]
            for c, cap in runs:
                extra = settle + (["--cap-bytes", str(cap)] if cap else [])
                r = run_one(sink, c, MEMORY_WORKLOAD, burst, "memory", extra, timeout=900)
                r["cap_bytes"] = cap
                results["memory"].append(r)
                print(f"memory {c}{f' cap {cap >> 20} MiB' if cap else ''}: +{r['growth_mb']:.1f} MB peak, held {r['held_delivered']}", flush=True)

        if "waker" not in skip and not a.smoke:
            for c in [c for c in contenders if c in ("floor", "otlp") or c.startswith("ours-processor")]:
                r = run_one(sink, c, WAKER_WORKLOAD, sizes["small"], "throughput", ["--waker"])
                results.setdefault("waker", []).append(r)
                print(f"waker {c}: late p50 {r['waker_late_p50_ms']:.2f} ms p99 {r['waker_late_p99_ms']:.2f} ms", flush=True)
    finally:
        sink.close()
    results["elapsed_s"] = time.perf_counter() - t_start
    print(f"done in {results['elapsed_s']:.0f} s", flush=True)

    if out_json:
        with open(out_json, "w") as f:
            json.dump(results, f, indent=1)
    _write_outputs(results, out_md, not a.smoke and not a.no_charts and bool(results["throughput"]))
    return 0


def _write_outputs(results: dict, out_md: str | None, charts: bool) -> None:
    if out_md:
        from report import render

        text = render(results)
        old = open(out_md).read() if os.path.exists(out_md) else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
        if BEGIN in old and END in old:
            head, rest = old.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            new = head + BEGIN + "\n" + text + "\n" + END + tail
        else:
            new = old.rstrip() + "\n\n" + BEGIN + "\n" + text + "\n" + END + "\n"
        with open(out_md, "w") as f:
            f.write(new)
    if charts:
        from charts import draw

        draw(results, os.path.join(ROOT, "docs"))


def _line(r: dict) -> str:
    cpu_us = r["cpu_s"] / r["spans"] * 1e6
    return (
        f"{r['workload']:<18} {r['contender']:<15} app p50 {r['app_median_us']:7.1f} us  p99 {r['app_p99_us']:8.1f} us  "
        f"cpu {cpu_us:7.1f} us/span  delivered {r['delivered']}/{r['spans']}  bytes/span {r['sink']['body_bytes'] / max(1, r['spans']):8.0f}"
    )


if __name__ == "__main__":
    sys.exit(main())
