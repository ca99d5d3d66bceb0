"""Two processes, one run tree: a client calls a small HTTP server, and the `runs` propagator joins their runs.

    python examples/distributed/client.py

The client starts server.py as a second process, calls it once under a
@traceable run and waits for it to exit. propagate.inject() puts the current
run into the request headers: `traceparent` (W3C) and `langsmith-trace` (the
run's dotted_order, written by our `runs` propagator); the server extracts
them, so its runs land under the client's run, in the same trace. The same
works with OTEL_PROPAGATORS=tracecontext,baggage,runs instead of the
set_global_textmap() call below, and with a peer that uses the service's own SDK.

With OTEL_EXPORTER_RUNS_ENDPOINT unset the client starts the embedded local
service, passes its address to the server through the environment, and prints
the tree it received; with it set, both processes send there. Give a URL
(`client.py http://127.0.0.1:8000`) to call a server.py you started yourself:
see server.py for the three-terminal version with `otel-runs serve`.
"""

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from opentelemetry import propagate
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from otel_runs_exporter import configure, get_processor, traceable
from otel_runs_exporter.propagation import RunsPropagator
from otel_runs_exporter.testing import local_service_unless_configured, show_runs

SERVER = Path(__file__).with_name("server.py")


@traceable(name="ask_server")
def ask_server(url: str, question: str) -> str:
    headers = {"Content-Type": "application/json"}
    propagate.inject(headers)  # the current run: this one
    request = urllib.request.Request(url + "/answer", data=json.dumps({"question": question}).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.load(response)["answer"])


def start_server() -> tuple[subprocess.Popen[str], str]:
    """server.py on a free port, for one request; it inherits the endpoint through the environment."""
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", "0", "--requests", "1"], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None  # stdout=PIPE
    line = server.stdout.readline()  # "listening on http://127.0.0.1:PORT"
    if not line.startswith("listening on "):
        server.kill()
        sys.exit(f"server.py did not start (it printed {line!r})")
    return server, line.split()[-1]


if __name__ == "__main__":
    with local_service_unless_configured() as service:
        propagate.set_global_textmap(
            CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator(), RunsPropagator()])
        )
        configure()
        server, url = (None, sys.argv[1]) if len(sys.argv) > 1 else start_server()
        try:
            print("answer:", ask_server(url, "What are runs and traces?"))
        finally:
            if server is not None:
                try:
                    server.wait(timeout=15)  # it exits after its one request, delivering its runs
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
        processor = get_processor()  # None only if configure() could not install it
        if processor is not None and not processor.force_flush():  # deliver now, so the tree printed below is complete
            print("not everything was delivered:", processor.stats())
        # ask_server here; POST /answer, lookup and compose in the server process
        show_runs(service, expected=4)
