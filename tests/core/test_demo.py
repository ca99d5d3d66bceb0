"""The README's first command, as a user runs it, and what it tells the user to run next."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "otel_runs_exporter.cli"]


def otel_runs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)


def suggested(out: str) -> list[list[str]]:
    """The commands the demo prints for the user to run next, as argument lists."""
    return [shlex.split(line.strip()) for line in out.splitlines() if line.startswith("  otel-runs ")]


def test_otel_runs_demo_delivers_the_tree_and_says_how_to_keep_it():
    proc = otel_runs("demo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "chain  answer_question" in out and "  llm  chat demo-model" in out
    assert "error: TimeoutError" in out and "tokens in=42 out=17" in out
    assert "dropped 0; violations 0" in out
    assert "(runs in memory)" in out and "went with the demo" in out
    assert suggested(out) == [
        ["otel-runs", "demo", "--db", "demo.db"],
        ["otel-runs", "runs", "list", "--db", "demo.db"],
        ["otel-runs", "runs", "tree", "TRACE_ID", "--db", "demo.db"],
    ]


def test_demo_with_db_keeps_its_runs_and_the_commands_it_prints_show_them(tmp_path: Path):
    db = tmp_path / "my demo.db"  # a space, so the printed commands must quote it
    first = otel_runs("demo", "--db", str(db))
    assert first.returncode == 0, first.stdout + first.stderr
    second = otel_runs("demo", "--db", str(db))  # a database that already holds a demo's runs
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("\ntrace ") == 1  # only the trace this run added is shown and checked
    assert f"The runs are kept in {shlex.quote(str(db))}" in second.stdout

    listing, tree = suggested(second.stdout)[:2]
    assert listing[:3] == ["otel-runs", "runs", "list"] and tree[:3] == ["otel-runs", "runs", "tree"]
    shown = otel_runs(*listing[1:])
    assert shown.returncode == 0, shown.stderr
    # Both demos' traces, a line each, after both services stopped; the tree is named by the start of its id
    # that the list shows, which no other trace's shares.
    assert [line.split()[3] for line in shown.stdout.splitlines()[1:]] == ["answer_question", "answer_question"]
    assert tree[3] in [line.split()[0] for line in shown.stdout.splitlines()[1:]]
    one = otel_runs(*tree[1:])
    assert one.returncode == 0, one.stderr
    assert one.stdout.startswith(f"trace {tree[3]}") and one.stdout.splitlines()[0].endswith("  (5 runs)")
    assert "tool  flaky_tool" in one.stdout


def test_demo_with_a_db_that_is_not_a_database_says_so(tmp_path: Path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database")
    proc = otel_runs("demo", "--db", str(bad))
    assert proc.returncode == 2
    assert proc.stderr == f"otel-runs demo: cannot use {bad} as a runs database: file is not a database\n"
    assert bad.read_text() == "not a database"
