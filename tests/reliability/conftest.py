"""Fixtures of the reliability tests: a fresh local service per test (rate-limited logs are reset by the root conftest)."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from otel_runs_exporter.server import FaultConfig, LocalService


@pytest.fixture
def make_service() -> Iterator[Callable[..., LocalService]]:
    """Start LocalServices with the given options; each is stopped after the test.

    A fresh service per test (rather than the session one) so a worker still
    retrying from an earlier test can never add runs to this test's counts.
    """
    started: list[LocalService] = []

    def make(**options: Any) -> LocalService:
        options.setdefault("strict", True)  # the exporter's output held to every rule
        svc = LocalService(**options).start()
        started.append(svc)
        return svc

    yield make
    for svc in started:
        svc.faults.clear()
        svc.stop()


@pytest.fixture
def svc(make_service: Callable[..., LocalService]) -> LocalService:
    return make_service(faults=FaultConfig(seed=7))


@pytest.fixture
def service_process() -> Iterator[Any]:
    """A LocalService in a child process (see rel_service_proc), stopped after the test."""
    from reliability.rel_service_proc import ServiceProcess

    proc = ServiceProcess(seed=2024)
    yield proc
    proc.close()
