"""A user's first try, as their habits say, in a process of its own: environment variables and nothing else.

* The service SDK's users: ``LANGSMITH_TRACING=true`` with the SDK's endpoint, key and
  project, and ``from otel_runs_exporter import traceable`` in place of the SDK's import.
* Nothing switched on: one warning saying how, the app untouched.
* Phoenix's habit: one switch traces the model clients, ``configure(instrument=True)``;
  without it, one line names the switch. Under a framework's own llm spans (LangChain
  through OpenInference, pydantic-ai) no call is traced twice.

The processes start together (a module fixture) and each test reads its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from otel_runs_exporter.server import LocalService
from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

pytestmark = pytest.mark.heavy(seconds=8)

KEY = "sk-first-try-4c1d"
APPS = Path(__file__).resolve().parent / "apps"
LOG = 'import logging; logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")\n'

LANGSMITH_APP = LOG + textwrap.dedent(
    """
    import json, openai
    from opentelemetry import trace
    from otel_runs_exporter import get_current_run_tree, traceable

    client = openai.OpenAI(max_retries=0)
    http = trace.get_tracer("app.http")

    @traceable(run_type="tool", project_name="elsewhere")   # nested: stays in its tree's project
    def lookup(question):
        with http.start_as_current_span("GET /search"):      # the app's own span: not sent for LANGSMITH_TRACING
            pass
        return question.upper()

    @traceable
    def answer(question):
        run = get_current_run_tree()
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": question}])
        return {"ids": [str(run.id), str(run.trace_id)], "lookup": lookup(question),
                "reply": reply.choices[0].message.content}

    print(json.dumps(answer("why?")))
    print("GLOBAL", type(trace.get_tracer_provider()).__name__)
    """
)

UNTRACED_APP = textwrap.dedent(
    """
    from otel_runs_exporter import traceable

    @traceable
    def add(a, b):
        return a + b

    print(add(1, 2), add(3, 4))
    """
)

OWN_PROVIDER_APP = textwrap.dedent(
    """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from otel_runs_exporter import traceable

    trace.set_tracer_provider(TracerProvider())   # the app's own, with nothing of ours on it

    @traceable
    def add(a, b):
        return a + b

    print(add(1, 2), add(3, 4))
    """
)

CONFIGURE_APP = LOG + textwrap.dedent(
    """
    from otel_runs_exporter import configure, traceable

    configure(project="clients")

    @traceable
    def answer(question):
        return question

    answer("What is a run?")
    """
)


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_", "OPENAI_"))}
    env.update(more)
    return env


class Ran:
    def __init__(self, proc: subprocess.CompletedProcess[str], service: LocalService | None) -> None:
        self.proc, self.service = proc, service
        self.out, self.err = proc.stdout, proc.stderr

    def lines(self, level: str) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith(level + " ")]


@pytest.fixture(scope="module")
def ran() -> Iterator[dict[str, Future[Ran]]]:
    with FakeLLMAPI() as fake, LocalService(api_key=KEY, strict=True) as sdk_side, \
            LocalService(api_key=KEY, strict=True) as untouched, LocalService(api_key=KEY, strict=True) as off, \
            LocalService(api_key=KEY, strict=True) as frameworks, ThreadPoolExecutor(max_workers=3) as pool:
        model = {"OPENAI_BASE_URL": fake.openai_base_url, "OPENAI_API_KEY": "test"}
        ours = {"OTEL_EXPORTER_RUNS_API_KEY": KEY}

        def run(args: list[str], env: dict[str, str], service: LocalService | None) -> Callable[[], Ran]:
            def go() -> Ran:
                proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=120)
                assert proc.returncode == 0, proc.stderr
                assert "Traceback" not in proc.stderr and KEY not in proc.stdout + proc.stderr, proc.stderr
                return Ran(proc, service)

            return go

        sdk_vars = {"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": KEY, "LANGSMITH_PROJECT": "from-sdk-vars"}
        jobs = {
            # Heaviest first: the frameworks' imports take the longest.
            "frameworks": run([str(APPS / "framework_under_instrument.py")],
                              _env(OTEL_EXPORTER_RUNS_ENDPOINT=frameworks.url, **ours, **model), frameworks),
            "langsmith": run(["-c", LANGSMITH_APP], _env(LANGSMITH_ENDPOINT=sdk_side.url, OTEL_EXPORTER_RUNS_INSTRUMENT="true",
                                                         **sdk_vars, **model), sdk_side),
            "instrument_off": run(["-c", CONFIGURE_APP], _env(OTEL_EXPORTER_RUNS_ENDPOINT=off.url, **ours), off),
            "untraced": run(["-c", UNTRACED_APP], _env(), None),
            "sdk_disabled": run(["-c", LOG + UNTRACED_APP], _env(LANGSMITH_ENDPOINT=untouched.url, OTEL_SDK_DISABLED="true",
                                                                 **sdk_vars), untouched),
            "own_provider": run(["-c", LOG + OWN_PROVIDER_APP], _env(LANGSMITH_ENDPOINT=untouched.url, **sdk_vars), untouched),
        }
        yield {name: pool.submit(job) for name, job in jobs.items()}


def _ran(ran: dict[str, Future[Ran]], name: str) -> Ran:
    return ran[name].result(timeout=240)


def _by_name(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {run["name"]: run for run in runs}


def test_langsmith_tracing_true_sends_traceables_runs_without_configure(ran):
    done = _ran(ran, "langsmith")
    runs = _by_name(done.service.wait_for_runs(3, timeout=10))
    assert sorted(runs) == ["answer", "chat gpt-4o-mini", "lookup"]  # the app's own HTTP span is not among them
    answer, lookup, chat = runs["answer"], runs["lookup"], runs["chat gpt-4o-mini"]
    assert lookup["parent_run_id"] == chat["parent_run_id"] == answer["id"] and chat["run_type"] == "llm"
    assert {r["session_name"] for r in runs.values()} == {"from-sdk-vars"}  # one tree, one project
    assert chat["outputs"]["usage_metadata"]["total_tokens"] > 0  # OTEL_EXPORTER_RUNS_INSTRUMENT=true traced the client
    printed = json.loads(done.out.splitlines()[0])
    assert printed["ids"] == [answer["id"], answer["trace_id"]]  # get_current_run_tree() named the run as stored
    assert "GLOBAL ProxyTracerProvider" in done.out  # nothing global was installed
    (info,) = [line for line in done.lines("INFO") if "LANGSMITH_TRACING is on" in line]
    assert f"sending the runs of traceable and the openai and anthropic clients to {done.service.url} " in info, info
    assert "(project 'from-sdk-vars', API key set)" in info and "nothing global was installed" in info
    assert done.lines("WARNING") == [
        "WARNING otel_runs_exporter._convert: langsmith.trace.session_name 'elsewhere' on span 'lookup' is not used: "
        "the run is in the project of the tree it was placed in (the exporter's own). Name the project on the span that "
        "starts the tree, when it starts. Further cases are not reported."
    ]
    assert done.service.violations() == []


def test_with_tracing_enabled_nowhere_the_first_traced_call_says_how_once(ran):
    done = _ran(ran, "untraced")
    assert done.out == "3 7\n"
    assert done.err.splitlines() == [
        "traceable: tracing is not enabled, so no run is recorded. Call otel_runs_exporter.configure() at startup, "
        "or set LANGSMITH_TRACING=true (with LANGSMITH_ENDPOINT and LANGSMITH_API_KEY, or the OTEL_EXPORTER_RUNS_* "
        "variables) to trace from the environment"
    ]


def test_otel_sdk_disabled_wins_over_langsmith_tracing(ran):
    done = _ran(ran, "sdk_disabled")
    assert done.out == "3 7\n" and done.err == ""
    assert done.service.runs() == [] and done.service.requests() == []


def test_an_app_provider_without_our_processor_is_used_and_configure_is_named(ran):
    done = _ran(ran, "own_provider")
    assert done.out == "3 7\n"
    (warning,) = done.err.splitlines()
    assert "LANGSMITH_TRACING is on and the app has its own OpenTelemetry tracer provider" in warning
    assert warning.endswith("Call otel_runs_exporter.configure() at startup to send them as runs")


def _frameworks(ran: dict[str, Future[Ran]]) -> tuple[Ran, list[dict[str, Any]]]:
    done = _ran(ran, "frameworks")
    return done, done.service.wait_for_runs(3, timeout=10)


def test_configure_instrument_true_traces_the_openai_client_with_its_content(ran):
    done, runs = _frameworks(ran)
    by_id = {r["id"]: r for r in runs}
    (chat,) = [r for r in runs if r.get("parent_run_id") and by_id[r["parent_run_id"]]["name"] == "direct"]
    assert chat["name"] == "chat gpt-4o-mini" and chat["run_type"] == "llm"
    assert chat["extra"]["metadata"]["otel_scope_name"] == "otel_runs_exporter.instrumentation.openai"
    assert chat["inputs"]["messages"] == [{"role": "user", "content": "What is the weather in Paris?"}]  # content, by default
    assert chat["outputs"]["usage_metadata"]["input_tokens"] > 0
    said = done.lines("INFO")
    assert "INFO otel_runs_exporter._configure: configure(): tracing the openai and anthropic clients" in said
    assert (f"INFO otel_runs_exporter._configure: configure(): sending runs to {done.service.url} "
            "(project 'frameworks', API key set)") in said


def test_without_instrument_one_line_names_the_switch(ran):
    done = _ran(ran, "instrument_off")
    (run,) = done.service.wait_for_runs(1, timeout=10)
    assert run["name"] == "answer"
    assert ("INFO otel_runs_exporter._configure: configure(): the openai and anthropic clients are installed and not "
            "instrumented, so model calls are not traced; configure(instrument=True) or "
            "OTEL_EXPORTER_RUNS_INSTRUMENT=true traces them") in done.lines("INFO")


@pytest.mark.parametrize("framework, llm_runs", [("langchain", 5), ("pydantic_ai", 5)])
def test_a_frameworks_own_llm_spans_are_not_traced_twice(ran, framework, llm_runs):
    """The producer matrix's conversations under configure(instrument=True): exactly the framework's own llm
    runs (as the matrix stores them), none of ours under them and no token counted twice."""
    _, runs = _frameworks(ran)
    by_id = {r["id"]: r for r in runs}

    def root(run: dict[str, Any]) -> str:
        while run.get("parent_run_id"):
            run = by_id[run["parent_run_id"]]
        return run["name"]

    llm = [r for r in runs if r["run_type"] == "llm" and root(r) == framework]
    scopes = {r["extra"]["metadata"].get("otel_scope_name", "") for r in llm}
    assert len(llm) == llm_runs and not any(scope.startswith("otel_runs_exporter") for scope in scopes), scopes
