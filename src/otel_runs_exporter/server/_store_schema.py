"""What the local service's store keeps: the SQLite schema, how a post and its patches merge, and time as text.

Pure pieces shared by :mod:`._store` (the runs) and :mod:`._store_projects` (the
projects): no connection is opened here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson

from .._cost import usage_of
from ._validate import canonical_id, parse_timestamp

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "INDEX_COLUMNS",
    "FEEDBACK_COLUMNS",
    "add_columns",
    "RUN_INDEX_SET",
    "RUN_INDEX_NAMES",
    "ApplyResult",
    "QueriedRun",
    "RunSummary",
    "merge_run",
    "merge_into",
    "sortable_time",
    "now_iso",
    "dumps",
    "index_values",
]

SCHEMA_VERSION = 3
# Columns of ``runs`` that only mirror the merged run, for the read API's filters.
# Version 1 databases get them (and the projects table) added and filled on open.
INDEX_COLUMNS: tuple[tuple[str, str], ...] = (
    ("project_id", "TEXT"),
    ("name", "TEXT"),
    ("run_type", "TEXT"),
    ("start_time", "TEXT"),
    ("end_time", "TEXT"),
    ("latency", "REAL"),
    ("error", "TEXT"),
    ("tags", "TEXT"),
    ("metadata", "TEXT"),
    ("reference_example_id", "TEXT"),
    # A model run's model (what ran, else what was asked for: _cost.usage_of), the names to price it by (JSON),
    # its provider and tokens: the filters, the stats and the charts add them up in SQL.
    ("model", "TEXT"),
    ("models", "TEXT"),
    ("provider", "TEXT"),
    ("prompt_tokens", "INTEGER"),
    ("completion_tokens", "INTEGER"),
    ("total_tokens", "INTEGER"),
    ("cache_read_tokens", "INTEGER"),
    ("reasoning_tokens", "INTEGER"),
)
SCHEMA = """
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
    seq INTEGER NOT NULL,
    project_id TEXT,
    name TEXT,
    run_type TEXT,
    start_time TEXT,
    end_time TEXT,
    latency REAL,
    error TEXT,
    tags TEXT,
    metadata TEXT,
    reference_example_id TEXT,
    model TEXT,
    models TEXT,
    provider TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    total_tokens INTEGER,
    cache_read_tokens INTEGER,
    reasoning_tokens INTEGER
);
CREATE INDEX IF NOT EXISTS runs_by_trace ON runs (trace_id, dotted_order);
CREATE INDEX IF NOT EXISTS runs_by_project ON runs (project_id, start_time);
-- A project's traces newest first (the viewer's list, runs list): its roots in the order query_runs sorts by, so a
-- page of them is read off the index, and a filter on their trees stops at the page instead of sorting every root.
CREATE INDEX IF NOT EXISTS runs_roots_by_project ON runs (project_id, COALESCE(start_time, ''), seq)
    WHERE parent_run_id IS NULL;
-- The search index (_store_search) names runs by seq.
CREATE INDEX IF NOT EXISTS runs_by_seq ON runs (seq);
-- Exactly the order query_runs sorts by, so a trace's pages (the viewer reads a 10,000-run
-- trace 100 at a time) come off the index instead of sorting the whole trace for each page.
CREATE INDEX IF NOT EXISTS runs_by_trace_start ON runs (trace_id, COALESCE(start_time, ''), seq);
CREATE TABLE IF NOT EXISTS projects (
    id TEXT PRIMARY KEY,
    name TEXT UNIQUE,
    description TEXT,
    extra TEXT,
    reference_dataset_id TEXT,
    start_time TEXT NOT NULL,
    end_time TEXT,
    created INTEGER NOT NULL,
    seq INTEGER NOT NULL
);
-- Projects list newest first, and a new project's seq is one past the largest.
CREATE INDEX IF NOT EXISTS projects_by_seq ON projects (seq);
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
    data TEXT NOT NULL,
    id TEXT,
    trace_id TEXT,
    session_id TEXT,
    key TEXT,
    score REAL,
    source TEXT
);
-- One item per id: a second create of the same id (a retry) is ignored. Feedback is read by its
-- run (the viewer's trees, list_feedback(run_ids=), feedback filters) and by its trace.
CREATE UNIQUE INDEX IF NOT EXISTS feedback_by_id ON feedback (id);
CREATE INDEX IF NOT EXISTS feedback_by_run ON feedback (run_id, key);
CREATE INDEX IF NOT EXISTS feedback_by_trace ON feedback (trace_id);
-- The bytes of multipart attachment.<run_id>.<name> parts; added without a version change,
-- since a database without the table simply has no attachments.
CREATE TABLE IF NOT EXISTS attachments (
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    content_type TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, name)
);
"""
FEEDBACK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "TEXT"),
    ("trace_id", "TEXT"),
    ("session_id", "TEXT"),
    ("key", "TEXT"),
    ("score", "REAL"),
    ("source", "TEXT"),
)
"""Columns of ``feedback`` that mirror its JSON (version 3): a version 2 database gets them added and filled."""
RUN_INDEX_SET = ", ".join(f"{name} = ?" for name, _ in INDEX_COLUMNS)
RUN_INDEX_NAMES = ", ".join(name for name, _ in INDEX_COLUMNS)


def _sortable(moment: datetime | None) -> str | None:
    # isoformat rather than strftime: several times faster, and this runs for every stored run.
    return None if moment is None else moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def sortable_time(value: Any) -> str | None:
    """An ISO 8601 timestamp as fixed-width UTC text, so SQL compares and sorts it as text.

    >>> sortable_time("2025-03-01T13:00:00.5+01:00")
    '2025-03-01T12:00:00.500000Z'
    """
    return _sortable(parse_timestamp(value))


def merge_into(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Overlay a patch: each field it carries replaces the stored one, ``extra`` and
    the inputs, outputs and events included, as a whole.

    A client sends in its patch the run as it is at the end (the service's SDK
    sends its whole ``extra`` again), so a key its post guessed must be able to
    go; a union could only add. A field sent as null is one the client left out
    (the SDK's ``inputs=None`` when it excludes them), not an erasure.
    """
    for key, value in update.items():
        if value is None and key in base:
            continue
        base[key] = value
    return base


def merge_run(post: Mapping[str, Any] | None, patch: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run as the service shows it: the post's fields overlaid by the patches'."""
    merged: dict[str, Any] = dict(post or {})
    if patch:
        merge_into(merged, patch)
    if post is not None and "inputs" not in merged:
        # Clients leave out an empty inputs part (spec 4.4: parts are "sent only when
        # present"); the service's runs always have inputs, as the SDK's Run model requires.
        merged["inputs"] = {}
    return merged


@dataclass


class ApplyResult:
    """What storing one request's ops did."""

    posted: list[str] = field(default_factory=list)
    patched: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)


@dataclass(frozen=True)


class QueriedRun:
    """One run found by :meth:`RunStore.query_runs`: the merged run, its project, and where a next page starts."""

    run: dict[str, Any]
    project_id: str | None
    position: tuple[str, int]


@dataclass(frozen=True)


class RunSummary:
    """What :meth:`RunStore.summarize` found: counts from the index columns, and the few runs that report tokens."""

    count: int
    errors: int
    last_start_time: str | None
    latencies: list[float]
    token_runs: list[dict[str, Any]]


def dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def now_iso() -> str:
    return _sortable(datetime.now(timezone.utc)) or ""


def index_values(merged: Mapping[str, Any], project_id: str | None) -> tuple[Any, ...]:
    """The values of ``INDEX_COLUMNS`` for one merged run, in that order."""
    begun, ended = parse_timestamp(merged.get("start_time")), parse_timestamp(merged.get("end_time"))
    latency = (ended - begun).total_seconds() if begun is not None and ended is not None else None
    name, run_type, error = merged.get("name"), merged.get("run_type"), merged.get("error")
    tags = merged.get("tags")
    extra = merged.get("extra")
    metadata = extra.get("metadata") if isinstance(extra, dict) else None
    usage = usage_of(merged)
    counted = usage.input is not None or usage.output is not None or usage.total is not None
    return (
        project_id,
        name if isinstance(name, str) else None,
        run_type if isinstance(run_type, str) else None,
        _sortable(begun),
        _sortable(ended),
        latency,
        # A lenient service may hold an error that is not text; a filter still sees that there is one.
        None if error is None else error if isinstance(error, str) else dumps(error),
        dumps(tags) if isinstance(tags, list) else None,
        dumps(metadata) if isinstance(metadata, dict) else None,
        canonical_id(merged.get("reference_example_id")),
        usage.model,
        dumps(list(usage.models)) if usage.models else None,
        usage.provider,
        usage.input,
        usage.output,
        usage.total if usage.total is not None else (usage.input or 0) + (usage.output or 0) if counted else None,
        usage.cache_read or None,
        usage.reasoning or None,
    )


def add_columns(db: sqlite3.Connection, table: str, columns: Sequence[tuple[str, str]]) -> list[str]:
    """Add the ``columns`` a table of an older database lacks; their names.

    Each ALTER commits on its own, so an upgrade cut short leaves some columns behind: only the rest are added.
    """
    present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    if not present:
        return []  # no table yet: the schema script creates it whole
    added = [name for name, _ in columns if name not in present]
    for name, kind in columns:
        if name in added:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
    return added
