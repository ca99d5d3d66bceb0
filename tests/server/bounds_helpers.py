"""A database of large runs made cheaply, and ``otel-runs serve`` on it under an address-space limit.

Importable without pytest, so ``bench/`` or a scratch script can measure with the same pieces.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson

from otel_runs_exporter.server._store import RunStore
from otel_runs_exporter.server._validate import RunOp

GiB = 1 << 30
MiB = 1 << 20


def seed_large_runs(db: Path, sizes: Sequence[int], project: str = "large") -> list[str]:
    """``len(sizes)`` root runs of project ``project`` in ``db``, each with ``inputs.text`` of that many bytes; their ids.

    Each run is stored small through the store (its index columns, its project), then given its
    large inputs by SQL with the search index's triggers set aside: indexing costs ~25 ms a MB,
    and these tests never search. (So the index lacks the large text.)
    """
    start = datetime.now(timezone.utc) - timedelta(minutes=30)
    store = RunStore(db)
    ids, ops = [], []
    for i in range(len(sizes)):
        run_id = str(uuid.uuid4())
        at = start + timedelta(seconds=i)
        ops.append(RunOp("post", run_id, {
            "id": run_id, "trace_id": run_id, "dotted_order": at.strftime("%Y%m%dT%H%M%S%fZ") + run_id,
            "name": f"large-{i}", "run_type": "chain", "start_time": at.isoformat(),
            "end_time": (at + timedelta(seconds=1)).isoformat(), "inputs": {}, "session_name": project,
        }, ("body",)))
        ids.append(run_id)
    store.apply(ops)
    store.close()
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'runs_fts_%'").fetchall()
        conn.execute("BEGIN IMMEDIATE")
        for name, _ in triggers:
            conn.execute(f"DROP TRIGGER {name}")
        for (run_id, op), size in zip(zip(ids, ops), sizes):
            data = orjson.dumps({**op.data, "inputs": {"text": "x" * size}})
            conn.execute("UPDATE runs SET post_data = ?, size = ? WHERE id = ?", (data.decode(), len(data), run_id))
        for _, sql in triggers:
            conn.execute(sql)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return ids


@dataclass
class Limited:
    """``otel-runs serve`` in its own process under ``prlimit --as``: its address, pid and what it printed."""

    proc: subprocess.Popen[str]
    url: str
    lines: list[str] = field(default_factory=list)

    def peak_rss_mb(self) -> float:
        """The process's peak resident memory so far (``VmHWM``), in MB."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        found = re.search(r"VmHWM:\s+(\d+) kB", status)
        assert found is not None
        return int(found.group(1)) / 1024

    def alive(self) -> bool:
        return self.proc.poll() is None


def prlimit_available() -> str | None:
    """Why the address-space limit cannot be set here, or None."""
    if shutil.which("prlimit") is None:
        return "prlimit (util-linux) is not installed"
    if not Path("/proc/self/status").exists():
        return "no /proc to read a process's memory from"
    return None


@contextmanager
def serve_limited(db: Path, address_space: int = GiB, *args: str) -> Iterator[Limited]:
    """``otel-runs serve --db db --port 0`` under ``prlimit --as=address_space``, until the block ends."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        ["prlimit", f"--as={address_space}", "--", sys.executable, "-m", "otel_runs_exporter.cli", "serve",
         "--db", str(db), "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    lines: list[str] = []
    found: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if not found and line.startswith("Listening on "):
                found.append(line.split()[2])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 30
    while not found and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if not found:
        proc.kill()
        raise RuntimeError(f"otel-runs serve did not start under prlimit: {''.join(lines)[-2000:]}")
    limited = Limited(proc, found[0], lines)
    try:
        yield limited
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(5)
