"""The local service's reads for ``otel-runs runs``: trace ids from their prefixes, and the consistency report.

The service's SDK has neither; the CLI asks them of a running service (``--service``)
or of the file it serves for itself (``--db``), so both ways answer alike::

    POST /runs/trace-ids  {"prefixes": ["0190b3c5", ...], "limit": 10}
    -> {"matches": {"0190b3c5": ["0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d", ...], ...}}

    GET /runs/check
    -> {"patched_not_posted": [...], "never_completed": [...], "missing_parents": [...],
        "parent_cycles": [...], "accepted_violations": [...], "counts": {...}}

A prefix is at least :data:`MIN_PREFIX` hex digits of a trace id, with or without its
hyphens, in either case; its matches are the stored traces whose id starts with it,
in id order, at most ``limit`` (default 10, at most 100): one match is the trace,
several say the prefix is ambiguous. ``runs list`` asks for its traces' shortest
prefixes this way, so a prefix it prints is one ``runs tree`` takes.

The report is :meth:`RunStore.check_report <._store.RunStore.check_report>`'s, each list (and each
missing parent's children) cut to its first :data:`MAX_ITEMS`, and to what fits in one page of the service's
``max_answer_bytes`` (``counts`` holds every list's full length).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from ._jsonio import dump
from ._filter import QueryError
from ._reply import Reply
from ._routing import Request, Service
from ._v2 import check_body

__all__ = ["MIN_PREFIX", "SHORT_PREFIX", "MAX_ITEMS", "canonical_prefix", "short_prefix", "trace_ids", "check_report"]

MIN_PREFIX = 4
"""Hex digits a trace id prefix has at least."""
SHORT_PREFIX = 8
"""Characters of a trace id a short one shows at least (``otel-runs runs list``)."""
MAX_ITEMS = 1_000
"""Items of each list of the check report answered at most."""
_MAX_PREFIXES = 1_000
_MAX_LIMIT = 100
_HEX = re.compile(r"[0-9a-f]+")
_GROUPS = (8, 12, 16, 20)  # where a canonical UUID has its hyphens, counted in hex digits


def canonical_prefix(text: str) -> str | None:
    """A prefix of a trace id as stored ids begin (lower case, hyphens where a UUID has them), or None.

    >>> canonical_prefix("0190B3C5F1B8"), canonical_prefix("0190b3c5-f1"), canonical_prefix("xyz")
    ('0190b3c5-f1b8', '0190b3c5-f1', None)
    """
    digits = text.strip().lower().replace("-", "")
    if not MIN_PREFIX <= len(digits) <= 32 or not _HEX.fullmatch(digits):
        return None
    out = digits[:8]
    for start, end in zip(_GROUPS, (*_GROUPS[1:], 32)):
        if len(digits) > start:
            out += "-" + digits[start:end]
    return out


def short_prefix(trace_id: str, others: Iterable[str]) -> str:
    """The shortest prefix of ``trace_id`` (:data:`SHORT_PREFIX` characters at least, never ending on a hyphen) that
    none of ``others`` begins with: what ``runs list`` shows and ``runs tree`` takes back.

    >>> short_prefix("0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d", ["0190b3c5-f1aa-7000-8000-000000000000"])
    '0190b3c5-f1b'
    >>> short_prefix("0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d", ["1190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d"])
    '0190b3c5'
    """
    shared = 0
    for other in others:
        if other != trace_id:
            shared = max(shared, len(os.path.commonprefix((trace_id, other))))
    length = min(len(trace_id), max(SHORT_PREFIX, shared + 1))
    if trace_id[length - 1 : length] == "-":
        length += 1
    return trace_id[:length]


def trace_ids(request: Request, service: Service) -> Reply:
    """``POST /runs/trace-ids``: each prefix's stored trace ids, in id order."""
    body = check_body(request.body, ("prefixes", "limit"))
    prefixes = body.get("prefixes")
    if not isinstance(prefixes, list) or not prefixes or len(prefixes) > _MAX_PREFIXES:
        raise QueryError(("body", "prefixes"), f"prefixes must be a list of 1 to {_MAX_PREFIXES} trace id prefixes")
    limit = body.get("limit", 10)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT:
        raise QueryError(("body", "limit"), f"limit must be a whole number from 1 to {_MAX_LIMIT}")
    matches: dict[str, list[str]] = {}
    for index, given in enumerate(prefixes):
        prefix = canonical_prefix(given) if isinstance(given, str) else None
        if prefix is None:
            raise QueryError(
                ("body", "prefixes", index),
                f"{str(given)[:60]!r} is not the start of a trace id: {MIN_PREFIX} to 32 hex digits, hyphens allowed",
            )
        # Every id beginning with the prefix sorts at or after it and before it followed by "g" (past every hex
        # digit and the hyphen): a range of the trace index, not a scan.
        rows = service.store.rows(
            "SELECT DISTINCT trace_id FROM runs WHERE posted = 1 AND trace_id >= ? AND trace_id < ?"
            " ORDER BY trace_id LIMIT ?",
            (prefix, prefix + "g", limit),
        )
        matches[given] = [row[0] for row in rows]
    return Reply(200, {"matches": matches})


def check_report(request: Request, service: Service) -> Reply:
    """``GET /runs/check``: the store's consistency report, each list cut to :data:`MAX_ITEMS`, with their counts."""
    report, counts = service.store.check_report(MAX_ITEMS)
    # Each list's first items, while the answer stays within a page (counts say how many there are in all).
    room = service.answers.page_bytes - len(dump(counts, large=False)) - 200
    answer: dict[str, Any] = {}
    for name, items in report.items():
        kept = []
        for item in items:
            room -= len(dump(item, large=False)) + 1
            if room < 0:
                break
            kept.append(item)
        answer[name] = kept
    answer["counts"] = counts
    return Reply(200, answer)
