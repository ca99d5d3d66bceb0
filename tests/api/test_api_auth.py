"""Auth waits (spec 4.1): the four outcomes, 422 for a bad timeout, and the token kept secret."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from otel_runs_exporter import ValidationError
from otel_runs_exporter.api import AuthWaitStatus, ServiceClient
from otel_runs_exporter.server import LocalService

Advance = Callable[[float], None]


def test_completed_returns_the_token(client: ServiceClient, svc: LocalService) -> None:
    auth_id = svc.control.auth.start(token="tok-abc")
    result = client.wait_for_auth(auth_id)
    assert result.status is AuthWaitStatus.COMPLETED and result.token == "tok-abc"


def test_the_service_waits_for_completion_within_the_timeout(client: ServiceClient, svc: LocalService) -> None:
    auth_id = svc.control.auth.start(token="tok-late", complete_after_s=None)
    timer = threading.Timer(0.1, svc.control.auth.complete, args=(auth_id,))
    timer.start()
    try:
        svc.control.clock.speed = 1  # 30 s of service time is 30 s of real time: completion wins
        started = time.monotonic()
        result = client.wait_for_auth(auth_id, timeout=30)
    finally:
        timer.cancel()
    assert result.status is AuthWaitStatus.COMPLETED and result.token == "tok-late"
    assert time.monotonic() - started < 5


def test_pending_when_the_wait_ends_first(client: ServiceClient, svc: LocalService) -> None:
    auth_id = svc.control.auth.start(complete_after_s=None, expires_after_s=None)
    started = time.monotonic()
    result = client.wait_for_auth(auth_id, timeout=30)  # 30 ms of real time at 1000x
    assert result.status is AuthWaitStatus.PENDING and result.token is None
    assert time.monotonic() - started < 2


def test_timeout_once_the_authentication_expired(client: ServiceClient, svc: LocalService, frozen: Advance) -> None:
    auth_id = svc.control.auth.start(complete_after_s=None, expires_after_s=600)
    frozen(601)
    result = client.wait_for_auth(auth_id, timeout=0)
    assert result.status is AuthWaitStatus.TIMEOUT and result.token is None


def test_not_found(client: ServiceClient) -> None:
    result = client.wait_for_auth("never-started", timeout=1)
    assert result.status is AuthWaitStatus.NOT_FOUND and result.token is None


@pytest.mark.parametrize(
    ("timeout", "kind"),
    [("abc", "int_parsing"), ("1.5", "int_parsing"), (-1, "greater_than_equal"), (99999, "less_than_equal")],
)
def test_bad_timeout_is_422_http_validation_error(client: ServiceClient, timeout: object, kind: str) -> None:
    with pytest.raises(ValidationError) as info:
        client.wait_for_auth("x", timeout=timeout)  # type: ignore[arg-type]
    assert info.value.status == 422
    [error] = info.value.errors
    assert error["loc"] == ["query", "timeout"] and error["type"] == kind and error["msg"]
