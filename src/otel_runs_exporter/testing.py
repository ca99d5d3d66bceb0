"""Test helpers: the local service in-process, so a test can assert on the runs its code produced.

With pytest, enable the fixture in a ``conftest.py``::

    pytest_plugins = ["otel_runs_exporter.testing"]

    def test_my_chain(local_service):
        exporter = RunsSpanExporter(endpoint=local_service.url, api_key="test")
        ...  # run the code under test and flush the exporter
        runs = local_service.wait_for_runs(3)
        assert {r["name"] for r in runs} == {"agent", "llm", "tool"}
        assert local_service.violations() == []

Without pytest, use the context manager::

    with run_local_service() as svc:
        ...

Each fixture use gets a fresh service on a free port with ``:memory:`` storage,
so tests do not see each other's runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .server import FaultConfig, LocalService

__all__ = ["run_local_service", "FaultConfig", "LocalService"]


@contextlib.contextmanager
def run_local_service(**options: Any) -> Iterator[LocalService]:
    """Start a :class:`LocalService` on 127.0.0.1, a free port and ``:memory:`` storage; stop it on exit.

    ``options`` are passed to LocalService, e.g. ``lenient=True`` or
    ``faults=FaultConfig(rate_500=0.2, seed=1)``.
    """
    options.setdefault("host", "127.0.0.1")
    options.setdefault("port", 0)
    options.setdefault("db", ":memory:")
    service = LocalService(**options)
    service.start()
    try:
        yield service
    finally:
        service.stop()


try:
    import pytest
except ImportError:  # pytest is only needed by users who use the fixture
    pass
else:

    @pytest.fixture
    def local_service() -> Iterator[LocalService]:
        """A running local service for one test; its ``url`` is the exporter's endpoint.

        For other options, write your own fixture around :func:`run_local_service`.
        """
        with run_local_service() as service:
            yield service
