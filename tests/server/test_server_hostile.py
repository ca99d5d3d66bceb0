"""The local service under hostile input: each test attacks the way the problem was found (loopback, bounded)."""

from __future__ import annotations

import io
import random
import socket
import threading
import time
import uuid
from pathlib import Path

import orjson
import pytest
import requests

from otel_runs_exporter.server import LocalService

pytestmark = pytest.mark.heavy(seconds=10)

KEY = "sk-hostile-test"


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _raw(svc: LocalService, request: bytes, timeout: float = 5.0) -> bytes:
    """Send raw bytes, return what came back before the server closed or went quiet."""
    host, port = svc.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as conn:
        try:
            conn.sendall(request)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server answered and closed before taking it all: its answer is still there to read
        out = b""
        try:
            while chunk := conn.recv(65536):
                out += chunk
        except (socket.timeout, ConnectionResetError):
            pass
    return out


def _status(answer: bytes) -> int:
    """The status of a raw answer; 0 when there is no status line (nothing, or an HTTP/0.9 answer)."""
    if not answer.startswith(b"HTTP/1."):
        return 0
    return int(answer.split(b" ", 2)[1])


def _zstd_bomb(expanded: int) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    out = io.BytesIO()
    # Level 1: zeros compress to the same ~32 KB as at level 19, in a fifth of the time.
    with zstandard.ZstdCompressor(level=1).stream_writer(out, closefd=False) as writer:
        block = b"\0" * (1 << 20)
        for _ in range(expanded // len(block)):
            writer.write(block)
    return out.getvalue()


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return _zstd_bomb(1 << 30)  # 1 GiB of zeros in ~32 KB


@pytest.fixture
def svc():
    with LocalService(api_key=KEY) as service:
        yield service


def test_decompression_bombs_cost_nothing_without_a_key_and_413_with_one(svc, bomb):
    assert len(bomb) < 64 * 1024
    before = _rss_mb()
    for method in ("OPTIONS", "POST"):
        for _ in range(3):
            r = requests.request(
                method, svc.url + "/runs/multipart", data=bomb, headers={"Content-Encoding": "zstd"}, timeout=10
            )
            assert r.status_code == (204 if method == "OPTIONS" else 401), r.text
    # The public routes ask no key, so they decode no body: these were 413 after
    # decompressing 20 MiB for anyone.
    for path in ("/info", "/ok", "/api/v1/info"):
        r = requests.get(svc.url + path, data=bomb, headers={"Content-Encoding": "zstd"}, timeout=10)
        assert r.status_code == 200, (path, r.text[:200])
    # With the key it is decoded, as a stream with an output cap: the advertised limit, then 413.
    r = requests.post(
        svc.url + "/runs/multipart",
        data=bomb,
        headers={"Content-Encoding": "zstd", "x-api-key": KEY, "Content-Type": "multipart/form-data; boundary=b"},
        timeout=30,
    )
    assert r.status_code == 413 and r.json()["max_size"] == requests.get(svc.url + "/info").json()["batch_ingest_config"]["size_limit_bytes"]
    assert _rss_mb() - before < 150  # three 1 GiB bombs took the server to ~4 GB before


def test_a_zstd_window_past_8_mib_is_413_before_it_is_allocated(svc):
    """A frame may ask its decoder for a 128 MiB window (libzstd's default limit) before any output."""
    import zstandard

    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=24)  # 16 MiB
    sink = io.BytesIO()
    with zstandard.ZstdCompressor(compression_params=params).stream_writer(sink, closefd=False) as w:
        w.write(b"x" * 1000)  # streamed: no content size, so the header keeps the whole window
    headers = {"Content-Encoding": "zstd", "x-api-key": KEY, "Content-Type": "multipart/form-data; boundary=b"}
    r = requests.post(svc.url + "/runs/multipart", data=sink.getvalue(), headers=headers, timeout=10)
    assert r.status_code == 413 and "16777216-byte window" in r.text and r.json()["max_window_size"] == 1 << 23, r.text
    # What real clients send (level 3, streamed or not) still decodes.
    r = requests.post(svc.url + "/runs/multipart", data=zstandard.ZstdCompressor(level=19).compress(b"--b--\r\n"),
                      headers=headers, timeout=10)
    assert r.status_code != 413, r.text


@pytest.mark.parametrize(
    "chunks, status",
    [
        (b"-1\r\n", 400),  # read(-1) read until the client closed
        (b"5;ext=1\r\nhello\r\n0\r\n\r\n", 400),  # extensions: refused, not parsed
        (b"+5\r\nhello\r\n0\r\n\r\n", 400),
        (b"0x5\r\nhello\r\n0\r\n\r\n", 400),
        (b"fffffffffffffffff\r\n", 400),  # 17 hex digits
        (b"5\r\nhelloXX0\r\n\r\n", 400),  # no CRLF after the chunk
        (b"1400001\r\n", 413),  # one chunk past the 20 MiB limit, refused before reading it
    ],
)
def test_malformed_chunked_bodies_are_refused_at_once(svc, chunks, status):
    head = (
        b"POST /runs HTTP/1.1\r\nHost: localhost\r\nx-api-key: " + KEY.encode() + b"\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    began = time.monotonic()
    answer = _raw(svc, head + chunks)
    assert _status(answer) == status, answer[:200]
    assert time.monotonic() - began < 2


_BAD_FRAMINGS = {
    "chunk size -1": b"Transfer-Encoding: chunked\r\n\r\n-1\r\n",
    "chunk size with a sign": b"Transfer-Encoding: chunked\r\n\r\n+5\r\nhello\r\n0\r\n\r\n",
    "Content-Length not a number": b"Content-Length: abc\r\n\r\n",
    "two differing Content-Lengths": b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
    "Transfer-Encoding other than chunked": b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "Transfer-Encoding and Content-Length": b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
}


@pytest.mark.parametrize("framing", list(_BAD_FRAMINGS))
@pytest.mark.parametrize(
    "method, path, key",
    [
        ("OPTIONS", "/runs", False),  # found: 204 for a chunk size of -1
        ("GET", "/ok", False),  # public: the body is discarded, never read as runs
        ("GET", "/", False),  # the viewer's page
        ("POST", "/runs", False),  # refused for its key (401) before its body is read
        ("DELETE", "/runs/x", True),
        ("PATCH", "/runs/00000000-0000-0000-0000-000000000001", True),
    ],
)
def test_malformed_framing_is_400_on_every_method(svc, method, path, key, framing):
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n".encode() + (b"x-api-key: " + KEY.encode() + b"\r\n" if key else b"")
    answer = _raw(svc, head + _BAD_FRAMINGS[framing])
    assert _status(answer) == 400, answer[:300]
    assert b"Connection: close" in answer.split(b"\r\n\r\n")[0]


def test_chunked_running_total_respects_the_limit():
    with LocalService(api_key=KEY, max_body_bytes=4096) as svc:
        head = (
            b"POST /runs HTTP/1.1\r\nHost: localhost\r\nx-api-key: " + KEY.encode() + b"\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"800\r\n" + b"a" * 0x800 + b"\r\n"
        assert _status(_raw(svc, head + chunk * 3 + b"0\r\n\r\n")) == 413


DEEP = b'{"a":' * 300 + b"{}" + b"}" * 300  # valid JSON orjson reads (limit 1,024) but cannot write (255)


def _with_deep(template: dict, field: str) -> bytes:
    """``template`` as JSON with ``field`` set to 300 nested objects (built as text: orjson cannot write it)."""
    return orjson.dumps({**template, field: "DEEP"}).replace(b'"DEEP"', DEEP)


def test_deep_json_is_a_422_naming_the_limit_on_every_route(svc):
    run_id = str(uuid.uuid4())
    start = "2024-01-01T00:00:00.000000Z"
    run = {
        "id": run_id,
        "trace_id": run_id,
        "dotted_order": "20240101T000000000000Z" + run_id,
        "name": "deep",
        "run_type": "chain",
        "start_time": start,
        "session_name": "p",
    }
    h = {"x-api-key": KEY, "Content-Type": "application/json"}
    answers = [
        requests.post(svc.url + "/runs", data=_with_deep(run, "inputs"), headers=h, timeout=10),
        requests.post(
            svc.url + "/runs/batch",
            data=b'{"post": [' + _with_deep(run, "inputs") + b"]}",
            headers=h,
            timeout=10,
        ),
        requests.patch(svc.url + f"/runs/{run_id}", data=_with_deep({}, "outputs"), headers=h, timeout=10),
    ]
    boundary = "bnd"
    parts = [(f"post.{run_id}", orjson.dumps(run)), (f"post.{run_id}.inputs", DEEP)]
    multipart = b"".join(
        b"--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s\r\n" % (boundary.encode(), name.encode(), len(data), data)
        for name, data in parts
    ) + b"--%s--\r\n" % boundary.encode()
    answers.append(
        requests.post(
            svc.url + "/runs/multipart",
            data=multipart,
            headers={"x-api-key": KEY, "Content-Type": f"multipart/form-data; boundary={boundary}"},
            timeout=10,
        )
    )
    for answer in answers:
        assert answer.status_code == 422, (answer.request.url, answer.status_code, answer.text[:300])
        assert "200 levels" in answer.text


@pytest.mark.parametrize(
    "header, status",
    [
        (b"Content-Length: \xc2\xb2", 400),  # "2" superscript: isdigit() said yes, int() said no
        (b"Content-Length: 5\r\nContent-Length: 6", 400),
        (b"Content-Length: 99999999999999999999999", 400),
        (b"x-api-key: " + KEY.encode() + b"\r\nx-api-key: another", 400),
    ],
)
def test_malformed_headers_are_4xx_never_5xx(svc, header, status):
    answer = _raw(svc, b"POST /runs HTTP/1.1\r\nHost: localhost\r\nx-api-key: " + KEY.encode() + b"\r\n" + header + b"\r\n\r\nhello")
    assert _status(answer) == status, answer[:300]


def test_100_concurrent_clients_get_no_resets(svc):
    """100 clients at once, 10 connections each: every one answered, none reset at the TCP level."""
    errors: list[str] = []
    connect_s: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(100)

    host, port = svc.url.removeprefix("http://").split(":")

    def client(k: int) -> None:
        start.wait(30)
        for i in range(10):
            began = time.monotonic()
            try:
                # A new connection per request: what the listen backlog must absorb.
                with socket.create_connection((host, int(port)), timeout=30) as conn:
                    with lock:
                        connect_s.append(time.monotonic() - began)
                    conn.sendall(b"GET /ok HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    answer = b""
                    while chunk := conn.recv(65536):
                        answer += chunk
                if _status(answer) != 200:
                    with lock:
                        errors.append(f"{k}/{i}: {answer[:40]!r}")
            except OSError as exc:
                with lock:
                    errors.append(f"{k}/{i}: {type(exc).__name__}")

    threads = [threading.Thread(target=client, args=(k,)) for k in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    connect_s.sort()
    print("100 clients x 10: errors", len(errors), "connect p99 s", round(connect_s[int(len(connect_s) * 0.99)], 3))
    assert errors == []
    assert connect_s[int(len(connect_s) * 0.99)] < 1.0  # no multi-second connect delays


# The issue asked for 10 s of it: the long step's (.ci/run); the default suite runs the same seeded draws for 3 s.
@pytest.mark.parametrize("seconds", [3.0, pytest.param(10.0, marks=pytest.mark.long)])
def test_fuzz_malformed_requests_never_5xx_and_lose_nothing_acknowledged(svc, seconds):
    """A seeded generator of malformed requests: no 5xx, RSS bounded, acked runs readable."""
    rng = random.Random(1234)
    acked = []
    h = {"x-api-key": KEY, "Content-Type": "application/json"}
    for i in range(20):
        rid = str(uuid.uuid4())
        run = {
            "id": rid,
            "trace_id": rid,
            "dotted_order": "20240101T000000000000Z" + rid,
            "name": f"ok{i}",
            "run_type": "chain",
            "start_time": "2024-01-01T00:00:00.000000Z",
            "session_name": "fuzz",
        }
        assert requests.post(svc.url + "/runs", data=orjson.dumps(run), headers=h, timeout=10).status_code in (200, 202)
        acked.append(rid)
    pieces = [
        b"POST /runs HTTP/1.1\r\n",
        b"PATCH /runs/x HTTP/1.1\r\n",
        b"POST /runs/multipart HTTP/1.1\r\n",
        b"GET /info HTTP/1.1\r\n",
        b"OPTIONS /runs HTTP/1.1\r\n",
        b"Host: localhost\r\n",
        b"x-api-key: " + KEY.encode() + b"\r\n",
        b"Content-Length: \xc2\xb2\r\n",
        b"Content-Length: -1\r\n",
        b"Content-Length: 10\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Content-Encoding: zstd\r\n",
        b"Content-Encoding: gzip\r\n",
        b"Content-Encoding: br\r\n",
        b"Content-Type: multipart/form-data; boundary=\r\n",
        b"Content-Type: application/json\r\n",
        b"\r\n",
        b"-1\r\n",
        b"{\"id\": 5}",
        b"[" * 2000,
        DEEP,
        b"GET /sessions?offset=" + b"9" * 5000 + b" HTTP/1.1\r\n",
        b"POST /api/v1/bulk-exports HTTP/1.1\r\n",
        bytes(rng.randrange(256) for _ in range(64)),
    ]
    before = _rss_mb()
    statuses: dict[int, int] = {}
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        request = b"".join(rng.choice(pieces) for _ in range(rng.randrange(2, 10)))
        status = _status(_raw(svc, request, timeout=2.0))
        statuses[status] = statuses.get(status, 0) + 1
    print("fuzz statuses", statuses)
    assert not any(500 <= status < 600 for status in statuses), statuses
    # Answers without a status line (HTTP/0.9 requests) are checked in the service's own log.
    logged = [entry["status"] for entry in svc.requests()]
    assert not any(500 <= (status or 0) < 600 for status in logged), sorted(set(logged))
    assert sum(statuses.values()) > 50
    assert _rss_mb() - before < 100
    stored = {r["id"] for r in svc.runs()}
    assert set(acked) <= stored


def test_a_5000_digit_integer_parameter_is_a_422():
    with LocalService(api_key=KEY, bearer_token="t") as svc:
        r = requests.get(svc.url + "/v2/auth/wait/abc?timeout=" + "9" * 5000, headers={"x-api-key": KEY}, timeout=10)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "timeout"], r.text


def _multipart_with_part_header(header: str) -> bytes:
    rid = str(uuid.uuid4())
    run = orjson.dumps(
        {
            "id": rid,
            "trace_id": rid,
            "dotted_order": "20240101T000000000000Z" + rid,
            "name": "n",
            "run_type": "chain",
            "start_time": "2024-01-01T00:00:00.000000Z",
            "session_name": "p",
        }
    )
    head = f'--b\r\nContent-Disposition: form-data; name="post.{rid}"\r\n{header}\r\n\r\n'.encode()
    return head + run + b"\r\n--b--\r\n"


def _cursor(position: int) -> str:
    import base64

    return base64.urlsafe_b64encode(orjson.dumps(["desc", "x", position])).decode().rstrip("=")


# Each was a 500: int() refusing "²" (which str.isdigit() accepts) or 4,301 digits, or
# SQLite refusing a number past 64 bits.
@pytest.mark.parametrize(
    "method, path, body, content_type",
    [
        ("GET", "/sessions?limit=%C2%B2", None, None),
        ("GET", "/sessions?offset=" + "9" * 5000, None, None),
        ("GET", "/sessions?offset=18446744073709551616", None, None),
        ("POST", "/runs/query", {"filter": "eq(latency, " + "9" * 5000 + ")"}, None),
        ("POST", "/runs/query", {"filter": "gt(latency, 99999999999999999999999)"}, None),
        ("POST", "/runs/query", {"cursor": _cursor(2**64 - 1)}, None),
        ("POST", "/runs/multipart", _multipart_with_part_header("Content-Length: \u00b2"), "multipart"),
        ("POST", "/runs/multipart", _multipart_with_part_header("Content-Length: " + "9" * 5000), "multipart"),
        ("POST", "/runs/multipart", _multipart_with_part_header("Content-Type: application/json; length=\u00b2"), "multipart"),
        ("POST", "/runs/multipart", _multipart_with_part_header("Content-Type: application/json; length=" + "9" * 5000), "multipart"),
    ],
    ids=[
        "limit-superscript",
        "offset-5000-digits",
        "offset-past-64-bits",
        "filter-5000-digits",
        "filter-past-64-bits",
        "cursor-past-64-bits",
        "part-length-superscript",
        "part-length-5000-digits",
        "length-param-superscript",
        "length-param-5000-digits",
    ],
)
def test_malformed_parameters_are_422_never_5xx(svc, method, path, body, content_type):
    headers = {"x-api-key": KEY}
    if content_type == "multipart":
        headers["Content-Type"] = "multipart/form-data; boundary=b"
        r = requests.request(method, svc.url + path, data=body, headers=headers, timeout=10)
    else:
        r = requests.request(method, svc.url + path, json=body, headers=headers, timeout=10)
    assert r.status_code == 422, r.text[:300]
    if content_type == "multipart":  # the message names the bad value, not a "None bytes" it made up
        assert "is not a number" in r.text and "None" not in r.text, r.text[:300]


def test_deep_json_is_a_422_on_the_control_plane_too(svc):
    """Bulk exports and deployments keep their bodies and write them back as JSON: too deep, 422.

    A deployment 300 levels deep was stored, then the connection closed without an
    answer (orjson could not write it back); an export's was a 500.
    """
    h = {"x-api-key": KEY, "Content-Type": "application/json"}
    export = {
        "start_time": "2015-01-01T00:00:00Z",
        "end_time": "2015-01-05T00:00:00Z",
        "destination": {"type": "s3", "bucket_name": "b"},
    }
    r = requests.post(svc.url + "/api/v1/bulk-exports", data=_with_deep(export, "destination"), headers=h, timeout=10)
    assert r.status_code == 422 and "200 levels" in r.text, r.text[:300]
    r = requests.post(svc.url + "/v2/deployments", data=_with_deep({"name": "d"}, "source_config"), headers=h, timeout=10)
    assert r.status_code == 422 and "200 levels" in r.text, r.text[:300]


def test_connections_past_the_worker_limit_get_a_503_not_a_reset():
    """Connections held open (found: 2,000 of them made 2,000 threads): past the limit, 503 + Retry-After.

    The holders send a body slowly (a head never finished would be closed to make room).
    """
    with LocalService(api_key=KEY, max_connections=4, body_grace_s=30) as svc:
        host, port = svc.url.removeprefix("http://").split(":")
        idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(4)]
        try:
            for conn in idle:
                conn.sendall(b"POST /runs HTTP/1.1\r\nHost: localhost\r\nx-api-key: " + KEY.encode() + b"\r\nContent-Length: 100\r\n\r\n")
            time.sleep(0.2)
            # A body the refusal must drain, not reset: the client reads the 503 after sending it all.
            r = requests.post(svc.url + "/runs", data=b"x" * 2_000_000, headers={"x-api-key": KEY}, timeout=10)
            assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
        finally:
            for conn in idle:
                conn.close()
        deadline = time.monotonic() + 5
        while requests.get(svc.url + "/ok", timeout=5).status_code != 200:
            assert time.monotonic() < deadline  # the slots come back as the idle connections close
            time.sleep(0.05)
