"""A loopback sink for the benchmark: reads and discards request bodies, counts what arrived.

Run it as its own process so its CPU is never charged to a contender::

    python bench/sink.py --port 0        # prints "listening on http://127.0.0.1:PORT" then serves

It answers what the contenders send:

* ``POST /runs/multipart`` (plain, ``zstd`` or ``gzip`` encoded) -> 202; counts
  ``post.<id>`` / ``patch.<id>`` main parts; a run is *completed* by a patch or
  by a post that carries ``end_time``.
* ``POST /runs``, ``POST /runs/batch``, ``PATCH /runs/<id>`` -> 202 (the basic path).
* ``POST /otel/v1/traces`` (OTLP/protobuf) -> 200; counts spans.
* ``GET /info`` -> the shape the langsmith client reads to pick multipart and zstd.

``--max-body-bytes N`` makes it a receiver with a request size limit: a body over
``N`` bytes (as sent, before decompression) is read, counted as ``too_large`` and
answered 413, like a collector or an ingest proxy past its limit.

and a control surface under ``/_bench/``:

* ``POST /_bench/reset?down=503|close|&latency=0|1`` zero the counters, set the mode;
* ``GET /_bench/stats`` the counters as JSON;
* ``GET /_bench/wait?n=N&timeout=S`` block until ``n`` runs/spans are completed
  (long poll: the waiting contender spends no CPU polling);
* ``GET /_bench/latencies`` arrival minus end time of every completed run/span, in ms
  (recorded only when reset with ``latency=1``, to keep the hot path cheap).

It must never be the bottleneck: a threading server (one thread per keep-alive
connection), whole-body reads, counting with one regex pass over the bytes and
no JSON parsing unless latencies are asked for. ``run.py`` measures its capacity
at the start of every run and prints it next to the contenders' rates.
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import orjson

try:  # langsmith compresses with zstd when /info says the service accepts it
    import zstandard
except ImportError:  # pragma: no cover - then /info does not offer zstd
    zstandard = None

# A main part is named "post.<id>" or "patch.<id>"; ".inputs"/".outputs"/... parts
# have one more dotted segment, which the closing quote right after the id excludes.
_MAIN_PART = re.compile(rb'name="(post|patch)\.([0-9A-Fa-f-]{32,36})"')
_BOUNDARY = re.compile(r'boundary="?([^";]+)"?')


class Counters:
    """Everything the sink saw since the last reset; guarded by ``cond``."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.reset()

    def reset(self, down: str = "", latency: bool = False) -> None:
        self.down = down
        self.latency = latency
        self.requests = 0
        self.refused = 0
        self.too_large = 0  # bodies over --max-body-bytes, answered 413
        self.body_bytes = 0  # as received on the wire (compressed when compressed)
        self.raw_bytes = 0  # after decompression
        self.posts = 0
        self.patches = 0
        self.completed = 0  # runs completed (patch, or post with end_time)
        self.spans = 0  # OTLP spans
        self.unknown: dict[str, int] = {}
        self.latencies_ms: list[float] = []

    def snapshot(self) -> dict:
        return {
            "down": self.down,
            "requests": self.requests,
            "refused": self.refused,
            "too_large": self.too_large,
            "body_bytes": self.body_bytes,
            "raw_bytes": self.raw_bytes,
            "posts": self.posts,
            "patches": self.patches,
            "completed": self.completed,
            "spans": self.spans,
            "delivered": self.completed + self.spans,
            "unknown": dict(self.unknown),
            "latency_samples": len(self.latencies_ms),
        }


COUNTERS = Counters()
MAX_BODY_BYTES = 0  # 0: no limit (--max-body-bytes)


def _iso_to_ns(value: str) -> int:
    # Runs carry ISO 8601 times with microseconds (ours and langsmith's alike).
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    dt = datetime.fromisoformat(value)
    return int(dt.timestamp() * 1_000_000) * 1000


def count_multipart(body: bytes, boundary: bytes, arrival_ns: int, latencies: list[float] | None) -> tuple[int, int, int]:
    """(posts, patches, completed) in one multipart body; appends latencies when asked."""
    posts = patches = completed = 0
    delim = b"--" + boundary
    for m in _MAIN_PART.finditer(body):
        is_patch = m.group(1) == b"patch"
        if is_patch:
            patches += 1
            if latencies is None:
                completed += 1  # a patch always completes its run; no need to look inside
                continue
        else:
            posts += 1
        start = body.find(b"\r\n\r\n", m.end())
        if start < 0:
            continue
        start += 4
        stop = body.find(delim, start)
        stop = len(body) if stop < 0 else stop
        if not is_patch and body.find(b'"end_time"', start, stop) < 0:
            continue  # an early post: its run completes with a later patch
        completed += 1
        if latencies is not None:
            try:
                end_time = orjson.loads(body[start:stop].rstrip(b"\r\n")).get("end_time")
                if end_time:
                    latencies.append((arrival_ns - _iso_to_ns(end_time)) / 1e6)
            except (orjson.JSONDecodeError, ValueError, AttributeError):
                pass
    return posts, patches, completed


def count_otlp(body: bytes, arrival_ns: int, latencies: list[float] | None) -> int:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    n = 0
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            n += len(ss.spans)
            if latencies is not None:
                latencies.extend((arrival_ns - s.end_time_unix_nano) / 1e6 for s in ss.spans)
    return n


def count_json_runs(body: bytes, path: str, method: str, arrival_ns: int, latencies: list[float] | None) -> tuple[int, int, int]:
    """The basic path: ``/runs/batch`` ({"post": [...], "patch": [...]}), ``POST /runs``, ``PATCH /runs/<id>``."""
    data = orjson.loads(body) if body else {}
    if path.endswith("/runs/batch"):
        posts, patches = data.get("post") or [], data.get("patch") or []
    elif method == "PATCH":
        posts, patches = [], [data]
    else:
        posts, patches = [data], []
    done = patches + [p for p in posts if p.get("end_time")]
    if latencies is not None:
        latencies.extend((arrival_ns - _iso_to_ns(r["end_time"])) / 1e6 for r in done if r.get("end_time"))
    return len(posts), len(patches), len(done)


def _info() -> dict:
    # What langsmith's Client reads from GET /info: multipart on, zstd offered when we can decode it.
    return {
        "version": "bench-sink",
        "license_expiration_time": None,
        "batch_ingest_config": {
            "use_multipart_endpoint": True,
            "scale_up_qsize_trigger": 1000,
            "scale_up_nthreads_limit": 16,
            "scale_down_nempty_trigger": 4,
            "size_limit": 100,
            # A sink with a request size limit says so, as the service does.
            "size_limit_bytes": min(20 * 1024 * 1024, MAX_BODY_BYTES or 20 * 1024 * 1024),
        },
        "instance_flags": {"zstd_compression_enabled": zstandard is not None},
        "local": True,
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every contender reuses its connection if it can
    server_version = "bench-sink"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - silence per-request logging
        pass

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reply(self, status: int, body: bytes = b"", ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        q = parse_qs(url.query)
        c = COUNTERS
        if url.path.endswith("/info"):
            self._reply(200, orjson.dumps(_info()))
        elif url.path == "/_bench/stats":
            with c.cond:
                snap = c.snapshot()
            self._reply(200, orjson.dumps(snap))
        elif url.path == "/_bench/latencies":
            with c.cond:
                lat = list(c.latencies_ms)
            self._reply(200, orjson.dumps(lat))
        elif url.path == "/_bench/wait":
            n = int(q.get("n", ["0"])[0])
            deadline = time.monotonic() + float(q.get("timeout", ["60"])[0])
            with c.cond:
                while c.completed + c.spans < n:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    c.cond.wait(left)
                snap = c.snapshot()
            self._reply(200, orjson.dumps(snap))
        else:
            with c.cond:
                c.unknown["GET " + url.path] = c.unknown.get("GET " + url.path, 0) + 1
            self._reply(404, b'{"detail":"not found"}')

    def _refuse(self, status: int, wire: int, counter: str, body: bytes) -> None:
        c = COUNTERS
        with c.cond:
            setattr(c, counter, getattr(c, counter) + 1)
            c.requests += 1
            c.body_bytes += wire
        self._reply(status, body)

    def do_POST(self) -> None:
        self._ingest("POST")

    def do_PATCH(self) -> None:
        self._ingest("PATCH")

    def _ingest(self, method: str) -> None:
        url = urlsplit(self.path)
        path = url.path
        c = COUNTERS
        if path == "/_bench/reset":
            self._read_body()
            q = parse_qs(url.query)
            with c.cond:
                c.reset(down=q.get("down", [""])[0], latency=q.get("latency", ["0"])[0] == "1")
            self._reply(200, b"{}")
            return
        if c.down == "close":
            # An outage that looks like a dead host: no answer, connection dropped.
            with c.cond:
                c.refused += 1
            self.close_connection = True
            self.connection.close()
            return
        body = self._read_body()
        arrival = time.time_ns()
        wire = len(body)
        if MAX_BODY_BYTES and wire > MAX_BODY_BYTES:
            self._refuse(413, wire, "too_large", b'{"detail":"request body over the sink\'s --max-body-bytes"}')
            return
        if c.down:
            self._refuse(503, wire, "refused", b'{"detail":"down for the benchmark"}')
            return
        latencies: list[float] | None = [] if c.latency else None
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "zstd" and zstandard is not None:
            body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
        elif encoding == "gzip":
            body = gzip.decompress(body)
        posts = patches = completed = spans = 0
        status = 202
        try:
            if path.endswith("/otel/v1/traces"):
                spans = count_otlp(body, arrival, latencies)
                status = 200  # OTLP/HTTP answers 200 with an (empty) ExportTraceServiceResponse
            elif path.endswith("/runs/multipart"):
                m = _BOUNDARY.search(self.headers.get("Content-Type", ""))
                posts, patches, completed = count_multipart(body, m.group(1).encode() if m else b"", arrival, latencies)
            elif path.endswith("/runs/batch") or path.endswith("/runs") or (method == "PATCH" and "/runs/" in path):
                posts, patches, completed = count_json_runs(body, path, method, arrival, latencies)
            else:
                status = 404
        except Exception as exc:  # noqa: BLE001 - a parse error must show up, not kill the sink
            print(f"sink: could not count {method} {path}: {exc!r}", file=sys.stderr, flush=True)
            status = 400
        with c.cond:
            c.requests += 1
            c.body_bytes += wire
            c.raw_bytes += len(body)
            c.posts += posts
            c.patches += patches
            c.completed += completed
            c.spans += spans
            if latencies:
                c.latencies_ms.extend(latencies)
            if status == 404:
                key = f"{method} {path}"
                c.unknown[key] = c.unknown.get(key, 0) + 1
            if completed or spans:
                c.cond.notify_all()
        ctype = "application/x-protobuf" if status == 200 else "application/json"
        self._reply(status, b"" if status == 200 else b"{}", ctype)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # 8 producer threads x a few connections each, never a refused connect

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        # A client giving up mid-request (a contender exiting during an outage) is expected here.
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--max-body-bytes", type=int, default=0, help="answer 413 to bodies over this (0: no limit)")
    args = parser.parse_args(argv)
    global MAX_BODY_BYTES
    MAX_BODY_BYTES = args.max_body_bytes
    server = Server((args.host, args.port), Handler)
    print(f"listening on http://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
