"""How the local service's projects come to exist: derived from the runs that name them, or created.

Projects are rows of their own: created through ``POST /sessions``, or derived
when a run names a project that does not exist yet. A project named by
``session_name`` gets a stable id (a UUID 5 of its name), so the same name has
the same id across restarts and databases; one named only by ``session_id``
keeps that id and has no name.

Functions over the store's connection, which :class:`~._store.RunStore` calls
inside its write transactions; the store itself lists, reads and counts projects.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ._store_schema import dumps, now_iso, sortable_time
from ._validate import canonical_id

__all__ = [
    "ProjectExists",
    "delete_project",
    "list_projects",
    "PROJECT_COLUMNS",
    "create_project",
    "insert_project",
    "project_for_run",
    "project_id_for_name",
    "project_row",
]


# Any fixed UUID works as the namespace; changing it would change every derived project id.
_PROJECT_NAMESPACE = uuid.UUID("6f1c58a4-3a55-4c1e-9c52-5a0c6f0e2d17")


def project_id_for_name(name: str) -> str:
    """The id a project gets when runs name it before anyone created it: the same for the same name.

    >>> project_id_for_name("demo") == project_id_for_name("demo")
    True
    """
    return str(uuid.uuid5(_PROJECT_NAMESPACE, name))


class ProjectExists(Exception):
    """``POST /sessions`` named a project (or an id) that already exists; carries the existing project."""

    def __init__(self, message: str, project: dict[str, Any]) -> None:
        super().__init__(message)
        self.project = project


def project_for_run(db: sqlite3.Connection, run: Mapping[str, Any]) -> str | None:
    """The id of the project a posted run names, creating the project the first time it is named."""
    start = sortable_time(run.get("start_time")) or now_iso()
    session_id = canonical_id(run.get("session_id"))
    if session_id is not None:
        found = db.execute("SELECT id, start_time, created FROM projects WHERE id = ?", (session_id,)).fetchone()
        if found is None:
            insert_project(db, session_id, None, start)
        else:
            _note_run_start(db, found, start)
        return session_id
    name = run.get("session_name")
    if not isinstance(name, str) or not name:
        return None
    found = db.execute("SELECT id, start_time, created FROM projects WHERE name = ?", (name,)).fetchone()
    if found is not None:
        _note_run_start(db, found, start)
        return str(found[0])
    project_id = project_id_for_name(name)
    if db.execute("SELECT 1 FROM projects WHERE id = ?", (project_id,)).fetchone() is not None:
        project_id = str(uuid.uuid4())  # someone created a project with exactly that id under another name
    insert_project(db, project_id, name, start)
    return project_id


def insert_project(
    db: sqlite3.Connection,
    project_id: str,
    name: str | None,
    start_time: str,
    *,
    created: bool = False,
    description: str | None = None,
    extra: Mapping[str, Any] | None = None,
    reference_dataset_id: str | None = None,
    end_time: str | None = None,
) -> None:
    """Add one project row (in the caller's transaction)."""
    # seq orders the projects newest first; reset empties the table, so it starts at 1 again.
    db.execute(
        "INSERT INTO projects (id, name, description, extra, reference_dataset_id, start_time, end_time, created, seq)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM projects))",
        (
            project_id,
            name,
            description,
            dumps(dict(extra), large=True) if extra is not None else None,
            reference_dataset_id,
            start_time,
            end_time,
            int(created),
        ),
    )


def _note_run_start(db: sqlite3.Connection, project: Sequence[Any], start: str) -> None:
    # A derived project began with its earliest run, which need not be the first to arrive.
    project_id, project_start, created = project
    if not created and start < project_start:
        db.execute("UPDATE projects SET start_time = ? WHERE id = ?", (start, project_id))


PROJECT_COLUMNS = "id, name, description, extra, reference_dataset_id, start_time, end_time"


def project_row(row: Sequence[Any]) -> dict[str, Any]:
    return {
        "id": row[0],
        "name": row[1],
        "description": row[2],
        "extra": orjson.loads(row[3]) if row[3] else None,
        "reference_dataset_id": row[4],
        "start_time": row[5],
        "end_time": row[6],
    }


def create_project(
    db: sqlite3.Connection,
    *,
    name: str,
    project_id: str | None,
    description: str | None,
    extra: Mapping[str, Any] | None,
    reference_dataset_id: str | None,
    start_time: str | None,
    end_time: str | None,
    upsert: bool,
) -> tuple[dict[str, Any], bool]:
    """``POST /sessions`` inside the store's write transaction: the project and whether it is new (see
    :meth:`RunStore.create_project <._store.RunStore.create_project>`)."""
    by_name = db.execute(f"SELECT {PROJECT_COLUMNS} FROM projects WHERE name = ?", (name,)).fetchone()
    by_id = (
        db.execute(f"SELECT {PROJECT_COLUMNS} FROM projects WHERE id = ?", (project_id,)).fetchone()
        if project_id is not None
        else None
    )
    if by_id is not None and (by_name is None or by_id[0] != by_name[0]):
        raise ProjectExists(f"a project with id {project_id} already exists", project_row(by_id))
    if by_name is not None:
        if not upsert:
            raise ProjectExists(
                f"a project named {name!r} already exists (id {by_name[0]}); pass upsert=true to update it",
                project_row(by_name),
            )
        updates = {
            "description": description,
            "extra": dumps(dict(extra), large=True) if extra is not None else None,
            "reference_dataset_id": reference_dataset_id,
            "end_time": end_time,
        }
        given = {k: v for k, v in updates.items() if v is not None}
        if given:
            db.execute(
                f"UPDATE projects SET {', '.join(f'{k} = ?' for k in given)} WHERE id = ?",
                (*given.values(), by_name[0]),
            )
        row = db.execute(f"SELECT {PROJECT_COLUMNS} FROM projects WHERE id = ?", (by_name[0],)).fetchone()
        return project_row(row), False
    new_id = project_id or str(uuid.uuid4())
    insert_project(
        db,
        new_id,
        name,
        start_time or now_iso(),
        created=True,
        description=description,
        extra=extra,
        reference_dataset_id=reference_dataset_id,
        end_time=end_time,
    )
    row = db.execute(f"SELECT {PROJECT_COLUMNS} FROM projects WHERE id = ?", (new_id,)).fetchone()
    return project_row(row), True


def delete_project(db: sqlite3.Connection, project_id: str) -> int | None:
    """Delete a project, its runs, their feedback, attachments, violations and shares (inside the store's write
    transaction); the number of runs, or None when there is no such project. Feedback names its run as the client
    wrote the id (32-hex or hyphenated), so ids are compared without hyphens."""
    if db.execute("SELECT 1 FROM projects WHERE id = ?", (project_id,)).fetchone() is None:
        return None
    runs_of = "SELECT id FROM runs WHERE project_id = ?"
    db.execute(
        "DELETE FROM feedback WHERE replace(lower(run_id), '-', '') IN"
        f" (SELECT replace(id, '-', '') FROM ({runs_of}))",
        (project_id,),
    )
    db.execute(f"DELETE FROM attachments WHERE run_id IN ({runs_of})", (project_id,))
    db.execute(f"DELETE FROM violations WHERE run_id IN ({runs_of})", (project_id,))
    deleted = db.execute("DELETE FROM runs WHERE project_id = ?", (project_id,)).rowcount
    db.execute("DELETE FROM shares WHERE project_id = ?", (project_id,))
    db.execute("DELETE FROM projects WHERE id = ?", (project_id,))
    return int(deleted)


def list_projects(
    db: sqlite3.Connection,
    *,
    ids: Sequence[str] | None,
    name: str | None,
    name_contains: str | None,
    limit: int,
    offset: int,
) -> list[dict[str, Any]]:
    """Projects, newest first; every given filter must hold (``name_contains`` ignores ASCII case)."""
    clauses: list[str] = []
    args: list[Any] = []
    if ids is not None:
        clauses.append(f"id IN ({', '.join('?' * len(ids))})" if ids else "0")
        args += ids
    if name is not None:
        clauses.append("name = ?")
        args.append(name)
    if name_contains is not None:
        clauses.append("instr(lower(name), lower(?)) > 0")
        args.append(name_contains)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = db.execute(
        f"SELECT {PROJECT_COLUMNS} FROM projects {where} ORDER BY seq DESC LIMIT ? OFFSET ?", (*args, limit, offset)
    ).fetchall()
    return [project_row(r) for r in rows]
