"""Producer: openinference-instrumentation-langchain on a LangChain app (langchain-core, langchain-openai)."""

from __future__ import annotations

import pytest

from producers.expected import langchain_rows
from producers.matrix import NA, assert_same_runs, check_rows, run_app

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "OpenInference (LangChain)"
PACKAGES = ("openinference-instrumentation-langchain", "langchain-core", "langchain-openai")

# What this producer never writes, so no mapping can show it.
LIMITS = {
    ("first_token", "ChatOpenAI#4", "events.0.name"): NA(
        "OpenInference's LangChain tracer writes no event per streamed token (LangChain's own run "
        "events are not exported), so a streamed run has no first-token time"
    ),
}
# OpenInference has no parser span kind: it writes CHAIN for LangChain's parser runs, and the span
# carries nothing else that says parser, so the service's own OTel ingestion and we both make a chain run.
PARSER = "chain"

ROWS = [
    (field, run, path, LIMITS.get((field, run, path), expected))
    for field, run, path, expected in langchain_rows(parser_run_type=PARSER)
]


@pytest.fixture(scope="module")
def stored(fake, services):
    return run_app("openinference_langchain", fake, *services)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS)
