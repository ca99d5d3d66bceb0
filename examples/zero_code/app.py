"""An application that knows nothing of otel-runs-exporter: it only uses the OpenTelemetry API.

Traced without changing a line, by `opentelemetry-instrument` and environment
variables. In one command (it starts the embedded local service, runs the
command line below with the address filled in, and prints the tree):

    python examples/zero_code/run.py

Or by hand, with the local service in a second terminal (`otel-runs serve`,
listening on http://127.0.0.1:1984):

    OTEL_TRACES_EXPORTER=runs \\
    OTEL_EXPORTER_RUNS_ENDPOINT=http://127.0.0.1:1984 \\
    OTEL_EXPORTER_RUNS_API_KEY=local-example-key \\
    OTEL_EXPORTER_RUNS_PROJECT=zero-code \\
    OTEL_SERVICE_NAME=checkout \\
    opentelemetry-instrument python examples/zero_code/app.py

    otel-runs runs list

OTEL_TRACES_EXPORTER=runs selects this package's processor; the project
(OTEL_EXPORTER_RUNS_PROJECT, default "default") names where the runs go, while
OTEL_SERVICE_NAME only sets the resource's service.name (in each run's
metadata, `otel_service_name`; the root run has the whole `otel_resource`). `otel-runs serve` without --api-key accepts any
key; for the hosted service use your own (examples/hosted_service.md).
"""

import time

from opentelemetry import trace

tracer = trace.get_tracer("checkout")


def handle_checkout(cart: list[str]) -> dict[str, object]:
    with tracer.start_as_current_span("POST /checkout", kind=trace.SpanKind.SERVER) as span:
        span.set_attribute("cart.size", len(cart))
        with tracer.start_as_current_span("price_items"):
            total = sum(len(item) for item in cart)
        with tracer.start_as_current_span("charge_card") as charge:
            time.sleep(0.01)  # stands in for a payment API call
            charge.set_attribute("payment.amount", total)
        return {"status": "paid", "total": total}


if __name__ == "__main__":
    print("checkout:", handle_checkout(["book", "lamp"]))
