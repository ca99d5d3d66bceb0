"""Producer: pydantic-ai's instrumentation in data format 2, the oldest one pydantic-ai 2.x still writes.

Format 2 names its spans ``agent run`` and ``running tool`` and records a tool's arguments and
result as ``tool_arguments``/``tool_response`` (later formats: ``gen_ai.tool.call.*``). The older
Logfire-shaped format 1 (``events``/``all_messages_events`` JSON attributes) is gone from
pydantic-ai 2.x; ``test_mapping.py`` checks that shape from the attributes its last 1.x release wrote.
"""

from __future__ import annotations

import pytest

from producers.expected import STRICT_OPENAI_TOOLS, TOOL_RESULT_JSON, agent_rows
from producers.matrix import assert_same_runs, check_rows, run_app

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "pydantic-ai"
PACKAGES = ("pydantic-ai-slim",)

ROWS = agent_rows(("agent run", "agent run"), STRICT_OPENAI_TOOLS, finish=("tool_call", "stop"),
                  tool_result=TOOL_RESULT_JSON)


@pytest.fixture(scope="module")
def stored(fake, services):
    return run_app("pydantic_ai_agent", fake, *services, env={"MATRIX_PYDANTIC_AI_VERSION": "2"})


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS)
