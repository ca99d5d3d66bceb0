"""The exporter against hostile servers: each misbehaves at the socket level, on loopback, bounded in time.

For each: the app thread's p99 per span stays small, the process's memory stays
bounded, ``shutdown()`` returns within its bound without raising, and every run
is accounted for: created = delivered + spooled + dropped (by reason).
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from opentelemetry.sdk.trace import TracerProvider

from otel_runs_exporter import RunsSpanProcessor

from reliability.rel_helpers import report

pytestmark = pytest.mark.heavy(seconds=12)

SPANS = 1_000
SHUTDOWN_S = 0.5


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _read_request_head(conn: socket.socket) -> None:
    """Read up to the end of the request headers (the body is left unread, or read by the caller)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: HostileServer = self.server  # type: ignore[assignment]
        try:
            while not server.stopping.is_set():
                _read_request_head(self.request)
                server.requests += 1
                if not server.behaviour(self.request, server.stopping):
                    return
        except OSError:
            return


class HostileServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, behaviour: Callable[[socket.socket, threading.Event], bool]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.stopping = threading.Event()
        self.requests = 0
        # shutdown() waits for the loop's next poll: the default 0.5 s, 12 times over, was most of these tests' idle time.
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> "HostileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()


# --- behaviours: each returns True to serve the next request on the connection ---


def never_answers(conn: socket.socket, stop: threading.Event) -> bool:
    stop.wait(60)
    return False


def byte_by_byte(conn: socket.socket, stop: threading.Event) -> bool:
    answer = b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\nX-Padding: " + b"x" * 200 + b"\r\n\r\n{}"
    for i in range(len(answer)):
        if stop.wait(0.05):
            return False
        conn.sendall(answer[i : i + 1])
    return True


def resets_mid_body(conn: socket.socket, stop: threading.Event) -> bool:
    # Reads a little of the request body, then resets the connection before any answer.
    # (A 202 followed by a reset is a delivery: the status says the runs were taken.)
    conn.recv(1024)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
    return False


def huge_error_body(conn: socket.socket, stop: threading.Event) -> bool:
    size = 300 * 1024 * 1024
    conn.sendall(b"HTTP/1.1 422 Unprocessable\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % size)
    chunk = b"e" * 65536
    sent = 0
    try:
        while sent < size and not stop.is_set():
            conn.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass  # the client stopped reading and closed: what we want
    return False


def absurd_retry_after(conn: socket.socket, stop: threading.Event) -> bool:
    conn.sendall(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 999999999\r\nContent-Length: 0\r\n\r\n")
    return True


def garbage_status_line(conn: socket.socket, stop: threading.Event) -> bool:
    conn.sendall(b"HTX/9.9 ??? nonsense\r\n\r\n")
    return False


CASES = {
    "never answers": never_answers,
    "answers byte by byte": byte_by_byte,
    "resets mid-body": resets_mid_body,
    "300 MiB error bodies": huge_error_body,
    "429 with Retry-After of 31 years": absurd_retry_after,
    "garbage status line": garbage_status_line,
}


@pytest.mark.parametrize("spool", [False, True], ids=["no spool", "spool"])
@pytest.mark.parametrize("case", list(CASES))
def test_hostile_server(case: str, spool: bool, tmp_path: Path) -> None:
    with HostileServer(CASES[case]) as server:
        settings: dict[str, Any] = dict(
            endpoint=server.url,
            api_key="sk-hostile-never-shown",
            schedule_delay_s=0.05,
            export_timeout_s=0.5,
            timeout_s=0.25,
            mode="multipart",
        )
        if spool:
            settings["spool_dir"] = str(tmp_path / "spool")
        processor = RunsSpanProcessor(**settings)
        provider = TracerProvider()
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("hostile")
        rss_before = _rss_bytes()
        costs = []
        for i in range(SPANS):
            began = time.perf_counter()
            with tracer.start_as_current_span(f"s{i}", attributes={"input.value": "x" * 200}):
                pass
            costs.append(time.perf_counter() - began)
            if i % 100 == 0:
                time.sleep(0.02)  # an app that breathes: the worker meets the server meanwhile
        time.sleep(0.3)
        rss_grown = _rss_bytes() - rss_before
        began = time.monotonic()
        processor.shutdown(int(SHUTDOWN_S * 1000))  # must not raise
        shutdown_s = time.monotonic() - began
        stats = processor.stats()
        costs.sort()
        p99_us = costs[int(len(costs) * 0.99)] * 1e6
        report(
            {
                "case": f"hostile server: {case} ({'spool' if spool else 'no spool'})",
                "created": SPANS,
                "delivered": stats.delivered,
                "dropped": dict(stats.dropped),
                "spooled": stats.spooled,
                "requests": stats.requests,
                "elapsed_s": round(shutdown_s, 2),
                "extra": {"app_p99_us": round(p99_us), "rss_grown_mb": round(rss_grown / 2**20, 1)},
            }
        )
        assert stats.created == SPANS
        assert stats.created == stats.delivered + stats.dropped_total + stats.spooled, stats
        assert stats.queued == 0, stats
        assert stats.delivered == 0  # none of these servers ever accepts a run
        if spool:
            assert stats.spooled > 0 and set(stats.dropped) <= {"shutdown", "rejected"}, stats
        # bound + join margin + one in-flight request's timeout
        assert shutdown_s < SHUTDOWN_S + 0.5 + settings["timeout_s"] + 1.0, shutdown_s
        assert p99_us < 50_000, p99_us  # never waits on the network (a request here is >= 500 ms)
        assert rss_grown < 64 * 2**20, rss_grown  # a 300 MiB body is never read
