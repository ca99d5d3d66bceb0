"""``otel-runs runs`` as people scan it and scripts read it (issue 37): a line a trace, ``--tree``, costs rounded,
a trace named by a prefix of its id, ``check --service --json``, and what a read that finds nothing says.

One database filled through a running service; the commands run as the real program
(``python -m otel_runs_exporter.cli``), against the file and through the service.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
from server.server_helpers import entry, iso

from otel_runs_exporter import cli
from otel_runs_exporter.server import LocalService

START = datetime(2025, 3, 1, 9, 30, tzinfo=timezone.utc)
# Two traces whose ids share their first 13 characters, and one apart: the list shows each by the shortest start
# of its id that no other shares.
TURN_1, TURN_2, OTHER = "0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d", "0190b3c5-f1b8-7b00-8000-000000000001", "0a11ce00-0000-7000-8000-000000000002"
# gpt-4o-mini calls whose costs add up with float noise (0.00010979999999999999 for the first trace).
CALLS = ((123, 45), (200, 7), (77, 31))


def _trace(trace_id: str, at: datetime, question: str, *, failed_tool: bool = False) -> list[dict[str, Any]]:
    root_dotted = entry(at, trace_id)
    end = iso(at + timedelta(seconds=2))
    runs = [{
        "id": trace_id, "trace_id": trace_id, "dotted_order": root_dotted, "name": "conversation_turn", "run_type": "chain",
        "start_time": iso(at), "end_time": end, "session_name": "shop",
        "inputs": {"messages": [{"role": "user", "content": question}]}, "outputs": {"answer": "On its way."},
    }]
    for n, (tokens_in, tokens_out) in enumerate(CALLS):
        run_id = f"{trace_id[:-4]}{n + 1:04x}" if trace_id[-4:] != f"{n + 1:04x}" else f"{trace_id[:-4]}ffff"
        moment = at + timedelta(milliseconds=10 * (n + 1))
        runs.append({
            "id": run_id, "trace_id": trace_id, "parent_run_id": trace_id, "dotted_order": f"{root_dotted}.{entry(moment, run_id)}",
            "name": "chat gpt-4o-mini", "run_type": "llm", "start_time": iso(moment), "end_time": end, "session_name": "shop",
            "extra": {"metadata": {"ls_model_name": "gpt-4o-mini"}},
            "outputs": {"usage_metadata": {"input_tokens": tokens_in, "output_tokens": tokens_out}},
            **({"error": "TimeoutError: slow"} if failed_tool and n == 2 else {}),
        })
    return runs


class Filled:
    def __init__(self, svc: LocalService, db: Path) -> None:
        self.svc, self.db = svc, db


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Filled]:
    db = tmp_path_factory.mktemp("runs-list") / "shop.db"
    with LocalService(db=str(db)) as svc:
        posts = _trace(TURN_1, START, "Where is order #1001?") + _trace(
            TURN_2, START + timedelta(minutes=1), "Where is order #1002?", failed_tool=True
        ) + _trace(OTHER, START + timedelta(minutes=2), "Cancel order\n#1003, please")
        answer = requests.post(svc.url + "/runs/batch", json={"post": posts}, timeout=10)
        assert answer.status_code == 202, answer.text
        yield Filled(svc, db)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}
    return subprocess.run(
        [sys.executable, "-m", "otel_runs_exporter.cli", "runs", *args],
        capture_output=True, text=True, timeout=60, env={**clean, **(env or {})},
    )


def test_list_prints_a_line_a_trace_and_tree_takes_the_prefix_it_shows(filled: Filled) -> None:
    done = _cli("list", "--db", str(filled.db))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    header, *lines = done.stdout.splitlines()
    assert header.split() == ["TRACE", "STARTED", "(UTC)", "NAME", "STATUS", "LATENCY", "TOKENS", "COST", "INPUT"]
    assert len(lines) == 3  # 3 traces of 4 runs: 3 lines, not 12 (or 400 for 20 agent traces)
    cells = [line.split(None, 3)[:3] + [line.split(None, 3)[3]] for line in lines]
    # Newest first; each by the shortest start of its id no other trace's shares.
    assert [c[0] for c in cells] == ["0a11ce00", "0190b3c5-f1b8-7b", "0190b3c5-f1b8-7a"]
    assert [c[1:3] for c in cells] == [["2025-03-01", "09:32:00"], ["2025-03-01", "09:31:00"], ["2025-03-01", "09:30:00"]]
    # Name, status (with the failed run inside), latency, the trace's tokens and its cost to 4 significant digits,
    # and what it was asked, on one line.
    assert lines[1].split()[3:10] == ["conversation_turn", "ok,", "1", "failed", "2.000s", "483", "$0.0001098"], lines
    assert lines[0].endswith("  Cancel order #1003, please") and lines[2].endswith("  Where is order #1001?"), lines

    tree = _cli("tree", "0190b3c5-f1b8-7a", "--db", str(filled.db))  # the prefix the list showed
    assert tree.returncode == 0, tree.stderr
    first, root, *children = tree.stdout.splitlines()
    assert first == f"trace {TURN_1}  (4 runs)"
    assert root == "chain  conversation_turn  2.000s  ok  trace: 483 tokens, $0.0001098"
    assert children[0].startswith("  llm  chat gpt-4o-mini") and children[0].endswith("  $0.00004545")  # its own cost
    ambiguous = _cli("tree", "0190B3C5", "--db", str(filled.db))
    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    assert ambiguous.stderr == f"otel-runs: 0190B3C5 starts 2 trace ids ({TURN_1}, {TURN_2}): give more of it\n"

    trees = _cli("list", "--tree", "--db", str(filled.db))  # yesterday's view, a flag away
    assert trees.returncode == 0 and trees.stdout.count("\ntrace ") == 2 and trees.stdout.startswith(f"trace {OTHER}")


def test_json_is_a_trace_a_line_with_its_costs_rounded(filled: Filled) -> None:
    raw = requests.post(filled.svc.url + "/runs/query", json={"id": [TURN_1], "select": ["total_cost"]}, timeout=5)
    noisy = raw.json()["runs"][0]["total_cost"]
    assert noisy != round(noisy, 10)  # what the service sums: float noise a script should not see
    done = _cli("list", "--json", "--service", filled.svc.url)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    traces = [json.loads(line) for line in done.stdout.splitlines()]
    assert [t["trace_id"] for t in traces] == [OTHER, TURN_2, TURN_1] and traces[2]["run_count"] == 4
    assert traces[2]["total_cost"] == round(noisy, 10) == 0.0001098 and traces[2]["total_tokens"] == 483
    for trace in traces:
        for run in [trace, *trace["runs"]]:
            for key in ("total_cost", "prompt_cost", "completion_cost"):
                value = run.get(key)
                assert value is None or value == round(value, 10), (key, value)
    assert traces[1]["error_count"] == 1 and traces[1]["runs"][0]["name"] == "conversation_turn"


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The command in this process (its ``main``, as the program runs it): exit code, stdout, stderr."""
    code = cli.main(["runs", *args])
    done = capsys.readouterr()
    return code, done.out, done.err


def test_check_takes_service_and_json_like_the_others(
    filled: Filled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, through, _ = _main(capsys, "check", "--service", filled.svc.url, "--json")
    assert code == 0 and json.loads(through) == json.loads(_main(capsys, "check", "--db", str(filled.db), "--json")[1])
    assert json.loads(through)["counts"] == {
        "patched_not_posted": 0, "never_completed": 0, "missing_parents": 0, "parent_cycles": 0, "accepted_violations": 0,
    }
    assert _main(capsys, "check", "--service", filled.svc.url) == (0, f"no problems found in the service at {filled.svc.url}\n", "")

    broken = tmp_path / "broken.db"
    with LocalService(db=str(broken)) as svc:
        child = _trace(TURN_1, START, "?")[1]
        assert requests.post(svc.url + "/runs/batch", json={"post": [child]}, timeout=5).status_code == 202
        code, found, _ = _main(capsys, "check", "--service", svc.url, "--json")
    assert code == 1
    assert json.loads(found)["missing_parents"] == [{"parent_run_id": TURN_1, "children": [child["id"]]}]


def test_reads_that_find_nothing_name_what_they_read_and_a_bad_filter_is_a_usage_error(
    filled: Filled, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty.db"
    with LocalService(db=str(empty)):
        pass
    # No --db: the file the environment names, and the line says which.
    monkeypatch.setenv("OTEL_RUNS_SERVER_DB", str(empty))
    assert _main(capsys, "list") == (0, f"no runs stored in {empty}\n", "")
    assert _main(capsys, "tree", "ffff") == (1, "", f"otel-runs: no trace id starts with ffff in {empty}\n")
    code, out, err = _main(capsys, "list", "--db", str(filled.db), "--filter", "eq(colour, 'red')")
    assert (code, out) == (2, ""), err
    assert err.startswith("otel-runs: --filter cannot be read: at position 3: unsupported field 'colour'")
    assert "422" not in err and "/runs/query" not in err  # not the in-process HTTP layer
    code, _, err = _main(capsys, "list", "--service", filled.svc.url, "--search", "order", "--filter", 'eq(status, "late")')
    assert code == 2 and "--filter and --search cannot be read: at position 11: status is one of" in err
    code, _, err = _main(capsys, "tree", "not-an-id", "--db", str(filled.db))
    assert code == 2 and "is not a trace id or the start of one" in err
