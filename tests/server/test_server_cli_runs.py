"""``otel-runs runs list|tree`` for scripts: ``--json``, newest first, ``--project``, ``--since/--until``, ``--service``

One database, filled through a running service, read both ways: from the file
(``--db``) and through the service's API (``--service``); the two must print the
same lines. A subprocess for what a CI job runs, both ways; in-process for the rest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
import requests
from server.server_helpers import T0, Trace, entry, iso

from otel_runs_exporter import cli
from otel_runs_exporter.server import LocalService

KEY = "runs-cli-key"


class Filled:
    """The database's traces, newest first, and the service serving it."""

    def __init__(self, svc: LocalService, db: Path, traces: dict[str, Trace]) -> None:
        self.svc, self.db, self.traces = svc, db, traces

    def id(self, name: str) -> str:
        return self.traces[name].root_id


def _trace(
    start: datetime, project: str, *, error: bool = False, child_after: timedelta = timedelta(milliseconds=5)
) -> tuple[Trace, list[dict[str, Any]]]:
    trace = Trace(start)
    trace.child_start = start + child_after
    trace.child_dotted = trace.root_dotted + "." + entry(trace.child_start, trace.child_id)
    end = iso(trace.child_start + timedelta(seconds=2))
    root = trace.root_post() | {"session_name": project, "end_time": end, "outputs": {"answer": 42}}
    child = trace.child_post() | {"session_name": project, "end_time": end}
    if error:
        child["error"] = "ValueError: boom"
    return trace, [root, child]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Filled]:
    """Four whole traces in two projects, one of them long (its child starts among the others' roots), and one
    whose root never came (its child is newest of all)."""
    db = tmp_path_factory.mktemp("runs-cli") / "runs.db"
    hour = timedelta(hours=1)
    traces: dict[str, Trace] = {}
    posts: list[dict[str, Any]] = []
    for name, start, project, error, child_after in (
        ("long", T0 + hour / 2, "alpha", False, 3 * hour),
        ("a1", T0 + hour, "alpha", False, timedelta(milliseconds=5)),
        ("b1", T0 + 2 * hour, "beta", True, timedelta(milliseconds=5)),
        ("a2", T0 + 3 * hour, "alpha", False, timedelta(milliseconds=5)),
        ("orphan", T0 + 4 * hour, "alpha", False, timedelta(milliseconds=5)),
    ):
        traces[name], runs = _trace(start, project, error=error, child_after=child_after)
        posts += runs[1:] if name == "orphan" else runs
    with LocalService(db=str(db), api_key=KEY) as svc:
        answer = requests.post(svc.url + "/runs/batch", json={"post": posts}, headers={"x-api-key": KEY}, timeout=10)
        assert answer.status_code == 202, answer.text
        yield Filled(svc, db, traces)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}
    return subprocess.run(
        [sys.executable, "-m", "otel_runs_exporter.cli", "runs", *args],
        capture_output=True, text=True, timeout=60, env={**clean, **(env or {})},
    )


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_list_json_is_one_trace_a_line_newest_first_the_same_from_the_file_and_the_service(filled: Filled) -> None:
    from_file = _cli("list", "--json", "--db", str(filled.db))
    through_api = _cli("list", "--json", "--service", filled.svc.url, "--api-key", KEY)
    assert from_file.returncode == 0 and through_api.returncode == 0, from_file.stderr + through_api.stderr
    assert from_file.stderr == through_api.stderr == ""
    assert from_file.stdout == through_api.stdout  # the same queries, answered by the same code
    traces = _lines(from_file.stdout)
    # Newest first by their roots' start, as the viewer lists them; the trace whose root never came by its
    # earliest run; the long one by its root, though its child started after two other traces.
    assert [t["trace_id"] for t in traces] == [filled.id(n) for n in ("orphan", "a2", "b1", "a1", "long")]
    orphan, a2, b1, _, _ = traces
    assert orphan["root_run_id"] is None and orphan["name"] == "llm" and orphan["run_count"] == 1
    assert a2["root_run_id"] == filled.id("a2")
    assert (a2["name"], a2["run_type"], a2["status"]) == ("agent", "chain", "success")
    assert a2["start_time"].startswith("2025-03-01T15:00:00.123456") and a2["run_count"] == 2 and a2["error_count"] == 0
    assert [r["name"] for r in a2["runs"]] == ["agent", "llm"] and a2["runs"][0]["outputs"] == {"answer": 42}
    assert b1["error_count"] == 1 and b1["runs"][1]["error"] == "ValueError: boom"
    assert a2["session_id"] != b1["session_id"]


def test_list_filters_by_project_and_time_through_the_service(
    filled: Filled, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_API_KEY", KEY)  # the key from the exporter's variable without --api-key
    since, until = iso(T0 + timedelta(hours=2, minutes=30)), iso(T0 + timedelta(hours=5))
    args = ["--service", filled.svc.url, "--project", "alpha", "--since", since, "--until", until]
    assert cli.main(["runs", "list", "--json", *args]) == 0
    # The long trace has a run in the window, but it started (its root did) before it.
    assert [t["trace_id"] for t in _lines(capsys.readouterr().out)] == [filled.id("orphan"), filled.id("a2")]


def test_list_finds_traces_by_text_in_any_run_and_by_a_run_filter(
    filled: Filled, capsys: pytest.CaptureFixture[str]
) -> None:
    # "boom" is only in b1's child's error; the orphan's child is an llm run like every child.
    assert cli.main(["runs", "list", "--json", "--db", str(filled.db), "--search", "BOOM"]) == 0
    assert [t["trace_id"] for t in _lines(capsys.readouterr().out)] == [filled.id("b1")]
    args = ["--service", filled.svc.url, "--api-key", KEY, "--project", "alpha"]
    assert cli.main(["runs", "list", "--json", *args, "--filter", 'eq(status, "error")']) == 0
    assert _lines(capsys.readouterr().out) == []
    assert cli.main(["runs", "list", *args, "--search", "answer", "--filter", 'eq(run_type, "chain")']) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 3  # the alpha roots with outputs {"answer": 42}
    assert cli.main(["runs", "list", "--db", str(filled.db), "--search", "no such text"]) == 0
    assert capsys.readouterr().out == f"no traces match in {filled.db}\n"  # and where it looked


def test_tree_json_is_one_run_a_line_parents_first(filled: Filled, capsys: pytest.CaptureFixture[str]) -> None:
    trace = filled.traces["b1"]
    url = filled.svc.url
    assert cli.main(["runs", "tree", trace.root_id, "--json", "--service", url, "--api-key", KEY, "--url", url]) == 0
    done = capsys.readouterr()
    runs = _lines(done.out)
    assert [(r["id"], r.get("parent_run_id")) for r in runs] == [(trace.root_id, None), (trace.child_id, trace.root_id)]
    assert runs[1]["status"] == "error"
    assert done.err.startswith("viewer: " + filled.svc.url)  # the link off stdout, which stays JSON lines


def test_list_limit_project_time_and_the_text_newest_first(filled: Filled, capsys: pytest.CaptureFixture[str]) -> None:
    # Two roots kept, then the runs after the second walked: the long trace's child is met there and left out
    # (its root is older), the orphan's child is met and comes first.
    assert [t["trace_id"] for t in _lines(_json_list(filled, capsys, "--limit", "2"))] == [
        filled.id("orphan"), filled.id("a2")
    ]
    assert [t["trace_id"] for t in _lines(_json_list(filled, capsys, "--limit", "3"))] == [
        filled.id(n) for n in ("orphan", "a2", "b1")
    ]
    session = _lines(_json_list(filled, capsys, "--project", "beta"))[0]["session_id"]
    assert [t["trace_id"] for t in _lines(_json_list(filled, capsys, "--project", session))] == [filled.id("b1")]
    assert _json_list(filled, capsys, "--until", "2020-01-01") == ""
    # The trees, from the file: the same blocks as before, newest first.
    assert cli.main(["runs", "list", "--tree", "--db", str(filled.db)]) == 0
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("trace ")]
    assert [h.split()[1] for h in headers] == [filled.id(n) for n in ("orphan", "a2", "b1", "a1", "long")]
    b1 = f"trace {filled.id('b1')}  (2 runs)\nchain  agent  2.005s  ok\n  llm  llm  2.000s  error  error: ValueError: boom\n"
    assert b1 in out
    assert f"(parent {filled.id('orphan')} missing)" in out
    assert cli.main(["runs", "list", "--db", str(filled.db), "--since", "1h"]) == 0  # all in 2025: none this past hour
    assert capsys.readouterr().out == f"no traces match in {filled.db}\n"


def _json_list(filled: Filled, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert cli.main(["runs", "list", "--service", filled.svc.url, "--api-key", KEY, "--json", *args]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["list", "--limit", "-3"], "argument --limit: a whole number, 0 or more (got '-3')"),
        (["list", "--limit", "ten"], "argument --limit: a whole number, 0 or more"),
        (["list", "--since", "yesterday"], "argument --since: expected an ISO 8601 time"),
        (["list", "--until", "5 parsecs"], "argument --until: expected an ISO 8601 time"),
        (["tree", "x", "--service", "localhost:1984"], "argument --service: expected the service's http://"),
    ],
)
def test_bad_arguments_are_refused_by_argparse(args: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["runs", *args])
    assert exit_.value.code == cli.EXIT_USAGE == 2
    assert says in capsys.readouterr().err


def test_other_refusals_are_one_line_and_an_exit_code(filled: Filled, capsys: pytest.CaptureFixture[str]) -> None:
    db, url = str(filled.db), filled.svc.url
    cases = [
        (["list", "--db", db, "--since", "2025-03-02", "--until", "2025-03-01"], 2, "--since must be before --until"),
        (["list", "--db", db, "--service", url], 2, "give --db or --service, not both"),
        (["list", "--db", db, "--api-key", "k"], 2, "--api-key is for --service"),
        (["list", "--db", db, "--project", "gamma"], 1, "no project named 'gamma' (projects: 'alpha', 'beta')"),
        (["list", "--service", url, "--api-key", "wrong-key"], 3, "POST /api/v1/runs/query answered 401"),
        (["tree", filled.id("a1"), "--service", url], 3, "answered 401"),  # no key at all
    ]
    for args, code, says in cases:
        assert cli.main(["runs", *args]) == code, args
        err = capsys.readouterr().err
        assert says in err and "wrong-key" not in err, err


def test_a_service_that_does_not_answer_is_exit_7(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"  # bound, never listening: refused
        assert cli.main(["runs", "list", "--service", url]) == cli.EXIT_SERVER == 7
    err = capsys.readouterr().err
    assert err.startswith("otel-runs: ") and f"is the service running at {url}?" in err and err.count("\n") == 1, err


def test_relative_and_iso_times() -> None:
    from otel_runs_exporter.cli._runs_source import time_arg as _time

    now = datetime.now(timezone.utc)
    for text, ago in (("15m", timedelta(minutes=15)), ("2h", timedelta(hours=2)), ("1d", timedelta(days=1)),
                      ("1.5w", timedelta(weeks=1.5)), ("30s", timedelta(seconds=30))):
        assert abs((now - ago) - _time(text)) < timedelta(seconds=5), text
    assert _time("2025-03-01") == datetime(2025, 3, 1, tzinfo=timezone.utc)  # no offset: UTC
    assert _time("2025-03-01T13:00:00+01:00") == datetime(2025, 3, 1, 12, tzinfo=timezone.utc)
    assert _time("2025-03-01T12:00:00Z") == datetime(2025, 3, 1, 12, tzinfo=timezone.utc)


def test_tree_counts_one_run_as_one_run(filled: Filled, capsys: pytest.CaptureFixture[str]) -> None:
    """It said "(1 runs)"; ``runs list`` already said "(1 run)"."""
    assert cli.main(["runs", "tree", filled.id("orphan"), "--db", str(filled.db)]) == 0
    assert capsys.readouterr().out.startswith(f"trace {filled.id('orphan')}  (1 run)\n")
