"""What the local service's store needs of the disk: private files, SQLite's passing failures, JSON by size.

A database file, its ``-wal`` and ``-shm`` and the directories made for it are private to the
user (0600, 0700): they hold every prompt. A full disk or a database another process holds
locked is :func:`unavailable`'s to answer (503 with ``Retry-After``), not a 500: both clear
up by themselves.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from ._jsonio import dump

__all__ = ["BUSY_TIMEOUT_S", "RunTooLarge", "Unavailable", "unavailable", "private_file", "rollback", "sized_json", "transaction"]

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 2.0
"""How long a write waits for a lock another process holds on the database before its 503 (every request waits
behind it: one connection serves them all)."""


class RunTooLarge(Exception):
    """A run whose post and patches together would be more JSON than a run may hold; nothing of the request is stored."""

    def __init__(self, run_id: str, size: int, max_size: int) -> None:
        super().__init__(run_id, size, max_size)
        self.run_id, self.size, self.max_size = run_id, size, max_size

    def __str__(self) -> str:
        return (
            f"run {self.run_id} would be stored as {self.size} bytes of JSON (its post and patches together), "
            f"more than the {self.max_size} a run may hold; nothing in this request was stored"
        )


class Unavailable(NamedTuple):
    """Why the database cannot answer now, for a 503: ``reason`` for the log and the answer, ``retry_after`` seconds."""

    reason: str
    retry_after: int


# SQLite's primary result codes (the low byte of an extended one) that clear up by themselves: a full disk (or an
# I/O error writing to it), a lock another process holds.
_FULL, _BUSY, _LOCKED, _IOERR = 13, 5, 6, 10


def unavailable(exc: BaseException) -> Unavailable | None:
    """The 503 a database error deserves, or None for one that is not the database's state (a bug: a 500).

    >>> unavailable(sqlite3.OperationalError("database or disk is full")).reason
    'the disk holding the runs database is full'
    """
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(exc)
    if primary == _FULL or "database or disk is full" in text:
        return Unavailable("the disk holding the runs database is full", 10)
    if primary in (_BUSY, _LOCKED) or "database is locked" in text:
        return Unavailable("the runs database is locked by another process", 1)
    if primary == _IOERR or "disk I/O error" in text:
        return Unavailable(f"the runs database cannot be written ({text})", 10)
    return None


def private_file(path: Path) -> None:
    """Make the directories and the empty database file the store is about to open, private to the user.

    SQLite gives the ``-wal`` and ``-shm`` files the database file's mode, so they are private too. What
    exists already is left as it is (a warning says when others can read it).
    """
    missing = []
    parent = path.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            pass
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        mode = path.stat().st_mode
        if stat.S_ISREG(mode) and mode & (stat.S_IRGRP | stat.S_IROTH) and _is_database(path):
            logger.warning(
                "runs database %s can be read by other users of this machine (mode %o): it holds every prompt "
                "and output; chmod 600 it (and its -wal and -shm files)", path, stat.S_IMODE(mode),
            )


def sized_json(value: Any, large: bool) -> tuple[str, int]:
    """``value`` as the JSON text the store keeps, and its length in bytes (``large``: :func:`._jsonio.dump`)."""
    data = dump(value, large)
    return data.decode(), len(data)


def rollback(db: sqlite3.Connection) -> None:
    # SQLite rolls back by itself on a full disk; a second ROLLBACK would bury that error under its own.
    if db.in_transaction:
        db.execute("ROLLBACK")


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction (the caller holds the store's lock): committed when the block ends, rolled back
    when it raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        rollback(db)
        raise


def _is_database(path: Path) -> bool:
    """Whether ``path`` is an SQLite database, or empty (SQLite makes one of it); any other file is refused when
    opened: no warning about who can read it then."""
    try:
        with open(path, "rb") as file:
            return file.read(16) in (b"", b"SQLite format 3\x00")
    except OSError:
        return False
