"""Fixtures of the core tests."""

from __future__ import annotations

import pytest

from core import helpers


@pytest.fixture(autouse=True)
def _shut_down_providers():
    yield
    while helpers.created:
        provider = helpers.created.pop()
        provider.shutdown()  # idempotent: a test that shut down already is not affected
