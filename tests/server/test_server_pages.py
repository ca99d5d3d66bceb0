"""Which web pages reach the local service: the Host rule, the Origin rule, browsers' content types and CORS.

The headers here are the ones a browser sends (Chromium's own requests are in
tests/viewer/test_viewer_pages.py); the service runs on loopback as users run it.
"""

from __future__ import annotations

import gzip
import logging
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import requests
import zstandard

from otel_runs_exporter.server import LocalService
from otel_runs_exporter.server._origins import PagePolicy, normalize_allowed_host, normalize_origin
from server.server_helpers import BOUNDARY, Trace, multipart, run_parts

APP = "http://localhost:5173"
QUERY: dict[str, Any] = {}


@pytest.fixture(scope="module")
def svc() -> Iterator[LocalService]:
    """One service for the read-only checks (each write test makes its own, to count what was stored)."""
    with LocalService(cors_origins=[APP]) as service:
        yield service


def own(service: LocalService, name: str = "127.0.0.1") -> dict[str, str]:
    """The headers of the service's own page opened under ``name``: Host and Origin agree."""
    return {"Host": f"{name}:{service.port}", "Origin": f"http://{name}:{service.port}"}


def call(service: LocalService, method: str, path: str, headers: dict[str, str], body: Any = None,
         **kwargs: Any) -> requests.Response:
    data = body if isinstance(body, (bytes, str)) or body is None else orjson.dumps(body)
    return requests.request(method, service.url + path, headers=headers, data=data, timeout=10, **kwargs)


def cors_headers(response: requests.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower().startswith("access-control-")}


# --- Host ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["localhost", "LocalHost.", "127.0.0.1", "127.8.9.10", "[::1]", "[::ffff:127.0.0.1]", "0.0.0.0", "[::]"]
)
def test_loopback_names_on_any_port_pass(svc: LocalService, host: str) -> None:
    for port in ("", ":1", f":{svc.port}", ":8080"):  # ssh -L, docker -p and editors forward other ports
        for path in ("/ok", "/", "/sessions"):
            r = requests.get(svc.url + path, headers={"Host": host + port}, timeout=10)
            assert r.status_code == 200, (host + port, path, r.text)


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.localtest:80", "localhost.evil.example", "127.0.0.1.nip.io", "192.0.2.77", "[fd00::1]"]
)
def test_any_other_host_is_403_on_every_route_and_the_viewer_saying_how_to_allow_it(svc: LocalService, host: str) -> None:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host.strip("[]")
    for method, path in [("GET", "/"), ("GET", "/viewer/app.js"), ("GET", "/ok"), ("GET", "/info"),
                         ("POST", "/runs/query"), ("GET", f"/runs/{uuid.uuid4()}"), ("POST", "/runs"),
                         ("OPTIONS", "/runs"), ("GET", "/nowhere")]:
        r = call(svc, method, path, {"Host": host}, QUERY if method == "POST" else None)
        assert r.status_code == 403, (method, path, r.status_code)
        assert r.json()["host"] == host
        assert f"--allow-host {name}" in r.json()["detail"] and "allow_hosts" in r.json()["detail"]
    assert svc.runs() == []


def test_allow_host_names_more_hosts_and_star_turns_the_check_off_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with LocalService(allow_hosts=["DevBox.lan", "[fd00::1]"]) as service:
        for host, status in [("devbox.lan:9999", 200), ("devbox.lan", 200), ("[fd00::1]:1984", 200),
                             ("other.lan", 403), ("devbox.lan.evil.example", 403)]:
            assert requests.get(service.url + "/ok", headers={"Host": host}, timeout=10).status_code == status, host
    assert "Host check is off" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter.server._app"):
        with LocalService(allow_hosts=["*"]) as service:
            assert requests.get(service.url + "/ok", headers={"Host": "evil.example"}, timeout=10).status_code == 200
    assert "the Host check is off" in caplog.text and "DNS rebinding" in caplog.text
    for bad in ("devbox.lan:80", "a/b", "", "x y"):
        with pytest.raises(ValueError, match="--allow-host"):
            LocalService(allow_hosts=[bad])
    with pytest.raises(TypeError, match="lists of names"):
        LocalService(allow_hosts="devbox.lan")  # type: ignore[arg-type]


def test_bound_to_another_address_its_own_addresses_pass() -> None:
    policy = PagePolicy.build("0.0.0.0", (), ())
    # The address the client connected to is ours, whatever the bind: a rebound name never is an address.
    assert policy.host_allowed("192.0.2.2:1984", "192.0.2.2")
    assert policy.host_allowed("0.0.0.0:1984", "127.0.0.1")  # what LocalService.url prints for this bind
    assert PagePolicy.build("192.0.2.2", (), ()).host_allowed("192.0.2.2:1984", "192.0.2.2")
    assert not policy.host_allowed("192.0.2.3:1984", "192.0.2.2")
    assert not policy.host_allowed("evil.example:1984", "192.0.2.2")
    assert PagePolicy.build("devbox.lan", (), ()).host_allowed("DEVBOX.LAN:1984", "192.0.2.2")


def test_a_service_bound_to_a_non_loopback_address_answers_that_address() -> None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        address = probe.getsockname()[0]
    except OSError:
        address = "127.0.0.1"
    finally:
        probe.close()
    if address.startswith("127."):
        pytest.skip("this machine has no non-loopback IPv4 address")
    with LocalService(host=address) as service:
        assert requests.get(service.url + "/ok", timeout=10).status_code == 200
        assert requests.get(service.url + "/ok", headers={"Host": "evil.example"}, timeout=10).status_code == 403


def _raw(service: LocalService, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as conn:
        conn.sendall(head)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_two_hosts_or_two_origins_are_400_and_no_host_at_all_is_a_client(svc: LocalService) -> None:
    two_hosts = b"GET /ok HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
    assert _raw(svc, two_hosts).startswith(b"HTTP/1.1 400")
    origin = f"http://127.0.0.1:{svc.port}".encode()
    two_origins = (b"GET /sessions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: %s\r\nOrigin: http://evil.example\r\n"
                   b"Connection: close\r\n\r\n" % (svc.port, origin))
    assert _raw(svc, two_origins).startswith(b"HTTP/1.1 400")
    assert _raw(svc, b"GET /ok HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.1 200")  # HTTP/1.0: no browser omits Host


# --- Origin and Sec-Fetch-Site -----------------------------------------------------------


READS = [("POST", "/runs/query"), ("POST", "/runs/stats"), ("GET", "/sessions"), ("GET", "/runs/{run_id}")]


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_the_viewers_own_page_reads_however_it_was_opened(svc: LocalService, name: str) -> None:
    for method, path in READS:
        path = path.format(run_id=uuid.uuid4())
        r = call(svc, method, path, {**own(svc, name), "Content-Type": "application/json"}, QUERY if method == "POST" else None)
        assert r.status_code in (200, 404), (name, path, r.text)  # 404: the made-up run id
        assert cors_headers(r) == {}
        # A GET from the page itself carries no Origin, only Sec-Fetch-Site.
        if method == "GET":
            fetched = call(svc, method, path, {"Host": f"{name}:{svc.port}", "Sec-Fetch-Site": "same-origin"})
            assert fetched.status_code in (200, 404)


@pytest.mark.parametrize(
    "origin",
    ["http://127.0.0.1:{other}", "http://localhost:{other}", "http://localhost", "http://evil.example", "null",
     "http://[::1]:{port}", "chrome-extension://abcdef", "not an origin"],
)
def test_every_other_page_is_403_on_every_route_whatever_it_sends(origin: str) -> None:
    with LocalService() as service:
        origin = origin.format(port=service.port, other=service.port + 1)
        headers = {"Origin": origin, "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}
        trace = Trace()
        for method, path, body in [
            ("POST", "/runs", trace.root_post()),
            ("POST", "/runs/batch", {"post": [trace.root_post()]}),
            ("PATCH", f"/runs/{trace.root_id}", {"end_time": "2025-03-01T12:00:01Z"}),
            ("POST", "/sessions", {"name": "from a page"}),
            ("POST", "/runs/query", QUERY),
            ("GET", "/sessions", None),
            ("GET", "/ok", None),
            ("GET", "/info", None),
            ("GET", "/bulk-exports", None),
            ("OPTIONS", "/runs/query", None),
            ("GET", "/nowhere", None),
        ]:
            r = call(service, method, path, headers, body)
            assert r.status_code == 403, (origin, method, path, r.status_code, r.text)
            assert "may not call" in r.json()["detail"], r.text
            assert cors_headers(r) == {}
            # No flag can allow an opaque origin: the answer must not suggest one (it said --cors-origin null).
            assert "--cors-origin null" not in r.text, r.text
        body = multipart(run_parts("post", trace.root_post()))
        r = call(service, "POST", "/runs/multipart", {**headers, "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}, body)
        assert r.status_code == 403
        assert service.runs() == [] and service.store.projects(name="from a page") == []


@pytest.mark.parametrize("site", ["cross-site", "same-site", "something-new"])
def test_a_page_that_sends_no_origin_is_judged_by_sec_fetch_site(svc: LocalService, site: str) -> None:
    for path in ("/sessions", f"/runs/{uuid.uuid4()}", "/ok"):
        r = requests.get(svc.url + path, headers={"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "no-cors"}, timeout=10)
        assert r.status_code == 403, (site, path)
        assert "another site" in r.json()["detail"]
    # The user typing the address (Sec-Fetch-Site: none) is no page.
    assert requests.get(svc.url + "/sessions", headers={"Sec-Fetch-Site": "none"}, timeout=10).status_code == 200


def test_a_link_on_any_page_opens_the_viewer(svc: LocalService) -> None:
    for headers in ({"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, {"Origin": "http://evil.example"}):
        for path in ("/", "/viewer/app.js"):
            assert requests.get(svc.url + path, headers=headers, timeout=10).status_code == 200


def test_routes_no_page_calls_refuse_the_services_own_page_too() -> None:
    with LocalService() as service:
        trace = Trace()
        r = call(service, "POST", "/runs", {**own(service), "Content-Type": "application/json"}, trace.root_post())
        assert r.status_code == 403 and "not for the service's own pages" in r.json()["detail"]
        assert "--cors-origin" in r.json()["detail"]
        r = call(service, "GET", "/bulk-exports", own(service))
        assert r.status_code == 403 and "no web page may call it" in r.json()["detail"]
        assert service.runs() == []


# --- content types from browsers ---------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                     f"multipart/form-data; boundary={BOUNDARY}", None],
)
def test_a_browser_writes_json_routes_as_json_only_else_415_naming_the_types(content_type: str | None) -> None:
    with LocalService(cors_origins=[APP]) as service:
        trace = Trace()
        for headers, method, path, body in [
            (own(service), "POST", "/runs/query", QUERY),
            ({"Host": f"127.0.0.1:{service.port}", "Sec-Fetch-Site": "same-origin"}, "POST", "/runs/stats", QUERY),
            ({"Origin": APP}, "POST", "/runs", trace.root_post()),
            ({"Origin": APP}, "POST", "/runs/batch", {"post": [trace.root_post()]}),
        ]:
            if content_type is not None:
                headers = {**headers, "Content-Type": content_type}
            r = call(service, method, path, headers, body)
            assert r.status_code == 415, (path, content_type, r.text)
            assert r.json()["accepted_content_types"] == ["application/json"]
            assert "application/json" in r.json()["detail"]
        assert service.runs() == []


def test_the_types_a_route_names_pass_compressed_or_not_and_clients_are_parsed_as_before() -> None:
    with LocalService(cors_origins=[APP]) as service:
        json_type = {"Content-Type": "application/json; charset=utf-8"}
        assert call(service, "POST", "/runs/query", {**own(service), **json_type}, QUERY).status_code == 200
        first, second, third, fourth = Trace(), Trace(), Trace(), Trace()
        assert call(service, "POST", "/runs", {"Origin": APP, **json_type}, first.root_post()).status_code == 202
        body = multipart(run_parts("post", second.root_post()))
        mp = {"Origin": APP, "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
        assert call(service, "POST", "/runs/multipart", {**mp, "Content-Encoding": "gzip"}, gzip.compress(body)).status_code == 202
        body = multipart(run_parts("post", third.root_post()))
        zstd = zstandard.ZstdCompressor().compress(body)
        assert call(service, "POST", "/runs/multipart", {**mp, "Content-Encoding": "zstd"}, zstd).status_code == 202
        # No Origin, no Sec-Fetch-*: a client, whose body is parsed whatever it declares, as it always was.
        for content_type in (None, "text/plain"):
            trace = Trace()
            headers = {"Content-Type": content_type} if content_type else {}
            r = requests.post(service.url + "/runs", data=orjson.dumps(trace.root_post()), headers=headers,
                              timeout=10)
            assert r.status_code == 202, r.text
        assert call(service, "POST", "/runs", {}, fourth.root_post()).status_code == 202
        assert len(service.runs()) == 6


def test_the_content_type_415_is_told_apart_from_the_compression_415(svc: LocalService) -> None:
    compression = requests.post(svc.url + "/runs/multipart", data=b"x", headers={"Content-Encoding": "br"}, timeout=10)
    content_type = call(svc, "POST", "/runs/query", {**own(svc), "Content-Type": "text/plain"}, QUERY)
    assert compression.status_code == content_type.status_code == 415
    # The exporter turns compression off on a 415 to a compressed body; it never sends a browser's headers,
    # and the content-type refusal names what it accepts.
    assert "accepted_content_types" not in compression.json() and "Content-Encoding" in compression.json()["detail"]
    assert content_type.json()["accepted_content_types"] == ["application/json"]


# --- CORS ----------------------------------------------------------------------------------


def test_no_cors_header_on_any_answer_without_cors_origin() -> None:
    with LocalService() as service:
        origin = f"http://127.0.0.1:{service.port + 1}"
        answers = [
            call(service, "OPTIONS", "/runs/query", {"Origin": origin, "Access-Control-Request-Method": "POST",
                                                     "Access-Control-Request-Headers": "content-type"}),
            call(service, "OPTIONS", "/runs", {}),
            call(service, "GET", "/ok", {}),
            call(service, "POST", "/runs/query", {**own(service), "Content-Type": "application/json"}, QUERY),
            call(service, "GET", "/", {"Origin": origin}),
        ]
        assert [a.status_code for a in answers] == [403, 204, 200, 200, 200]
        assert [cors_headers(a) for a in answers] == [{}] * len(answers)


def test_a_cors_origin_gets_its_preflight_and_headers_on_every_answer_and_no_other_origin_does(svc: LocalService) -> None:
    preflight = {"Origin": APP, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    r = call(svc, "OPTIONS", "/runs/multipart", preflight)
    assert r.status_code == 204
    assert cors_headers(r) == {
        "Access-Control-Allow-Origin": APP,
        "Access-Control-Allow-Methods": "POST",
        "Access-Control-Allow-Headers": "accept, authorization, content-encoding, content-type, x-api-key, x-tenant-id",
        "Access-Control-Max-Age": "600",
    }
    assert r.headers["Vary"] == "Origin"
    r = call(svc, "POST", "/runs/query", {"Origin": APP, "Content-Type": "application/json"}, QUERY)
    assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == APP
    # Its refusals carry them too, so the app can read why; a route no page calls refuses its preflight.
    r = call(svc, "OPTIONS", "/bulk-exports", {**preflight, "Access-Control-Request-Method": "GET"})
    assert r.status_code == 403 and r.headers["Access-Control-Allow-Origin"] == APP
    assert "no web page may call it" in r.json()["detail"]
    r = call(svc, "POST", "/runs/query", {"Origin": APP, "Content-Type": "text/plain"}, QUERY)
    assert r.status_code == 415 and r.headers["Access-Control-Allow-Origin"] == APP
    for other in ("http://localhost:5174", "https://localhost:5173", "http://127.0.0.1:5173"):
        r = call(svc, "OPTIONS", "/runs/multipart", {**preflight, "Origin": other})
        assert r.status_code == 403 and cors_headers(r) == {}, other


def test_cors_origins_are_checked_when_the_service_is_made() -> None:
    assert normalize_origin("HTTP://LOCALHOST:5173/") == APP
    assert normalize_allowed_host("LOCALHOST.") == "localhost"
    for bad in ("*", "localhost:5173", "http://localhost:5173/app", "http://user@localhost", "http://"):
        with pytest.raises(ValueError, match="is not an origin"):
            LocalService(cors_origins=[bad])


def test_doctests() -> None:
    import doctest

    from otel_runs_exporter.server import _origins

    assert doctest.testmod(_origins).failed == 0
