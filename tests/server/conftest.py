"""Fixtures for the local service's tests; body helpers live in server_helpers.py.

``service`` here is a fresh service per test (the root conftest shares one),
because these tests change auth, limits and faults.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from otel_runs_exporter.server import LocalService


@pytest.fixture
def service() -> Iterator[LocalService]:
    """A strict local service on a free port with in-memory storage."""
    with LocalService(strict=True) as svc:
        yield svc


@pytest.fixture
def http() -> Iterator[requests.Session]:
    """A session, so tests exercise keep-alive like real clients."""
    with requests.Session() as session:
        yield session
