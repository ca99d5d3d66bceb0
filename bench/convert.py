"""Micro-benchmark of the worker's conversion: ids, ``span_to_run`` and ``encode_run`` per span.

What the processor's worker does for each span it converts under load (its
post merged with its end), on spans built and ended beforehand, so the SDK and
the queue are not timed, nor is sending. One shallow trace shape (a root and 9
children) of the benchmark's payloads (``workloads.py``). Best of several
rounds with the garbage collector off: noise only ever adds.

    python bench/convert.py                     # small, genai, 64k
    python bench/convert.py --src DIR           # import otel_runs_exporter from DIR (an older tree, a compiled build)
    python bench/convert.py --payloads small --split   # also time each step on its own

Prints microseconds per span and which build was imported (pure Python or compiled).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _spans(payload: str, n: int) -> list:
    """``n`` ended spans in shallow traces, started and ended in the benchmark's order."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import set_span_in_context

    from workloads import SPANS_PER_TRACE, plan, variants

    pool = variants(payload)
    tracer = TracerProvider().get_tracer("bench")
    per_trace = SPANS_PER_TRACE["shallow"]
    spans = []
    for t in range(max(1, n // per_trace)):
        trace: list = [None] * per_trace
        for op, i in plan("shallow"):
            v = pool[(t * per_trace + i) % len(pool)]
            if op == "start":
                ctx = None if i == 0 else set_span_in_context(trace[0])
                trace[i] = tracer.start_span(v.name, context=ctx, attributes=v.start_attrs)
            else:
                trace[i].set_attributes(v.end_attrs)
                trace[i].end()
        spans.extend(trace)  # root first: the order RunNode links them in below
    return spans


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", help="directory to import otel_runs_exporter from")
    p.add_argument("--payloads", default="small,genai,64k")
    p.add_argument("--spans", type=int, default=2000, help="spans per round (64k: a tenth)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--split", action="store_true", help="also time ids, span_to_run and encode_run separately")
    p.add_argument("--gc", action="store_true", help="leave the garbage collector on while timing, as in the pipeline")
    a = p.parse_args(argv)
    if a.src:
        sys.path.insert(0, os.path.abspath(a.src))
    sys.path.insert(0, HERE)

    from otel_runs_exporter import _ids, resolve_settings
    from otel_runs_exporter._convert import ConvertOptions, RunNode, span_to_run
    from otel_runs_exporter._encode import encode_run

    compiled = not _ids.__file__.endswith(".py")
    print(f"us per span, best of {a.rounds} rounds ({'compiled' if compiled else 'pure Python'}: {os.path.dirname(_ids.__file__)})")
    settings = resolve_settings({"api_key": "x"}, env={})
    opts = ConvertOptions.from_settings(settings)
    # The run-id scheme, looked up once from the settings (an older tree took its name).
    id_scheme = getattr(opts, "id_scheme", "v7")
    limit = settings.max_value_chars
    for payload in a.payloads.split(","):
        n = a.spans if payload != "64k" else max(10, a.spans // 10)
        spans = _spans(payload, n)
        best = {"ids": float("inf"), "span_to_run": float("inf"), "encode_run": float("inf"), "all": float("inf")}
        for _ in range(a.rounds):
            nodes = []
            parent = None
            for i, span in enumerate(spans):
                node = RunNode(span, None if i % 10 == 0 else parent)
                if i % 10 == 0:
                    parent = node
                nodes.append(node)
            if not a.gc:
                gc.disable()
            try:
                t0 = time.perf_counter_ns()
                for span, node in zip(spans, nodes):
                    encode_run("post", span_to_run(span, node.resolve(id_scheme), opts), limit, completes=True)
                best["all"] = min(best["all"], (time.perf_counter_ns() - t0) / n / 1000)
                if a.split:
                    fresh = [RunNode(s, None) for s in spans]
                    t0 = time.perf_counter_ns()
                    ids = [node.resolve(id_scheme) for node in fresh]
                    best["ids"] = min(best["ids"], (time.perf_counter_ns() - t0) / n / 1000)
                    t0 = time.perf_counter_ns()
                    runs = [span_to_run(s, i, opts) for s, i in zip(spans, ids)]
                    best["span_to_run"] = min(best["span_to_run"], (time.perf_counter_ns() - t0) / n / 1000)
                    t0 = time.perf_counter_ns()
                    for run in runs:
                        encode_run("post", run, limit, completes=True)
                    best["encode_run"] = min(best["encode_run"], (time.perf_counter_ns() - t0) / n / 1000)
            finally:
                gc.enable()
        line = f"  {payload:<6} all {best['all']:7.2f}"
        if a.split:
            line += f"   ids {best['ids']:6.2f}  span_to_run {best['span_to_run']:6.2f}  encode_run {best['encode_run']:6.2f}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
