"""An application that knows nothing of this package: only the OpenTelemetry API."""

import time

from opentelemetry import trace

tracer = trace.get_tracer("plain_app")

with tracer.start_as_current_span("handle-request", attributes={"input.value": '{"path": "/"}'}):
    time.sleep(0.5)  # long enough for the processor path to post the root before it ends
    with tracer.start_as_current_span("query-db"):
        pass
    with tracer.start_as_current_span("render"):
        pass
print("app done")
