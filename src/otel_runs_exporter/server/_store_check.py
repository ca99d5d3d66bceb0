"""The local service's consistency report, from the store's index columns.

Runs patched but never posted, posted but never completed, parents that never
arrived, runs that are their own ancestors, and the violations a lenient service
accepted (stored, but the real service would have refused them). Functions over the
store's connection, called by :class:`~._store.RunStore` with its lock held.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import orjson

from ._validate import parent_cycles

__all__ = ["report", "violation"]


def violation(row: Sequence[Any]) -> dict[str, Any]:
    """A ``violations`` row (run_id, rule, msg, loc, path, accepted, at) as the service shows it."""
    return {
        "run_id": row[0],
        "rule": row[1],
        "msg": row[2],
        "loc": orjson.loads(row[3]),
        "path": row[4],
        "accepted": bool(row[5]),
        "at": datetime.fromtimestamp(row[6], tz=timezone.utc).isoformat(),
    }


def report(db: sqlite3.Connection, limit: int | None = None) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """:meth:`check`'s lists, each cut to its first ``limit`` items (a parent's children too), and each list's
    whole length; from the index columns, so no run's JSON is read but that of a run with no end time."""
    cap = -1 if limit is None else limit  # SQLite: a negative LIMIT is none
    # A run's end time, as merged, when its index column has none (an end time it could not read: --lenient).
    ended = (
        "(r.end_time IS NOT NULL OR COALESCE(json_extract(r.patch_data, '$.end_time'),"
        " json_extract(r.post_data, '$.end_time')) IS NOT NULL)"
    )
    missing = (
        "FROM runs AS r WHERE r.posted = 1 AND r.parent_run_id IS NOT NULL AND r.parent_run_id != ''"
        " AND NOT EXISTS (SELECT 1 FROM runs AS p WHERE p.id = r.parent_run_id AND p.posted = 1)"
    )
    found_lists: dict[str, list[Any]] = {}
    counts: dict[str, int] = {}
    for name, where in (("patched_not_posted", "r.posted = 0"), ("never_completed", f"r.posted = 1 AND NOT {ended}")):
        found_lists[name] = [row[0] for row in db.execute(f"SELECT r.id FROM runs AS r WHERE {where} ORDER BY r.seq LIMIT ?", (cap,))]
        counts[name] = db.execute(f"SELECT COUNT(*) FROM runs AS r WHERE {where}").fetchone()[0]
    children: dict[str, list[str]] = {}
    for parent, child in db.execute(f"SELECT r.parent_run_id, r.id {missing} ORDER BY r.seq"):
        if parent not in children and limit is not None and len(children) >= limit:
            continue
        found = children.setdefault(parent, [])
        if limit is None or len(found) < limit:
            found.append(child)
    counts["missing_parents"] = db.execute(f"SELECT COUNT(DISTINCT r.parent_run_id) {missing}").fetchone()[0]
    parents = {
        row[0]: row[1]
        for row in db.execute(
            "SELECT id, parent_run_id FROM runs WHERE posted = 1 AND parent_run_id IS NOT NULL ORDER BY seq"
        )
    }
    accepted = db.execute(
        "SELECT run_id, rule, msg, loc, path, accepted, at FROM violations WHERE accepted = 1 ORDER BY seq LIMIT ?",
        (cap,),
    ).fetchall()
    counts["accepted_violations"] = db.execute("SELECT COUNT(*) FROM violations WHERE accepted = 1").fetchone()[0]
    found_lists["missing_parents"] = [{"parent_run_id": p, "children": c} for p, c in children.items()]
    cycles = [{"run_ids": cycle} for cycle in parent_cycles(parents)]
    found_lists["parent_cycles"] = cycles if limit is None else cycles[:limit]
    counts["parent_cycles"] = len(cycles)
    found_lists["accepted_violations"] = [violation(row) for row in accepted]
    order = ("patched_not_posted", "never_completed", "missing_parents", "parent_cycles", "accepted_violations")
    return {name: found_lists[name] for name in order}, {name: counts[name] for name in order}
