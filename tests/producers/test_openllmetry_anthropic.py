"""Producer: OpenLLMetry's opentelemetry-instrumentation-anthropic on the real anthropic client.

It writes the GenAI convention's messages (the ``system`` parameter as
``gen_ai.system_instructions``; content on by default), ``gen_ai.tool.definitions`` in
Anthropic's request shape, cache_read and cache_creation token counts, and finish
reasons mapped to the GenAI convention's (``end_turn`` is ``stop``, ``tool_use`` is
``tool_call``). A streamed call's span carries no event or attribute for its first
token. The app turns off the anthropic SDK's own tracing (on by default in anthropic
2.x), which would trace every call a second time, as a child run.
"""

from __future__ import annotations

import pytest

from producers.expected import anthropic_rows, replaced
from producers.matrix import NA, assert_same_runs, check_rows, run_app

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "OpenLLMetry (anthropic)"
PACKAGES = ("opentelemetry-instrumentation-anthropic", "anthropic")

NAME = "anthropic.chat"
ROWS = replaced(
    anthropic_rows(NAME),
    {
        ("output_messages", f"{NAME}#2", "outputs.finish_reason"): "stop",
        ("tool_calls", f"{NAME}#1", "outputs.finish_reason"): "tool_call",
        ("first_token", f"{NAME}#3", "events.0.name"): NA(
            "the streamed call's span records no first-token time (no chunk event, no attribute)"
        ),
    },
)


@pytest.fixture(scope="module")
def stored(fake, services):
    return run_app("openllmetry_anthropic", fake, *services)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS)
