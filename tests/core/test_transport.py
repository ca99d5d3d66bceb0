"""The retry matrix: what each answer of the service does, against the real local service."""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.helpers import FAST_BACKOFF
from otel_runs_exporter._encode import encode_run
from otel_runs_exporter._ids import child_ids, iso_time, root_ids, run_id_v7
from otel_runs_exporter._settings import resolve
from otel_runs_exporter._clock import FakeClock
from otel_runs_exporter._transport import Transport
from otel_runs_exporter.server import LocalService

KEY = "sk-transport-test-key"



def make_runs(n: int, op: str = "post", payload: str = "", trace: int = 1) -> list:
    """A root and n-1 children, complete, as the batcher would encode them."""
    start = 1_700_000_000_000_000_000
    root = root_ids(run_id_v7(trace, 1, start), start)
    out = []
    for i in range(n):
        ids = root if i == 0 else child_ids(root, run_id_v7(trace, i + 1, start + i * 1000), start + i * 1000)
        run = {
            "id": ids.run_id,
            "trace_id": ids.trace_id,
            "dotted_order": ids.dotted_order,
            "name": f"run{i}",
            "run_type": "chain",
            "start_time": iso_time(ids.start_time_ns),
            "end_time": iso_time(start + 10**9),
            "session_name": "default",
            "inputs": {"i": i, "payload": payload},
            "outputs": {"ok": True},
        }
        if ids.parent_run_id:
            run["parent_run_id"] = ids.parent_run_id
        out.append(encode_run(op, run, completes=True))
    return out


def transport_for(url: str, **settings) -> Transport:
    # The retry matrix is judged on plain bodies; compression=auto (the default, which
    # asks /info first) has its own tests in test_wire.py.
    settings.setdefault("api_key", KEY)
    settings.setdefault("compression", "none")
    settings.setdefault("retry_backoff", FAST_BACKOFF)
    return Transport(resolve({"endpoint": url, **settings}, env={}))


def test_2xx_delivers_in_one_request(service):
    t = transport_for(service.url)
    result = t.send(make_runs(5), time.monotonic() + 5)
    assert len(result.delivered) == 5 and not result.retry and not result.dropped
    assert len(service.wait_for_runs(5)) == 5 and service.violations() == []
    assert [r["path"] for r in service.requests()] == ["/runs/multipart"]


@pytest.mark.parametrize("statuses", [[500], [502, 503], [504, 500, 503], [408], [429]])
def test_transient_statuses_are_retried_until_delivered(service, statuses):
    service.faults.update(status_sequence=list(statuses), retry_after=None)
    t = transport_for(service.url)
    result = t.send(make_runs(3), time.monotonic() + 10)
    assert len(result.delivered) == 3
    assert t.counts.retried == len(statuses)
    assert [r["status"] for r in service.requests()] == [*statuses, 202]


def test_429_retry_after_is_honoured(service):
    # 30 s asked for, on the fake clock: the wait goes through the clock seam, not a sleep.
    service.faults.update(status_sequence=[429], retry_after=30)
    clock = FakeClock()
    t = Transport(resolve({"endpoint": service.url, "api_key": KEY}, env={}), clock=clock)
    began = time.monotonic()
    result = t.send(make_runs(1), clock.now() + 60)
    assert len(result.delivered) == 1
    assert clock.waits == [30.0]  # waited as told, not the backoff's first 0.25-0.5 s
    assert time.monotonic() - began < 5


def test_retry_after_beyond_the_deadline_hands_runs_back(service):
    service.faults.update(status_sequence=[429], retry_after=30)
    clock = FakeClock()
    t = Transport(resolve({"endpoint": service.url, "api_key": KEY}, env={}), clock=clock)
    result = t.send(make_runs(2), clock.now() + 10)
    assert len(result.retry) == 2 and not result.delivered
    assert clock.waits == []  # no wait past the deadline is even started


def test_backoff_doubles_with_equal_jitter(service):
    # The real schedule (0.5 s doubling, capped at 30 s), on the fake clock: minutes of waiting in no time.
    service.faults.update(status_sequence=[503] * 8, retry_after=None)
    clock = FakeClock()
    t = Transport(resolve({"endpoint": service.url, "api_key": KEY}, env={}), clock=clock)
    result = t.send(make_runs(1), clock.now() + 600)
    assert len(result.delivered) == 1 and len(clock.waits) == 8
    for attempt, wait in enumerate(clock.waits):
        step = min(30.0, 0.5 * 2**attempt)
        assert step / 2 <= wait <= step, (attempt, wait)


def test_absurd_retry_after_is_capped_at_the_export_timeout(service):
    service.faults.update(status_sequence=[429], retry_after=10**9)
    clock = FakeClock()
    t = Transport(resolve({"endpoint": service.url, "api_key": KEY, "export_timeout_s": 30}, env={}), clock=clock)
    result = t.send(make_runs(1), clock.now() + 60)
    assert len(result.delivered) == 1 and clock.waits == [30.0]


def test_unreachable_service_returns_runs_by_the_deadline():
    t = transport_for("http://127.0.0.1:9")
    began = time.monotonic()
    result = t.send(make_runs(4), time.monotonic() + 1.0)
    assert len(result.retry) == 4 and t.counts.failed >= 1
    assert time.monotonic() - began < 2.0


def test_wake_interrupts_the_backoff(service):
    service.faults.update(status_sequence=[429], retry_after=30)
    wake = threading.Event()
    t = Transport(resolve({"endpoint": service.url, "api_key": KEY}, env={}), wake=wake)
    threading.Timer(0.3, wake.set).start()
    began = time.monotonic()
    result = t.send(make_runs(1), time.monotonic() + 20)
    assert len(result.retry) == 1 and time.monotonic() - began < 5


def test_413_splits_the_batch_and_drops_only_a_run_too_large_alone():
    with LocalService(max_body_bytes=6000, strict=True) as svc:
        t = transport_for(svc.url)
        runs = make_runs(8, payload="x" * 500) + make_runs(1, payload="y" * 20000, trace=2)
        result = t.send(runs, time.monotonic() + 10)
        assert len(result.delivered) == 8
        assert [r.run_id for r in result.dropped["too_large"]] == [runs[-1].run_id]
        statuses = [r["status"] for r in svc.requests()]
        assert statuses.count(413) >= 2 and statuses.count(202) >= 2


def test_422_bisects_to_the_poison_run(service, caplog):
    runs = make_runs(50)
    poison = runs[37].run_id
    service.faults.update(reject_run_ids={poison})
    t = transport_for(service.url)
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        result = t.send(runs, time.monotonic() + 10)
    assert len(result.delivered) == 49
    assert [r.run_id for r in result.dropped["rejected"]] == [poison]
    assert poison not in {r["id"] for r in service.runs()} and len(service.runs()) == 49
    assert any(poison in r.getMessage() for r in caplog.records)


def test_404_falls_back_once_to_basic_tracing_parents_first(caplog):
    with LocalService(multipart=False, strict=True) as svc:
        t = transport_for(svc.url)
        posts = make_runs(4)
        with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
            result = t.send(list(reversed(posts)), time.monotonic() + 10)
            assert len(result.delivered) == 4 and t.mode == "basic"
            patches = [encode_run("patch", {"id": r.run_id, "trace_id": posts[0].run_id, "dotted_order": r.dotted_order, "outputs": {"done": 1}}, completes=True) for r in posts]
            assert len(t.send(patches, time.monotonic() + 10).delivered) == 4
        reqs = [(r["method"], r["path"]) for r in svc.requests()]
        assert reqs[0] == ("POST", "/runs/multipart")
        assert reqs[1] == ("POST", "/runs") and reqs.count(("POST", "/runs/multipart")) == 1
        assert sum(1 for m, p in reqs if m == "PATCH") == 4
        assert svc.violations() == []
        assert all(r["outputs"] == {"done": 1} for r in svc.runs())
        assert len([r for r in caplog.records if "no multipart endpoint" in r.getMessage()]) == 1


def test_multipart_mode_never_falls_back():
    with LocalService(multipart=False, strict=True) as svc:
        t = transport_for(svc.url, mode="multipart")
        result = t.send(make_runs(2), time.monotonic() + 5)
        # No fallback; the 404 says the address is wrong, so the runs are counted as not_found.
        assert len(result.dropped["not_found"]) == 2 and t.mode == "multipart"


def test_basic_mode_from_the_start(service):
    t = transport_for(service.url, mode="basic")
    assert len(t.send(make_runs(3), time.monotonic() + 5).delivered) == 3
    assert {r["path"] for r in service.requests()} == {"/runs"}


def test_401_stops_sending_and_never_logs_the_key(caplog):
    with LocalService(api_key="the-right-key", strict=True) as svc:
        t = transport_for(svc.url)
        with caplog.at_level(logging.DEBUG):
            first = t.send(make_runs(2), time.monotonic() + 5)
            second = t.send(make_runs(3), time.monotonic() + 5)
        assert len(first.dropped["unauthorized"]) == 2 and len(second.dropped["unauthorized"]) == 3
        assert len(svc.requests()) == 1
        assert not any(KEY in r.getMessage() for r in caplog.records)
        assert len([r for r in caplog.records if "refused the API key" in r.getMessage()]) == 1


@pytest.mark.parametrize("mode", ["multipart", "basic"])
def test_401_says_whether_no_key_was_set_or_the_key_was_refused_with_the_runs_lost(caplog, mode):
    from otel_runs_exporter import _transport

    with LocalService(api_key="the-right-key", strict=True) as svc:
        for key, said in ((None, "answered 401 and no API key was set"), ("sk-the-wrong-key", "refused the API key (401)")):
            _transport._rl.reset()  # one line per reason each 30 s, and both transports here are in one process
            caplog.clear()
            with caplog.at_level(logging.ERROR, logger="otel_runs_exporter"):
                result = transport_for(svc.url, api_key=key, mode=mode).send(make_runs(3), time.monotonic() + 5)
            assert len(result.dropped["unauthorized"]) == 3
            (line,) = [r.getMessage() for r in caplog.records]
            assert said in line and line.endswith("; 3 runs dropped (unauthorized)"), line
            assert f"the service at {svc.url}" in line and "sk-the-wrong-key" not in line


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_compressed_bodies(service, compression):
    t = transport_for(service.url, compression=compression)
    assert len(t.send(make_runs(3), time.monotonic() + 5).delivered) == 3
    assert service.requests()[0]["content_encoding"] == compression
    assert service.violations() == []


def test_self_hosted_endpoint_with_api_v1_prefix(service):
    t = transport_for(service.url + "/api/v1")
    assert len(t.send(make_runs(2), time.monotonic() + 5).delivered) == 2
    assert service.requests()[0]["path"] == "/api/v1/runs/multipart"


class _Redirector(BaseHTTPRequestHandler):
    seen: list = []
    other = ""

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append((self.path, self.headers.get("x-api-key")))
        if self.path.startswith("/same/"):
            self._answer(308, {"Location": "/final" + self.path[len("/same") :]})
        elif self.path.startswith("/away/"):
            self._answer(307, {"Location": type(self).other + self.path[len("/away") :]})
        else:
            self._answer(202, {})

    def _answer(self, status, headers):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_redirects_stay_on_our_origin(service):
    _Redirector.seen = []
    _Redirector.other = service.url.replace("127.0.0.1", "localhost")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirector)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        same = transport_for(base + "/same").send(make_runs(1), time.monotonic() + 5)
        assert len(same.delivered) == 1
        assert _Redirector.seen == [("/same/runs/multipart", KEY), ("/final/runs/multipart", KEY)]
        away = transport_for(base + "/away").send(make_runs(1), time.monotonic() + 5)
        assert len(away.dropped["redirect_refused"]) == 1
        assert service.requests() == []  # the other host never saw the request, nor the key
    finally:
        server.shutdown()


def test_our_requests_are_not_traced_by_requests_instrumentation(service):
    from opentelemetry.instrumentation.requests import RequestsInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    RequestsInstrumentor().instrument(tracer_provider=provider)
    try:
        import requests

        requests.get(service.url + "/ok", timeout=5)  # the instrumentation works...
        assert len(memory.get_finished_spans()) == 1
        assert len(transport_for(service.url).send(make_runs(2), time.monotonic() + 5).delivered) == 2
        assert len(memory.get_finished_spans()) == 1  # ...but not on our exports
    finally:
        RequestsInstrumentor().uninstrument()


class _CountingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: set = set()
    error_body = 0

    def do_POST(self):  # noqa: N802 - http.server's naming
        type(self).connections.add(self.client_address)
        self.rfile.read(int(self.headers["Content-Length"]))
        if type(self).error_body:
            self.send_response(400)
            self.send_header("Content-Length", str(type(self).error_body))
            self.end_headers()
            try:
                self.wfile.write(b"e" * type(self).error_body)
            except OSError:
                pass  # the client stopped reading
            return
        body = b'{"ok": true}'
        self.send_response(202)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_answers_are_read_bounded_and_small_ones_keep_the_connection():
    _CountingHandler.connections = set()
    _CountingHandler.error_body = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CountingHandler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        t = transport_for(f"http://127.0.0.1:{server.server_address[1]}", mode="multipart")
        for i in range(5):
            assert len(t.send(make_runs(3, trace=i + 1), time.monotonic() + 5).delivered) == 3
        assert len(_CountingHandler.connections) == 1  # keep-alive survives reading bodies ourselves
        # A 20 MB error body: the transport reads 64 KiB of it and shows 300 characters.
        _CountingHandler.error_body = 20 * 1024 * 1024
        result = t.send(make_runs(1, trace=9), time.monotonic() + 5)
        assert len(result.dropped["rejected"]) == 1
    finally:
        server.shutdown()
        server.server_close()


# --- what the service says about our request rate (read by the worker's pacer) ---


def test_paced_429_hands_the_runs_back_at_once_and_keeps_retry_after_as_the_floor(service):
    service.faults.update(status_sequence=[429], retry_after=7)
    clock = FakeClock()
    t = Transport(resolve({"endpoint": service.url, "api_key": KEY}, env={}), clock=clock)
    runs = make_runs(3)
    result = t.send(runs, clock.now() + 60, paced=True)
    assert result.retry == runs and not result.delivered and not result.interrupted
    assert result.throttled and result.retry_after_s == 7.0
    assert clock.waits == []  # not waited here: the pacer decides when to come back
    assert (t.counts.throttled, t.counts.retried) == (1, 1)
    assert [r["status"] for r in service.requests() if r["path"] == "/runs/multipart"] == [429]
    # The next send, paced or not, still waits out what the service asked for.
    again = t.send(runs, clock.now() + 60)
    assert len(again.delivered) == 3 and not again.throttled
    assert clock.waits == [7.0]


def test_a_429_retried_within_the_send_is_reported_too(service):
    service.faults.update(status_sequence=[429, 429], retry_after=2)
    clock = FakeClock()
    t = Transport(resolve({"endpoint": service.url, "api_key": KEY}, env={}), clock=clock)
    result = t.send(make_runs(2), clock.now() + 60)
    assert len(result.delivered) == 2
    assert result.throttled and result.retry_after_s == 2.0 and t.counts.throttled == 2


def test_a_paced_retry_after_is_capped_at_the_export_timeout(service):
    service.faults.update(status_sequence=[429], retry_after=10**9)
    clock = FakeClock()
    t = Transport(resolve({"endpoint": service.url, "api_key": KEY, "export_timeout_s": 30}, env={}), clock=clock)
    result = t.send(make_runs(1), clock.now() + 60, paced=True)
    assert result.throttled and result.retry_after_s == 30.0


def test_other_statuses_are_retried_as_before_on_a_paced_send(service):
    service.faults.update(status_sequence=[503, 502], retry_after=None)
    t = transport_for(service.url)
    result = t.send(make_runs(2), time.monotonic() + 10, paced=True)
    assert len(result.delivered) == 2 and not result.throttled and t.counts.retried == 2


class _QuotaHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    headers_to_send: dict = {}

    def do_POST(self):  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(202)
        for name, value in type(self).headers_to_send.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):  # noqa: N802 - /info: no flags, so no compression to decide
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(
    ("headers", "throttled", "wait"),
    [
        ({"RateLimit": '"multipart";r=0;t=4'}, True, 4.0),
        ({"RateLimit": '"burst";r=3;t=1, "multipart";r=0;t=6'}, True, 6.0),
        ({"RateLimit-Remaining": "0", "RateLimit-Reset": "5"}, True, 5.0),
        ({"X-RateLimit-Remaining": "0"}, True, None),
        ({"X-RateLimit-Remaining": "17", "X-RateLimit-Reset": "3"}, False, None),
        ({}, False, None),
    ],
)
def test_an_answer_saying_no_request_is_left_counts_as_a_slow_down(headers, throttled, wait):
    _QuotaHandler.headers_to_send = headers
    server = ThreadingHTTPServer(("127.0.0.1", 0), _QuotaHandler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        t = transport_for(f"http://127.0.0.1:{server.server_address[1]}", mode="multipart")
        result = t.send(make_runs(2), time.monotonic() + 5, paced=True)
        assert len(result.delivered) == 2  # delivered all the same: only the next request is in doubt
        assert result.throttled is throttled and result.retry_after_s == wait
        assert t.counts.throttled == 0  # not a 429
    finally:
        server.shutdown()
        server.server_close()


def test_quota_headers_that_do_not_parse_are_ignored():
    from otel_runs_exporter._http_client import quota_left

    assert quota_left({"RateLimit": "garbage"}) == (None, None)
    assert quota_left({"RateLimit-Remaining": "lots"}) == (None, None)
    assert quota_left({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "soon"}) == (0, None)
    assert quota_left({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "inf"}) == (0, None)
    # A Unix time (GitHub's way) becomes the seconds left until it.
    left, reset = quota_left({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 30)})
    assert left == 0 and 25 <= reset <= 31
