"""Producer: OpenLLMetry's opentelemetry-instrumentation-openai on the real openai client.

It writes the GenAI convention's ``gen_ai.input.messages``/``gen_ai.output.messages``
(content on by default), ``gen_ai.tool.definitions``, and one
``gen_ai.content.completion.chunk`` event per streamed chunk. Its finish reasons are
the GenAI convention's (``tool_calls`` becomes ``tool_call``).
"""

from __future__ import annotations

import pytest

from producers.expected import openai_rows, replaced
from producers.matrix import assert_same_runs, check_rows, run_app

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "OpenLLMetry (openai)"
PACKAGES = ("opentelemetry-instrumentation-openai", "openai")

NAME = "openai.chat"
ROWS = replaced(openai_rows(NAME), {("tool_calls", f"{NAME}#1", "outputs.finish_reason"): "tool_call"})


@pytest.fixture(scope="module")
def stored(fake, services):
    return run_app("openllmetry_openai", fake, *services)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS)


def test_stream_chunks_leave_only_the_first_token(stored):
    # One chunk event per word (and the role and the finish chunks): none is kept as an event.
    for plan in ("start", "random"):
        streamed = [r for r in stored.plan(plan) if r["name"] == NAME][2]
        assert [e["name"] for e in streamed.get("events") or []] == ["new_token"], plan
