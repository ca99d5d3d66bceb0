"""Feedback for the local service: what ``/feedback`` takes and answers, checked and shaped (pure functions).

Feedback is a score, a value or a comment on a run (or on a project), under a key
(``correctness``, ``thumbs``). It arrives two ways, both read by :func:`check_feedback`
and kept in the store's ``feedback`` table (:mod:`._store_feedback`):

- a ``feedback.<id>`` part of multipart ingest: the SDK's ``create_feedback(..., trace_id=...)``;
- ``POST /feedback``: the SDK's ``create_feedback`` without ``trace_id`` (or with
  ``extend_trace_retention=False``), and the viewer's thumbs up or down.

The SDK's reads and writes of one item (langsmith 0.15)::

    POST   /feedback                 create_feedback          {"id", "run_id", "key", "score", ...} -> the item
    GET    /feedback?run=&key=&...   list_feedback(run_ids=)  -> [item, ...], oldest first (limit, offset)
    GET    /feedback/{id}            read_feedback            -> the item; 404
    PATCH  /feedback/{id}            update_feedback          {"score", "value", "correction", "comment"} -> the item
    DELETE /feedback/{id}            delete_feedback          -> {"id"}; 404

An item is what its client sent, with its ids hyphenated and these always present
(the SDK's ``Feedback`` model requires them): ``id``, ``run_id``, ``trace_id``,
``key``, ``created_at``, ``modified_at``. A second create of the same id is answered
with the first and changes nothing: what a retry after a lost answer looks like.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from ._filter import QueryError
from ._numbers import plain_int
from ._store_schema import now_iso, sortable_time
from ._validate import canonical_id

__all__ = [
    "MAX_KEY_CHARS",
    "MAX_LIST",
    "FeedbackList",
    "check_feedback",
    "parse_feedback_create",
    "parse_feedback_update",
    "parse_feedback_list",
    "api_feedback",
    "feedback_stats",
]

MAX_KEY_CHARS = 200
"""A feedback key's length at most (the hosted service's keys are metric names)."""
MAX_LIST = 100
"""Items in one ``GET /feedback`` answer at most (the SDK asks 100 a page and follows with offset)."""
_IDS = ("id", "run_id", "trace_id", "session_id", "comparative_experiment_id", "feedback_group_id")
_TIMES = ("created_at", "modified_at", "start_time")
_UPDATABLE = ("score", "value", "correction", "comment")
_LIST_PARAMS = ("run", "trace", "key", "source", "session", "limit", "offset")


def _score(value: Any) -> tuple[float | None, str | None]:
    """The score as the store sorts and filters it (a bool is 1 or 0), or why it is not one."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        return float(value), None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value), None
    return None, f"score must be a number, true, false or null, got {str(value)[:60]!r}"


def check_feedback(value: Any, default_id: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """One feedback item as stored, or None and what is wrong with it.

    ``default_id`` is the id a multipart part's name gives (``feedback.<id>``); a body
    without ``id`` gets a new one.

    >>> item, problem = check_feedback({"run_id": "0190b3c5f1b87a3e9c1d2e3f4a5b6c7d", "key": "thumbs", "score": True})
    >>> problem, item["run_id"], item["score"], item["trace_id"]
    (None, '0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d', True, None)
    >>> check_feedback({"key": "thumbs"})[1]
    'feedback names no run (run_id) and no project (session_id)'
    """
    if not isinstance(value, dict):
        return None, "feedback must be a JSON object"
    item = dict(value)
    key = item.get("key")
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS:
        return None, f"key must be the feedback's name, 1 to {MAX_KEY_CHARS} characters"
    for name in _IDS:
        raw = item.get(name)
        if raw is None:
            continue
        canon = canonical_id(raw)
        if canon is None:
            return None, f"{name} {str(raw)[:60]!r} is not a UUID"
        item[name] = canon
    for name in _TIMES:
        raw = item.get(name)
        if raw is not None:
            moment = sortable_time(raw)
            if moment is None:
                return None, f"{name} {str(raw)[:60]!r} is not an ISO 8601 timestamp"
            item[name] = moment
    _, problem = _score(item.get("score"))
    if problem:
        return None, problem
    if item.get("comment") is not None and not isinstance(item["comment"], str):
        return None, "comment must be text"
    if item.get("run_id") is None and item.get("trace_id") is not None:
        item["run_id"] = item["trace_id"]  # the SDK's rule: feedback on a trace is on its root run
    if item.get("run_id") is None and item.get("session_id") is None:
        return None, "feedback names no run (run_id) and no project (session_id)"
    item["id"] = item.get("id") or canonical_id(default_id) or str(uuid.uuid4())
    item.setdefault("trace_id", None)
    now = now_iso()
    item["created_at"] = item.get("created_at") or now
    item["modified_at"] = item.get("modified_at") or item["created_at"]
    return item, None


def parse_feedback_create(body: Any) -> dict[str, Any]:
    """A ``POST /feedback`` body as the item to store; a 422 saying what is wrong."""
    item, problem = check_feedback(body)
    if problem is not None:
        raise QueryError(("body",), problem)
    assert item is not None
    return item


def parse_feedback_update(body: Any) -> dict[str, Any]:
    """A ``PATCH /feedback/{id}`` body: the fields to replace (``update_feedback`` sends only those given).

    >>> parse_feedback_update({"score": 0.5, "comment": None})
    {'score': 0.5, 'comment': None}
    """
    if not isinstance(body, dict):
        raise QueryError(("body",), "the body must be a JSON object of the fields to change")
    for name in body:
        if name not in _UPDATABLE:
            raise QueryError(("body", name), f"{name} cannot be changed; a feedback's {', '.join(_UPDATABLE)} can")
    _, problem = _score(body.get("score"))
    if problem:
        raise QueryError(("body", "score"), problem)
    if body.get("comment") is not None and not isinstance(body["comment"], str):
        raise QueryError(("body", "comment"), "comment must be text or null")
    return dict(body)


@dataclass(frozen=True)
class FeedbackList:
    """A checked ``GET /feedback``: each given list must match (an item matches any of a list's values)."""

    runs: tuple[str, ...] | None = None
    traces: tuple[str, ...] | None = None
    keys: tuple[str, ...] | None = None
    sources: tuple[str, ...] | None = None
    sessions: tuple[str, ...] | None = None
    limit: int = MAX_LIST
    offset: int = 0


def _id_list(values: Sequence[str], name: str) -> tuple[str, ...]:
    out = []
    for value in values:
        canon = canonical_id(value)
        if canon is None:
            raise QueryError(("query", name), f"{name} {value[:60]!r} is not a UUID")
        out.append(canon)
    return tuple(out)


def parse_feedback_list(query: str) -> FeedbackList:
    """Check ``GET /feedback``'s query string (``list_feedback`` sends ``run``, ``key``, ``source``, ``limit``, ``offset``).

    >>> parse_feedback_list("run=0190b3c5f1b87a3e9c1d2e3f4a5b6c7d&limit=10").runs
    ('0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d',)
    """
    params = parse_qs(query, keep_blank_values=True)
    for name, values in params.items():
        if name not in _LIST_PARAMS:
            raise QueryError(("query", name), f"{name} is not supported here; supported: {', '.join(_LIST_PARAMS)}")
        if len(values) > 1 and name in ("limit", "offset"):
            raise QueryError(("query", name), f"{name} is given {len(values)} times; give it once")
    if sum(len(v) for v in params.values()) > 1_000:
        raise QueryError(("query",), "at most 1,000 values in one feedback query")
    numbers = {}
    for name, default, lowest, highest in (("limit", MAX_LIST, 1, MAX_LIST), ("offset", 0, 0, 10**9)):
        raw = params.get(name, [str(default)])[0]
        number = plain_int(raw.strip())
        if number is None or not lowest <= number <= highest:
            raise QueryError(("query", name), f"{name} must be a whole number from {lowest} to {highest:,}")
        numbers[name] = number
    runs = _id_list(params["run"], "run") if "run" in params else None
    traces = _id_list(params["trace"], "trace") if "trace" in params else None
    sessions = _id_list(params["session"], "session") if "session" in params else None
    keys = tuple(params["key"]) if "key" in params else None
    sources = tuple(params["source"]) if "source" in params else None
    return FeedbackList(runs, traces, keys, sources, sessions, numbers["limit"], numbers["offset"])


def api_feedback(item: Mapping[str, Any]) -> dict[str, Any]:
    """A stored item as ``/feedback`` answers it: the SDK's ``Feedback`` needs these keys present."""
    out = dict(item)
    for name in ("run_id", "trace_id", "score", "value", "comment", "correction", "feedback_source", "session_id"):
        out.setdefault(name, None)
    out.setdefault("created_at", now_iso())
    out.setdefault("modified_at", out["created_at"])
    return out


def feedback_stats(items: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """A run's ``feedback_stats``, per key: how many (``n``), the mean score (``avg``), the text values counted.

    >>> feedback_stats([{"key": "thumbs", "score": 1}, {"key": "thumbs", "score": 0}, {"key": "tone", "value": "curt"}])
    {'thumbs': {'n': 2, 'avg': 0.5, 'values': {}}, 'tone': {'n': 1, 'avg': None, 'values': {'curt': 1}}}
    """
    stats: dict[str, dict[str, Any]] = {}
    scores: dict[str, list[float]] = {}
    for item in items:
        key = str(item.get("key"))
        entry = stats.setdefault(key, {"n": 0, "avg": None, "values": {}})
        entry["n"] += 1
        score, _ = _score(item.get("score"))
        if score is not None:
            scores.setdefault(key, []).append(score)
        value = item.get("value")
        if isinstance(value, str):
            entry["values"][value] = entry["values"].get(value, 0) + 1
    for key, values in scores.items():
        stats[key]["avg"] = sum(values) / len(values)
    return stats
