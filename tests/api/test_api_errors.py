"""Typed errors, the retry rules per method, auth headers, addresses, and secrets kept out of text.

What each answer does (the client's half of the retry matrix):

=========================  ===================  =====================
answer                     GET                  POST / PATCH
=========================  ===================  =====================
429 (+ Retry-After), 5xx   retried to deadline  raised at once
401/403, 404, 409, 422     raised               raised
no answer                  NoAnswerError        NoAnswerError
=========================  ===================  =====================
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest
import requests
from api.api_helpers import API_KEY, BEARER, SPEED, export_body
from core.helpers import FAST_BACKOFF

from otel_runs_exporter import (
    ConfigError,
    NotFoundError,
    RateLimitedError,
    ServerError,
    ServiceError,
    UnauthorizedError,
    ValidationError,
)
from otel_runs_exporter.api import NoAnswerError, ServiceClient
from otel_runs_exporter.server import LocalService


def control_requests(svc: LocalService) -> list[tuple[str, str, int]]:
    return [(e["method"], e["path"], e["status"]) for e in svc.requests() if "bulk-exports" in e["path"] or "/v2/" in e["path"]]


def test_404_is_not_found_with_the_parsed_body(client: ServiceClient) -> None:
    with pytest.raises(NotFoundError) as info:
        client.get_export("no-such-export")
    err = info.value
    assert (err.status, err.method, err.path) == (404, "GET", "/api/v1/bulk-exports/no-such-export")
    assert list(err.detail) == ["detail"] and err.detail["detail"].startswith("export no-such-export not found (")
    assert str(err).startswith('GET /api/v1/bulk-exports/no-such-export answered 404: {"detail": "export no-such-export not found (')


def test_401_on_a_wrong_key_and_the_key_is_in_no_message(svc: LocalService) -> None:
    with ServiceClient(endpoint=svc.url, control_plane_url=svc.url, api_key="wrong-key-abcdef") as client:
        with pytest.raises(UnauthorizedError) as info:
            client.list_exports()
    assert info.value.status == 401
    assert "wrong-key-abcdef" not in str(info.value) + repr(info.value) + repr(client)


def test_403_when_the_workspace_is_not_the_services(svc: LocalService) -> None:
    svc.workspace_id = "ws-1"
    with ServiceClient(endpoint=svc.url, api_key=API_KEY, workspace_id="ws-2") as client:
        with pytest.raises(UnauthorizedError) as info:
            client.list_exports()
    assert info.value.status == 403


def test_422_carries_the_detail_list(client: ServiceClient) -> None:
    with pytest.raises(ValidationError) as info:
        client.create_deployment({"source": "github"})
    assert info.value.errors == [{"loc": ["body", "name"], "msg": "Field required", "type": "missing"}]


def test_get_retries_429_honouring_retry_after_then_succeeds(client: ServiceClient, svc: LocalService) -> None:
    svc.control.fail_next(429, 503, retry_after=0.05)
    assert client.list_exports() == []
    assert [s for _, _, s in control_requests(svc)] == [429, 503, 200]


def test_get_gives_up_at_the_deadline_with_the_last_answer(svc: LocalService) -> None:
    svc.control.fail_next(*[503] * 50)
    # A deadline a loaded machine cannot eat with the first request alone (0.3 s failed once so).
    with ServiceClient(endpoint=svc.url, api_key=API_KEY, call_timeout_s=1.0, retry_backoff=FAST_BACKOFF) as client:
        with pytest.raises(ServerError) as info:
            client.get_export("x")
    assert info.value.status == 503
    assert len(control_requests(svc)) > 1


@pytest.mark.parametrize("status", [429, 500, 503])
def test_post_and_patch_are_not_retried(client: ServiceClient, svc: LocalService, status: int) -> None:
    svc.control.fail_next(status, retry_after=7)
    with pytest.raises(ServiceError) as info:
        client.create_export(export_body(days=1))
    assert info.value.status == status
    if status == 429:
        assert isinstance(info.value, RateLimitedError) and info.value.retry_after == 7
    else:
        assert isinstance(info.value, ServerError)
    assert control_requests(svc) == [("POST", "/api/v1/bulk-exports", status)]
    assert client.list_exports() == []  # nothing was created behind our back

    svc.control.fail_next(status)
    with pytest.raises(ServiceError):
        client.update_deployment("d", {"name": "x"})
    assert [r[0] for r in control_requests(svc)].count("PATCH") == 1


def test_no_answer_is_its_own_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens here
    with ServiceClient(endpoint=f"http://127.0.0.1:{port}", api_key=API_KEY, call_timeout_s=0.3) as client:
        with pytest.raises(NoAnswerError) as info:
            client.create_export(export_body())
        assert isinstance(info.value, ConnectionError)
        with pytest.raises(NoAnswerError):
            client.list_exports()


def test_an_address_that_never_answered_fails_at_once_not_at_the_deadline(closed_port: int) -> None:
    with ServiceClient(endpoint=f"http://127.0.0.1:{closed_port}", api_key=API_KEY, call_timeout_s=20) as client:
        started = time.monotonic()
        with pytest.raises(NoAnswerError) as info:
            client.list_exports()
    assert time.monotonic() - started < 2  # not the 20 s call timeout
    assert "connection refused" in str(info.value) and f"127.0.0.1:{closed_port}" in str(info.value)


def test_connect_timeout_is_short_and_apart_from_the_read_timeout(silent_port: int) -> None:
    endpoint = f"http://127.0.0.1:{silent_port}"
    with ServiceClient(endpoint=endpoint, timeout_s=30, call_timeout_s=20, connect_timeout_s=0.3) as client:
        started = time.monotonic()
        with pytest.raises(NoAnswerError) as info:
            client.list_exports()
    assert time.monotonic() - started < 2  # neither the 30 s read timeout nor the 20 s call timeout
    assert "nothing accepted a connection within 0.3 s" in str(info.value)


def test_a_slow_answer_is_not_cut_by_the_connect_timeout(svc: LocalService) -> None:
    auth_id = svc.control.auth.start(complete_after_s=SPEED * 1.0, expires_after_s=None)  # done after one real second
    with ServiceClient(endpoint=svc.url, control_plane_url=svc.url, api_key=API_KEY, connect_timeout_s=0.2) as client:
        started = time.monotonic()
        result = client.wait_for_auth(auth_id, timeout=3600)  # the service holds the request open meanwhile
    assert result.completed and time.monotonic() - started > 0.8


def test_once_an_address_has_answered_a_lost_connection_is_retried() -> None:
    first = LocalService(api_key=API_KEY).start()
    port = first.port
    with ServiceClient(endpoint=first.url, api_key=API_KEY, call_timeout_s=10) as client:
        assert client.list_exports() == []
        first.stop()  # a restart: nothing listens for a moment
        second = LocalService(api_key=API_KEY, port=port)
        restart = threading.Timer(0.5, second.start)
        restart.start()
        try:
            assert client.list_exports() == []  # retried through the refused connections
            assert [e["path"] for e in second.requests()] == ["/api/v1/bulk-exports"]
        finally:
            restart.join()
            second.stop()


@pytest.mark.parametrize("bad", [0, -1, "3", True])
def test_connect_timeout_must_be_positive_seconds(bad: object) -> None:
    with pytest.raises(ConfigError, match="connect_timeout_s must be a number of seconds above 0"):
        ServiceClient(endpoint="http://127.0.0.1:1", connect_timeout_s=bad)  # type: ignore[arg-type]


def test_endpoint_with_api_v1_is_not_doubled(svc: LocalService) -> None:
    with ServiceClient(endpoint=svc.url + "/api/v1/", api_key=API_KEY) as client:
        assert client.list_exports() == []
    assert [p for _, p, _ in control_requests(svc)] == ["/api/v1/bulk-exports"]


def test_bearer_goes_to_the_control_plane_only(svc: LocalService) -> None:
    sent: list[tuple[str, str | None]] = []
    with ServiceClient(endpoint=svc.url, control_plane_url=svc.url, bearer_token=BEARER, api_key=API_KEY) as client:
        client._session.hooks["response"].append(
            lambda r, *a, **k: sent.append((r.request.path_url, r.request.headers.get("Authorization")))
        )
        client.create_deployment({"name": "d"})
        client.list_exports()
    assert sent == [("/v2/deployments", f"Bearer {BEARER}"), ("/api/v1/bulk-exports", None)]


def test_bearer_alone_is_accepted_on_the_control_plane(svc: LocalService) -> None:
    with ServiceClient(endpoint=svc.url, control_plane_url=svc.url, bearer_token=BEARER) as client:
        assert client.create_deployment({"name": "d"}).id
        with pytest.raises(UnauthorizedError):
            client.list_exports()  # the main API wants the key
    with ServiceClient(control_plane_url=svc.url, bearer_token="not-it", api_key=API_KEY) as client:
        with pytest.raises(UnauthorizedError) as info:
            client.create_deployment({"name": "d"})
    assert "not-it" not in str(info.value)


def test_secrets_never_reach_logs_reprs_or_errors(svc: LocalService, caplog: pytest.LogCaptureFixture) -> None:
    token = "tok-super-secret-value"
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    with ServiceClient(endpoint=svc.url, control_plane_url=svc.url, api_key=API_KEY, bearer_token=BEARER) as client:
        texts += [repr(client), repr(client.settings), str(client.settings)]
        auth_id = svc.control.auth.start(token=token)
        result = client.wait_for_auth(auth_id)
        assert result.token == token
        texts += [repr(result), str(result), repr(result.raw)]
        for call in (lambda: client.get_export("missing"), lambda: client.wait_for_auth(auth_id, timeout="soon")):  # type: ignore[arg-type]
            with pytest.raises(ServiceError) as info:
                call()
            texts += [str(info.value), repr(info.value), repr(info.value.detail)]
        svc.control.fail_next(503)
        with pytest.raises(ServerError) as info:
            client.create_deployment({"name": "x"})
        texts.append(str(info.value))
    texts.append(caplog.text)
    for secret in (API_KEY, BEARER, token):
        assert all(secret not in text for text in texts), secret


def test_raw_requests_see_the_same_answers(svc: LocalService) -> None:
    """The wire shapes the client relies on, without the client in between."""
    headers = {"x-api-key": API_KEY}
    created = requests.post(f"{svc.url}/api/v1/bulk-exports", json=export_body(days=1), headers=headers, timeout=5)
    assert created.status_code == 201 and created.json()["status"] == "CREATED"
    listed = requests.get(f"{svc.url}/api/v1/bulk-exports", headers=headers, timeout=5)
    assert isinstance(listed.json(), list)
    assert requests.delete(f"{svc.url}/api/v1/bulk-exports", headers=headers, timeout=5).status_code == 405
    assert requests.get(f"{svc.url}/v2/nothing", headers=headers, timeout=5).status_code == 404
