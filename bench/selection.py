"""What sending less saves: CPU per span with tail sampling and with ``spans=genai``, and what holding costs.

    python bench/selection.py                  # 5 interleaved rounds (~3 min on 2 cores); rewrites the
                                               # "Sending what matters" block of BENCHMARKS.md
    python bench/selection.py --rounds 3 --traces 300 --no-write     # a quicker look, nothing written
    python bench/selection.py --smoke                                # does it still run (seconds); no figure

Two ratios, each measured as in ``contenders.py`` (a fresh process per measurement,
the sink in its own process, process CPU from the first span until the sink has
every run that is sent), with a ``floor`` (the SDK with no processor) in the same
round so the ratio compares what the exporter adds:

* **rate**: ``sample_rate=0.1`` (keep_errors on, no errors) against the default,
  on 10-span traces of the ``small`` and of the ``genai`` payload;
* **genai**: ``spans=genai`` against ``spans=all`` on 10-span requests as
  ``opentelemetry-instrument`` records them, where 8 spans are HTTP/DB noise (the
  FastAPI server span, SQLAlchemy queries with their SQL, requests calls, each
  with the attributes those instrumentations set) and 2 are LLM calls (openai-v2
  with its default, no message content; one nested under a query, so it is
  spliced). The runs kept are the costly ones there (an LLM run converts in
  ~50 µs, a query's in ~15 µs), so it is measured again with every span the
  ``small`` payload (the LLM calls known by their scope alone: what the filter
  itself costs, as the target assumes), and with the LLM calls carrying their
  messages (the ``genai`` payload, ~4 KB): no target for that one. And what
  ``spans=genai`` could cost at best: only the root and the two LLM calls it
  keeps, traced and sent with no noise at all (``noisy-kept``), against sending
  all ten, each with its own floor.

Rounds are interleaved (every mode once per round, in a rotated order) so drift on
this shared machine hits every mode alike; the spread over rounds is reported.

**hold**: what a held trace costs, with ``sample_rate=0`` (every trace held) and a
small ``sample_hold_max_bytes``: traces whose roots stay open while their spans
end, measured with ``tracemalloc`` against the hold's own estimate and its bound.
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
import tracemalloc
import urllib.request
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from workloads import variants  # noqa: E402

OUT_MD = os.path.join(ROOT, "BENCHMARKS.md")
BEGIN, END = "<!-- selection:begin -->", "<!-- selection:end -->"
SPANS_PER_TRACE = 10

# mode -> (workload, processor settings; None: the floor)
MODES: dict[str, tuple[str, dict[str, Any] | None]] = {
    "small floor": ("small", None),
    "small unsampled": ("small", {}),
    "small rate 0.1": ("small", {"sample_rate": 0.1}),
    "genai floor": ("genai", None),
    "genai unsampled": ("genai", {}),
    "genai rate 0.1": ("genai", {"sample_rate": 0.1}),
    "noisy floor": ("noisy", None),
    "noisy spans=all": ("noisy", {}),
    "noisy spans=genai": ("noisy", {"spans": "genai"}),
    "noisy-equal floor": ("noisy-equal", None),
    "noisy-equal spans=all": ("noisy-equal", {}),
    "noisy-equal spans=genai": ("noisy-equal", {"spans": "genai"}),
    "noisy-content floor": ("noisy-content", None),
    "noisy-content spans=all": ("noisy-content", {}),
    "noisy-content spans=genai": ("noisy-content", {"spans": "genai"}),
    "noisy-kept floor": ("noisy-kept", None),
    "noisy-kept spans=all": ("noisy-kept", {}),
}
# name -> (measured, baseline, floor, target[, the measured mode's own floor when its workload differs])
RATIOS: dict[str, tuple[Any, ...]] = {
    "rate 0.1, small payload": ("small rate 0.1", "small unsampled", "small floor", 0.35),
    "rate 0.1, genai payload": ("genai rate 0.1", "genai unsampled", "genai floor", 0.35),
    "spans=genai, 80 % noise": ("noisy spans=genai", "noisy spans=all", "noisy floor", 0.4),
    "spans=genai, 80 % noise, every span the small payload": (
        "noisy-equal spans=genai", "noisy-equal spans=all", "noisy-equal floor", 0.4),
    "spans=genai, 80 % noise, LLM calls with their messages": (
        "noisy-content spans=genai", "noisy-content spans=all", "noisy-content floor", None),
    "only the runs spans=genai keeps, sent with no noise traced at all (the least spans=genai could cost)": (
        "noisy-kept spans=all", "noisy spans=all", "noisy floor", None, "noisy-kept floor"),
}


def _sink_call(url: str, path: str) -> dict:
    method = "POST" if path.startswith("/_bench/reset") else "GET"
    request = urllib.request.Request(url + path, data=b"" if method == "POST" else None, method=method)
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read() or b"{}")


# --- one measurement, in its own process ------------------------------------------


def _tracing(workload: str):
    """``trace(k)`` traces request ``k`` of the workload: 10 spans, ended innermost first (``noisy-kept``:
    only the 3 that ``spans=genai`` keeps of ``noisy``'s 10, the noise not traced at all; its CPU is still
    given per span of the whole request)."""
    from opentelemetry.trace import SpanKind, set_span_in_context

    def tracer(provider: Any, scope: str) -> Any:
        return provider.get_tracer(scope)

    small, genai = variants("small"), variants("genai")

    def equal(provider: Any):
        """The same tree with every span the ``small`` payload: the LLM calls known by their scope alone."""
        scopes = ["opentelemetry.instrumentation.fastapi"] + ["opentelemetry.instrumentation.sqlalchemy"] * 7
        scopes[1:1] = ["pydantic-ai"]  # nested under the first query, as in the noisy tree
        tracers = [tracer(provider, scope) for scope in scopes + ["pydantic-ai"]]

        def trace(k: int) -> None:
            def start(i: int, ctx: Any) -> Any:
                v = small[(k * SPANS_PER_TRACE + i) % len(small)]
                span = tracers[i].start_span(v.name, context=ctx, attributes=v.start_attrs)
                span.set_attributes(v.end_attrs)
                return span

            root = start(0, None)
            ctx = set_span_in_context(root)
            first = start(2, ctx)
            start(1, set_span_in_context(first)).end()
            first.end()
            for i in range(3, 10):
                start(i, ctx).end()
            root.end()

        return trace

    def make(provider: Any):
        if workload in ("small", "genai"):
            pool = small if workload == "small" else genai
            bench = tracer(provider, "bench")

            def trace(k: int) -> None:
                root_v = pool[k % len(pool)]
                root = bench.start_span(root_v.name, attributes=root_v.start_attrs)
                ctx = set_span_in_context(root)
                for i in range(1, SPANS_PER_TRACE):
                    v = pool[(k * SPANS_PER_TRACE + i) % len(pool)]
                    child = bench.start_span(v.name, context=ctx, attributes=v.start_attrs)
                    child.set_attributes(v.end_attrs)
                    child.end()
                root.set_attributes(root_v.end_attrs)
                root.end()

            return trace
        server = tracer(provider, "opentelemetry.instrumentation.fastapi")
        db = tracer(provider, "opentelemetry.instrumentation.sqlalchemy")
        http = tracer(provider, "opentelemetry.instrumentation.requests")
        llm = tracer(provider, "opentelemetry.instrumentation.openai_v2")
        content = workload == "noisy-content"
        if workload == "noisy-equal":
            return equal(provider)

        def query(k: int, i: int, ctx: Any) -> Any:
            # What opentelemetry-instrument's SQLAlchemy instrumentation records for a query.
            text = small[(k * SPANS_PER_TRACE + i) % len(small)].name
            return db.start_span("SELECT app", context=ctx, attributes={
                "db.system.name": "postgresql", "db.namespace": "app", "db.operation.name": "SELECT",
                "db.query.text": f"SELECT id, name, created_at, owner_id, status FROM items WHERE owner_id = %(owner_id)s "
                                 f"AND status IN (%(s1)s, %(s2)s) ORDER BY created_at DESC LIMIT 50 /* {text} */",
                "server.address": "db.internal", "server.port": 5432,
            })

        def fetch(k: int, i: int, ctx: Any) -> Any:
            span = http.start_span("GET", context=ctx, kind=SpanKind.CLIENT, attributes={
                "http.request.method": "GET", "url.full": f"https://inventory.internal/api/v2/items/{k}-{i}?expand=owner",
                "server.address": "inventory.internal", "server.port": 443, "network.protocol.version": "1.1",
            })
            span.set_attribute("http.response.status_code", 200)
            return span

        def call_model(k: int, i: int, ctx: Any) -> None:
            # openai-v2 with its default (no message content); with content, the genai payload's messages too.
            v = genai[(k * 2 + i) % len(genai)]
            attributes = {key: value for key, value in v.start_attrs.items() if content or "messages" not in key}
            span = llm.start_span(v.name, context=ctx, kind=SpanKind.CLIENT, attributes={
                **attributes, "gen_ai.request.max_tokens": 512, "server.address": "api.openai.com",
            })
            span.set_attributes({key: value for key, value in v.end_attrs.items() if content or "messages" not in key})
            span.end()

        kept_only = workload == "noisy-kept"

        def trace(k: int) -> None:
            root = server.start_span("POST /chat", kind=SpanKind.SERVER, attributes={
                "http.request.method": "POST", "url.scheme": "https", "url.path": "/chat", "http.route": "/chat",
                "server.address": "app.example.com", "server.port": 443, "network.protocol.version": "1.1",
                "user_agent.original": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0",
                "client.address": "10.0.3.17",
            })
            ctx = set_span_in_context(root)
            if kept_only:
                call_model(k, 0, ctx)
            else:
                first = query(k, 1, ctx)  # the first LLM call under a query: spliced to the root
                call_model(k, 0, set_span_in_context(first))
                first.end()
                for i in range(2, 8):
                    (query if i % 2 else fetch)(k, i, ctx).end()
            call_model(k, 1, ctx)
            root.set_attribute("http.response.status_code", 200)
            root.end()

        return trace

    return make


def measure(mode: str, traces: int, sink: str, warm_up: int = 20) -> dict:
    from opentelemetry.sdk.trace import TracerProvider

    workload, settings = MODES[mode]
    provider = TracerProvider()
    processor = None
    if settings is not None:
        from otel_runs_exporter import RunsSpanProcessor

        processor = RunsSpanProcessor(
            endpoint=sink, api_key="x", max_queue_size=4 * traces * SPANS_PER_TRACE + 1024, **settings
        )
        provider.add_span_processor(processor)
    trace = _tracing(workload)(provider)
    for k in range(warm_up):  # the first connection, caches
        trace(10**6 + k)
    provider.force_flush(60_000)
    _sink_call(sink, "/_bench/reset")
    before = processor.stats() if processor is not None else None
    gc.collect()
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    for k in range(traces):
        trace(k)
    provider.force_flush(120_000)
    sent = 0
    if processor is not None:
        after = processor.stats()
        sent = after.created - before.created
        _sink_call(sink, f"/_bench/wait?n={sent}&timeout=120")
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    spans = traces * SPANS_PER_TRACE
    result = {"mode": mode, "spans": spans, "sent": sent, "cpu_us_per_span": cpu / spans * 1e6, "wall_s": wall}
    if processor is not None:
        s = processor.stats()
        result.update(filtered=s.filtered, sampled_out=s.sampled_out, dropped=s.dropped_total)
    provider.shutdown()
    return result


# --- what holding costs ---------------------------------------------------------------


def hold_memory(open_traces: int, spans_per_trace: int, bound_bytes: int) -> dict:
    """Traces at rate 0 whose roots stay open while their spans end: held until a bound decides them."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import set_span_in_context

    from otel_runs_exporter import RunsSpanProcessor

    processor = RunsSpanProcessor(
        endpoint="http://127.0.0.1:9", api_key="x", sample_rate=0.0, sample_hold_max_bytes=bound_bytes,
        schedule_delay_s=3600,
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    pool = variants("small")
    hold = processor._worker.hold  # bench only: the hold's own estimate, read as the worker reads it
    roots = [tracer.start_span(f"agent-{t}") for t in range(open_traces)]
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    peak_estimate = peak_traced = 0
    for i in range(spans_per_trace):
        for t, root in enumerate(roots):
            v = pool[(t * spans_per_trace + i) % len(pool)]
            span = tracer.start_span(v.name, context=set_span_in_context(root), attributes=v.start_attrs)
            span.set_attributes(v.end_attrs)
            span.end()
        del span
        traced = tracemalloc.get_traced_memory()[0] - base
        peak_traced = max(peak_traced, traced)
        peak_estimate = max(peak_estimate, hold.bytes)
    held_runs = processor.stats().sampling_held
    tracemalloc.stop()
    stats = processor.stats()
    processor.shutdown(timeout_millis=0)
    return {
        "bound_bytes": bound_bytes,
        "spans": open_traces * spans_per_trace,
        "open_traces": open_traces,
        "peak_estimate_bytes": peak_estimate,
        "peak_traced_bytes": peak_traced,
        "held_runs_at_end": held_runs,
        "sampled_at_bound": dict(stats.sampled_at_bound),
    }


# --- the driver ------------------------------------------------------------------------


def _one(mode: str, traces: int, sink: str, src: str | None) -> dict:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, __file__, "--one", mode, "--traces", str(traces), "--sink", sink],
        capture_output=True, text=True, env=env, timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{mode}: {proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} (median {statistics.median(values):.2f})"


def render(results: dict) -> str:
    rounds = results["rounds"]
    lines = [
        f"{len(rounds)} interleaved rounds of {results['traces']} ten-span traces per mode, each mode in a fresh "
        f"process, on this 2-core machine ({results['when']}). CPU is the process's (app thread and worker) "
        "from the first span until the sink has every run sent, per span traced; \"added\" is that minus the "
        "same round's `floor` (the SDK alone), what the exporter costs; the ratio is of added CPU, and of total "
        "CPU in brackets.",
        "",
        "| Ratio | Added CPU µs/span, measured / baseline (medians) | Ratio of added CPU, spread over rounds | Total-CPU ratio | Target | Met |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in RATIOS.items():
        measured, baseline, floor, target = row[:4]
        floor_m = row[4] if len(row) > 4 else floor
        added_m = [r[measured]["cpu_us_per_span"] - r[floor_m]["cpu_us_per_span"] for r in rounds]
        added_b = [r[baseline]["cpu_us_per_span"] - r[floor]["cpu_us_per_span"] for r in rounds]
        ratios = [m / b for m, b in zip(added_m, added_b)]
        totals = [(r[measured]["cpu_us_per_span"] if floor_m == floor
                   else r[measured]["cpu_us_per_span"] - r[floor_m]["cpu_us_per_span"] + r[floor]["cpu_us_per_span"])
                  / r[baseline]["cpu_us_per_span"] for r in rounds]
        if target is None:
            met, aim = "(no target)", "—"
        else:
            aim = f"≤ {target}"
            met = "yes" if max(ratios) <= target else ("at the median" if statistics.median(ratios) <= target else "no")
        lines.append(
            f"| {name} | {statistics.median(added_m):.1f} / {statistics.median(added_b):.1f} | {_spread(ratios)} "
            f"| {_spread(totals)} | {aim} | {met} |"
        )
    sample = rounds[0]
    lines += [
        "",
        "Runs sent per round: rate 0.1 sent "
        f"{sample['small rate 0.1']['sent']} of {sample['small rate 0.1']['spans']} small and "
        f"{sample['genai rate 0.1']['sent']} of {sample['genai rate 0.1']['spans']} genai runs (the rest sampled out, "
        f"never converted); spans=genai sent {sample['noisy spans=genai']['sent']} of "
        f"{sample['noisy spans=genai']['spans']} (each request's root and its two LLM calls; "
        f"{sample['noisy spans=genai']['filtered']} filtered).",
    ]
    hold = results.get("hold")
    if hold:
        lines += [
            "",
            "| Held while waiting (`sample_rate=0`, roots open) | Spans ended | Bound (`sample_hold_max_bytes`) | Hold's estimate, peak | Measured (tracemalloc), peak | Decided at the bound |",
            "|---|---|---|---|---|---|",
        ]
        for h in hold:
            lines.append(
                f"| {h['open_traces']} traces | {h['spans']:,} | {h['bound_bytes'] / 2**20:.0f} MiB "
                f"| {h['peak_estimate_bytes'] / 2**20:.2f} MiB | {h['peak_traced_bytes'] / 2**20:.2f} MiB "
                f"| {', '.join(f'{k}: {v}' for k, v in h['sampled_at_bound'].items()) or 'none'} |"
            )
    return "\n".join(lines)


def _smoke(sink: Any, out: str | None) -> int:
    """What the full run does, at a scale that proves only that it still runs: every mode once, in one
    process rather than one each (the figures mean nothing here), the hold past a tiny bound, the report."""
    try:
        rounds = [{mode: measure(mode, 3, sink.url, warm_up=2) for mode in MODES}]
    finally:
        sink.close()
    results = {"rounds": rounds, "traces": 3, "when": time.strftime("%Y-%m-%d"),
               "hold": [hold_memory(3, 20, 64 * 2**10)]}
    print(render(results))
    if out:
        with open(out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--traces", type=int, default=1000, help="ten-span traces per measurement")
    parser.add_argument("--no-write", action="store_true", help="print, leave BENCHMARKS.md alone")
    parser.add_argument("--src", help="import otel_runs_exporter from this directory")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--only", help="measure only the modes whose names start with this (say, 'small'); nothing written")
    parser.add_argument("--smoke", action="store_true",
                        help="every mode once on a few traces, in this process, and a tiny hold; nothing written "
                             "(tests/test_bench_smoke.py: the script still runs, no figure)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--sink", help=argparse.SUPPRESS)
    parser.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.one:
        print(json.dumps(measure(a.one, a.traces, a.sink)))
        return 0
    if a.hold:
        print(json.dumps([hold_memory(20, 1000, 4 * 2**20), hold_memory(200, 200, 16 * 2**20)]))
        return 0

    from run import SinkProcess

    if a.smoke:
        return _smoke(SinkProcess(), a.json)
    sink = SinkProcess()
    rounds: list[dict[str, dict]] = []
    names = [name for name in MODES if not a.only or name.startswith(a.only)]
    try:
        for r in range(a.rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            got = {}
            for mode in order:
                got[mode] = _one(mode, a.traces, sink.url, a.src)
                print(f"round {r + 1} {mode:<20} {got[mode]['cpu_us_per_span']:7.1f} us/span  sent {got[mode]['sent']}", flush=True)
            rounds.append(got)
    finally:
        sink.close()
    if a.only:
        for name, row in RATIOS.items():
            measured, baseline, floor = row[:3]
            floor_m = row[4] if len(row) > 4 else floor
            if {measured, baseline, floor, floor_m} <= set(names):
                ratios = [(r[measured]["cpu_us_per_span"] - r[floor_m]["cpu_us_per_span"])
                          / (r[baseline]["cpu_us_per_span"] - r[floor]["cpu_us_per_span"]) for r in rounds]
                print(f"{name}: {_spread(ratios)}")
        return 0
    hold = subprocess.run([sys.executable, __file__, "--hold"], capture_output=True, text=True, check=True, timeout=900)
    results = {
        "rounds": rounds,
        "traces": a.traces,
        "when": time.strftime("%Y-%m-%d"),
        "hold": json.loads(hold.stdout.strip().splitlines()[-1]),
    }
    text = render(results)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    if not a.no_write:
        old = open(OUT_MD).read()
        head, rest = old.split(BEGIN, 1)
        new = head + BEGIN + "\n" + text + "\n" + END + rest.split(END, 1)[1]
        with open(OUT_MD, "w") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
