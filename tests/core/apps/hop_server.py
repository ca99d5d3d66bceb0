"""Service B of the two-process test: extracts the caller's context, traces its work."""

import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry import propagate, trace

from otel_runs_exporter import configure

provider = configure(project="hops")
tracer = trace.get_tracer("hop_server")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        ctx = propagate.extract(dict(self.headers))
        with tracer.start_as_current_span("server-handle", context=ctx, kind=trace.SpanKind.SERVER):
            with tracer.start_as_current_span("server-work"):
                pass
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.handle_request()  # one request, then exit (the SDK's exit hook delivers)
provider.force_flush(10000)
sys.exit(0)
