"""Producer: pydantic-ai's own instrumentation (``Instrumentation`` capability, default data format) on OpenAI."""

from __future__ import annotations

import pytest

from producers.expected import STRICT_OPENAI_TOOLS, TOOL_RESULT_JSON, agent_rows
from producers.matrix import assert_same_runs, check_rows, run_app

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "pydantic-ai"
PACKAGES = ("pydantic-ai-slim",)

#: Its finish reasons are the GenAI semconv's ("tool_call"), not OpenAI's ("tool_calls").
ROWS = agent_rows(("invoke_agent weather", "invoke_agent refused"), STRICT_OPENAI_TOOLS,
                  finish=("tool_call", "stop"), tool_result=TOOL_RESULT_JSON)


@pytest.fixture(scope="module")
def stored(fake, services):
    return run_app("pydantic_ai_agent", fake, *services)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS)
