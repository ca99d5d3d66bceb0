"""``GET /runs/changes``: a trace's runs as they are stored or change, for a page that keeps showing a running trace.

A long poll: the answer comes when a run of the trace is stored or changed after the
client's cursor, or after ``wait`` seconds with none (then with no runs and the same
cursor), so a trace of any size stays current with one request per change, or per
``wait``, instead of being read again whole. Its row in the route table says
``streams``: the request leaves its slot for a long-lived one while it waits.

    GET /runs/changes?trace=ID                      -> {"runs": [], "cursor": "...", "more": false} at once
    GET /runs/changes?trace=ID&after=CURSOR&wait=20 -> {"runs": [run, ...], "cursor": "...", "more": bool}

Runs come in the order they changed, at most ``limit`` (default and most 1,000; ``more``
says to ask again at once), each with the fields the viewer's tree reads
(:data:`FIELDS`). A cursor names the store that made it: after a restart of the service
an old one is taken as the start of the trace, so every run comes again, never none.
Every answer says too whether the trace is ``live``: it has a run still open (no end time,
no error) and a run of it was stored within the service's live window (``otel-runs serve
--live-window``, 10 minutes by default), so a trace whose app stopped long ago without
ending its runs is not shown as running. Pure functions; the handler
(:func:`._handlers.run_changes`) waits on the store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from ._filter import QueryError
from ._numbers import SQL_INT_MAX, plain_int
from ._validate import canonical_id

__all__ = ["FIELDS", "MAX_WAIT_S", "MAX_LIMIT", "LIVE_WINDOW_S", "ChangesQuery", "parse_changes", "cursor", "is_live"]

FIELDS = frozenset({
    "name", "run_type", "start_time", "end_time", "status", "parent_run_id", "dotted_order", "trace_id",
    "total_tokens", "total_cost", "model", "requested_model", "priced_as", "thread_id", "session_id",
})
"""The fields each changed run answers (``id`` always): what the viewer's tree shows of a run."""
MAX_WAIT_S = 25
"""The longest a request is held (default 20 s): under the 60 s a connection may sit idle."""
MAX_LIMIT = 1_000
LIVE_WINDOW_S = 600.0
"""How recently a run of an open trace must have been stored for the trace to be live (the service's default)."""
_PARAMS = ("trace", "after", "wait", "limit")


@dataclass(frozen=True)
class ChangesQuery:
    """A checked ``GET /runs/changes``: ``after`` None is the first look (no runs, the cursor now)."""

    trace_id: str
    after: tuple[str, int] | None
    wait_s: float
    limit: int


def cursor(store_id: str, version: int) -> str:
    """The cursor a client sends back as ``after``.

    >>> cursor("ab12", 42)
    'ab12.42'
    """
    return f"{store_id}.{version}"


def _number(params: dict[str, list[str]], name: str, default: int, lowest: int, highest: int) -> int:
    raw = params.get(name, [str(default)])[0].strip()
    value = plain_int(raw)
    if value is None or not lowest <= value <= highest:
        raise QueryError(("query", name), f"{name} must be a whole number from {lowest} to {highest}")
    return value


def parse_changes(query: str) -> ChangesQuery:
    """Check the query string.

    >>> parse_changes("trace=0190b3c5f1b87a3e9c1d2e3f4a5b6c7d&after=ab12.7&wait=5").after
    ('ab12', 7)
    """
    params = parse_qs(query, keep_blank_values=True)
    for name, values in params.items():
        if name not in _PARAMS:
            raise QueryError(("query", name), f"{name} is not supported here; supported: {', '.join(_PARAMS)}")
        if len(values) > 1:
            raise QueryError(("query", name), f"{name} is given {len(values)} times; give it once")
    trace_id = canonical_id(params.get("trace", [""])[0])
    if trace_id is None:
        raise QueryError(("query", "trace"), "trace is required: the id of the trace to follow")
    after = None
    if "after" in params:
        store_id, _, number = params["after"][0].partition(".")
        version = plain_int(number)
        if not store_id or version is None or version > SQL_INT_MAX:  # never one of ours
            raise QueryError(("query", "after"), "after is a cursor this service handed out; pass it unchanged")
        after = (store_id, version)
    return ChangesQuery(trace_id, after, _number(params, "wait", 20, 0, MAX_WAIT_S), _number(params, "limit", MAX_LIMIT, 1, MAX_LIMIT))


def is_live(rows: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]], trace_id: str, window_s: float, now: float) -> bool:
    """Whether the trace has an open run and a run of it was stored in the ``window_s`` before ``now`` (Unix time).

    ``rows`` is the store's (:meth:`RunStore.rows <._store.RunStore.rows>`); both reads are index lookups.
    """
    (found,) = rows(
        "SELECT MAX(first_seen) FROM runs WHERE trace_id = ? AND posted = 1 AND first_seen >= ?"
        " AND EXISTS (SELECT 1 FROM runs WHERE trace_id = ? AND posted = 1 AND end_time IS NULL AND error IS NULL)",
        (trace_id, now - window_s, trace_id),
    )
    return found[0] is not None
