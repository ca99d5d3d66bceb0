"""Deep trees: peak memory of a process nesting 1,200 spans, on both paths.

Each run carried its whole dotted_order, so a chain cost the square of its depth:
nesting 5,000 spans took the exporter past 1.2 GB. Runs past ``_ids.MAX_DEPTH``
now start a new trace naming their parent, so memory grows linearly. The process
is measured alone (its ``VmHWM``, from just before the spans to the end of the
flush); the service is this test's. ``bench/deep_trees.py exporter --spans 5000``
is the big version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from reliability.rel_helpers import report

SPANS = 1_200
# Measured growth: ~25 MB with the depth limit; 100 MB (exporter path) to 130 MB (processor) without.
GROWTH_BOUND_MB = 60

_CHILD = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from otel_runs_exporter import RunsSpanExporter, RunsSpanProcessor

    def peak_mb():
        with open("/proc/self/status") as status:
            return next(int(l.split()[1]) for l in status if l.startswith("VmHWM:")) / 1024

    path, spans, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    provider = TracerProvider()
    if path == "processor":
        counted = RunsSpanProcessor(endpoint=url, api_key="k", schedule_delay_s=0.05)
        provider.add_span_processor(counted)
    else:
        counted = RunsSpanExporter(endpoint=url, api_key="k")
        provider.add_span_processor(BatchSpanProcessor(counted, max_queue_size=10_000, schedule_delay_millis=50))
    tracer = provider.get_tracer("deep")
    before = peak_mb()
    chain, context = [], None
    for i in range(spans):
        span = tracer.start_span(f"s{i}", context=context)
        context = trace.set_span_in_context(span)
        chain.append(span)
    for span in reversed(chain):
        span.end()
    provider.force_flush(120_000)
    s = counted.stats()
    print(json.dumps({"grown_mb": round(peak_mb() - before, 1), "peak_mb": round(peak_mb(), 1),
                      "created": s.created, "delivered": s.delivered, "dropped": dict(s.dropped),
                      "queued": s.queued, "depth_limited": s.depth_limited}))
    provider.shutdown()
    """
)


@pytest.mark.parametrize("path", ["processor", "exporter"])
def test_1200_nested_spans_grow_memory_linearly_and_arrive(svc, path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, path, str(SPANS), svc.url], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    report({"case": f"{SPANS} nested spans, {path} path", **out})
    # Every span delivered or counted, and what the service holds is what the process said it sent.
    assert out["created"] == SPANS == out["delivered"] + sum(out["dropped"].values()) and out["queued"] == 0
    assert len([r for r in svc.runs() if r.get("end_time")]) == out["delivered"]
    assert svc.violations() == []
    assert out["grown_mb"] < GROWTH_BOUND_MB, out
