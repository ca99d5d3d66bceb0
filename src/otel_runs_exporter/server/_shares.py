"""Shared traces: a token that opens one trace, read-only and without a key (the SDK's ``share_run``).

A share names one trace (its root run id) in one project, and the run it was asked
for; anyone holding its token reads that trace's runs as they are at read time
(``/public/{token}/...``, ``/api/v2/public/{token}/...``), never another trace's, never
feedback. The SDK's two APIs both land here: v1 shares a run (``PUT /runs/{id}/share``,
the SDK's ``share_run``), v2 a trace (``POST /api/v2/runs/{id}/share``); either way a
trace has at most one share, which every run of it reports, and unsharing any of its
runs revokes it.

Tokens are random UUIDs (:func:`new_token`); a client may choose its own UUID only on
an authenticated call (``share_run(share_id=...)``). A token is looked up by its
SHA-256 (the index compares digests, which say nothing about the tokens next to them)
and then compared in constant time. Revoking deletes the row, so the next request finds
nothing: a revoked token and one that never existed get the same 404 (:data:`NO_SHARE`).
Shares live in the runs database, so a link survives a restart, as the hosted service's do.

>>> import sqlite3, threading
>>> db = sqlite3.connect(":memory:", isolation_level=None); db.executescript(SCHEMA)  # doctest: +ELLIPSIS
<sqlite3.Cursor object at ...>
>>> shares = ShareTable(threading.RLock(), lambda: db)
>>> share = shares.create("0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d", "p1", "0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d")
>>> shares.find(share.token) == share, shares.find(new_token()), shares.find("not a uuid")
(True, None, None)
>>> shares.revoke("0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d"), shares.find(share.token)
(True, None)
"""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from typing import NamedTuple

from ._validate import canonical_id

__all__ = ["NO_SHARE", "SCHEMA", "Share", "ShareTable", "new_token"]

NO_SHARE = "no shared trace here: the link is wrong, or its trace was unshared"
"""The one answer (404) for a token that never existed and for one revoked."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS shares (
    digest TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    trace_id TEXT NOT NULL UNIQUE,
    project_id TEXT,
    run_id TEXT NOT NULL,
    created REAL NOT NULL
);
"""
"""Added without a schema version: a database without the table simply has no shares."""


class Share(NamedTuple):
    """One shared trace: its token, the trace (its root run's id), the project, and the run that was shared."""

    token: str
    trace_id: str
    project_id: str | None
    run_id: str


def new_token() -> str:
    """A random share token: a version-4 UUID, 122 random bits from the OS."""
    return str(uuid.uuid4())


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ShareTable:
    """The shares of one runs database; every method is safe from any thread (it takes the store's lock)."""

    def __init__(self, lock: threading.RLock, db: Callable[[], sqlite3.Connection]) -> None:
        self._lock = lock
        self._db = db

    def find(self, token: str) -> Share | None:
        """The live share ``token`` opens, or None (malformed, never made, or revoked: all alike)."""
        canon = canonical_id(token)
        if canon is None:
            return None
        with self._lock:
            row = self._db().execute(
                "SELECT token, trace_id, project_id, run_id FROM shares WHERE digest = ?", (_digest(canon),)
            ).fetchone()
        if row is None or not hmac.compare_digest(row[0].encode(), canon.encode()):
            return None
        return Share(*row)

    def of_trace(self, trace_id: str) -> Share | None:
        """The share of a trace, if it has one (what the SDK's ``read_run_shared_link`` asks)."""
        with self._lock:
            row = self._db().execute(
                "SELECT token, trace_id, project_id, run_id FROM shares WHERE trace_id = ?", (trace_id,)
            ).fetchone()
        return Share(*row) if row is not None else None

    def create(self, trace_id: str, project_id: str | None, run_id: str, token: str | None = None) -> Share:
        """Share a trace; a trace already shared keeps its share (and its token), whatever ``token`` says."""
        with self._lock:
            found = self.of_trace(trace_id)
            if found is not None:
                return found
            chosen = canonical_id(token) if token is not None else None
            share = Share(chosen or new_token(), trace_id, project_id, run_id)
            try:
                self._insert(share)
            except sqlite3.IntegrityError:
                # The chosen token opens another trace already: this one gets a random token of its own.
                share = share._replace(token=new_token())
                self._insert(share)
            return share

    def _insert(self, share: Share) -> None:
        self._db().execute(
            "INSERT INTO shares (digest, token, trace_id, project_id, run_id, created) VALUES (?, ?, ?, ?, ?, ?)",
            (_digest(share.token), *share, time.time()),
        )

    def revoke(self, trace_id: str) -> bool:
        """Unshare a trace; whether it was shared. The next request with its token reads nothing."""
        with self._lock:
            return self._db().execute("DELETE FROM shares WHERE trace_id = ?", (trace_id,)).rowcount > 0
