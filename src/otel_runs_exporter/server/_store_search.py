"""The local service's search index: SQLite's FTS5 with the trigram tokenizer over every stored run's JSON.

``search("text")`` (and ``query``) finds the text anywhere in a run, ignoring ASCII
case: a substring of the JSON the client sent (post and patches). Scanning that
JSON is fine for a trace and slow for a day's traffic, so each run's text is also in
a trigram index (``runs_fts``, contentless: the text is not kept twice), kept by
triggers on ``runs`` (insert, update of the JSON, delete), keyed by the run's
``seq``. A search of 3 characters or more asks the index for the runs holding each
of its trigrams, then checks each candidate with the scan's own condition, so the answers are the scan's exactly
(the index folds Unicode case, the scan ASCII only: the index may propose more, the
check keeps the scan's). Shorter texts, and a SQLite built without FTS5 or its
trigram tokenizer (said once, when the first store opens), use the scan.

A database the index was dropped from (opened by a SQLite without FTS5, which
cannot keep it) is marked; the next store that can keep it rebuilds it.
"""

from __future__ import annotations

import logging
import sqlite3
from functools import lru_cache

from ._store_disk import transaction

__all__ = ["available", "setup", "match", "MIN_CHARS", "TEXT"]

logger = logging.getLogger(__name__)

MIN_CHARS = 3
"""Characters a search needs for the index: the trigram tokenizer indexes every run of three."""
TEXT = "COALESCE({t}.post_data, '') || ' ' || COALESCE({t}.patch_data, '')"
"""What is searched in a run: its post's and its patches' JSON, as :func:`._filter.search_where` scans it."""
_TRIGGERS = {
    "runs_fts_insert": "AFTER INSERT ON runs BEGIN {add}; END",
    "runs_fts_update": "AFTER UPDATE OF post_data, patch_data ON runs BEGIN {drop}; {add}; END",
    "runs_fts_delete": "AFTER DELETE ON runs BEGIN {drop}; END",
}
_ADD = "INSERT INTO runs_fts (rowid, body) VALUES (new.seq, " + TEXT.format(t="new") + ")"
_DROP = "INSERT INTO runs_fts (runs_fts, rowid, body) VALUES ('delete', old.seq, " + TEXT.format(t="old") + ")"
_said = False
_MAX_TRIGRAMS = 24


def match(needle: str) -> str:
    """The index query for runs holding every trigram of ``needle`` (candidates: the scan's check decides).

    The index keeps no positions (``detail=none``: a twentieth of the size, and writes several times faster),
    so it is asked for the trigrams, not the phrase; for a long text, two dozen of them spread along it.

    >>> match("Hello")
    '"Hel" "ell" "llo"'
    """
    grams = list(dict.fromkeys(needle[i : i + 3] for i in range(len(needle) - 2)))
    if len(grams) > _MAX_TRIGRAMS:
        step = (len(grams) - 1) / (_MAX_TRIGRAMS - 1)
        grams = [grams[round(i * step)] for i in range(_MAX_TRIGRAMS)]
    return " ".join('"' + gram.replace('"', '""') + '"' for gram in grams)


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether this process's SQLite has FTS5 and its trigram tokenizer (3.34 and later, built with FTS5)."""
    try:
        with sqlite3.connect(":memory:") as probe:
            probe.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='trigram')")
        probe.close()
    except sqlite3.Error:
        return False
    return True


def _exists(db: sqlite3.Connection, kind: str, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)).fetchone() is not None


def setup(db: sqlite3.Connection, path: str) -> bool:
    """Make the index current for the database on ``db``; whether searches may use it.

    Built from the stored runs when it is new, or was dropped since; kept by the triggers after that.
    """
    global _said
    if not available():
        if not _said:
            logger.warning(
                "SQLite %s has no FTS5 trigram tokenizer: searches scan the stored runs (slower on large databases)",
                sqlite3.sqlite_version,
            )
            _said = True
        if _exists(db, "trigger", "runs_fts_insert"):
            # Triggers naming a table this SQLite cannot write would fail every write: drop them, mark the index stale.
            for name in _TRIGGERS:
                db.execute(f"DROP TRIGGER IF EXISTS {name}")
            db.execute("CREATE TABLE IF NOT EXISTS runs_fts_stale (since REAL)")
        return False
    stale = _exists(db, "table", "runs_fts_stale")
    fresh = not _exists(db, "table", "runs_fts")
    if not (fresh or stale) and all(_exists(db, "trigger", name) for name in _TRIGGERS):
        return True
    with transaction(db):
        db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS runs_fts"
            " USING fts5(body, content='', tokenize='trigram', detail=none, columnsize=0)"
        )
        db.execute("INSERT INTO runs_fts (runs_fts) VALUES ('delete-all')")
        for name, body in _TRIGGERS.items():
            db.execute(f"DROP TRIGGER IF EXISTS {name}")
            db.execute(f"CREATE TRIGGER {name} {body.format(add=_ADD, drop=_DROP)}")
        count = db.execute(
            "INSERT INTO runs_fts (rowid, body) SELECT r.seq, " + TEXT.format(t="r") + " FROM runs AS r"
        ).rowcount
        db.execute("DROP TABLE IF EXISTS runs_fts_stale")
    if count:
        logger.info("search index of %s built: %d runs", path, count)
    return True
