"""Instructions each contender adds per span, counted by valgrind: a measure this machine's noise does not move.

Wall and CPU time on a shared 2-core VM move by 30 % between identical rounds
(BENCHMARKS.md); instruction counts move by under 1 %. Each contender of
``contenders.py`` runs under ``valgrind --tool=callgrind`` twice, with N and 3N
spans, against ``sink.py`` in its own process (not counted); the difference over
2N spans is its instructions per span, start-up and warm-up cancelled out, and
``floor``'s (the SDK alone) is subtracted. Instructions are not time: they do
not see cache misses, the collector's memory traffic or the kernel (a GIL
hand-off, a socket write), and zstd's compression runs many cheap instructions,
so 64 KB spans, where ours compress and OTLP's do not, count far more than they
cost. Valgrind runs one thread at a time, so the worker keeps up with the
producer as it would not under load.

    python bench/instructions.py                        # ~8 min; needs valgrind
    python bench/instructions.py --workloads small-shallow-1 --src before=../old/src
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SPANS = {"small": 1000, "genai": 500, "64k": 100}  # N; each contender also runs 3N


def _instructions(contender: str, workload: str, spans: int, sink: str, src: str | None) -> int:
    env = {**os.environ, **({"PYTHONPATH": os.path.abspath(src)} if src else {})}
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         os.path.join(HERE, "contenders.py"), "--contender", contender, "--workload", workload,
         "--spans", str(spans), "--sink", sink, "--warmup", "100"],
        env=env, capture_output=True, text=True, check=True,
    )
    match = re.search(r"Collected : (\d+)", out.stderr)
    if match is None:
        raise SystemExit(f"valgrind reported no count for {contender}: {out.stderr[-500:]}")
    return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="small-shallow-1,genai-shallow-1,64k-shallow-1")
    parser.add_argument("--contenders", default="otlp,ours-processor")
    parser.add_argument("--src", action="append", default=[], metavar="LABEL=DIR",
                        help="also count ours-processor importing otel_runs_exporter from DIR, as LABEL; repeatable")
    args = parser.parse_args()
    sink_proc = subprocess.Popen([sys.executable, os.path.join(HERE, "sink.py"), "--port", "0"],
                                 stdout=subprocess.PIPE, text=True)
    try:
        assert sink_proc.stdout is not None
        sink = sink_proc.stdout.readline().strip().split()[-1]
        cases = [(c, c, None) for c in ["floor", *args.contenders.split(",")]]
        for spec in args.src:
            label, _, src = spec.partition("=")
            cases.append((f"ours-processor @{label}", "ours-processor", src))
        for workload in args.workloads.split(","):
            n = SPANS[workload.split("-")[0]]
            per_span = {}
            for name, contender, src in cases:
                low = _instructions(contender, workload, n, sink, src)
                high = _instructions(contender, workload, 3 * n, sink, src)
                per_span[name] = (high - low) / (2 * n)
            floor = per_span.pop("floor")
            otlp = per_span.get("otlp")
            print(f"{workload}: instructions per span added over floor ({floor / 1000:,.1f}k)")
            for name, value in per_span.items():
                ratio = f"  {(value - floor) / (otlp - floor):.2f}x OTLP's" if otlp and name != "otlp" else ""
                print(f"  {name:28s} {(value - floor) / 1000:9,.1f}k{ratio}", flush=True)
    finally:
        sink_proc.kill()


if __name__ == "__main__":
    main()
