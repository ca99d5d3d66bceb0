"""The real network seam (``SessionNetwork``) and the environment: proxies and ``NO_PROXY``.

requests reads these on every request; ``SessionNetwork`` reads them once per
origin (the first request there) and hands them to each request itself. Real
sockets on loopback: one small server plays the proxy, another the service.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from otel_runs_exporter._http_client import HttpClient, SessionNetwork, new_session
from otel_runs_exporter._settings import resolve


class _Recorder:
    """A loopback HTTP server answering 200 to everything and keeping each request line."""

    def __init__(self) -> None:
        lines: list[str] = []
        self.lines = lines

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                lines.append(self.requestline)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[_Recorder, _Recorder]]:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    proxy, service = _Recorder(), _Recorder()
    yield proxy, service
    proxy.close()
    service.close()


def _client(base: str) -> HttpClient:
    settings = resolve({"endpoint": base, "api_key": "k"})
    return HttpClient(SessionNetwork(new_session(settings)), base, timeout_s=5.0)


def test_a_proxy_from_the_environment_carries_the_requests(servers: tuple[_Recorder, _Recorder], monkeypatch: pytest.MonkeyPatch) -> None:
    proxy, _ = servers
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    http = _client("http://runs.example.invalid:8080/api")
    for _ in range(2):
        assert http.request("POST", "/runs/multipart", time.monotonic() + 10, body=b"x").status_code == 200
    # Absolute-form request lines: the proxy was asked to forward them, both times.
    assert proxy.lines == ["POST http://runs.example.invalid:8080/api/runs/multipart HTTP/1.1"] * 2


def test_no_proxy_sends_directly(servers: tuple[_Recorder, _Recorder], monkeypatch: pytest.MonkeyPatch) -> None:
    proxy, service = servers
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    http = _client(service.url)
    assert http.request("POST", "/runs/multipart", time.monotonic() + 10, body=b"x").status_code == 200
    assert proxy.lines == [] and service.lines == ["POST /runs/multipart HTTP/1.1"]


def test_the_environment_is_read_once_per_origin(servers: tuple[_Recorder, _Recorder], monkeypatch: pytest.MonkeyPatch) -> None:
    # What the README's settings section says: a proxy set after the first request
    # to an address is not seen by that session (as OTel's exporters read their settings once).
    proxy, service = servers
    http = _client(service.url)
    assert http.request("GET", "/info", time.monotonic() + 10).status_code == 200
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    assert http.request("GET", "/info", time.monotonic() + 10).status_code == 200
    assert proxy.lines == [] and service.lines == ["GET /info HTTP/1.1"] * 2
