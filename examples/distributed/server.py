"""The server half of examples/distributed: a small HTTP service that continues its caller's run tree.

client.py starts it for you (`python examples/distributed/client.py`). To run the
two processes yourself, against `otel-runs serve`, use three terminals:

    otel-runs serve
    OTEL_EXPORTER_RUNS_ENDPOINT=http://127.0.0.1:1984 python examples/distributed/server.py --port 8000
    OTEL_EXPORTER_RUNS_ENDPOINT=http://127.0.0.1:1984 python examples/distributed/client.py http://127.0.0.1:8000

then stop the server with Ctrl-C (it delivers its last runs as it exits) and
look at the single tree with `otel-runs runs list`.

For each `POST /answer` the server extracts the caller's context from the
request headers. The `runs` propagator reads the `langsmith-trace` header (the
caller's run, as a dotted_order), so the server's span becomes a child of the
client's run, in the same trace, although another process sends it.
"""

import argparse
import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry import propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from otel_runs_exporter import configure, traceable
from otel_runs_exporter.propagation import RunsPropagator

tracer = trace.get_tracer("examples.distributed.server")
FACTS = {
    "runs": "A run is one traced step: a chain, a model call, a tool call.",
    "traces": "A trace is a tree of runs sharing one trace_id.",
}


@traceable(run_type="retriever")
def lookup(question: str) -> list[str]:
    return [fact for topic, fact in FACTS.items() if topic.rstrip("s") in question.lower()]


@traceable(run_type="chain")
def compose(question: str, facts: list[str]) -> str:
    return " ".join(facts) if facts else f"No facts about {question!r}."


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # keep the example's output to what it is about

    def do_POST(self) -> None:
        # self.headers matches names case-insensitively, as HTTP does; a plain dict would not.
        parent = propagate.extract(self.headers)
        with tracer.start_as_current_span("POST /answer", context=parent, kind=trace.SpanKind.SERVER) as span:
            question = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))["question"]
            span.set_attribute("input.value", json.dumps({"question": question}))
            answer = compose(question, lookup(question))
            span.set_attribute("output.value", json.dumps({"answer": answer}))
        body = json.dumps({"answer": answer}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (0: a free one)")
    parser.add_argument("--requests", type=int, default=0, help="exit after this many requests (0: run until stopped)")
    args = parser.parse_args()

    propagate.set_global_textmap(
        CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator(), RunsPropagator()])
    )
    configure()  # the SDK's exit hook delivers what is left when the process ends
    # SIGTERM ends the process through SystemExit, so that exit hook runs too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))

    server = HTTPServer(("127.0.0.1", args.port), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        if args.requests:
            for _ in range(args.requests):
                server.handle_request()
        else:
            server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
