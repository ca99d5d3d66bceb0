"""Producer: openinference-instrumentation-openai on the real openai client."""

from __future__ import annotations

import pytest

from producers.matrix import assert_same_runs, check_rows, run_app
from producers.expected import openai_rows

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "OpenInference (openai)"
PACKAGES = ("openinference-instrumentation-openai", "openai")

ROWS = openai_rows("ChatCompletion")


@pytest.fixture(scope="module")
def stored(fake, services):
    return run_app("openinference_openai", fake, *services)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS)
