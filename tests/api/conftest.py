"""Fixtures for the API client and CLI tests: a real local service with a fast clock.

Each test gets its own service (cheap: in-memory store, a free port), so clock
speed, limits and injected failures never leak between tests. Service time runs
1000x real time by default; tests that need exact timing freeze it
(``frozen`` fixture) and move it with ``advance``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from api.api_helpers import API_KEY, BEARER, SPEED

from otel_runs_exporter.api import ServiceClient
from otel_runs_exporter.server import LocalService


@pytest.fixture
def svc() -> Iterator[LocalService]:
    """A local service requiring API_KEY (and accepting BEARER on /v2), clock at 1000x."""
    with LocalService(api_key=API_KEY, bearer_token=BEARER, clock_speed=SPEED) as service:
        yield service


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port whose listener never accepts: connecting hangs, as to a host that drops packets.

    The listen backlog is 0 and one connection already fills it, so the kernel
    drops every further SYN; no test needs a route to the outside for a real
    connect timeout.
    """
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            yield port


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on: connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def client(svc: LocalService) -> Iterator[ServiceClient]:
    """A client of ``svc`` for both the main API and the control plane."""
    with ServiceClient(endpoint=svc.url, control_plane_url=svc.url, api_key=API_KEY, call_timeout_s=5.0) as c:
        yield c


@pytest.fixture
def frozen(svc: LocalService) -> Callable[[float], None]:
    """Stop ``svc``'s clock; the returned function moves it forward by service seconds."""
    svc.control.clock.speed = 0
    return svc.control.clock.advance


@pytest.fixture
def run_cli(svc: LocalService, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run ``otel-runs`` in this process (same settings by environment); returns (exit code, stdout, stderr).

    Cheaper than a process, for the many table/JSON checks; the process-level
    contract (exit status, streams) is pinned by the ``cli`` fixture's tests.
    """
    from otel_runs_exporter import cli as cli_module

    monkeypatch.setenv("OTEL_EXPORTER_RUNS_ENDPOINT", svc.url)
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL", svc.url)
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_API_KEY", API_KEY)

    def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        capsys.readouterr()
        with monkeypatch.context() as patch:
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            try:
                code = cli_module.main(list(args))
            except SystemExit as exc:  # argparse refusing the arguments
                code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def cli(svc: LocalService) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``otel-runs`` as a real process configured for ``svc`` by environment variables."""

    def run(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}
        base.update(
            {
                "OTEL_EXPORTER_RUNS_ENDPOINT": svc.url,
                "OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL": svc.url,
                "OTEL_EXPORTER_RUNS_API_KEY": API_KEY,
                "PYTHONUNBUFFERED": "1",
            }
        )
        base.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "otel_runs_exporter.cli", *args],
            env=base,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=20,
        )

    return run
