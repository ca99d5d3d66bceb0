"""Where the application thread's time goes with our processor: its hooks, the worker, the collector.

The producer of ``bench/run.py``'s throughput phase (flat out, one thread) traces
``--traces`` trees; each span's start + end is timed on the app thread, and so are
our ``on_start`` and ``on_end`` inside it. Each case runs in a fresh process
against ``bench/sink.py``, interleaved over ``--rounds``:

* ``floor``: the SDK alone; ``otlp``: the SDK's batch processor and OTLP exporter;
* ``ours``: our processor, as users get it;
* ``ours, hooks timed``: the same with its ``on_start`` and ``on_end`` timed too, each
  call wrapped (two clock reads and an append): the wrapping adds ~1 µs to the app
  figure, so only this case's hook columns are read, never its ``added``;
* ``ours, worker idle``: the same with the worker woken only at the end (a schedule
  delay and batch size past the run), so what remains over ``floor`` is our hooks;
* ``ours, gc off``: the collector disabled while the spans are made;
* ``floor + no-op`` and ``floor + keep``: the SDK with a processor of two empty hooks,
  and with one whose ``on_end`` only keeps each span in a list (as a worker that has
  not converted it yet does): what any processor costs, and what holding ended spans
  costs the app thread's allocations, with none of our code.

    python bench/app_thread.py                      # ~1 min; --workload genai-shallow-1, --rounds N
    python bench/app_thread.py --case floor --case otlp --case ours --src new=../tree/src   # A/B: "ours" from another tree too
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (bench/run.py's contender, environment, collector off, hooks timed)
CASES = {
    "floor": ("floor", {}, False, False),
    "otlp": ("otlp", {}, False, False),
    "ours": ("ours-processor", {}, False, False),
    "ours, hooks timed": ("ours-processor", {}, False, True),
    "ours, worker idle": (
        "ours-processor", {"OTEL_BSP_SCHEDULE_DELAY": "600000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100000"}, False, False
    ),
    "ours, gc off": ("ours-processor", {}, True, False),
    "floor + no-op": ("floor", {"APP_THREAD_PROCESSOR": "noop"}, False, False),
    "floor + keep": ("floor", {"APP_THREAD_PROCESSOR": "keep"}, False, False),
}


def _control(keep: bool) -> Any:
    """A processor for the two control cases: two empty hooks, or an ``on_end`` that only keeps the span."""
    from opentelemetry.sdk.trace import SpanProcessor

    kept: list[Any] = []

    class Control(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            pass

        def on_end(self, span: Any) -> None:
            if keep:
                kept.append(span)

    return Control()


def _child(contender: str, workload: str, traces: int, gc_off: bool, timed: bool) -> None:
    sys.path.insert(0, HERE)
    from contenders import Tracing, _trace_many
    from workloads import Workload, variants

    sink = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "sink.py"), "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert sink.stdout is not None
    url = sink.stdout.readline().strip().split()[-1]
    wl = Workload.parse(workload)
    t = Tracing(contender, url, "throughput", traces * wl.spans_per_trace * 2, None)
    hooks: dict[str, list[int]] = {"on_start": [], "on_end": []}
    if timed:
        _time_hooks(t, hooks)
    control = os.environ.get("APP_THREAD_PROCESSOR")
    if contender == "floor" and control:
        t.provider.add_span_processor(_control(keep=control == "keep"))
    pool = variants(wl.payload)
    _trace_many(t, wl.shape, pool, 0, 200, None)  # warm up
    for times in hooks.values():
        times.clear()
    if gc_off:
        gc.disable()
    spans: list[int] = []
    _trace_many(t, wl.shape, pool, 200, traces, spans)
    gc.enable()
    line = {"app": _p50_us(spans), **{name: _p50_us(times) for name, times in hooks.items() if times}}
    print(json.dumps(line), flush=True)
    sink.kill()
    os._exit(0)  # the worker may hold a minute's schedule delay: its delivery is not what is measured


def _time_hooks(t: Any, hooks: dict[str, list[int]]) -> None:
    """Wrap our processor's hooks in the SDK's processor tuple, timing each call."""
    processor, clock = t.processor, time.perf_counter_ns
    on_start, on_end = processor.on_start, processor.on_end

    def timed_start(span: Any, parent_context: Any = None) -> None:
        began = clock()
        on_start(span, parent_context)
        hooks["on_start"].append(clock() - began)

    def timed_end(span: Any) -> None:
        began = clock()
        on_end(span)
        hooks["on_end"].append(clock() - began)

    processor.on_start, processor.on_end = timed_start, timed_end


def _p50_us(values: list[int]) -> float:
    return statistics.median(values) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="small-shallow-1")
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--case", action="append", default=[], choices=list(CASES), metavar="NAME",
        help="a case to run, by its name (some hold a comma: quote them); repeatable; default: all",
    )
    parser.add_argument(
        "--src", action="append", default=[], metavar="LABEL=DIR",
        help="also run the 'ours' cases importing otel_runs_exporter from DIR (a checkout's src), as LABEL; repeatable",
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        contender, gc_off, timed = args.child
        _child(contender, args.workload, args.traces, gc_off == "1", timed == "1")
        return
    cases = {name: case for name, case in CASES.items() if not args.case or name in args.case}
    for spec in args.src:
        label, _, src = spec.partition("=")
        for name, (contender, env, gc_off, timed) in list(cases.items()):
            if contender == "ours-processor":
                cases[f"{name} @{label}"] = (contender, {**env, "PYTHONPATH": os.path.abspath(src)}, gc_off, timed)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, (contender, env, gc_off, timed) in cases.items():
            out = subprocess.run(
                [sys.executable, __file__, "--workload", args.workload, "--traces", str(args.traces),
                 "--child", contender, "1" if gc_off else "0", "1" if timed else "0"],
                env={**os.environ, **env}, capture_output=True, text=True, check=True,
            ).stdout
            results[name].append(json.loads(out.strip().splitlines()[-1]))
    print(f"{args.workload}, {args.rounds} interleaved rounds, load average {os.getloadavg()[0]:.2f}; p50 in µs, "
          "spread over rounds (median)")
    floor = statistics.median(r["app"] for r in results["floor"]) if results.get("floor") else 0.0
    for name, rounds in results.items():
        cells = []
        for key in ("app", "on_start", "on_end"):
            values = [r[key] for r in rounds if key in r]
            if values:
                cells.append(f"{key} {min(values):.1f}-{max(values):.1f} ({statistics.median(values):.1f})")
        added = statistics.median(r["app"] for r in rounds) - floor
        ratio = ""
        if results.get("otlp") and results.get("floor") and name not in ("floor", "otlp"):
            # Each round's added over OTLP's in the same round: the rounds drift together.
            per_round = [
                (r["app"] - f["app"]) / (o["app"] - f["app"])
                for r, f, o in zip(rounds, results["floor"], results["otlp"]) if o["app"] > f["app"]
            ]
            if per_round:
                ratio = f"   x otlp {min(per_round):.2f}-{max(per_round):.2f} ({statistics.median(per_round):.2f})"
        print(f"  {name:24s} added {added:+5.1f}   " + "   ".join(cells) + ratio)


if __name__ == "__main__":
    main()
