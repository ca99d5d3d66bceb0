"""Every file in examples/, run the way a user runs it, and what arrived at the local service.

Each example is a subprocess started from the repository root with the venv's
interpreter, pointed at a local service this module owns (which requires an
API key) through OTEL_EXPORTER_RUNS_ENDPOINT / OTEL_EXPORTER_RUNS_API_KEY, so
the assertions read what the service stored. One test also runs an example
with neither variable set, as its docstring says, and reads the tree it prints.
``test_every_file_in_examples_is_covered`` fails for a new example no test runs.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from otel_runs_exporter import _settings
from otel_runs_exporter.server import LocalService
from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

pytestmark = pytest.mark.heavy(seconds=12)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent
KEY = "sk-examples-test-5f0c9e"  # the service requires it; it must never show in an example's output
PROJECT = "examples-under-test"
TIMEOUT_S = 90


# --------------------------------------------------------------------------- running


def example_env(service: LocalService | None, **extra: str) -> dict[str, str]:
    """The test's environment without the developer's telemetry settings, plus the service's address."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "LANGSMITH_", "OPENAI_", "ANTHROPIC_"))
    }
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # as an activated venv has it
    if service is not None:
        env.update(
            OTEL_EXPORTER_RUNS_ENDPOINT=service.url,
            OTEL_EXPORTER_RUNS_API_KEY=KEY,
            OTEL_EXPORTER_RUNS_PROJECT=PROJECT,
        )
    env.update(extra)
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    # Examples start children of their own (server.py, opentelemetry-instrument): end them all.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_example(relpath: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python examples/<relpath> args...`` from the repository root; fails on a non-zero exit or a leak."""
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / relpath), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        pytest.fail(f"{relpath} did not finish within {TIMEOUT_S}s\n{out}\n{err}")
    assert proc.returncode == 0, f"{relpath} exited {proc.returncode}\n--- stdout\n{out}\n--- stderr\n{err}"
    check_output_is_clean(relpath, out, err)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def check_output_is_clean(what: str, out: str, err: str) -> None:
    assert "Traceback" not in err, f"{what} printed a traceback:\n{err}"
    assert KEY not in out + err, f"{what} printed the API key"


def read_line(proc: subprocess.Popen, timeout: float) -> str:
    """One line of ``proc``'s stdout, or fail after ``timeout`` seconds."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no output from {proc.args} within {timeout}s"
    return proc.stdout.readline()


# --------------------------------------------------------------------------- reading runs


def stored(service: LocalService, n: int, project: str = PROJECT) -> list[dict[str, Any]]:
    """Exactly ``n`` completed runs, consistent, all in ``project`` (this module's, unless the code names one)."""
    runs = service.wait_for_runs(n, timeout=10)
    assert len(service.runs()) == n, [r["name"] for r in service.runs()]
    assert service.violations() == []
    assert not any(service.check().values()), service.check()
    assert {r["session_name"] for r in runs} == {project}
    return runs


def edges(runs: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """(name, parent's name) for every run, sorted: the tree's shape without ids."""
    by_id = {r["id"]: r for r in runs}
    return sorted((r["name"], by_id[r["parent_run_id"]]["name"] if r.get("parent_run_id") else None) for r in runs)


def one_trace(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The single root; every run shares its trace_id, and the trace id is the root's id (spec 2.3)."""
    roots = [r for r in runs if not r.get("parent_run_id")]
    assert len(roots) == 1, edges(runs)
    assert {r["trace_id"] for r in runs} == {roots[0]["id"]}
    return roots[0]


def named(runs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [r for r in runs if r["name"] == name]


def said_where_runs_went(proc: subprocess.CompletedProcess, service: LocalService) -> None:
    assert f"Runs sent to {service.url}." in proc.stdout
    assert "otel-runs runs list" in proc.stdout


# --------------------------------------------------------------------------- the runs, side by side

# What each test runs, by the test's name without "test_"; heaviest first. A runner starts the
# example(s) against the service it is given and returns the (last) finished process.
CASES: dict[str, Callable[[LocalService], subprocess.CompletedProcess]] = {}
WORKERS = 4


def case(fn: Callable[[LocalService], subprocess.CompletedProcess]) -> Callable[[LocalService], subprocess.CompletedProcess]:
    CASES[fn.__name__.removeprefix("run_")] = fn
    return fn


@case
def run_zero_code(service: LocalService) -> subprocess.CompletedProcess:
    return run_example("zero_code/run.py", env=example_env(service, OTEL_SERVICE_NAME="checkout-under-test"))


@case
def run_anthropic_messages(service: LocalService) -> subprocess.CompletedProcess:
    return run_example("anthropic_messages.py", env=example_env(service))


@case
def run_openai_chat(service: LocalService) -> subprocess.CompletedProcess:
    return run_example("openai_chat.py", env=example_env(service))


@case
def run_distributed_server_and_client_started_separately(service: LocalService) -> subprocess.CompletedProcess:
    env = example_env(service)
    server = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "distributed" / "server.py"), "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = read_line(server, timeout=TIMEOUT_S)
        assert line.startswith("listening on http://127.0.0.1:"), line
        client = run_example("distributed/client.py", line.split()[-1], env=env)
        server.send_signal(signal.SIGTERM)  # it must deliver its runs as it exits
        out, err = server.communicate(timeout=30)
        assert server.returncode == 0, err
        check_output_is_clean("server.py", out, err)
        return client
    finally:
        if server.poll() is None:
            _kill_group(server)
        server.stdout.close()
        server.stderr.close()


@case
def run_distributed_in_one_command(service: LocalService) -> subprocess.CompletedProcess:
    return run_example("distributed/client.py", env=example_env(service))


@case
def run_quickstart(service: LocalService) -> subprocess.CompletedProcess:
    # As its docstring says: the endpoint and an OpenAI key in the environment (the key for the fake API).
    with FakeLLMAPI() as fake:
        return run_example("quickstart.py", env=example_env(service, OPENAI_BASE_URL=fake.openai_base_url,
                                                           OPENAI_API_KEY="the-fake-api-ignores-it"))


@case
def run_spans(service: LocalService) -> subprocess.CompletedProcess:
    return run_example("spans.py", env=example_env(service))


@case
def run_spans_as_its_docstring_says_prints_the_tree_it_sent(service: LocalService) -> subprocess.CompletedProcess:
    return run_example("spans.py", env=example_env(None))  # no endpoint: it starts its own service


@case
def run_traceable(service: LocalService) -> subprocess.CompletedProcess:
    return run_example("traceable.py", env=example_env(service))


@case
def run_exporter_path(service: LocalService) -> subprocess.CompletedProcess:
    return run_example("exporter_path.py", env=example_env(service))


@pytest.fixture(scope="module")
def launched(request: pytest.FixtureRequest) -> Iterator[dict[str, tuple[LocalService, Future]]]:
    """The selected tests' examples, started at once, each against a service of its own.

    They spend most of their time importing (openai, anthropic, and all that
    opentelemetry-instrument loads), so running them side by side keeps the time
    they add to the suite down; each test waits only for its own.
    """
    here = Path(__file__).resolve()
    wanted = {item.originalname.removeprefix("test_") for item in request.session.items if Path(item.path) == here}
    names = [name for name in CASES if name in wanted]
    with contextlib.ExitStack() as stack:
        services = [stack.enter_context(LocalService(api_key=KEY, strict=True)) for _ in names]
        # Entered last, so it is shut down (waiting for every run) before the services stop.
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="example"))
        yield {name: (svc, pool.submit(CASES[name], svc)) for name, svc in zip(names, services)}


def finished(launched: dict[str, tuple[LocalService, Future]], name: str) -> tuple[LocalService, subprocess.CompletedProcess]:
    service, future = launched[name]
    return service, future.result(timeout=3 * TIMEOUT_S)


# --------------------------------------------------------------------------- what arrived


def test_quickstart(launched) -> None:
    """The README's quickstart: the decorated function's run, and the OpenAI call under it with its messages and tokens."""
    svc, proc = finished(launched, "quickstart")
    fake = FakeLLMAPI()  # not started: only its documented constants are read
    runs = stored(svc, 2, project="quickstart")
    root = one_trace(runs)
    assert edges(runs) == [("answer", None), ("chat gpt-4o-mini", "answer")]
    chat = named(runs, "chat gpt-4o-mini")[0]
    assert chat["run_type"] == "llm" and chat["inputs"]["messages"] == [{"role": "user", "content": "What is a run?"}]
    assert chat["outputs"]["usage_metadata"]["total_tokens"] == fake.input_tokens + fake.output_tokens()
    assert root["inputs"] == {"question": "What is a run?"} and root["outputs"] == {"output": fake.reply_text}
    assert proc.stdout == fake.reply_text + "\n"


def test_the_readme_opens_with_the_quickstart_file() -> None:
    """The README's quickstart is this file's code (after its docstring), within the README's first 60 lines."""
    source = (EXAMPLES / "quickstart.py").read_text()
    code = source[source.index('"""', 3) + 3 :].strip() + "\n"
    readme = (ROOT / "README.md").read_text()
    block = f"```python\n{code}```"
    assert block in readme, "README's quickstart block differs from examples/quickstart.py"
    assert readme[: readme.index(block) + len(block)].count("\n") < 60


def test_spans(launched) -> None:
    svc, proc = finished(launched, "spans")
    runs = stored(svc, 3)
    root = one_trace(runs)
    assert edges(runs) == [("answer_question", None), ("compose", "answer_question"), ("retrieve", "answer_question")]
    assert named(runs, "retrieve")[0]["run_type"] == "retriever"
    assert set(root["inputs"]) == {"question"} and set(root["outputs"]) == {"answer"}
    assert root["outputs"]["answer"] in proc.stdout
    said_where_runs_went(proc, svc)


def test_spans_as_its_docstring_says_prints_the_tree_it_sent(launched) -> None:
    """No endpoint set: the example starts its own local service and prints what that received."""
    svc, proc = finished(launched, "spans_as_its_docstring_says_prints_the_tree_it_sent")
    assert svc.runs() == []  # nothing came here: the example used its own service
    header = re.search(r"^trace ([0-9a-f-]{36})  \(3 runs\)$", proc.stdout, re.M)
    assert header, proc.stdout
    tree = proc.stdout[header.end() :].strip().splitlines()[:3]
    assert [re.sub(r"\s+\d+\.\d+s\s+", " ", line) for line in tree] == [
        "chain  answer_question ok",
        "  retriever  retrieve ok",
        "  chain  compose ok",
    ]


def test_traceable(launched) -> None:
    svc, proc = finished(launched, "traceable")
    runs = stored(svc, 6)
    root = one_trace(runs)
    assert edges(runs) == sorted(
        [("stock_report", None)]
        + [(name, "stock_report") for name in ("check_stock", "check_stock", "lookup_prices", "format_lines", "summarize")]
    )
    assert {r["name"]: r["run_type"] for r in runs} == {
        "stock_report": "chain", "check_stock": "tool", "lookup_prices": "retriever",
        "format_lines": "parser", "summarize": "chain",
    }
    # sync: inputs bound from the signature, the return value as outputs; one call raised
    ok, failed = sorted(named(runs, "check_stock"), key=lambda r: bool(r.get("error")))
    assert ok["outputs"] == {"output": root["outputs"]["counts"][ok["inputs"]["item"]]}
    assert "KeyError" in failed["error"] and failed["inputs"]["item"] in failed["error"]
    assert root["outputs"]["counts"][failed["inputs"]["item"]] is None  # the caller handled it
    assert not root.get("error")
    # generator: outputs are the items it yielded; async: awaited result
    lines = named(runs, "format_lines")[0]["outputs"]["output"]
    assert len(lines) == len(root["inputs"]["items"])
    assert named(runs, "summarize")[0]["inputs"] == {"lines": lines}
    assert named(runs, "summarize")[0]["outputs"] == {"output": root["outputs"]["summary"]}
    # a traced block
    documents = named(runs, "lookup_prices")[0]["outputs"]["documents"]
    assert documents and all("page_content" in d for d in documents)
    said_where_runs_went(proc, svc)


def check_llm_runs(runs: list[dict[str, Any]], provider: str) -> list[dict[str, Any]]:
    """Two llm runs (plain and streamed) under ask_twice, with the fake API's reply and token counts."""
    fake = FakeLLMAPI()  # not started: only its documented constants are read
    root = one_trace(runs)
    llm = [r for r in runs if r["run_type"] == "llm"]
    assert len(llm) == 2 and {r["parent_run_id"] for r in llm} == {root["id"]}
    assert root["outputs"] == {"reply": fake.reply_text, "streamed": fake.reply_text}
    for run in llm:
        metadata = run["extra"]["metadata"]
        assert metadata["ls_provider"] == provider
        assert metadata["response_model"] == metadata["ls_model_name"] + "-fake-0001"
        assert run["name"] == f"chat {metadata['ls_model_name']}"
        assert run["inputs"]["messages"][-1] == {"role": "user", "content": root["inputs"]["question"]}
        assert run["outputs"]["messages"] == [{"role": "assistant", "content": fake.reply_text}]
        usage = run["outputs"]["usage_metadata"]
        assert usage["input_tokens"] == fake.input_tokens
        assert usage["output_tokens"] == fake.output_tokens()
        assert usage["total_tokens"] == fake.input_tokens + fake.output_tokens()
        assert usage["input_token_details"]["cache_read"] == fake.cached_tokens
    # The streamed call, and only it, marks its first token.
    assert sorted(bool(r.get("events")) and [e["name"] for e in r["events"]] == ["new_token"] for r in llm) == [
        False,
        True,
    ]
    return llm


def test_openai_chat(launched) -> None:
    svc, proc = finished(launched, "openai_chat")
    runs = stored(svc, 3)
    llm = check_llm_runs(runs, "openai")
    assert all(r["inputs"]["messages"][0]["role"] == "system" for r in llm)
    said_where_runs_went(proc, svc)


def test_anthropic_messages(launched) -> None:
    svc, proc = finished(launched, "anthropic_messages")
    runs = stored(svc, 3)
    llm = check_llm_runs(runs, "anthropic")
    assert all(r["extra"]["metadata"]["otel_scope_name"].endswith("instrumentation.anthropic") for r in llm)
    said_where_runs_went(proc, svc)


def test_exporter_path(launched) -> None:
    svc, proc = finished(launched, "exporter_path")
    runs = stored(svc, 5)
    root = one_trace(runs)
    assert edges(runs) == [("embed", "parse"), ("embed", "parse"), ("ingest", None), ("parse", "ingest"), ("parse", "ingest")]
    assert {r["run_type"] for r in named(runs, "embed")} == {"embedding"}
    assert root["extra"]["metadata"]["otel_resource"]["service.name"] == "ingest-worker"
    # An exporter sees ended spans: one post per run, never a patch.
    parts = [p for request in svc.requests() for p in (request.get("part_names") or [])]
    assert parts and not any(p.startswith("patch.") for p in parts)
    said_where_runs_went(proc, svc)


def check_distributed(runs: list[dict[str, Any]]) -> None:
    root = one_trace(runs)
    assert root["name"] == "ask_server"
    assert edges(runs) == sorted([("ask_server", None), ("POST /answer", "ask_server"), ("compose", "POST /answer"),
                                  ("lookup", "POST /answer")])
    handler = named(runs, "POST /answer")[0]
    assert handler["extra"]["metadata"]["otel_span_kind"] == "SERVER"
    # The server's span has the client's span as its OTel parent too (traceparent).
    client_span = root["extra"]["metadata"]["otel_span_id"]
    assert handler["extra"]["metadata"]["otel_parent_span_id"] == client_span
    assert handler["extra"]["metadata"]["otel_trace_id"] == root["extra"]["metadata"]["otel_trace_id"]
    assert handler["outputs"]["answer"]


def test_distributed_in_one_command(launched) -> None:
    """client.py starts server.py itself: two processes, one run tree."""
    svc, proc = finished(launched, "distributed_in_one_command")
    check_distributed(stored(svc, 4))
    said_where_runs_went(proc, svc)


def test_distributed_server_and_client_started_separately(launched) -> None:
    """As in server.py's docstring: the server runs until stopped (SIGTERM here), the client is given its URL."""
    svc, client = finished(launched, "distributed_server_and_client_started_separately")
    check_distributed(stored(svc, 4))
    said_where_runs_went(client, svc)


def test_zero_code(launched) -> None:
    """run.py runs the unchanged app under the venv's opentelemetry-instrument, configured by env vars only."""
    svc, proc = finished(launched, "zero_code")
    instrument = BIN / "opentelemetry-instrument"
    assert instrument.exists()
    command = next(line for line in proc.stdout.splitlines() if line.startswith("$ "))
    assert f"{instrument} {sys.executable} {EXAMPLES / 'zero_code' / 'app.py'}" in command
    assert "OTEL_TRACES_EXPORTER=runs" in command and "OTEL_EXPORTER_RUNS_API_KEY=***" in command
    assert f"OTEL_EXPORTER_RUNS_ENDPOINT={svc.url}" in command and f"OTEL_EXPORTER_RUNS_PROJECT={PROJECT}" in command
    runs = stored(svc, 3)  # the project came from the environment: stored() checks it
    root = one_trace(runs)
    assert edges(runs) == [("POST /checkout", None), ("charge_card", "POST /checkout"), ("price_items", "POST /checkout")]
    # OTEL_SERVICE_NAME went to the resource, not to the project.
    assert root["extra"]["metadata"]["otel_resource"]["service.name"] == "checkout-under-test"
    assert "checkout:" in proc.stdout  # the app's own output
    said_where_runs_went(proc, svc)


# --------------------------------------------------------------------------- docs and coverage


def test_hosted_service_notes_match_the_settings() -> None:
    text = (EXAMPLES / "hosted_service.md").read_text()
    for url in (_settings.US_ENDPOINT, _settings.EU_ENDPOINT, _settings.US_CONTROL_PLANE, _settings.EU_CONTROL_PLANE):
        assert url in text, url
    assert f"OTEL_EXPORTER_RUNS_ENDPOINT={_settings.US_ENDPOINT}\n" in text
    assert f"OTEL_EXPORTER_RUNS_ENDPOINT={_settings.EU_ENDPOINT}\n" in text
    declared = {name for decl in _settings._DECLS.values() for name in decl.env}
    named_here = set(re.findall(r"\b(?:OTEL_EXPORTER_RUNS|LANGSMITH)_[A-Z_]+\b", text))
    assert named_here - declared == set(), "variables the exporter does not read"
    for needed in ("OTEL_EXPORTER_RUNS_API_KEY", "OTEL_EXPORTER_RUNS_WORKSPACE_ID", "OTEL_EXPORTER_RUNS_PROJECT"):
        assert f"export {needed}=" in text


# Every file in examples/ and the test that runs or checks it.
COVERED = {
    "quickstart.py": "test_quickstart",
    "spans.py": "test_spans",
    "traceable.py": "test_traceable",
    "openai_chat.py": "test_openai_chat",
    "anthropic_messages.py": "test_anthropic_messages",
    "exporter_path.py": "test_exporter_path",
    "distributed/client.py": "test_distributed_in_one_command",
    "distributed/server.py": "test_distributed_server_and_client_started_separately",
    "zero_code/run.py": "test_zero_code",
    "zero_code/app.py": "test_zero_code",
    "hosted_service.md": "test_hosted_service_notes_match_the_settings",
    "collector/loadbalancer.yaml": "test_collector_configs",
    "collector/gateway.yaml": "test_collector_configs",
    "collector/README.md": "test_the_collector_folder_says_how_to_run_it",
    "otlp_node/index.js": "test_otlp_node",
    "otlp_node/package.json": "test_otlp_node",
    "otlp_node/package-lock.json": "test_otlp_node",
}


def example_files() -> set[str]:
    return {
        p.relative_to(EXAMPLES).as_posix()
        for p in EXAMPLES.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and "node_modules" not in p.parts and p.suffix != ".pyc"
    }


def test_every_file_in_examples_is_covered() -> None:
    files = example_files()
    assert files - set(COVERED) == set(), "examples no test runs: add each to COVERED with its test"
    assert set(COVERED) - files == set(), "COVERED names files that are gone"
    tests = {name for name, value in globals().items() if name.startswith("test_") and callable(value)}
    assert set(COVERED.values()) <= tests
    assert {f"test_{name}" for name in CASES} <= tests, "a runner without a test reading its result"


@pytest.mark.parametrize("relpath", sorted(p for p in COVERED if p.endswith(".py")))
def test_each_example_says_what_it_shows_and_how_to_run_it(relpath: str) -> None:
    source = (EXAMPLES / relpath).read_text()
    docstring = ast.get_docstring(ast.parse(source))
    assert docstring and len(docstring.splitlines()[0]) > 20, "a docstring whose first line says what it shows"
    assert f"python examples/{relpath}" in docstring, "the exact command to run it"
    if re.search(r"^(from|import) (openai|anthropic)\b|^    import (openai|anthropic)\b", source, re.M):
        # Both forms: the package's name works from an index, a clone installs itself as '.'.
        assert re.search(r"pip install '\.\[[a-z,]*examples[a-z,]*\]'", docstring), "the install from a clone"
        assert re.search(r"pip install 'otel-runs-exporter\[[a-z,]*examples[a-z,]*\]'", docstring), "from an index"


@pytest.mark.parametrize("relpath, module", [("openai_chat.py", "openai"), ("anthropic_messages.py", "anthropic")])
def test_client_example_without_the_extra_says_what_to_install(relpath: str, module: str) -> None:
    # None in sys.modules makes the import fail, as in an environment without the package.
    code = f"import runpy, sys; sys.modules[{module!r}] = None; runpy.run_path({str(EXAMPLES / relpath)!r}, run_name='__main__')"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=example_env(None), capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"This example needs the {module} client: pip install '.[examples]' in a clone of the repository, "
        "else pip install 'otel-runs-exporter[examples]'"
    )


# --------------------------------------------------------------------------- the Collector route


def _doc_pipelines() -> dict[str, dict[str, list[str]]]:
    """The pipeline table of docs/collector.md: file -> receiver, processors, exporter, as written."""
    rows: dict[str, dict[str, list[str]]] = {}
    for line in (ROOT / "docs" / "collector.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[1].startswith("`examples/collector/"):
            names = [[n.strip(" `") for n in cell.split(",")] for cell in cells[2:]]
            rows[cells[1].strip("`")] = dict(zip(("receivers", "processors", "exporters"), names))
    return rows


def test_collector_configs() -> None:
    # No Collector binary here: the files are parsed and checked against what the doc describes.
    import yaml

    described = _doc_pipelines()
    assert set(described) == {f"examples/collector/{p}" for p in ("loadbalancer.yaml", "gateway.yaml")}
    configs = {}
    for relpath, pipeline in described.items():
        config = yaml.safe_load((ROOT / relpath).read_text())
        configs[relpath] = config
        traces = config["service"]["pipelines"]["traces"]
        assert {k: traces[k] for k in pipeline} == pipeline, relpath
        for kind in pipeline:
            for name in traces[kind]:
                assert name in config[kind], f"{relpath}: {kind} {name} is used but not defined"
        for name in config["service"].get("extensions", []):
            assert name in config["extensions"]
    balancer = configs["examples/collector/loadbalancer.yaml"]["exporters"]["loadbalancing"]
    assert balancer["routing_key"] == "traceID"  # whole traces on one gateway, for tail sampling
    gateway = configs["examples/collector/gateway.yaml"]
    policies = {p["type"] for p in gateway["processors"]["tail_sampling"]["policies"]}
    assert policies == {"status_code", "latency", "probabilistic"}
    runs = gateway["exporters"]["otlphttp/runs"]
    assert runs["traces_endpoint"].endswith("/otel/v1/traces")  # spec 4.5
    assert runs["headers"] == {"x-api-key": "${env:OTEL_EXPORTER_RUNS_API_KEY}"}  # never a key in the file
    assert runs["sending_queue"]["storage"] in gateway["extensions"]


def test_the_collector_folder_says_how_to_run_it() -> None:
    """Its README gives the command for each file, and what it says of them is what they hold."""
    import yaml

    readme = (EXAMPLES / "collector" / "README.md").read_text()
    for path in sorted((EXAMPLES / "collector").glob("*.yaml")):
        assert f"otelcol-contrib --config examples/collector/{path.name}" in readme, path.name
        config = yaml.safe_load(path.read_text())
        for protocol in config["receivers"]["otlp"]["protocols"].values():
            assert f":{protocol['endpoint'].rsplit(':', 1)[1]}`" in readme, (path.name, protocol)
    balancer = yaml.safe_load((EXAMPLES / "collector" / "loadbalancer.yaml").read_text())
    assert f"`{balancer['exporters']['loadbalancing']['resolver']['dns']['hostname']}`" in readme
    gateway = yaml.safe_load((EXAMPLES / "collector" / "gateway.yaml").read_text())
    assert f"`{gateway['extensions']['file_storage']['directory']}`" in readme
    key_variable = gateway["exporters"]["otlphttp/runs"]["headers"]["x-api-key"].removeprefix("${env:").removesuffix("}")
    assert f"export {key_variable}=" in readme
    assert f"{gateway['processors']['tail_sampling']['decision_wait'].removesuffix('s')} s" in readme


NODE_EXAMPLE = EXAMPLES / "otlp_node"


def test_otlp_node() -> None:
    """examples/otlp_node/: a Node.js app traced with the OpenTelemetry JS SDK, its OTLP stored as runs.

    In a real ``node`` process whose own OTLP exporter reads the standard variables
    (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``). Skipped, saying
    why, without ``node`` or without the example's packages (``.ci/run`` installs them with
    ``npm ci``); not a Python example, so not in ``test_each_example_says_what_it_shows...``.
    """
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node on this machine: the Node.js example needs Node.js 18 or later")
    if not (NODE_EXAMPLE / "node_modules" / "@opentelemetry" / "exporter-trace-otlp-proto").is_dir():
        pytest.skip(f"the example's packages are not installed: run npm ci in {NODE_EXAMPLE} (.ci/run does)")
    with LocalService(api_key=KEY, strict=True) as svc:
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{svc.url}/otel/v1/traces",
            "OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key={KEY},Langsmith-Project=node-demo",
        }
        done = subprocess.run([node, "index.js"], cwd=NODE_EXAMPLE, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        trace_id = done.stdout.strip()
        runs = sorted(svc.wait_for_runs(4), key=lambda r: r["dotted_order"])
        assert svc.violations() == []
    # One tree, in the project the header named, as the JS SDK's spans nest (siblings by start, which JS's
    # clock may make equal: compared as a set).
    shape = [(r["dotted_order"].count("."), r["name"], r["run_type"]) for r in runs]
    assert shape[0] == (0, "invoke_agent weather", "chain") and sorted(shape[1:]) == [
        (1, "chat gpt-4o-mini", "llm"), (1, "chat gpt-4o-mini", "llm"), (1, "get_weather", "tool"),
    ]
    assert {r["session_name"] for r in runs} == {"node-demo"}
    assert runs[0]["extra"]["metadata"]["otel_trace_id"] == trace_id
    # The GenAI conventions read on the service's side: messages, the tool call, usage.
    first, last = sorted((r for r in runs if r["run_type"] == "llm"), key=lambda r: len(r["inputs"]["messages"]))
    assert first["inputs"]["messages"] == [{"role": "user", "content": "What is the weather in Paris?"}]
    assert first["outputs"]["messages"][0]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert last["outputs"]["messages"][0]["content"] == "It is sunny in Paris, 24 °C."
    assert last["outputs"]["usage_metadata"] == {"input_tokens": 71, "output_tokens": 11, "total_tokens": 82}
