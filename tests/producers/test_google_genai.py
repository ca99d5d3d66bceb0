"""Producer: opentelemetry-instrumentation-google-genai 1.3b0 (with opentelemetry-util-genai 1.3b0) on the real google-genai client.

Runs in the second environment (``requirements-env2.txt``: this instrumentation needs
util-genai>=1.3b0, the test extra pins 1.1b0 for openai-v2). The app talks to the fake
API's Gemini endpoints. What the installed versions write (read from their source and
the spans): a ``generate_content <model>`` CLIENT span per call with
``gen_ai.operation.name=generate_content``, ``gen_ai.provider.name=gemini``, the requested
and response model, input/output tokens (output counts Gemini's thoughts with the
candidates' tokens), cache_read and reasoning counts, finish reasons, tool definitions
(without parameters: ``parameters: null`` for a Python function the SDK declares with a
JSON schema), and ``gen_ai.response.time_to_first_chunk`` (seconds) on a stream; messages
only with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``span_only``: on the
span; ``event_only``: in the ``gen_ai.client.inference.operation.details`` log record it
emits per call in either mode, joined to its run by ``configure()``'s log record processor;
an ``execute_tool`` span then has no arguments or result, and no record carries them). A call made with
automatic function calling through ``models.generate_content`` is one span over both
model requests with an ``execute_tool`` child; through a chat, each request is a span of
its own and the tool call has no span. The SDK sends a function's result back without the
call's id; the instrumentation then names it ``<function>_<index>``.
"""

from __future__ import annotations

import pytest

from producers.expected import ARGUMENTS, CONVERSATION, REPLY, TOOL_CALL, replaced
from producers.matrix import (
    ENV2, NA, Contains, Json, Like, Row, assert_log_events_joined, assert_same_runs, check_rows, run_in_content_mode,
    skip_unless_installed,
)
from producers.scenarios import GEMINI_MODEL, WEATHER

from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

#: Its row in the README's "Works with" table, the packages whose pinned versions that row
#: names, and the file that pins them (the second environment).
PRODUCER = "OpenTelemetry GenAI (google-genai)"
PACKAGES = ("opentelemetry-instrumentation-google-genai", "opentelemetry-util-genai", "google-genai")
REQUIREMENTS = ENV2

NAME, FAILED = f"generate_content {GEMINI_MODEL}", "generate_content error-500"
MODES = ("span_only", "event_only")


def google_genai_rows() -> list[Row]:
    api = FakeLLMAPI
    words = len(REPLY.split(" "))
    # #1: the chat's tool call; #2: its answer; #3: models.generate_content with the tool run
    # under it; #4: streamed; then the refused call.
    tree = [(0, "llm", NAME), (0, "llm", NAME), (0, "llm", NAME), (1, "tool", "get_weather"), (0, "llm", NAME),
            (0, "llm", FAILED)]
    called = {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}
    # The SDK's functionResponse part has no id: the instrumentation names it get_weather_0.
    result = {"role": "tool", "content": Json({"result": WEATHER}), "tool_call_id": "get_weather_0"}
    answer = [{"role": "assistant", "content": REPLY}]
    # Output tokens as it counts them: the candidates' and the thoughts'.
    out = words + api.reasoning_tokens
    return [
        ("tree", "trace", "tree", tree),
        ("run_types", "trace", "run_types", [(d, t) for d, t, _ in tree]),
        ("input_messages", f"{NAME}#1", "inputs.messages", CONVERSATION),
        ("input_messages", f"{NAME}#4", "inputs.messages", CONVERSATION),
        ("output_messages", f"{NAME}#2", "outputs.messages", answer),
        ("output_messages", f"{NAME}#2", "outputs.finish_reason", "stop"),
        ("output_messages", f"{NAME}#3", "outputs.messages", answer),
        ("tool_calls", f"{NAME}#1", "outputs.messages", Like([called])),
        ("tool_calls", "get_weather", "inputs", ARGUMENTS),
        ("tool_results", "get_weather", "outputs", WEATHER),
        ("tool_results", f"{NAME}#2", "inputs.messages", Like([*CONVERSATION, called, result])),
        ("usage", f"{NAME}#2", "outputs.usage_metadata.input_tokens", api.input_tokens),
        ("usage", f"{NAME}#2", "outputs.usage_metadata.output_tokens", out),
        ("usage", f"{NAME}#2", "outputs.usage_metadata.total_tokens", api.input_tokens + out),
        ("usage", f"{NAME}#1", "outputs.usage_metadata.output_tokens", api.tool_call_tokens + api.reasoning_tokens),
        ("usage", f"{NAME}#4", "outputs.usage_metadata.output_tokens", out),
        ("usage_details", f"{NAME}#2", "outputs.usage_metadata.input_token_details.cache_read", api.cached_tokens),
        ("usage_details", f"{NAME}#2", "outputs.usage_metadata.output_token_details.reasoning", api.reasoning_tokens),
        ("model", f"{NAME}#1", "extra.metadata.ls_model_name", GEMINI_MODEL),
        ("model", f"{NAME}#1", "extra.metadata.response_model", f"{GEMINI_MODEL}-fake-0001"),
        ("model", FAILED, "extra.metadata.ls_model_name", "error-500"),
        ("provider", f"{NAME}#1", "extra.metadata.ls_provider", "gemini"),
        ("error", FAILED, "error", Contains("500")),
        ("first_token", f"{NAME}#4", "events.0.name", "new_token"),
        ("first_token", f"{NAME}#4", "outputs.messages", answer),
        ("tool_definitions", f"{NAME}#1", "extra.invocation_params.tools",
         Like([{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city"}}])),
    ]


ROWS = google_genai_rows()
#: event_only: the messages come from the log records; the tool's arguments and result nowhere.
EVENT_ONLY_ROWS = replaced(ROWS, {
    ("tool_calls", "get_weather", "inputs"): NA("event_only: the execute_tool span carries no arguments"),
    ("tool_results", "get_weather", "outputs"): NA("event_only: the execute_tool span carries no result"),
})


@pytest.fixture(scope="module", params=MODES)
def stored(request, fake, services):
    skip_unless_installed("google.genai", "opentelemetry.instrumentation.google_genai")
    return run_in_content_mode("google_genai", request.param, fake, services)


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, EVENT_ONLY_ROWS if stored.report["content_mode"] == "event_only" else ROWS)


def test_every_log_event_reached_its_run(stored):
    """Each call's details record (sent in both modes, with content in event_only) is joined on both paths."""
    assert_log_events_joined(stored, 5 * 2)  # the model-call spans, under each flush plan
