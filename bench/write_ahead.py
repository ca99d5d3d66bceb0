"""What write-ahead (``OTEL_EXPORTER_RUNS_SPOOL_WRITE_AHEAD``) costs, and what it keeps when a process dies.

Each measurement runs in a fresh child process against the local service in
this one (so the service's own CPU is not counted), write-ahead on and off
interleaved round by round (the machine's load drifts; interleaving spreads it
over both). Reported per mode: the median and spread of the rounds.

* **cost**: ``--spans`` spans with a 200-character input at ``--rate`` spans a
  second, then ``force_flush``; the child's CPU seconds (user + system, every
  thread: the app's and our worker's) per span, and the app thread's time per
  span (start + end), p50 and p99.
* **file**: what write-ahead adds per batch, alone: ``Spool.write_ahead`` (write a
  temporary file, rename it) and ``Spool.forget`` (unlink) of a 50-run batch (the
  batch a 200 ms schedule delay makes of 250 spans a second), best of
  ``--rounds`` x 200, in microseconds per run. The stream's CPU differs by less
  than the rounds' spread on a shared machine; this is the figure under it.
* **loss**: the same stream, killed with SIGKILL after ``--kill-after`` seconds;
  a new process replays the spool. Lost: runs made and never stored; window:
  how long before the kill the oldest lost run ended (one clock for all
  processes: ``time.monotonic``). Duplicates: extra posts at the service, a
  replayed run the service already had (the batch in flight at the kill). Also
  with the service answering each request ``--slow`` seconds late (a slow but
  working service).

    python bench/write_ahead.py                      # 3 rounds of each
    python bench/write_ahead.py --rounds 5 --json out.json
    python bench/write_ahead.py --src DIR            # import otel_runs_exporter from DIR
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

_CHILD = """
    import json, os, resource, sys, time
    if sys.argv[5]:
        sys.path.insert(0, sys.argv[5])
    from opentelemetry.sdk.trace import TracerProvider
    from otel_runs_exporter import RunsSpanProcessor
    spans, rate, kill = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "kill"
    processor = RunsSpanProcessor()
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    value = "x" * 200
    out = sys.stdout
    print("ready", flush=True)
    cpu0 = time.process_time()
    costs = []
    began = time.monotonic()
    i = 0
    while kill or i < spans:
        t0 = time.perf_counter()
        with tracer.start_as_current_span(f"{sys.argv[4]}{i}", attributes={"input.value": value}):
            pass
        costs.append(time.perf_counter() - t0)
        if kill:
            out.write(f"{i} {time.monotonic():.6f}\\n")
            out.flush()
        i += 1
        time.sleep(max(0.0, began + i / rate - time.monotonic()))
    assert processor.force_flush(60_000)
    cpu = time.process_time() - cpu0
    costs.sort()
    print(json.dumps({"cpu_us_per_span": cpu / spans * 1e6, "app_p50_us": costs[len(costs) // 2] * 1e6,
                      "app_p99_us": costs[int(len(costs) * 0.99)] * 1e6}), flush=True)
    processor.shutdown()
    """


def _env(url: str, spool: str, write_ahead: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    env.update(
        OTEL_EXPORTER_RUNS_ENDPOINT=url,
        OTEL_EXPORTER_RUNS_API_KEY="bench-key",
        OTEL_EXPORTER_RUNS_SPOOL_DIR=spool,
        OTEL_EXPORTER_RUNS_SPOOL_WRITE_AHEAD="true" if write_ahead else "false",
    )
    return env


def _child(args: argparse.Namespace, url: str, spool: str, write_ahead: bool, mode: str, prefix: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_CHILD), str(args.spans), str(args.rate), mode, prefix, args.src or ""],
        env=_env(url, spool, write_ahead), stdout=subprocess.PIPE, text=True,
    )


def cost(args: argparse.Namespace, service, write_ahead: bool, n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        proc = _child(args, service.url, os.path.join(tmp, "spool"), write_ahead, "cost", f"cost-{n}-")
        out, _ = proc.communicate(timeout=600)
        lines = out.splitlines()
        assert proc.returncode == 0 and lines[0] == "ready", out
        return json.loads(lines[-1])


def loss(args: argparse.Namespace, service, write_ahead: bool, n: int) -> dict[str, float]:
    from otel_runs_exporter import RunsSpanProcessor

    prefix = f"loss-{n}-"
    with tempfile.TemporaryDirectory() as tmp:
        spool = os.path.join(tmp, "spool")
        proc = _child(args, service.url, spool, write_ahead, "kill", prefix)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        made: dict[str, float] = {}

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                i, when = line.split()
                made[f"{prefix}{i}"] = float(when)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(args.kill_after)
        killed = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        reader.join(10)
        time.sleep(max(0.3, 2 * args.slow))  # the request in flight at the kill is answered, as it would be
        service.faults.clear()
        replayer = RunsSpanProcessor(endpoint=service.url, api_key="bench-key", spool_dir=spool)
        assert replayer.force_flush(60_000)
        replayed = replayer.stats().replayed
        replayer.shutdown()
    runs = [r for r in service.runs() if r["name"].startswith(prefix)]
    stored = {r["name"] for r in runs}
    ids = {r["id"] for r in runs}
    missing = [t for name, t in made.items() if name not in stored]
    return {
        "made": len(made),
        "lost": len(missing),
        "window_ms": (killed - min(missing)) * 1000 if missing else 0.0,
        "replayed": replayed,
        "duplicates": sum(v for k, v in service.duplicate_posts().items() if k in ids),
    }


def file_cost(rounds: int) -> dict[str, float]:
    from otel_runs_exporter._encode import encode_run
    from otel_runs_exporter._spool import Spool

    runs = [encode_run("post", {"id": f"r{i}", "name": "bench", "inputs": {"input": "x" * 200}}, completes=True)
            for i in range(50)]
    best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        spool = Spool(tmp, 10**9)
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(200):
                wal = spool.write_ahead(runs)
                assert wal is not None
                spool.forget(wal)
            best = min(best, (time.perf_counter() - t0) / 200)
        spool.owner.release()
    return {"us_per_batch_of_50": best * 1e6, "us_per_run": best / 50 * 1e6}


def _summary(rows: list[dict[str, float]]) -> dict[str, str]:
    return {
        key: f"{statistics.median(r[key] for r in rows):.1f} ({min(r[key] for r in rows):.1f}-{max(r[key] for r in rows):.1f})"
        for key in rows[0]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spans", type=int, default=3000, help="spans per cost round")
    parser.add_argument("--rate", type=float, default=250.0, help="spans a second")
    parser.add_argument("--kill-after", type=float, default=2.0, help="seconds of stream before SIGKILL")
    parser.add_argument("--slow", type=float, default=0.3, help="seconds each answer takes in the slow-service rounds")
    parser.add_argument("--src", help="directory to import otel_runs_exporter from")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, args.src)
    from otel_runs_exporter.server import LocalService

    print(f"load average at start: {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs", flush=True)
    results: dict[str, dict[str, list[dict[str, float]]]] = {"cost": {}, "loss": {}, "loss_slow_service": {}}
    n = 0
    with LocalService() as service:
        for _ in range(args.rounds):
            for write_ahead in (False, True):
                n += 1
                mode = "on" if write_ahead else "off"
                results["cost"].setdefault(mode, []).append(cost(args, service, write_ahead, n))
                results["loss"].setdefault(mode, []).append(loss(args, service, write_ahead, n))
                service.faults.update(rate_slow=1.0, slow_seconds=args.slow)
                results["loss_slow_service"].setdefault(mode, []).append(loss(args, service, write_ahead, n))
                service.faults.clear()
                print(f"round {n}: write-ahead {mode}: cost {results['cost'][mode][-1]}, "
                      f"loss {results['loss'][mode][-1]}, slow service {results['loss_slow_service'][mode][-1]}", flush=True)
    load = os.getloadavg()[0]
    results["file"] = {"on": [file_cost(args.rounds)]}
    print(f"\nload average at the end: {load:.2f}")
    print(f"command: python bench/write_ahead.py --rounds {args.rounds} --spans {args.spans} --rate {args.rate:g} "
          f"--kill-after {args.kill_after:g} --slow {args.slow:g}")
    summary = {kind: {mode: _summary(rows) for mode, rows in by_mode.items()} for kind, by_mode in results.items()}
    for kind, by_mode in summary.items():
        for mode, figures in by_mode.items():
            print(f"{kind:18} write-ahead {mode:3}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "load_end": load, "rounds": results, "summary": summary}, fh, indent=1)


if __name__ == "__main__":
    main()
