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

from .._cost import Cost, PriceTable, Usage, usage_of
from ._jsonio import dump, loads
from ._store_disk import transaction
from ._validate import canonical_id, parse_timestamp

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "INDEX_COLUMNS",
    "FEEDBACK_COLUMNS",
    "add_columns",
    "loads",
    "RUN_INDEX_SET",
    "RUN_INDEX_NAMES",
    "ApplyResult",
    "QueriedRun",
    "RunSummary",
    "USAGE_FIELDS",
    "USAGE_SUMS",
    "usage_totals",
    "merge_run",
    "merge_into",
    "merge_extra",
    "sortable_time",
    "now_iso",
    "dumps",
    "index_values",
    "usage_values",
    "reprice",
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
    # What it cost (USD): carried by the run, else its tokens at the price table's (_cost); null: no price.
    # ``priced_as`` names the table's row, or "carried".
    ("prompt_cost", "REAL"),
    ("completion_cost", "REAL"),
    ("total_cost", "REAL"),
    ("priced_as", "TEXT"),
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
    reasoning_tokens INTEGER,
    prompt_cost REAL,
    completion_cost REAL,
    total_cost REAL,
    priced_as TEXT,
    changed INTEGER,
    size INTEGER
);
CREATE INDEX IF NOT EXISTS runs_by_trace ON runs (trace_id, dotted_order);
CREATE INDEX IF NOT EXISTS runs_by_project ON runs (project_id, start_time);
-- A project's traces newest first (the viewer's list, runs list): its roots in the order query_keys sorts by, so a
-- page of them is read off the index, and a filter on their trees stops at the page instead of sorting every root.
CREATE INDEX IF NOT EXISTS runs_roots_by_project ON runs (project_id, COALESCE(start_time, ''), seq)
    WHERE parent_run_id IS NULL;
-- The changes feed (GET /runs/changes): a trace's runs stored or changed after a write number.
CREATE INDEX IF NOT EXISTS runs_changes ON runs (trace_id, changed);
-- The search index (_store_search) names runs by seq.
CREATE INDEX IF NOT EXISTS runs_by_seq ON runs (seq);
-- Exactly the order query_keys sorts by, so a trace's pages (the viewer reads a 10,000-run
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
-- Facts about the store itself: 'prices', the fingerprint of the price table its costs were computed with.
CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT);
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
    """Overlay a patch: each field it carries replaces the stored one (inputs, outputs and events as a whole),
    except ``extra``, which merges key by key (:func:`merge_extra`).

    A field sent as null is one the client left out (the SDK's ``inputs=None`` when it
    excludes them), not an erasure. ``extra`` merges because clients patch it partially:
    the service's SDK posts its metadata and ``runtime`` and may patch an empty or partial
    ``extra``, which must not wipe them. Nothing a patch carries takes a metadata key back:
    the exporter's early posts carry no ``extra`` at all (only what is fixed at a span's start),
    so its patches never need to.
    """
    for key, value in update.items():
        if value is None and key in base:
            continue
        old = base.get(key)
        base[key] = merge_extra(old, value) if key == "extra" and isinstance(old, dict) and isinstance(value, dict) else value
    return base


def merge_extra(stored: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """A patch's ``extra`` over the stored one: ``metadata`` by key, every other key (``runtime``,
    ``invocation_params``, ...) replaced as given; a null or an empty patch changes nothing.

    >>> merge_extra({"metadata": {"a": 1, "b": 2}, "runtime": {"sdk": "x"}}, {"metadata": {"b": 3}, "runtime": {"v": 1}})
    {'metadata': {'a': 1, 'b': 3}, 'runtime': {'v': 1}}
    >>> merge_extra({"metadata": {"a": 1}}, {})
    {'metadata': {'a': 1}}
    """
    merged = dict(stored)
    for key, value in patch.items():
        if value is None and key in merged:
            continue
        old = merged.get(key)
        merged[key] = {**old, **value} if key == "metadata" and isinstance(old, dict) and isinstance(value, dict) else value
    return merged


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
    """One run loaded by :meth:`RunStore.load_runs`: the merged run, its project, and where a next page starts."""

    run: dict[str, Any]
    project_id: str | None
    position: tuple[str, int]


@dataclass(frozen=True)


class RunSummary:
    """What :meth:`RunStore.summarize` found, from the index columns: counts, latencies, tokens and costs."""

    count: int
    errors: int
    last_start_time: str | None
    latencies: list[float]
    usage: dict[str, Any] = field(default_factory=dict)
    """:func:`usage_totals`: tokens and costs added up, and how many runs with tokens have no price."""


USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens", "prompt_cost", "completion_cost", "total_cost")
USAGE_SUMS = ", ".join(f"SUM(r.{name})" for name in USAGE_FIELDS) + (
    ", SUM(CASE WHEN r.total_tokens IS NOT NULL AND r.total_cost IS NULL THEN 1 ELSE 0 END)"
)
"""SQL over ``runs AS r``: the usage fields added up, then the runs with tokens and no price; read by :func:`usage_totals`."""


def usage_totals(row: Sequence[Any]) -> dict[str, Any]:
    """The values of :data:`USAGE_SUMS` by name: tokens 0 when none, costs None when no run had a price.

    >>> usage_totals((3, 2, 5, None, None, None, 1))["total_cost"], usage_totals((None,) * 7)["total_tokens"]
    (None, 0)
    """
    out: dict[str, Any] = {}
    for name, value in zip(USAGE_FIELDS, row):
        out[name] = (int(value) if value is not None else 0) if name.endswith("tokens") else value
    out["unpriced"] = int(row[len(USAGE_FIELDS)] or 0)
    return out


def dumps(value: Any, large: bool = False) -> str:
    """``value`` as the JSON text the store keeps; ``large`` when it may hold more than :data:`._jsonio.LARGE`."""
    return dump(value, large).decode()




def now_iso() -> str:
    return _sortable(datetime.now(timezone.utc)) or ""


def index_values(
    merged: Mapping[str, Any], project_id: str | None, prices: PriceTable, large: bool = False
) -> tuple[Any, ...]:
    """The values of ``INDEX_COLUMNS`` for one merged run, in that order, its cost at ``prices`` (``large``: as
    :func:`dumps`)."""
    begun, ended = parse_timestamp(merged.get("start_time")), parse_timestamp(merged.get("end_time"))
    latency = (ended - begun).total_seconds() if begun is not None and ended is not None else None
    name, run_type, error = merged.get("name"), merged.get("run_type"), merged.get("error")
    tags = merged.get("tags")
    extra = merged.get("extra")
    metadata = extra.get("metadata") if isinstance(extra, dict) else None
    usage = usage_of(merged)
    return (
        project_id,
        name if isinstance(name, str) else None,
        run_type if isinstance(run_type, str) else None,
        _sortable(begun),
        _sortable(ended),
        latency,
        # A lenient service may hold an error that is not text; a filter still sees that there is one.
        None if error is None else error if isinstance(error, str) else dumps(error, large),
        dumps(tags, large) if isinstance(tags, list) else None,
        dumps(metadata, large) if isinstance(metadata, dict) else None,
        canonical_id(merged.get("reference_example_id")),
        *usage_values(usage, prices.cost(usage)),
    )


def usage_values(usage: Usage, cost: Cost | None) -> tuple[Any, ...]:
    """The model, token and cost columns of a run (the last 12 of ``INDEX_COLUMNS``)."""
    both = usage.input is not None and usage.output is not None
    total = usage.total if usage.total is not None else usage.input + usage.output if both else None  # type: ignore[operator]
    return (
        usage.model,
        dumps(list(usage.models)) if usage.models else None,
        usage.provider,
        usage.input,
        usage.output,
        total,
        usage.cache_read or None,
        usage.reasoning or None,
        *((cost.input, cost.output, cost.total, cost.priced_as) if cost is not None else (None, None, None, None)),
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


def reprice(db: sqlite3.Connection, prices: PriceTable) -> int | None:
    """Cost every stored model run again at ``prices`` when the store's costs were computed with another table;
    how many runs, or None when they were not. A cost the run carries stays."""
    fingerprint = prices.fingerprint()
    row = db.execute("SELECT value FROM store_meta WHERE key = 'prices'").fetchone()
    if row is not None and row[0] == fingerprint:
        return None
    rows = db.execute(
        "SELECT seq, models, provider, prompt_tokens, completion_tokens, cache_read_tokens, reasoning_tokens FROM runs"
        " WHERE models IS NOT NULL AND COALESCE(priced_as, '') != 'carried'"
        " AND (prompt_tokens IS NOT NULL OR completion_tokens IS NOT NULL)"
    ).fetchall()
    updates = []
    for seq, models, provider, prompt, completion, cache, reasoning in rows:
        usage = Usage(tuple(orjson.loads(models)), provider, prompt, completion, None, cache or 0, reasoning or 0)
        cost = prices.cost(usage)
        updates.append((*((cost.input, cost.output, cost.total, cost.priced_as) if cost else (None,) * 4), seq))
    with transaction(db):
        db.executemany(
            "UPDATE runs SET prompt_cost = ?, completion_cost = ?, total_cost = ?, priced_as = ? WHERE seq = ?", updates
        )
        db.execute("INSERT OR REPLACE INTO store_meta (key, value) VALUES ('prices', ?)", (fingerprint,))
    return len(updates)
