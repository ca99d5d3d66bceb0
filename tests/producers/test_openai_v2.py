"""Producer: opentelemetry-instrumentation-openai-v2 2.4b0 (with opentelemetry-util-genai 1.1b0) on the real openai client.

What the installed versions do with the environment (read from their source):

* ``OTEL_SEMCONV_STABILITY_OPT_IN`` changes nothing: util-genai's ``is_experimental_mode()``
  always answers True, so openai-v2 always takes its latest-conventions path (the v1.30 path
  with ``gen_ai.user.message``/``gen_ai.choice`` log events is unreachable).
* ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` unset (the default), or ``true`` (the
  README's legacy value, refused with a warning): no message content anywhere.
  ``span_only``: ``gen_ai.input.messages``/``gen_ai.output.messages`` JSON on the span.
  ``event_only``: no content on the span; one ``gen_ai.client.inference.operation.details``
  log record per call, emitted just before the span ends, its attributes holding the span's
  attributes with the messages as objects. ``span_and_event``: both.
* ``OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT`` (default: on for event_only/span_and_event) emits
  that record even without content.

Both content modes are run; the runs must be the same field for field in each, and hold the
same table: with ``event_only``, the messages come from the log record, joined to the run by
``configure()``'s log record processor (``_genai_events``).
"""

from __future__ import annotations

import pytest

from producers.expected import openai_rows
from producers.matrix import NA, Row, assert_log_events_joined, assert_same_runs, check_rows, run_in_content_mode

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "OpenTelemetry GenAI (openai-v2)"
PACKAGES = ("opentelemetry-instrumentation-openai-v2", "opentelemetry-util-genai", "openai")

NAME = "chat gpt-4o-mini"
FAILED = "chat error-500"  # openai-v2 names a span after the model requested

LIMITS = {
    "usage_details": NA("openai-v2 records only gen_ai.usage.input_tokens/output_tokens for chat completions; "
                        "the API's cached and reasoning token counts are not written"),
    "first_token": NA("openai-v2's chat stream wrapper records no first-token event or time-to-first-chunk "
                      "attribute"),
    "tool_definitions": NA("openai-v2 never records the tools offered to the model (no gen_ai.tool.definitions)"),
}


def openai_v2_rows() -> list[Row]:
    rows: list[Row] = [("tree", "trace", "tree", [(0, "llm", NAME)] * 3 + [(0, "llm", FAILED)])]
    for field, run, path, expected in openai_rows(NAME):
        if field == "tree" or field in LIMITS:
            continue
        rows.append((field, FAILED if run == f"{NAME}#4" else run, path, expected))
    rows += [(field, NAME, "", na) for field, na in LIMITS.items()]
    return rows


ROWS = openai_v2_rows()
MODES = ("span_only", "event_only")


@pytest.fixture(scope="module", params=MODES)
def stored(request, fake, services):
    return run_in_content_mode("openai_v2", request.param, fake, services)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS)


def test_every_log_event_reached_its_run(stored):
    """event_only: the one details record per call is joined on both paths, none dropped; span_only: none sent."""
    calls = 4 * 2  # the scenario's calls, under each flush plan
    assert_log_events_joined(stored, calls if stored.report["content_mode"] == "event_only" else 0)
