"""``otel-runs serve`` as a real process, and ``otel-runs runs list/tree/check`` against a database file."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Iterator

import pytest
import requests
from server.server_helpers import Trace, entry, good_trace_body, iso, multipart, post_multipart, run_parts

from otel_runs_exporter import cli
from otel_runs_exporter.server import LocalService

pytestmark = pytest.mark.heavy(seconds=8)


@contextlib.contextmanager
def serving(db: Path, *args: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """``otel-runs serve --port 0 --db DB ARGS`` as a process; yields it and its first line. Killed if still up after."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "otel_runs_exporter.cli", "serve", "--port", "0", "--db", str(db), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        yield proc, proc.stdout.readline()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def _service_at(url: str) -> LocalService:
    svc = LocalService()  # not started: an address for the helpers that post to one
    svc.host, svc.port = "127.0.0.1", int(url.rstrip(")").rsplit(":", 1)[1])
    return svc


def test_serve_subprocess_start_post_sigint(tmp_path: Path) -> None:
    db = tmp_path / "serve.db"
    with serving(db, "--api-key", "very-secret-key") as (proc, line):
        assert line.startswith("Listening on http://127.0.0.1:"), line
        trace = Trace()
        response = post_multipart(_service_at(line.split()[2]), good_trace_body(trace), **{"x-api-key": "very-secret-key"})
        assert response.status_code == 202, response.text
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "very-secret-key" not in line + out + err
    with sqlite3.connect(db) as conn:
        ids = {row[0] for row in conn.execute("SELECT id FROM runs WHERE posted = 1")}
    assert ids == {trace.root_id, trace.child_id}


def test_serve_with_scaled_rate_limits_says_so_and_logs_requests(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    with serving(tmp_path / "s.db", "--rate-limit-scale", "3000", "--request-log", str(log)) as (proc, line):
        assert "rate limits on (counts / 3000)" in line, line
        svc = _service_at(line.split()[2])
        codes = [post_multipart(svc, good_trace_body(Trace()), **{"x-api-key": "k"}).status_code for _ in range(3)]
        assert codes == [202, 202, 429]  # 6000 / 3000 per 10 s, without --rate-limits
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)
    assert [json.loads(entry)["status"] for entry in log.read_text().splitlines()] == [202, 202, 429]


def test_serve_stops_on_sigterm(tmp_path: Path) -> None:
    with serving(tmp_path / "t.db") as (proc, line):
        assert requests.get(line.split()[2] + "/ok", timeout=5).status_code == 200
        proc.terminate()
        proc.communicate(timeout=10)
    assert proc.returncode == 0


def test_a_sigterm_right_after_the_listening_line_still_stops_cleanly(tmp_path: Path) -> None:
    # The handler used to be set after the line was printed: a SIGTERM sent at once (as a
    # script or a loaded test machine does) met the default handler and killed it (-15).
    with serving(tmp_path / "s.db") as (proc, line):
        assert line.startswith("Listening on"), line
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "Stopped." in out


def test_serve_answers_the_hosts_and_origins_it_is_told_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(tmp_path / "h.db", "--allow-host", "DevBox.lan", "--cors-origin", "http://LOCALHOST:5173/") as (proc, line):
        assert "also answers Host DevBox.lan, CORS for http://localhost:5173)" in line, line
        url = line.split()[2]
        assert requests.get(url + "/ok", headers={"Host": "devbox.lan:8080"}, timeout=5).status_code == 200
        refused = requests.get(url + "/ok", headers={"Host": "evil.example:1984"}, timeout=5)
        assert refused.status_code == 403 and "--allow-host evil.example" in refused.json()["detail"]
        app = requests.get(url + "/info", headers={"Origin": "http://localhost:5173"}, timeout=5)
        assert app.headers["Access-Control-Allow-Origin"] == "http://localhost:5173"
        proc.terminate()
        proc.communicate(timeout=10)
    for bad, said in ((["--allow-host", "devbox.lan:80"], "without a port"), (["--cors-origin", "*"], "is not an origin")):
        assert cli.main(["serve", "--port", "0", "--db", str(tmp_path / "x.db"), *bad]) == 2
        assert said in capsys.readouterr().err


def test_serve_max_connections_bounds_what_it_serves_at_once(tmp_path: Path) -> None:
    with serving(tmp_path / "m.db", "--max-connections", "1") as (proc, line):
        url = line.split()[2]
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as idle:
            # A body under way holds the one slot (an unfinished head would be closed to make room).
            idle.sendall(b"POST /runs HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n")
            time.sleep(0.2)
            r = requests.get(url + "/ok", timeout=5)
            assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
        deadline = time.monotonic() + 5
        while requests.get(url + "/ok", timeout=5).status_code != 200:  # the slot comes back
            assert time.monotonic() < deadline
            time.sleep(0.05)
    bad = subprocess.run([sys.executable, "-m", "otel_runs_exporter.cli", "serve", "--max-connections", "0"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "--max-connections: a whole number greater than 0" in bad.stderr, bad.stderr


def test_serve_slow_client_limits_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    from otel_runs_exporter.cli import build_parser

    parsed = build_parser().parse_args(["serve"])
    assert (parsed.head_timeout, parsed.min_body_rate, parsed.body_grace) == (5.0, 1024, 5.0)
    for flag, value in (("--head-timeout", "0"), ("--body-grace", "-1"), ("--min-body-rate", "-5")):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args(["serve", flag, value])
        assert exited.value.code == 2 and flag in capsys.readouterr().err


def test_serve_names_the_request_log_when_it_cannot_open_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "cannot listen on 127.0.0.1:1984: [Errno 2] ... '/.../log'": the port blamed for the file."""
    from otel_runs_exporter.cli import main

    missing = tmp_path / "no-such-dir" / "requests.log"
    assert main(["serve", "--port", "0", "--db", str(tmp_path / "r.db"), "--request-log", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"cannot open --request-log {missing}" in err and "cannot listen" not in err


def test_serve_validation_mode_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from otel_runs_exporter.cli import build_parser

    assert not build_parser().parse_args(["serve"]).strict
    assert build_parser().parse_args(["serve", "--strict"]).strict
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", "--strict", "--lenient"])
    assert exited.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_runs_check_lists_what_the_default_mode_stored_despite_a_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "hosted.db"
    trace = Trace()
    late = {**trace.root_post(), "start_time": iso(trace.root_start + timedelta(milliseconds=3))}
    with LocalService(db=str(db)) as svc:
        assert requests.post(svc.url + "/runs/batch", json={"post": [late]}, timeout=5).status_code == 202
    assert cli.main(["runs", "check", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert f"accepted violation [start_time_entry] run {trace.root_id}: start_time" in out, out


@pytest.fixture
def filled_db(tmp_path: Path) -> tuple[Path, Trace, Trace]:
    db = tmp_path / "runs.db"
    complete, broken = Trace(), Trace()
    end = complete.child_start + timedelta(seconds=1)
    with LocalService(db=str(db)) as svc:
        child = complete.child_post()
        body = multipart(
            run_parts("post", complete.root_post() | {"end_time": end.isoformat()}, inputs={}, outputs={})
            + run_parts(
                "post",
                child | {"end_time": end.isoformat()},
                outputs={"usage_metadata": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}},
            )
        )
        assert post_multipart(svc, body).status_code == 202
        # broken: a child whose parent never came, and a patch whose post never came
        assert post_multipart(svc, multipart(run_parts("post", broken.child_post()))).status_code == 202
        patch = broken.patch(broken.root_id, broken.root_dotted, end)
        assert post_multipart(svc, multipart(run_parts("patch", patch))).status_code == 202
    return db, complete, broken


def test_runs_tree(filled_db: tuple[Path, Trace, Trace], capsys: pytest.CaptureFixture[str]) -> None:
    db, complete, _ = filled_db
    assert cli.main(["runs", "tree", complete.root_id.replace("-", ""), "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"trace {complete.root_id}")
    assert out[1].startswith("chain  agent  1.005s  ok")
    assert out[2].startswith("  llm  llm  1.000s  ok  tokens in=3 out=4 total=7")


def test_runs_list_and_check(filled_db: tuple[Path, Trace, Trace], capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    db, complete, broken = filled_db
    monkeypatch.setenv(cli.ENV_SERVER_DB, str(db))
    assert cli.main(["runs", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # A line a trace: the id's start, name, status (the one whose root never came says so), tokens.
    assert lines[0].split() == ["TRACE", "STARTED", "(UTC)", "NAME", "STATUS", "LATENCY", "TOKENS", "COST", "INPUT"]
    by_id = {line.split()[0]: line for line in lines[1:]}
    assert by_id[complete.root_id[:8]].split()[3:6] == ["agent", "ok", "1.005s"], lines
    assert by_id[broken.root_id[:8]].split()[3:6] == ["llm", "no", "root"], lines
    assert cli.main(["runs", "list", "--tree"]) == 0
    out = capsys.readouterr().out
    assert f"trace {complete.root_id}  (2 runs)" in out
    assert f"(parent {broken.root_id} missing)" in out
    assert cli.main(["runs", "check"]) == 1
    out = capsys.readouterr().out
    assert f"patched but never posted: {broken.root_id}" in out
    assert f"missing parent {broken.root_id} of {broken.child_id}" in out
    assert f"never completed (no end_time): {broken.child_id}" in out


def test_runs_tree_and_check_show_runs_that_are_their_own_ancestors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Found: a self-parented run made ``runs tree`` print "(2 runs)" and no run at all, and ``runs check`` nothing.

    Such runs are refused now (``own_parent``), but a database may hold them from
    before, or from ``--lenient``; and two runs naming each other pass every per-run rule.
    """
    db = tmp_path / "cycles.db"
    own, pair = Trace(), Trace()
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    at = {rid: entry(pair.child_start, rid) for rid in (a, b)}
    first = {**pair.child_post(), "id": a, "parent_run_id": b, "dotted_order": f"{pair.root_dotted}.{at[b]}.{at[a]}"}
    second = {**pair.child_post(), "id": b, "parent_run_id": a, "dotted_order": f"{pair.root_dotted}.{at[a]}.{at[b]}"}
    with LocalService(db=str(db), lenient=True) as svc:
        own_entry = entry(own.child_start, own.child_id)
        itself = {**own.child_post(), "parent_run_id": own.child_id, "dotted_order": f"{own.root_dotted}.{own_entry}.{own_entry}"}
        assert requests.post(svc.url + "/runs/batch", json={"post": [own.root_post(), itself]}, timeout=5).ok
    with LocalService(db=str(db), strict=True) as svc:  # strict: each of the two is a valid run on its own
        response = requests.post(svc.url + "/runs/batch", json={"post": [first, second]}, timeout=5)
        assert response.status_code == 202, response.text
    assert cli.main(["runs", "tree", own.root_id, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "(2 runs)" in out and "agent" in out
    assert f"\nllm  llm  -  open  (in a parent cycle: {own.child_id} is its own parent)" in out, out
    assert cli.main(["runs", "tree", pair.root_id, "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"trace {pair.root_id}  (2 runs)") and len(out) == 3, out  # both shown, neither twice
    assert "(in a parent cycle: " in out[1] and out[2].startswith("  llm  llm"), out  # the loop from its first run
    assert cli.main(["runs", "check", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert f"run {own.child_id} is its own parent" in out, out
    assert f"parent cycle: {a} -> {b} -> {a}" in out or f"parent cycle: {b} -> {a} -> {b}" in out, out


def test_runs_check_clean_and_missing_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "clean.db"
    with LocalService(db=str(db)):
        pass
    assert cli.main(["runs", "check", "--db", str(db)]) == 0
    assert capsys.readouterr().out == f"no problems found in {db}\n"
    assert cli.main(["runs", "list", "--db", str(tmp_path / "absent.db")]) == 1
    assert "no runs database" in capsys.readouterr().err
    assert not (tmp_path / "absent.db").exists()


def test_default_db_path() -> None:
    assert cli.default_db_path({"OTEL_RUNS_SERVER_DB": "/x/y.db"}) == "/x/y.db"
    assert cli.default_db_path({"XDG_DATA_HOME": "/data"}) == "/data/otel-runs/runs.db"
    assert cli.default_db_path({}).endswith(".local/share/otel-runs/runs.db")


def test_version_prints_the_installed_package_version() -> None:
    from importlib.metadata import version

    import otel_runs_exporter

    proc = subprocess.run(
        [sys.executable, "-m", "otel_runs_exporter.cli", "--version"], capture_output=True, text=True, timeout=20
    )
    assert proc.returncode == 0, proc.stderr
    build = "compiled with mypyc" if otel_runs_exporter.build_info()["compiled"] else "pure Python"
    assert proc.stdout == f"otel-runs {version('otel-runs-exporter')} ({build})\n"
    assert version("otel-runs-exporter") == otel_runs_exporter.__version__  # the two never drift apart
    assert proc.stderr == ""


@pytest.fixture
def many_traces_db(tmp_path: Path) -> Path:
    """A database the local service filled over HTTP with 3000 traces: far more output than a pipe holds."""
    db = tmp_path / "many.db"
    with LocalService(db=str(db)) as svc:
        for _ in range(6):  # /info's size_limit: 1,000 runs a request
            parts: list[bytes] = []
            for _ in range(500):
                trace = Trace()
                end = (trace.child_start + timedelta(seconds=1)).isoformat()
                parts += run_parts("post", trace.root_post() | {"end_time": end})
                parts += run_parts("post", trace.child_post() | {"end_time": end})
            assert post_multipart(svc, multipart(parts)).status_code == 202
    return db


def test_runs_list_piped_into_head_stops_quietly(many_traces_db: Path) -> None:
    """`otel-runs runs list | head -1`: the reader leaves early; no BrokenPipeError traceback, exit 141 like cat or yes."""
    writer = subprocess.Popen(
        [sys.executable, "-m", "otel_runs_exporter.cli", "runs", "list", "--limit", "0", "--db", str(many_traces_db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert writer.stdout is not None and writer.stderr is not None
    head = subprocess.Popen(["head", "-1"], stdin=writer.stdout, stdout=subprocess.PIPE)
    writer.stdout.close()  # only head holds the read end now, so its exit breaks the pipe
    try:
        first, _ = head.communicate(timeout=30)
        err = writer.stderr.read()
        writer.wait(timeout=30)
    finally:
        for proc in (writer, head):
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        writer.stderr.close()
    assert first.decode().startswith("TRACE ") and first.count(b"\n") == 1
    assert err == b"", err.decode()
    assert writer.returncode == cli.EXIT_BROKEN_PIPE == 141


def test_serve_and_runs_with_a_file_that_is_not_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database")
    assert cli.main(["serve", "--port", "0", "--db", str(bad)]) == 2
    assert capsys.readouterr().err == f"otel-runs serve: cannot use {bad} as a runs database: file is not a database\n"
    assert cli.main(["runs", "list", "--db", str(bad)]) == 1
    assert capsys.readouterr().err == f"otel-runs: cannot read {bad} as a runs database: file is not a database\n"
    assert bad.read_text() == "not a database"
