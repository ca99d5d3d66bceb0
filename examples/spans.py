"""Plain OpenTelemetry spans: one configure() call, nested spans, and the run tree they become.

Run it from the repository root (after `pip install .`):

    python examples/spans.py

configure() installs the runs span processor on the global tracer provider, so
every span becomes a run, nested as the spans are. With OTEL_EXPORTER_RUNS_ENDPOINT
unset, the script starts the embedded local service on a free port, sends there
and prints the tree it received. With it set (to `otel-runs serve`'s
http://127.0.0.1:1984, or to the hosted service: see examples/hosted_service.md)
the runs go there instead. Everything else is read from the environment too:
OTEL_EXPORTER_RUNS_API_KEY, OTEL_EXPORTER_RUNS_PROJECT (default "default"), ...
"""

import json

from opentelemetry import trace

from otel_runs_exporter import configure, get_processor
from otel_runs_exporter.testing import local_service_unless_configured, show_runs

tracer = trace.get_tracer("examples.spans")


def answer(question: str) -> str:
    # input.value / output.value become the run's inputs and outputs;
    # langsmith.span.kind picks its run type (chain when absent).
    with tracer.start_as_current_span("answer_question") as span:
        span.set_attribute("input.value", json.dumps({"question": question}))
        with tracer.start_as_current_span("retrieve", attributes={"langsmith.span.kind": "retriever"}) as step:
            documents = ["Each OpenTelemetry span becomes a run.", "Runs nest as their spans do."]
            step.set_attribute("output.value", json.dumps({"documents": documents}))
        with tracer.start_as_current_span("compose") as step:
            reply = " ".join(documents)
            step.set_attribute("output.value", json.dumps({"reply": reply}))
        span.set_attribute("output.value", json.dumps({"answer": reply}))
        return reply


if __name__ == "__main__":
    with local_service_unless_configured() as service:
        configure()
        print("answer:", answer("How do spans become runs?"))
        processor = get_processor()  # None only if configure() could not install it
        if processor is not None and not processor.force_flush():  # deliver now, so the tree printed below is complete
            print("not everything was delivered:", processor.stats())
        show_runs(service, expected=3)
