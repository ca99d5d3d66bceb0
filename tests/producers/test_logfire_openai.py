"""Producer: Logfire's OpenAI integration (``logfire.instrument_openai``) on the real openai client.

Logfire adds our span processors as it adds any other (``additional_span_processors``; see
the app). Both of its attribute formats are run: 2, its default (the GenAI attributes,
``gen_ai.usage.raw`` with the provider's whole usage object, ``logfire.tags``), and 1
(``request_data``: the request body; ``response_data``: the response's message and usage).

A streamed call is two runs: the request's span, which ends as the response starts (the
conversation, no answer), and the log Logfire writes when the stream ends, beside it
("streaming response from ... took ...": the conversation, the answer, its usage). Logfire
writes that log under a propagated copy of the context, so its parent looks remote.
"""

from __future__ import annotations

import pytest

from producers.expected import CONVERSATION, REPLY, openai_rows, replaced
from producers.scenarios import MODEL
from producers.matrix import NA, assert_same_runs, check_rows, run_app

from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

#: Its row in the README's "Works with" table, and the packages whose pinned versions that row names.
PRODUCER = "Logfire (openai)"
PACKAGES = ("logfire", "openai")

NAME = "Chat Completion with {request_data[model]!r}"
STREAM_LOG = "streaming response from {request_data[model]!r} took {duration:.2f}s"
_STREAMED = f"{NAME}#3"
_NO_FIRST_TOKEN = NA(
    "Logfire records no time of a stream's first chunk: the request's span ends as the response "
    "starts, and the answer is a separate log written when the stream ends, with its whole duration"
)
_RUNS = [(0, "llm", NAME)] * 3 + [(0, "llm", STREAM_LOG), (0, "llm", NAME)]

ROWS = [
    row
    for row in replaced(
        openai_rows(NAME),
        {
            ("tree", "trace", "tree"): _RUNS,
            ("run_types", "trace", "run_types"): [(d, t) for d, t, _ in _RUNS],
            ("first_token", _STREAMED, "events.0.name"): _NO_FIRST_TOKEN,
        },
    )
    # The streamed answer is on the log, not on the request's span.
    if row[:3] != ("first_token", _STREAMED, "outputs.messages")
] + [
    ("stream", _STREAMED, "inputs.messages", CONVERSATION),
    ("stream", STREAM_LOG, "inputs.messages", CONVERSATION),
    ("stream", STREAM_LOG, "outputs.messages", [{"role": "assistant", "content": REPLY}]),
    ("stream", STREAM_LOG, "outputs.finish_reason", "stop"),
    ("stream", STREAM_LOG, "outputs.usage_metadata.output_tokens", len(REPLY.split(" "))),
    ("stream", STREAM_LOG, "outputs.usage_metadata.output_token_details.reasoning", FakeLLMAPI.reasoning_tokens),
    ("stream", STREAM_LOG, "extra.metadata.ls_model_name", MODEL),
    ("tags", NAME, "tags", ["LLM"]),
]


@pytest.fixture(scope="module", params=["2", "1"], ids=["format2", "format1"])
def stored(request, fake, services):
    return run_app("logfire_openai", fake, *services, env={"MATRIX_LOGFIRE_VERSION": request.param})


def test_both_paths_store_the_same_runs(stored):
    assert_same_runs(stored)


def test_the_runs_hold_the_table(stored):
    check_rows(stored, ROWS)


def test_logfire_request_and_response_objects_are_not_repeated_in_metadata(stored):
    for plan in ("start", "random"):
        for run in stored.plan(plan)[1:]:
            metadata = run["extra"]["metadata"]
            assert not {"request_data", "response_data", "gen_ai.usage.raw"} & set(metadata), (plan, run["name"])


_RESPONSES_APP = """
import json, logfire, openai
from otel_runs_exporter import RunsSpanProcessor
from otel_runs_exporter.testing import FakeLLMAPI, run_local_service
with FakeLLMAPI() as api, run_local_service() as svc:
    processor = RunsSpanProcessor(endpoint=svc.url, api_key="k", project="p")
    logfire.configure(send_to_logfire=False, console=False, additional_span_processors=[processor])
    client = openai.OpenAI(base_url=api.openai_base_url, api_key="t", max_retries=0)
    logfire.instrument_openai(client, version=1)
    client.responses.create(model="gpt-4o-mini", input="hi", instructions="Be brief.")
    processor.force_flush()
    print(json.dumps(svc.wait_for_runs(1)[0]))
"""


def test_format1_responses_api_answer_is_the_output_not_an_input():
    """Found by a fidelity audit: Logfire's Responses spans give the reply as a trailing
    gen_ai.assistant.message event, not gen_ai.choice; the answer was stored as the last input
    and the outputs had no message."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LOGFIRE_"))}
    done = subprocess.run([sys.executable, "-c", _RESPONSES_APP], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads(done.stdout.strip().splitlines()[-1])
    assert run["inputs"]["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert run["outputs"]["messages"] == [{"role": "assistant", "content": REPLY}]
    assert run["outputs"]["finish_reason"] == "stop"
