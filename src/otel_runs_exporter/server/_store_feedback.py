"""The local service's feedback in SQLite: one row per item, its JSON and the columns it is found by.

Functions over the store's connection, called by :class:`~._store.RunStore` with its
lock held (inside its write transaction for :func:`insert`). An item is kept as the
JSON :mod:`._feedback` checked; the columns (``id``, ``run_id``, ``trace_id``,
``session_id``, ``key``, ``score``, ``source``) mirror it for lookups and filters.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from ._store_schema import dumps, now_iso
from ._validate import canonical_id

__all__ = ["insert", "get", "update", "delete", "listing", "of_runs", "backfill"]

_COLUMNS = "run_id, data, id, trace_id, session_id, key, score, source"


def _row(item: Mapping[str, Any]) -> tuple[Any, ...]:
    score = item.get("score")
    source = item.get("feedback_source")
    return (
        canonical_id(item.get("run_id")) or item.get("run_id"),
        dumps(dict(item), large=True),
        canonical_id(item.get("id")),
        canonical_id(item.get("trace_id")),
        canonical_id(item.get("session_id")),
        item.get("key") if isinstance(item.get("key"), str) else None,
        float(score) if isinstance(score, (int, float)) else None,
        source.get("type") if isinstance(source, dict) and isinstance(source.get("type"), str) else None,
    )


def insert(db: sqlite3.Connection, items: Iterable[Mapping[str, Any]]) -> None:
    """Keep each item; one whose id is kept already is a retry, and ignored (the first wins)."""
    for item in items:
        db.execute(f"INSERT OR IGNORE INTO feedback ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", _row(item))


def get(db: sqlite3.Connection, feedback_id: str) -> dict[str, Any] | None:
    row = db.execute("SELECT data FROM feedback WHERE id = ?", (feedback_id,)).fetchone()
    return orjson.loads(row[0]) if row else None


def update(db: sqlite3.Connection, feedback_id: str, changes: Mapping[str, Any]) -> dict[str, Any] | None:
    """Replace the given fields of one item (a null clears one) and its ``modified_at``; the item, or None."""
    item = get(db, feedback_id)
    if item is None:
        return None
    item.update(changes)
    item["modified_at"] = now_iso()
    db.execute(
        f"UPDATE feedback SET ({_COLUMNS}) = (?, ?, ?, ?, ?, ?, ?, ?) WHERE id = ?", (*_row(item), feedback_id)
    )
    return item


def delete(db: sqlite3.Connection, feedback_id: str) -> bool:
    return db.execute("DELETE FROM feedback WHERE id = ?", (feedback_id,)).rowcount > 0


def _in(column: str, values: Sequence[str] | None, where: list[str], args: list[Any]) -> None:
    if values is not None:
        where.append(f"{column} IN ({', '.join('?' * len(values))})" if values else "0")
        args.extend(values)


def listing(
    db: sqlite3.Connection,
    *,
    runs: Sequence[str] | None = None,
    traces: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    sources: Sequence[str] | None = None,
    sessions: Sequence[str] | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Items matching every given list, oldest first. An item is in a trace when it names the trace, its root (whose
    id is the trace's) or a run of it: ``POST /feedback`` need not say the trace, nor its run have arrived."""
    where: list[str] = []
    args: list[Any] = []
    _in("f.run_id", runs, where, args)
    if traces is not None:
        marks = ", ".join("?" * len(traces)) or "NULL"
        where.append(
            f"(f.trace_id IN ({marks}) OR f.run_id IN ({marks})"
            f" OR f.run_id IN (SELECT t.id FROM runs AS t WHERE t.trace_id IN ({marks})))"
        )
        args += [*traces, *traces, *traces]
    _in("f.key", keys, where, args)
    _in("f.source", sources, where, args)
    _in("f.session_id", sessions, where, args)
    sql = f"SELECT f.data FROM feedback AS f WHERE {' AND '.join(where) or '1'} ORDER BY f.seq LIMIT ? OFFSET ?"
    return [orjson.loads(row[0]) for row in db.execute(sql, (*args, limit, offset))]


def of_runs(db: sqlite3.Connection, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """run id -> its items, oldest first, for the runs that have any."""
    out: dict[str, list[dict[str, Any]]] = {}
    if not run_ids:
        return out
    rows = db.execute(
        f"SELECT run_id, data FROM feedback WHERE run_id IN ({', '.join('?' * len(run_ids))}) ORDER BY seq",
        list(run_ids),
    )
    for run_id, data in rows:
        out.setdefault(run_id, []).append(orjson.loads(data))
    return out


def backfill(db: sqlite3.Connection) -> None:
    """Fill the columns of items kept before version 3, and write their run ids hyphenated.

    An id kept twice (a multipart retry the old schema let through) is found by its first item only.
    """
    seen: set[str] = set()
    for seq, data in db.execute("SELECT seq, data FROM feedback WHERE id IS NULL ORDER BY seq").fetchall():
        try:
            item = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(item, dict):
            continue
        row = list(_row(item))
        feedback_id = row[2]
        if feedback_id in seen or (
            feedback_id and db.execute("SELECT 1 FROM feedback WHERE id = ?", (feedback_id,)).fetchone()
        ):
            row[2] = None
        elif feedback_id:
            seen.add(feedback_id)
        db.execute(
            "UPDATE feedback SET run_id = ?, id = ?, trace_id = ?, session_id = ?, key = ?, score = ?, source = ?"
            " WHERE seq = ?",
            (row[0], *row[2:], seq),
        )
