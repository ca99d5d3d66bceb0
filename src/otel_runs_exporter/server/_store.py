"""SQLite storage for the local service: runs, their merge, and the consistency report.

A post and its patches are kept apart (``post_data``, ``patch_data``) and merged
when read, so the result is the same whichever arrives first: the spec lets a
patch reach the service before its post. One connection guarded by a lock serves
every thread; that is what makes ``:memory:`` work across the server's threads,
and SQLite serialises writers anyway. A write commits before the service
answers 2xx, and WAL with ``synchronous=NORMAL`` survives the process being
killed right after.

The read API (``POST /runs/query``, ``/sessions``) filters in SQL, so each write
also keeps a few columns of the merged run up to date (name, run_type, times,
error, tags, metadata, project): the JSON of a post and its patches is only
merged in Python, and a filter on ``error`` must see what the patch said.

The schema and the merge rules are in :mod:`._store_schema`; projects (rows of
their own, created or derived from the runs that name them) in :mod:`._store_projects`.

What a run may hold is bounded: its post and patches together at most
``max_run_bytes`` of JSON (:class:`RunTooLarge` past it), each run's size kept in a
column, so a read knows what a run weighs before it loads it (:meth:`RunStore.query_keys`).
Private files, a full disk and a lock are :mod:`._store_disk`'s; the consistency report
is :mod:`._store_check`'s.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import orjson

from .._cost import PriceTable
from . import _store_check as store_check
from . import _store_feedback as store_feedback
from . import _store_search as store_search
from ._ingest import Attachment
from ._jsonio import LARGE
from ._shares import SCHEMA as SHARES_SCHEMA
from ._shares import ShareTable
from ._store_disk import (
    BUSY_TIMEOUT_S,
    RunTooLarge,
    Unavailable,
    private_file,
    sized_json,
    transaction,
    unavailable,
)
from ._store_projects import (
    PROJECT_COLUMNS,
    ProjectExists,
    create_project,
    delete_project,
    list_projects,
    project_for_run,
    project_id_for_name,
    project_row,
)
from ._store_schema import (
    FEEDBACK_COLUMNS,
    INDEX_COLUMNS,
    RUN_INDEX_NAMES,
    RUN_INDEX_SET,
    SCHEMA,
    SCHEMA_VERSION,
    USAGE_FIELDS,
    USAGE_SUMS,
    ApplyResult,
    QueriedRun,
    RunSummary,
    add_columns,
    dumps,
    index_values,
    loads,
    merge_into,
    merge_run,
    reprice,
    sortable_time,
    usage_totals,
)
from ._validate import RunOp, Violation

__all__ = [
    "RunStore", "RunKey", "RunTooLarge", "Unavailable", "unavailable", "BUSY_TIMEOUT_S", "ApplyResult", "QueriedRun",
    "RunSummary", "ProjectExists", "ThreadRow", "merge_run", "project_id_for_name", "sortable_time",
]

logger = logging.getLogger(__name__)


class RunKey(NamedTuple):
    """One run found by :meth:`RunStore.query_keys`: its id, project, where a next page starts, and its stored bytes."""

    run_id: str
    project_id: str | None
    position: tuple[str, int]
    size: int


class ThreadRow(NamedTuple):
    """One thread found by :meth:`RunStore.threads`: its id, its traces, its first and latest start."""

    thread_id: str
    traces: int
    first_start: str
    last_start: str


class RunStore:
    """Runs in one SQLite database; every method is safe to call from any thread.

    >>> store = RunStore(":memory:")
    >>> store.count()
    0
    >>> store.close()
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        create: bool = True,
        prices: PriceTable | None = None,
        max_run_bytes: int | None = None,
    ) -> None:
        self.path = str(path)
        # Given a table, the stored costs follow it; without one, new runs get the shipped table's and old ones keep theirs.
        self.prices = prices if prices is not None else PriceTable.load()
        self.max_run_bytes = max_run_bytes
        """A run's post and patches together at most this much JSON (None: no limit): :class:`RunTooLarge`."""
        if self.path != ":memory:":
            db_path = Path(self.path)
            if not create and not db_path.exists():
                raise FileNotFoundError(f"no runs database at {self.path}")
            private_file(db_path)
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S
        )
        self._unavailable: str | None = None
        self._note_lock = threading.Lock()
        with self._lock:
            conn = self._conn
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, 1, 2, SCHEMA_VERSION):
                raise RuntimeError(
                    f"runs database {self.path} has schema version {version}, this version reads {SCHEMA_VERSION}"
                )
            # Before the schema script, whose indexes name the columns an older table lacks.
            reindex = add_columns(conn, "runs", INDEX_COLUMNS)
            add_columns(conn, "runs", (("changed", "INTEGER"),))
            if add_columns(conn, "runs", (("size", "INTEGER"),)):
                # Written before runs had a size: each is read once, here, by SQLite alone.
                conn.execute(
                    "UPDATE runs SET size = length(CAST(COALESCE(post_data, '') AS BLOB))"
                    " + length(CAST(COALESCE(patch_data, '') AS BLOB))"
                )
            refill = add_columns(conn, "feedback", FEEDBACK_COLUMNS)
            conn.executescript(SCHEMA + SHARES_SCHEMA)
            if reindex:
                self._reindex_all(conn)
            if refill:
                store_feedback.backfill(conn)
            store_search.setup(conn, self.path)
            if prices is not None or reindex or version == 0:
                repriced = reprice(conn, self.prices)
                if repriced:
                    logger.info("runs database %s: %d model runs priced again (%s)", self.path, repriced,
                                ", ".join(self.prices.sources))
            if version != SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                if version:
                    logger.info("runs database %s upgraded from schema version %d to %d", self.path, version, SCHEMA_VERSION)
        self._seq = self._max_seq()
        with self._lock:
            self.version: int = self._db.execute("SELECT COALESCE(MAX(changed), 0) FROM runs").fetchone()[0]
        """The latest write's number: each post or patch stored takes the next (the changes feed's cursor)."""
        self.store_id = secrets.token_hex(4)
        """Names this store in the changes feed's cursors: one of another (before a restart) starts over."""
        self.shares = ShareTable(self._lock, lambda: self._db)
        """The shared traces (:mod:`._shares`), in this database."""

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

    def _reindex_all(self, db: sqlite3.Connection) -> None:
        """Fill the index columns and derive the projects of every stored run (upgrade from version 1)."""
        rows = db.execute("SELECT id, posted, post_data, patch_data FROM runs ORDER BY seq").fetchall()
        with transaction(db):
            for run_id, posted, post_data, patch_data in rows:
                merged = merge_run(
                    loads(post_data) if post_data else None, loads(patch_data) if patch_data else None
                )
                project_id = project_for_run(db, merged) if posted else None
                db.execute(
                    f"UPDATE runs SET {RUN_INDEX_SET} WHERE id = ?",
                    (*index_values(merged, project_id, self.prices), run_id),
                )

    def note_unavailable(self, reason: str) -> None:
        """Say once (until a write succeeds again) why requests are answered 503: one line, no traceback."""
        with self._note_lock:
            if self._unavailable == reason:
                return
            self._unavailable = reason
        logger.warning("%s: writes are answered 503 with Retry-After until it clears", reason)

    def _noted_recovery(self) -> None:
        with self._note_lock:
            if self._unavailable is None:
                return
            self._unavailable = None
        logger.info("the runs database %s takes writes again", self.path)

    # --- writes -----------------------------------------------------------------

    def apply(
        self,
        ops: Iterable[RunOp],
        feedback: Iterable[Mapping[str, Any]] = (),
        attachments: Iterable[Attachment] = (),
        *,
        large: bool = False,
    ) -> ApplyResult:
        """Store one request's posts, patches, feedback and attachments in one transaction (all or nothing).

        An attachment sent again under the same name replaces the earlier one. ``large``: the request was
        more than :data:`._jsonio.LARGE` of JSON, so its runs are written with care (:func:`._jsonio.dump`).
        :class:`RunTooLarge` for a run that would be more than ``max_run_bytes``.
        """
        result = ApplyResult()
        now = time.time()
        with self._lock:
            with transaction(self._db) as db:
                for op in ops:
                    self._apply_one(db, op, now, result, large)
                store_feedback.insert(db, feedback)
                for attachment in attachments:
                    db.execute(
                        "INSERT OR REPLACE INTO attachments (run_id, name, content_type, data) VALUES (?, ?, ?, ?)",
                        (attachment.run_id, attachment.name, attachment.content_type, attachment.data),
                    )
            self._changed.notify_all()
        if self._unavailable is not None:
            self._noted_recovery()
        return result

    def _apply_one(self, db: sqlite3.Connection, op: RunOp, now: float, result: ApplyResult, large: bool) -> None:
        row = db.execute(
            "SELECT posted, patched, post_data, patch_data, project_id, size FROM runs WHERE id = ?", (op.run_id,)
        ).fetchone()
        posted, patched = (bool(row[0]), bool(row[1])) if row is not None else (False, False)
        post_data: str | None = row[2] if row is not None else None
        patch_data: str | None = row[3] if row is not None else None
        patch = loads(patch_data) if patch_data else None
        patch_bytes = len(patch_data.encode()) if patch_data else 0
        large = large or (row is not None and (row[5] or 0) > LARGE)
        if op.kind == "post":
            if posted:
                # A retry of a post whose answer was lost: keep the first, count the rest.
                db.execute("UPDATE runs SET extra_posts = extra_posts + 1 WHERE id = ?", (op.run_id,))
                result.duplicates.append(op.run_id)
                return
            post: dict[str, Any] | None = op.data
            posted = True
            post_data, post_bytes = sized_json(op.data, large)
        else:
            post = loads(post_data) if post_data else None
            post_bytes = (row[5] or 0) - patch_bytes if row is not None else 0
            patch, patched = merge_into(patch or {}, op.data), True
            patch_data, patch_bytes = sized_json(patch, large)
        size = post_bytes + patch_bytes
        if self.max_run_bytes is not None and size > self.max_run_bytes:
            raise RunTooLarge(op.run_id, size, self.max_run_bytes)
        (result.posted if op.kind == "post" else result.patched).append(op.run_id)
        merged = merge_run(post, patch)
        # The project is settled when the post arrives (a patch that came first may help name it);
        # later patches do not move a run to another project.
        if op.kind == "post":
            project_id = project_for_run(db, merged)
        else:
            project_id = row[4] if row is not None else None
        values = (
            merged.get("trace_id"),
            merged.get("parent_run_id"),
            merged.get("dotted_order"),
            int(posted),
            int(patched),
            post_data,
            patch_data,
            *index_values(merged, project_id, self.prices, large),
        )
        self.version += 1  # the changes feed (changes()) finds what changed after a client's last look by it
        if row is None:
            self._seq += 1
            db.execute(
                "INSERT INTO runs (trace_id, parent_run_id, dotted_order, posted, patched, post_data, patch_data,"
                f" {RUN_INDEX_NAMES}, changed, size, id, first_seen, seq) VALUES ({', '.join('?' * (len(values) + 5))})",
                (*values, self.version, size, op.run_id, now, self._seq),
            )
        else:
            db.execute(
                "UPDATE runs SET trace_id = ?, parent_run_id = ?, dotted_order = ?, posted = ?, patched = ?,"
                f" post_data = ?, patch_data = ?, {RUN_INDEX_SET}, changed = ?, size = ? WHERE id = ?",
                (*values, self.version, size, op.run_id),
            )

    def record_violations(self, violations: Iterable[Violation], *, path: str, accepted: bool) -> None:
        """Keep violations so ``runs check`` can show what a lenient service let through."""
        now = time.time()
        rows = [
            (v.run_id, v.rule, v.msg, dumps(list(v.loc)), path, int(accepted), now) for v in violations
        ]
        if not rows:
            return
        with self._lock:
            self._db.executemany(
                "INSERT INTO violations (run_id, rule, msg, loc, path, accepted, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def reset(self) -> None:
        """Delete every run, project, violation, feedback item, attachment and share."""
        with self._lock:
            self._db.executescript(
                "DELETE FROM runs; DELETE FROM projects; DELETE FROM violations; DELETE FROM feedback;"
                " DELETE FROM attachments; DELETE FROM shares;"
            )
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
                loads(post_data) if post_data else None, loads(patch_data) if patch_data else None
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

    def _select_in(self, sql: str, values: Sequence[str]) -> list[Any]:
        """The rows of ``sql`` whose ``IN ({})`` takes ``values``, each bound as a parameter; none for no values."""
        if not values:
            return []
        with self._lock:
            return self._db.execute(sql.format(", ".join("?" * len(values))), list(values)).fetchall()

    def _page(
        self,
        sql: str,
        args: list[Any],
        key: tuple[str, str],
        order: str,
        after: Sequence[Any] | None,
        limit: int,
    ) -> list[Any]:
        """One keyset page of ``sql`` ordered by the two ``key`` expressions, past ``after``.

        Keyset paging, not offsets: rows that arrive between pages neither repeat nor
        shift what comes next. ``sql`` ends in a WHERE or HAVING clause that the bound continues.
        """
        direction, beyond = ("DESC", "<") if order == "desc" else ("ASC", ">")
        if after is not None:
            sql += f" AND ({key[0]}, {key[1]}) {beyond} (?, ?)"
            args = [*args, after[0], after[1]]
        sql += f" ORDER BY {key[0]} {direction}, {key[1]} {direction} LIMIT ?"
        with self._lock:
            return self._db.execute(sql, [*args, limit]).fetchall()

    def query_keys(
        self,
        where: str,
        params: Sequence[Any],
        *,
        order: Literal["asc", "desc"],
        after: tuple[str, int] | None,
        limit: int,
    ) -> list[RunKey]:
        """Posted runs matching a WHERE fragment over ``runs AS r``, by start time then arrival, ``limit`` at most:
        their keys and sizes, nothing of their JSON (:meth:`load_run` reads a run when its answer has room for it).

        ``where`` comes from :mod:`._query`, built from a fixed set of column
        expressions with every value bound as a parameter. ``after`` is the
        ``position`` of the last run of the previous page: keyset paging, so runs
        that arrive between pages neither repeat nor shift what comes next.
        """
        sql = (
            "SELECT r.id, r.project_id, COALESCE(r.start_time, ''), r.seq, COALESCE(r.size, 0)"
            f" FROM runs AS r WHERE r.posted = 1 AND ({where})"
        )
        rows = self._page(sql, list(params), ("COALESCE(r.start_time, '')", "r.seq"), order, after, limit)
        return [RunKey(run_id, project_id, (start, seq), size) for run_id, project_id, start, seq, size in rows]

    def load_run(self, run_id: str) -> dict[str, Any] | None:
        """One posted run, merged, with its ``id``; None if it is not (or no longer) stored."""
        with self._lock:
            row = self._db.execute(
                "SELECT post_data, patch_data FROM runs WHERE id = ? AND posted = 1", (run_id,)
            ).fetchone()
        if row is None:
            return None
        run = merge_run(loads(row[0]) if row[0] else None, loads(row[1]) if row[1] else None)
        run["id"] = run_id
        return run

    def load_runs(self, keys: Iterable[RunKey]) -> list[QueriedRun]:
        """The runs of ``keys`` (:meth:`query_keys`), each loaded: for a few at a time (a read route pages by size)."""
        out = []
        for key in keys:
            run = self.load_run(key.run_id)
            if run is not None:
                out.append(QueriedRun(run, key.project_id, key.position))
        return out

    def summarize(self, where: str, params: Sequence[Any]) -> RunSummary:
        """Aggregates over the posted runs matching a WHERE fragment over ``runs AS r`` (from :mod:`._query`):
        counts, errors, start times, latencies, tokens and costs, all from the index columns."""
        base = f"FROM runs AS r WHERE r.posted = 1 AND ({where})"
        with self._lock:
            db = self._db
            row = db.execute(f"SELECT COUNT(*), COUNT(r.error), MAX(r.start_time), {USAGE_SUMS} {base}", params).fetchone()
            latencies = [
                row[0] for row in db.execute(f"SELECT r.latency {base} AND r.latency IS NOT NULL ORDER BY r.latency", params)
            ]
        return RunSummary(int(row[0]), int(row[1]), row[2], latencies, usage_totals(row[3:]))

    def trace_totals(self, roots: str, params: Sequence[Any]) -> dict[str, dict[str, Any]]:
        """trace id -> :func:`usage_totals` of its runs, for the traces whose root run matches ``roots`` (over
        ``runs AS rt``, built by the read modules from fixed expressions)."""
        sql = (
            f"SELECT r.trace_id, {USAGE_SUMS} FROM runs AS r WHERE r.posted = 1 AND r.trace_id IN"
            f" (SELECT rt.id FROM runs AS rt WHERE rt.posted = 1 AND ({roots})) GROUP BY r.trace_id"
        )
        with self._lock:
            rows = self._db.execute(sql, list(params)).fetchall()
        return {row[0]: usage_totals(row[1:]) for row in rows}

    def run_usage(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """run id -> its ``model``, ``priced_as``, tokens and costs (:data:`USAGE_FIELDS`), and for a root ``trace``,
        its trace's :func:`usage_totals`."""
        sql = f"SELECT id, parent_run_id IS NULL, model, priced_as, {', '.join(USAGE_FIELDS)} FROM runs WHERE id IN ({{}})"
        out = {
            row[0]: {"root": bool(row[1]), "model": row[2], "priced_as": row[3], **dict(zip(USAGE_FIELDS, row[4:]))}
            for row in self._select_in(sql, list(dict.fromkeys(run_ids)))
        }
        roots = [run_id for run_id, usage in out.items() if usage.pop("root")]
        if roots:
            totals = self.trace_totals(f"rt.id IN ({', '.join('?' * len(roots))})", roots)
            for run_id in roots:
                out[run_id]["trace"] = totals.get(run_id)
        return out

    def run_key(self, run_id: str) -> RunKey | None:
        """One posted run's key and size (:meth:`query_keys`), or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT project_id, COALESCE(start_time, ''), seq, COALESCE(size, 0) FROM runs WHERE id = ? AND posted = 1",
                (run_id,),
            ).fetchone()
        return RunKey(run_id, row[0], (row[1], row[2]), row[3]) if row is not None else None

    def project_of_run(self, run_id: str) -> str | None:
        """The id of the project a posted run belongs to, or None."""
        with self._lock:
            row = self._db.execute("SELECT project_id FROM runs WHERE id = ? AND posted = 1", (run_id,)).fetchone()
        return row[0] if row else None

    # --- projects (derived and inserted in ._store_projects) -------------------------

    def projects(
        self,
        *,
        ids: Sequence[str] | None = None,
        name: str | None = None,
        name_contains: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Projects, newest first; every given filter must hold (``name_contains`` ignores ASCII case)."""
        with self._lock:
            return list_projects(self._db, ids=ids, name=name, name_contains=name_contains, limit=limit, offset=offset)

    def project(self, project_id: str) -> dict[str, Any] | None:
        """One project by id, or None."""
        with self._lock:
            row = self._db.execute(f"SELECT {PROJECT_COLUMNS} FROM projects WHERE id = ?", (project_id,)).fetchone()
        return project_row(row) if row else None

    def project_stats(self, project_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """project id -> run_count, last_run_start_time, tokens and costs, for the projects that have runs."""
        sql = (
            f"SELECT r.project_id, COUNT(*), MAX(r.start_time), {USAGE_SUMS} FROM runs AS r"
            " WHERE r.posted = 1 AND r.project_id IN ({}) GROUP BY r.project_id"
        )
        rows = self._select_in(sql, project_ids)
        return {r[0]: {"run_count": r[1], "last_run_start_time": r[2], **usage_totals(r[3:])} for r in rows}

    def create_project(
        self,
        *,
        name: str,
        project_id: str | None = None,
        description: str | None = None,
        extra: Mapping[str, Any] | None = None,
        reference_dataset_id: str | None = None,
        start_time: str | None = None,
        end_time: str | None = None,
        upsert: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """Create a project, or with ``upsert`` update the one of that name; returns it and whether it is new.

        Raises :class:`ProjectExists` when the name (or the id) is taken and
        ``upsert`` is off: a project derived from ingested runs counts as existing,
        as it does on the service.
        """
        with self._lock, transaction(self._db) as db:
            return create_project(
                db, name=name, project_id=project_id, description=description, extra=extra,
                reference_dataset_id=reference_dataset_id, start_time=start_time, end_time=end_time, upsert=upsert,
            )

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
        return [store_check.violation(r) for r in rows]

    def feedback(self) -> list[dict[str, Any]]:
        """Every feedback item, oldest first, as kept (from multipart parts and ``POST /feedback``)."""
        with self._lock:
            rows = self._db.execute("SELECT data FROM feedback ORDER BY seq").fetchall()
        return [orjson.loads(r[0]) for r in rows]

    def add_feedback(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """Keep one item checked by :mod:`._feedback`; the item kept under its id (the first, for a retry)."""
        with self._lock:
            with transaction(self._db) as db:
                store_feedback.insert(db, [item])
                kept = store_feedback.get(db, item["id"])
            self._changed.notify_all()
        assert kept is not None
        return kept

    def feedback_item(self, feedback_id: str) -> dict[str, Any] | None:
        with self._lock:
            return store_feedback.get(self._db, feedback_id)

    def update_feedback(self, feedback_id: str, changes: Mapping[str, Any]) -> dict[str, Any] | None:
        """Replace the given fields of one item; the item, or None when there is no such item."""
        with self._lock:
            item = store_feedback.update(self._db, feedback_id, changes)
            self._changed.notify_all()
        return item

    def delete_feedback(self, feedback_id: str) -> bool:
        with self._lock:
            gone = store_feedback.delete(self._db, feedback_id)
            self._changed.notify_all()
        return gone

    def list_feedback(self, **where: Any) -> list[dict[str, Any]]:
        """Items matching every given list (:func:`._store_feedback.listing`), oldest first."""
        with self._lock:
            return store_feedback.listing(self._db, **where)

    def feedback_of_runs(self, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            return store_feedback.of_runs(self._db, run_ids)

    def check(self) -> dict[str, list[Any]]:
        """The consistency report (:mod:`._store_check`): runs patched but never posted, never completed, parents
        that never arrived, runs that are their own ancestors, and the violations a lenient service accepted."""
        return self.check_report()[0]

    def check_report(self, limit: int | None = None) -> tuple[dict[str, list[Any]], dict[str, int]]:
        """:meth:`check`'s lists, each cut to its first ``limit`` items, and each list's whole length (:mod:`._store_check`)."""
        with self._lock:
            return store_check.report(self._db, limit)

    # --- attachments, project deletion, threads, violations by run ----------------------

    def attachments_of(self, run_ids: Sequence[str]) -> dict[str, list[tuple[str, str, int]]]:
        """run id -> ``(name, content type, size)`` of each of its stored attachments, by name."""
        out: dict[str, list[tuple[str, str, int]]] = {}
        sql = (
            "SELECT run_id, name, content_type, length(data) FROM attachments"
            " WHERE run_id IN ({}) ORDER BY run_id, name"
        )
        rows = self._select_in(sql, run_ids)
        for run_id, name, content_type, size in rows:
            out.setdefault(run_id, []).append((name, content_type, int(size)))
        return out

    def attachment(self, run_id: str, name: str) -> tuple[str, bytes] | None:
        """One attachment's content type and bytes, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT content_type, data FROM attachments WHERE run_id = ? AND name = ?", (run_id, name)
            ).fetchone()
        return (row[0], bytes(row[1])) if row else None

    def delete_project(self, project_id: str) -> int | None:
        """Delete a project, its runs, their feedback, attachments, violations and shares; the number of runs, or None
        when there is no such project."""
        with self._lock:
            with transaction(self._db) as db:
                deleted = delete_project(db, project_id)
            if deleted is not None:
                self._changed.notify_all()
        return deleted

    def threads(
        self,
        key_sql: str,
        where: str,
        params: Sequence[Any],
        *,
        having: str = "1",
        having_params: Sequence[Any] = (),
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> list[ThreadRow]:
        """Root runs matching ``where`` grouped by thread, the most recently active first.

        ``key_sql`` is the thread key's SQL over ``runs AS r`` (from :mod:`._query`, a fixed
        expression); ``having`` keeps the threads where it holds (``SUM(...) > 0``: a
        thread with at least one matching trace). ``after`` is the last thread of the
        previous page, as ``(latest start time, thread id)``.
        """
        latest = "MAX(COALESCE(r.start_time, ''))"
        sql = (
            f"SELECT {key_sql} AS thread, COUNT(*), MIN(COALESCE(r.start_time, '')), {latest}"
            f" FROM runs AS r WHERE r.posted = 1 AND r.parent_run_id IS NULL AND ({where}) AND {key_sql} IS NOT NULL"
            f" GROUP BY thread HAVING ({having})"
        )
        rows = self._page(sql, [*params, *having_params], (latest, "thread"), "desc", after, limit)
        return [ThreadRow(str(r[0]), int(r[1]), r[2], r[3]) for r in rows]

    def aggregate(self, columns: str, where: str, params: Sequence[Any]) -> tuple[Any, ...]:
        """One row of aggregates (``columns``, e.g. ``COUNT(*), MAX(r.end_time)``) over the posted runs matching
        a WHERE fragment over ``runs AS r``; both built by the read modules from fixed expressions."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {columns} FROM runs AS r WHERE r.posted = 1 AND ({where})", list(params)
            ).fetchone()
        return tuple(row)

    def columns(self, columns: str, where: str, params: Sequence[Any], *, order: str = "r.seq") -> list[tuple[Any, ...]]:
        """``columns`` of the posted runs matching a WHERE fragment over ``runs AS r``, in ``order``: the index
        columns only, no JSON merged (the read modules build all three from fixed expressions)."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {columns} FROM runs AS r WHERE r.posted = 1 AND ({where}) ORDER BY {order}", list(params)
            ).fetchall()
        return [tuple(row) for row in rows]

    def run_violations(
        self, *, run_id: str | None = None, trace_id: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """The violations recorded for one run, or for the runs of one trace, oldest first (the first ``limit``)."""
        key: str | None = run_id if run_id is not None else trace_id
        where = "run_id = ?" if run_id is not None else "run_id IN (SELECT id FROM runs WHERE trace_id = ?)"
        args = (key, -1 if limit is None else limit)
        with self._lock:
            rows = self._db.execute(
                f"SELECT run_id, rule, msg, loc, path, accepted, at FROM violations WHERE {where} ORDER BY seq LIMIT ?",
                args,
            ).fetchall()
        return [store_check.violation(r) for r in rows]

    def rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows of a whole SELECT a read module built from fixed expressions (:mod:`._charts`), values bound."""
        with self._lock:
            return [tuple(row) for row in self._db.execute(sql, list(params))]

    def changes(self, trace_id: str, after: int, limit: int) -> tuple[list[tuple[RunKey, int]], int, bool]:
        """The posted runs of a trace stored or changed after write number ``after``, in the order they changed, at
        most ``limit``, each with its write number (:meth:`load_run` reads it); with the write number to ask after
        next when all of them are answered, and whether more are waiting."""
        with self._lock:
            rows = self._db.execute(
                "SELECT r.id, r.project_id, COALESCE(r.start_time, ''), r.seq, COALESCE(r.size, 0), r.changed"
                " FROM runs AS r WHERE r.trace_id = ? AND r.changed > ? AND r.posted = 1 ORDER BY r.changed LIMIT ?",
                (trace_id, after, limit + 1),
            ).fetchall()
            version = self.version
        more = len(rows) > limit
        rows = rows[:limit]
        found = [(RunKey(run_id, project_id, (start, seq), size), changed) for run_id, project_id, start, seq, size, changed in rows]
        return found, (rows[-1][5] if more else max(version, after)), more

    def changed_since(self, trace_id: str, after: int) -> bool:
        """Whether a run of the trace was stored or changed after write number ``after`` (cheap: an index)."""
        if self.version <= after:
            return False
        with self._lock:
            return self._db.execute(
                "SELECT 1 FROM runs WHERE trace_id = ? AND changed > ? AND posted = 1 LIMIT 1", (trace_id, after)
            ).fetchone() is not None

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
