"""SQLite storage for the local service: runs, their merge, and the consistency report.

A post and its patches are kept apart (``post_data``, ``patch_data``) and merged
when read, so the result is the same whichever arrives first: the spec lets a
patch reach the service before its post. One connection guarded by a lock serves
every thread; that is what makes ``:memory:`` work across the server's threads,
and SQLite serialises writers anyway. A write commits before the service
answers 2xx, and WAL with ``synchronous=NORMAL`` survives the process being
killed right after.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from ._validate import RunOp, Violation

__all__ = ["RunStore", "ApplyResult", "merge_run"]

logger = logging.getLogger(__name__)

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    trace_id TEXT,
    parent_run_id TEXT,
    dotted_order TEXT,
    posted INTEGER NOT NULL DEFAULT 0,
    patched INTEGER NOT NULL DEFAULT 0,
    extra_posts INTEGER NOT NULL DEFAULT 0,
    post_data TEXT,
    patch_data TEXT,
    first_seen REAL NOT NULL,
    seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_trace ON runs (trace_id, dotted_order);
CREATE TABLE IF NOT EXISTS violations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT,
    rule TEXT NOT NULL,
    msg TEXT NOT NULL,
    loc TEXT NOT NULL,
    path TEXT,
    accepted INTEGER NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS feedback (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT,
    data TEXT NOT NULL
);
"""

# Fields that hold a nested object a patch adds to rather than replaces.
_MERGED_OBJECTS = ("extra",)


def _merge_into(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in update.items():
        if value is None and key in base:
            continue  # a patch that omits a field must not erase what the post said
        if key in _MERGED_OBJECTS and isinstance(value, dict) and isinstance(base.get(key), dict):
            merged = dict(base[key])
            for sub, sub_value in value.items():
                if isinstance(sub_value, dict) and isinstance(merged.get(sub), dict):
                    merged[sub] = {**merged[sub], **sub_value}
                else:
                    merged[sub] = sub_value
            base[key] = merged
        else:
            base[key] = value
    return base


def merge_run(post: Mapping[str, Any] | None, patch: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run as the service shows it: the post's fields overlaid by the patches'."""
    merged: dict[str, Any] = dict(post or {})
    if patch:
        _merge_into(merged, patch)
    return merged


@dataclass
class ApplyResult:
    """What storing one request's ops did."""

    posted: list[str] = field(default_factory=list)
    patched: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


class RunStore:
    """Runs in one SQLite database; every method is safe to call from any thread.

    >>> store = RunStore(":memory:")
    >>> store.count()
    0
    >>> store.close()
    """

    def __init__(self, path: str | Path = ":memory:", *, create: bool = True) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            db_path = Path(self.path)
            if not create and not db_path.exists():
                raise FileNotFoundError(f"no runs database at {self.path}")
            db_path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=10.0
        )
        with self._lock:
            conn = self._conn
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                conn.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
            elif version != _SCHEMA_VERSION:
                raise RuntimeError(
                    f"runs database {self.path} has schema version {version}, this version reads {_SCHEMA_VERSION}"
                )
        self._seq = self._max_seq()

    # --- lifecycle ---------------------------------------------------------------

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("the run store is closed")
        return self._conn

    def close(self) -> None:
        """Close the database; later calls raise RuntimeError."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _max_seq(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM runs").fetchone()[0])

    # --- writes -----------------------------------------------------------------

    def apply(self, ops: Iterable[RunOp], feedback: Iterable[Mapping[str, Any]] = ()) -> ApplyResult:
        """Store one request's posts and patches in one transaction (all or nothing)."""
        result = ApplyResult()
        now = time.time()
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                for op in ops:
                    self._apply_one(db, op, now, result)
                for item in feedback:
                    db.execute(
                        "INSERT INTO feedback (run_id, data) VALUES (?, ?)", (item.get("run_id"), _dumps(dict(item)))
                    )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            self._changed.notify_all()
        return result

    def _apply_one(self, db: sqlite3.Connection, op: RunOp, now: float, result: ApplyResult) -> None:
        row = db.execute(
            "SELECT posted, post_data, patch_data FROM runs WHERE id = ?", (op.run_id,)
        ).fetchone()
        if op.kind == "post":
            if row is not None and row[0]:
                # A retry of a post whose answer was lost: keep the first, count the rest.
                db.execute("UPDATE runs SET extra_posts = extra_posts + 1 WHERE id = ?", (op.run_id,))
                result.duplicates.append(op.run_id)
                return
            patch = orjson.loads(row[2]) if row is not None and row[2] else None
            ids = merge_run(op.data, patch)
            if row is None:
                self._seq += 1
                db.execute(
                    "INSERT INTO runs (id, trace_id, parent_run_id, dotted_order, posted, post_data, first_seen, seq)"
                    " VALUES (?, ?, ?, ?, 1, ?, ?, ?)",
                    (op.run_id, ids.get("trace_id"), ids.get("parent_run_id"), ids.get("dotted_order"),
                     _dumps(op.data), now, self._seq),
                )
            else:
                db.execute(
                    "UPDATE runs SET posted = 1, post_data = ?, trace_id = ?, parent_run_id = ?, dotted_order = ?"
                    " WHERE id = ?",
                    (_dumps(op.data), ids.get("trace_id"), ids.get("parent_run_id"), ids.get("dotted_order"),
                     op.run_id),
                )
            result.posted.append(op.run_id)
            return
        previous = orjson.loads(row[2]) if row is not None and row[2] else {}
        patch = _merge_into(previous, op.data)
        if row is None:
            self._seq += 1
            db.execute(
                "INSERT INTO runs (id, trace_id, parent_run_id, dotted_order, patched, patch_data, first_seen, seq)"
                " VALUES (?, ?, ?, ?, 1, ?, ?, ?)",
                (op.run_id, patch.get("trace_id"), patch.get("parent_run_id"), patch.get("dotted_order"),
                 _dumps(patch), now, self._seq),
            )
        else:
            post = orjson.loads(row[1]) if row[1] else None
            ids = merge_run(post, patch)
            db.execute(
                "UPDATE runs SET patched = 1, patch_data = ?, trace_id = ?, parent_run_id = ?, dotted_order = ?"
                " WHERE id = ?",
                (_dumps(patch), ids.get("trace_id"), ids.get("parent_run_id"), ids.get("dotted_order"), op.run_id),
            )
        result.patched.append(op.run_id)

    def record_violations(self, violations: Iterable[Violation], *, path: str, accepted: bool) -> None:
        """Keep violations so ``runs check`` can show what a lenient service let through."""
        now = time.time()
        rows = [
            (v.run_id, v.rule, v.msg, _dumps(list(v.loc)), path, int(accepted), now) for v in violations
        ]
        if not rows:
            return
        with self._lock:
            self._db.executemany(
                "INSERT INTO violations (run_id, rule, msg, loc, path, accepted, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def reset(self) -> None:
        """Delete every run, violation and feedback item."""
        with self._lock:
            self._db.executescript("DELETE FROM runs; DELETE FROM violations; DELETE FROM feedback;")
            self._seq = 0
            self._changed.notify_all()

    # --- reads ------------------------------------------------------------------

    def _rows(self, where: str = "", args: tuple[Any, ...] = (), order: str = "seq") -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT id, posted, patched, extra_posts, post_data, patch_data FROM runs {where} ORDER BY {order}",
                args,
            ).fetchall()
        out = []
        for run_id, posted, patched, _extra, post_data, patch_data in rows:
            run = merge_run(
                orjson.loads(post_data) if post_data else None, orjson.loads(patch_data) if patch_data else None
            )
            run["id"] = run_id
            run["_posted"] = bool(posted)
            run["_patched"] = bool(patched)
            out.append(run)
        return out

    @staticmethod
    def _public(run: dict[str, Any]) -> dict[str, Any]:
        run.pop("_posted", None)
        run.pop("_patched", None)
        return run

    def runs(self, *, trace_id: str | None = None) -> list[dict[str, Any]]:
        """Posted runs, merged with their patches, in order of arrival (or tree order for one trace)."""
        if trace_id is not None:
            rows = self._rows("WHERE posted = 1 AND trace_id = ?", (trace_id,), order="dotted_order, seq")
        else:
            rows = self._rows("WHERE posted = 1")
        return [self._public(r) for r in rows]

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        """One posted run, merged, or None."""
        rows = self._rows("WHERE id = ? AND posted = 1", (run_id,))
        return self._public(rows[0]) if rows else None

    def count(self, *, completed: bool = False) -> int:
        """Number of posted runs (with an end_time when ``completed``)."""
        return len(self.completed_runs()) if completed else len(self.runs())

    def completed_runs(self) -> list[dict[str, Any]]:
        """Posted runs that have an end_time, from the post or a patch."""
        return [r for r in self.runs() if r.get("end_time") is not None]

    def trace_ids(self) -> list[str]:
        """Trace ids in order of their first run's arrival."""
        with self._lock:
            rows = self._db.execute(
                "SELECT trace_id FROM runs WHERE trace_id IS NOT NULL GROUP BY trace_id ORDER BY MIN(seq)"
            ).fetchall()
        return [r[0] for r in rows]

    def duplicate_posts(self) -> dict[str, int]:
        """run id -> number of posts beyond the first."""
        with self._lock:
            rows = self._db.execute("SELECT id, extra_posts FROM runs WHERE extra_posts > 0 ORDER BY seq").fetchall()
        return {r[0]: r[1] for r in rows}

    def violations(self) -> list[dict[str, Any]]:
        """Every recorded violation, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT run_id, rule, msg, loc, path, accepted, at FROM violations ORDER BY seq"
            ).fetchall()
        return [
            {
                "run_id": r[0],
                "rule": r[1],
                "msg": r[2],
                "loc": orjson.loads(r[3]),
                "path": r[4],
                "accepted": bool(r[5]),
                "at": datetime.fromtimestamp(r[6], tz=timezone.utc).isoformat(),
            }
            for r in rows
        ]

    def feedback(self) -> list[dict[str, Any]]:
        """Feedback items received in multipart requests."""
        with self._lock:
            rows = self._db.execute("SELECT data FROM feedback ORDER BY seq").fetchall()
        return [orjson.loads(r[0]) for r in rows]

    def check(self) -> dict[str, list[Any]]:
        """Consistency report: runs patched but never posted, never completed, and parents that never arrived.

        Also lists violations a lenient service accepted, since those runs are stored
        but would have been refused by the real service.
        """
        rows = self._rows()
        posted = {r["id"] for r in rows if r["_posted"]}
        report: dict[str, list[Any]] = {
            "patched_not_posted": [],
            "never_completed": [],
            "missing_parents": [],
            "accepted_violations": [],
        }
        missing: dict[str, list[str]] = {}
        for run in rows:
            if not run["_posted"]:
                report["patched_not_posted"].append(run["id"])
                continue
            if run.get("end_time") is None:
                report["never_completed"].append(run["id"])
            parent = run.get("parent_run_id")
            if parent and parent not in posted:
                missing.setdefault(parent, []).append(run["id"])
        report["missing_parents"] = [{"parent_run_id": p, "children": c} for p, c in missing.items()]
        report["accepted_violations"] = [v for v in self.violations() if v["accepted"]]
        return report

    def wait(self, predicate: Any, timeout: float) -> bool:
        """Block until ``predicate()`` is true or ``timeout`` passes; re-checked after each write."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True
