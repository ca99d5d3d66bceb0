"""Service A of the two-process test: calls B with the current run in the headers."""

import sys

import requests
from opentelemetry import propagate, trace

from otel_runs_exporter import configure

provider = configure(project="hops")
tracer = trace.get_tracer("hop_client")

with tracer.start_as_current_span("client-call"):
    headers: dict = {}
    propagate.inject(headers)
    assert "langsmith-trace" in headers and "traceparent" in headers, headers
    requests.get(f"http://127.0.0.1:{sys.argv[1]}/", headers=headers, timeout=10)
provider.force_flush(10000)
