"""Issue 38, the local service's writes: a full disk, a database locked by another process, files only the user
reads, and ``Expect: 100-continue`` answered only once the key is checked."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from otel_runs_exporter.server import LocalService

KEY = "k-38"


def _run(name: str = "r") -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "name": name, "run_type": "chain", "start_time": "2025-03-01T12:00:00Z",
            "inputs": {}, "session_name": "faults"}


def test_the_database_its_wal_and_shm_and_the_directories_made_for_it_are_private(tmp_path: Path) -> None:
    """Before: 0644 files and 0755 directories (umask 022): any local user read every prompt."""
    old = os.umask(0o022)
    try:
        there = tmp_path / "there"
        there.mkdir(mode=0o755)
        db = there / "made" / "for" / "runs.db"
        with LocalService(db=str(db)) as svc:
            assert requests.post(svc.url + "/runs", json=_run(), timeout=5).status_code == 202
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm"))}
            dirs = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (db.parent, db.parent.parent)}
    finally:
        os.umask(old)
    assert modes == {"runs.db": 0o600, "runs.db-wal": 0o600, "runs.db-shm": 0o600}
    assert dirs == {"for": 0o700, "made": 0o700}
    assert stat.S_IMODE(there.stat().st_mode) == 0o755  # a directory that was there is left as it was


def test_an_existing_database_others_can_read_is_left_as_it_is_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A database the user made is not chmod-ed behind their back; a file that is no database is refused
    with its own error, not warned about (the demo's test says how it is refused)."""
    from otel_runs_exporter.server._store import RunStore

    made = tmp_path / "made.db"
    RunStore(str(made)).close()
    os.chmod(made, 0o644)
    empty = tmp_path / "empty.db"  # SQLite makes a database of an empty file: others could read it too
    empty.touch(mode=0o644)
    os.chmod(empty, 0o644)
    with caplog.at_level("WARNING", logger="otel_runs_exporter"):
        for path in (made, empty):
            RunStore(str(path)).close()
            assert stat.S_IMODE(path.stat().st_mode) == 0o644
    said = [r.getMessage() for r in caplog.records if "can be read by other users" in r.getMessage()]
    assert len(said) == 2 and str(made) in said[0] and "mode 644" in said[0] and str(empty) in said[1]


def test_otel_runs_demo_db_makes_a_private_database(tmp_path: Path) -> None:
    db = tmp_path / "demo" / "runs.db"
    done = subprocess.run([sys.executable, "-m", "otel_runs_exporter.cli", "demo", "--db", str(db)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert stat.S_IMODE(db.stat().st_mode) == 0o600 and stat.S_IMODE(db.parent.stat().st_mode) == 0o700


def _expect_continue(svc: LocalService, key: str | None, length: int | None = None) -> bytes:
    """A POST that asks ``Expect: 100-continue``, sending its body only if told to: what came back first."""
    body = json.dumps({"post": [], "patch": []}).encode()
    head = (
        f"POST /runs/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length or len(body)}\r\nExpect: 100-continue\r\n"
        + (f"x-api-key: {key}\r\n" if key else "") + "\r\n"
    )
    with socket.create_connection(("127.0.0.1", svc.port), timeout=5) as sock:
        sock.sendall(head.encode())
        first = sock.recv(65536)
        if first.startswith(b"HTTP/1.1 100"):
            sock.sendall(body)
            first += sock.recv(65536)
        return first


def test_expect_100_continue_is_answered_only_after_the_key_is_checked() -> None:
    """Before: ``100 Continue`` as soon as the head was read, before anything was checked."""
    with LocalService(api_key=KEY) as svc:
        refused = _expect_continue(svc, None)
        assert refused.startswith(b"HTTP/1.1 401") and b"100 Continue" not in refused
        assert b"Connection: close" in refused  # never told to go on, the client may or may not send its body
        wrong = _expect_continue(svc, "nope")
        assert wrong.startswith(b"HTTP/1.1 401")
        taken = _expect_continue(svc, KEY)
        assert taken.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202"), taken[:200]
        too_large = _expect_continue(svc, KEY, length=svc.max_body_bytes + 1)
        assert too_large.startswith(b"HTTP/1.1 413"), too_large[:200]  # not told to send 20 MiB to be refused


def test_a_database_locked_by_another_process_is_a_503_with_retry_after(tmp_path: Path) -> None:
    """Before: a 500 after 10 s, with a traceback, while every other request waited behind it."""
    db = tmp_path / "runs.db"
    with LocalService(db=str(db)) as svc:
        assert requests.post(svc.url + "/runs", json=_run(), timeout=5).status_code == 202
        holder = subprocess.Popen(
            [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None);"
             " c.execute('BEGIN IMMEDIATE'); print('held', flush=True); sys.stdin.read()", str(db)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            locked = requests.post(svc.url + "/runs", json=_run(), timeout=30)
            assert locked.status_code == 503 and locked.headers["Retry-After"] == "1", locked.text
            assert "locked by another process" in locked.json()["detail"]
            assert requests.post(svc.url + "/runs/query", json={"select": ["name"]}, timeout=30).status_code == 200
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(10)
        assert requests.post(svc.url + "/runs", json=_run(), timeout=5).status_code == 202
        assert len(svc.runs()) == 2


_FULL_DISK = textwrap.dedent('''
    import io, json, logging, os, sys, uuid
    import requests
    from otel_runs_exporter.server import LocalService

    root = sys.argv[1]
    log = io.StringIO()
    logging.basicConfig(stream=log, level=logging.INFO, format="%(levelname)s %(name)s %(message)s")

    def post(svc, size):
        run = {"id": str(uuid.uuid4()), "name": "x", "run_type": "chain", "start_time": "2025-03-01T12:00:00Z",
               "inputs": {"text": "y" * size}, "session_name": "full"}
        return requests.post(svc.url + "/runs", json=run, timeout=30)

    out = {}
    with LocalService(db=os.path.join(root, "runs.db")) as svc:
        out["before"] = post(svc, 100).status_code
        filler = os.path.join(root, "filler")
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\\0" * 65536)
                    f.flush()
            except OSError as exc:
                out["filled"] = exc.errno
        full = [post(svc, 200_000) for _ in range(3)]
        out["full"] = [(r.status_code, r.headers.get("Retry-After"), r.json().get("detail")) for r in full]
        out["read"] = requests.post(svc.url + "/runs/query", json={"select": ["name"]}, timeout=30).status_code
        os.remove(filler)
        out["after"] = post(svc, 200_000).status_code
        out["stored"] = len(svc.runs())
    out["log"] = log.getvalue()
    print(json.dumps(out))
''')


def _namespaced_tmpfs() -> str | None:
    """Why a small tmpfs cannot be mounted here (unprivileged user and mount namespaces), or None."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"], capture_output=True)
    return None if probe.returncode == 0 else f"cannot mount a tmpfs in a user namespace: {probe.stderr.decode()[:200]}"


def test_a_full_disk_is_a_503_with_retry_after_one_log_line_and_no_traceback(tmp_path: Path) -> None:
    """A real full disk: the service's database on a 4 MB tmpfs (in a user namespace of its own), filled up.

    Before: a 500 with two chained tracebacks per request (the failed write's, then ROLLBACK's
    "cannot rollback - no transaction is active": SQLite had already rolled back).
    """
    why = _namespaced_tmpfs()
    if why is not None:
        pytest.skip(why)
    mount = tmp_path / "disk"
    mount.mkdir()
    script = tmp_path / "full_disk.py"
    script.write_text(_FULL_DISK)
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size=4m tmpfs "{mount}" && exec "{sys.executable}" "{script}" "{mount}"'],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["before"] == 202 and out["filled"] == 28  # ENOSPC
    assert [(status, retry) for status, retry, _ in out["full"]] == [(503, "10")] * 3
    assert "disk holding the runs database is full" in out["full"][0][2]
    assert out["read"] == 200 and out["after"] == 202 and out["stored"] == 2  # recovered once space was freed
    said = [line for line in out["log"].splitlines() if "is full" in line]
    assert len(said) == 1 and said[0].startswith("WARNING"), out["log"]
    assert "Traceback" not in out["log"] and "takes writes again" in out["log"]
