"""The exporter path: RunsSpanExporter under the SDK's own BatchSpanProcessor.

    python examples/exporter_path.py

For setups that compose exporters themselves (or next to other exporters on the
same provider) instead of calling configure(). The exporter sees spans only
when they end, children first, so it holds a child until its parent's place in
the tree is known; shutting the provider down delivers everything held. For
long-lived root spans (a server request) prefer RunsSpanProcessor, which sends
a run when its span starts: see docs/delivery.md, "Processor or exporter?".

With OTEL_EXPORTER_RUNS_ENDPOINT unset the script starts the embedded local
service and prints the tree it received; with it set, it sends there.
"""

import json

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_runs_exporter import RunsSpanExporter
from otel_runs_exporter.testing import local_service_unless_configured, show_runs


def ingest(paths: list[str]) -> int:
    tracer = trace.get_tracer("examples.exporter_path")
    total = 0
    with tracer.start_as_current_span("ingest", attributes={"input.value": json.dumps({"paths": paths})}):
        for path in paths:
            with tracer.start_as_current_span("parse", attributes={"file.path": path}):
                with tracer.start_as_current_span("embed", attributes={"langsmith.span.kind": "embedding"}):
                    total += len(path)
    return total


if __name__ == "__main__":
    with local_service_unless_configured() as service:
        provider = TracerProvider(resource=Resource.create({"service.name": "ingest-worker"}))
        # Settings (endpoint, API key, project) come from the environment, as with configure().
        provider.add_span_processor(BatchSpanProcessor(RunsSpanExporter()))
        trace.set_tracer_provider(provider)
        print("ingested:", ingest(["a.txt", "b.txt"]))
        provider.shutdown()  # flushes the batch processor, then the exporter delivers what it holds
        show_runs(service, expected=5)
