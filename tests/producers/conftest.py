"""Fixtures of the producer matrix: the fake model API and one local service per path."""

from __future__ import annotations

from typing import Iterator

import pytest

from otel_runs_exporter.server import LocalService
from otel_runs_exporter.testing.fake_llm import FakeLLMAPI


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLMAPI]:
    with FakeLLMAPI() as api:
        yield api


@pytest.fixture(scope="module")
def services() -> Iterator[tuple[LocalService, LocalService]]:
    """(the processor path's service, the exporter path's service)."""
    with LocalService(strict=True) as processor_side, LocalService(strict=True) as exporter_side:
        yield processor_side, exporter_side
