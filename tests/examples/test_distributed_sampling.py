"""Tail sampling across processes: the distributed example's server, a real second process, at rate 0.5.

Each process decides from the OTel trace id (as ``TraceIdRatioBased``), so a trace's two halves are kept
or dropped together although no process tells the other what it decided.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import urllib.request

from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from otel_runs_exporter.propagation import RunsPropagator

from core.helpers import processor_provider
from examples.test_examples import EXAMPLES, KEY, PROJECT, TIMEOUT_S, example_env, read_line

REQUESTS = 16  # all kept or all dropped by chance: 2 in 65,536


def test_the_distributed_example_keeps_or_drops_both_halves_of_a_trace_together(service):
    env = example_env(service, OTEL_EXPORTER_RUNS_SAMPLE_RATE="0.5")
    server = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "distributed" / "server.py"), "--port", "0", "--requests", str(REQUESTS)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = read_line(server, timeout=TIMEOUT_S)
        assert line.startswith("listening on http://127.0.0.1:"), line + server.stderr.read()
        url = line.split()[-1]
        provider, processor = processor_provider(service.url, api_key=KEY, project=PROJECT, sample_rate=0.5)
        tracer = provider.get_tracer("examples.distributed.client")
        propagator = CompositePropagator([TraceContextTextMapPropagator(), RunsPropagator()])
        for i in range(REQUESTS):
            with tracer.start_as_current_span(f"ask-{i}"):
                headers = {"Content-Type": "application/json"}
                propagator.inject(headers)
                body = json.dumps({"question": "What are runs?"}).encode()
                request = urllib.request.Request(url + "/answer", data=body, headers=headers)
                with urllib.request.urlopen(request, timeout=10) as response:
                    assert json.load(response)["answer"]
        _, err = server.communicate(timeout=30)  # it exits after its requests, delivering its runs
        assert server.returncode == 0, err
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert processor.force_flush(5000)
    kept = REQUESTS - processor.stats().sampled_out
    runs = service.wait_for_runs(4 * kept)
    by_trace = collections.defaultdict(list)
    for run in runs:
        by_trace[run["trace_id"]].append(run["name"])
    # Every trace that arrived has both halves: the client's run and the server's three under it.
    halves = [
        (sum(name.startswith("ask-") for name in names), sorted(n for n in names if not n.startswith("ask-")))
        for names in by_trace.values()
    ]
    assert halves == [(1, ["POST /answer", "compose", "lookup"])] * kept
    assert 0 < kept < REQUESTS
    assert {k: v for k, v in service.check().items() if v} == {}
