"""Producer: openinference-instrumentation-anthropic on the real anthropic client.

It writes OpenInference's flattened messages (the ``system`` parameter as the first
message), each content block of a message as ``contents.N.message_content.*`` and a
``tool_use`` block's id, name and input under ``contents.N.tool_call.*`` (besides the
message's ``tool_calls``: the same call, which the run keeps once, as a tool call, the one
shape every producer's calls take), usage with cache_read, and Anthropic's own finish reasons.
It writes cache_creation only when it is not zero (the fake API's is zero). A streamed call
(``messages.stream``) gets its own span name and no event or attribute for its first token
(its span wrapper has an ``add_event`` that nothing calls). The app turns off the anthropic SDK's own tracing (on by default in
anthropic 2.x), which would trace every call a second time, as a child run.
"""

from __future__ import annotations

import pytest

from producers.expected import ANTHROPIC_PREAMBLE, ANTHROPIC_TOOL_CALL, anthropic_rows
from producers.matrix import NA, OPENINFERENCE_CONSUMED, Row, assert_same_runs, check_rows, run_app

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "OpenInference (anthropic)"
PACKAGES = ("openinference-instrumentation-anthropic", "anthropic")

CREATE, STREAM = "messages.create", "messages.stream"
#: anthropic_rows' runs by position (create, create, streamed, refused) as this producer names them.
RUNS = {f"{CREATE}#1": f"{CREATE}#1", f"{CREATE}#2": f"{CREATE}#2", f"{CREATE}#3": STREAM, f"{CREATE}#4": f"{CREATE}#3"}
FIRST_TOKEN = NA("a streamed call's span records no event or attribute for its first token")
#: An assistant turn: its text, and its tool_use block as its tool call (not a bare ``{"type": "tool_use"}``,
#: nor the call twice).
CALLED = [{"role": "assistant", "content": ANTHROPIC_PREAMBLE, "tool_calls": [ANTHROPIC_TOOL_CALL]}]
IN_HISTORY = {"role": "assistant", "content": None, "tool_calls": [ANTHROPIC_TOOL_CALL]}


def openinference_anthropic_rows() -> list[Row]:
    tree = [(0, "llm", CREATE), (0, "llm", CREATE), (0, "llm", STREAM), (0, "llm", CREATE)]
    rows: list[Row] = [("tree", "trace", "tree", tree)]
    for field, run, path, expected in anthropic_rows(CREATE):
        if field == "tree" or path.endswith("cache_creation") or (field, path) == ("first_token", "events.0.name"):
            continue
        if (field, path) == ("tool_calls", "outputs.messages"):
            expected = CALLED
        elif (field, path) == ("tool_results", "inputs.messages"):
            expected = [*expected[:2], IN_HISTORY, expected[3]]
        rows.append((field, RUNS.get(run, run), path, expected))
    rows.append(("first_token", STREAM, "events", FIRST_TOKEN))
    return rows


ROWS = openinference_anthropic_rows()


@pytest.fixture(scope="module")
def stored(fake, services):
    return run_app("openinference_anthropic", fake, *services)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS, consumed=OPENINFERENCE_CONSUMED)

