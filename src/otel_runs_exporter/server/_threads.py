"""Threads for the local service's ``/api/v2/threads`` routes: requests checked, answers shaped.

A thread is the traces of one conversation: root runs whose metadata names the same
thread, by ``session_id``, ``thread_id`` or ``conversation_id`` (the first present,
as the hosted service reads them, and as ``eq(thread_id, ...)`` filters in
:mod:`._query`), within one project. Each trace is a turn; turns are numbered by
start time, then trace id. Pure functions like :mod:`._v2` (whose request pieces they
share); the routes (:mod:`._handlers_v2`) run the store's queries::

    POST /api/v2/threads/query           {"project_id", "filter", "trace_filter", "tree_filter",
                                          "min_start_time", "max_start_time", "page_size", "cursor"}
                                         -> {"items": [thread, ...], "next_cursor"}, latest activity first
    GET  /api/v2/threads/{id}/traces     ?project_id=&filter=&trace_filter=&tree_filter=&selects=&page_size=&cursor=
                                         -> {"items": [trace, ...], "next_cursor"}, in turn order
    GET  /api/v2/threads/{id}/stats      ?session_id=&selects=TURNS&selects=...&filter=      -> stats of one thread
    POST /api/v2/threads/stats           {"project_id", "select", "filter", "trace_filter", "tree_filter",
                                          "min_start_time", "max_start_time"}                 -> stats over threads

``filter`` narrows the traces a thread is made of (a thread none of whose traces
match is not listed); ``trace_filter`` keeps the threads with at least one trace whose
root run matches, ``tree_filter`` those with a matching run anywhere in a trace.
Tokens and costs are the traces' (each run's own added up); token and cost details and
feedback stats are null: not kept here. ``thread_filter``,
``ai_search`` and ``sem_filter`` are 422s naming them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ._filter import FIELDS, QueryError, Where, parse_filter
from ._v2 import check_body, one_id, page_of, parse_params, selects_of, time_window

__all__ = [
    "thread_key",
    "RootsWhere",
    "ThreadsQuery",
    "ThreadTraces",
    "ThreadStatsQuery",
    "AggregateStatsQuery",
    "TRACE_SELECTS",
    "THREAD_STATS_SELECTS",
    "AGGREGATE_STATS_SELECTS",
    "parse_threads_query",
    "parse_thread_traces",
    "parse_thread_stats",
    "parse_aggregate_stats",
    "thread_summary",
]

TRACE_SELECTS = (
    "THREAD_ID", "TRACE_ID", "OP", "PROMPT_TOKENS", "COMPLETION_TOKENS", "TOTAL_TOKENS", "START_TIME", "END_TIME",
    "LATENCY", "FIRST_TOKEN_TIME", "INPUTS_PREVIEW", "OUTPUTS_PREVIEW", "INPUTS", "OUTPUTS", "ERROR", "PROMPT_COST",
    "COMPLETION_COST", "TOTAL_COST", "PROMPT_TOKEN_DETAILS", "COMPLETION_TOKEN_DETAILS", "PROMPT_COST_DETAILS",
    "COMPLETION_COST_DETAILS", "NAME", "ERROR_PREVIEW", "TURN_NUMBER",
)
"""The SDK's ``ThreadTraceSelectField``: what one trace of a thread may be asked for."""
THREAD_STATS_SELECTS = (
    "TURNS", "FIRST_START_TIME", "LAST_START_TIME", "LAST_END_TIME", "LATENCY_P50", "LATENCY_P99", "PROMPT_TOKENS",
    "PROMPT_COST", "COMPLETION_TOKENS", "COMPLETION_COST", "TOTAL_TOKENS", "TOTAL_COST", "PROMPT_TOKEN_DETAILS",
    "COMPLETION_TOKEN_DETAILS", "PROMPT_COST_DETAILS", "COMPLETION_COST_DETAILS", "FEEDBACK_STATS",
)
"""The SDK's ``SingleThreadStatsSelectField``."""
AGGREGATE_STATS_SELECTS = (
    "THREAD_COUNT", "TRACE_COUNT", "TOTAL_TOKENS", "TOTAL_COST", "ERROR_RATE", "STREAMING_RATE", "LATENCY_P50",
    "LATENCY_P99", "MEDIAN_TOKENS", "FIRST_TOKEN_P50", "FIRST_TOKEN_P99", "PROMPT_TOKENS", "COMPLETION_TOKENS",
    "PROMPT_COST", "COMPLETION_COST", "PROMPT_TOKEN_DETAILS", "COMPLETION_TOKEN_DETAILS", "PROMPT_COST_DETAILS",
    "COMPLETION_COST_DETAILS", "THREAD_FEEDBACK_STATS",
)
"""What ``POST /api/v2/threads/stats`` may be asked for (its ``select``)."""

def thread_key(alias: str) -> str:
    """The SQL of a root run's thread id over ``runs AS <alias>`` (the same one ``eq(thread_id, ...)`` uses)."""
    return FIELDS["thread_id"][0].format(t=alias)


def _params(query: str, allowed: Sequence[str], repeatable: Sequence[str] = ()) -> dict[str, str | list[str]]:
    params = parse_params(query, allowed, repeatable)
    return {k: (v if k in repeatable else v[0]) for k, v in params.items()}


def _text(value: Any, loc: Sequence[str]) -> str:
    if not isinstance(value, str):
        raise QueryError(loc, f"{loc[-1]} must be text")
    return value


@dataclass(frozen=True)
class RootsWhere:
    """Which root runs make up the threads asked about, as SQL for any table alias.

    ``project_id``, the thread (when one is named), the time window, ``root_filters``
    (on the root run) and ``tree_filters`` (on any run of its trace) hold for each
    root counted; ``trace_filter`` and ``tree_filter`` keep a whole thread when one of
    its roots (or any run of one of its traces) matches. Filters are ``(key, text)``,
    the key naming the request's field in errors.
    """

    project_id: str
    thread_id: str | None = None
    window: tuple[str, str, bool] | None = None
    root_filters: tuple[tuple[str, str], ...] = ()
    tree_filters: tuple[tuple[str, str], ...] = ()
    trace_filter: str | None = None
    tree_filter: str | None = None
    where: str = "body"

    def roots(self, alias: str = "r") -> Where:
        """The roots counted, over ``runs AS <alias>`` (the caller keeps to posted runs)."""
        a = alias
        parts = [
            Where(f"{a}.parent_run_id IS NULL"),
            Where(f"{a}.project_id = ?", (self.project_id,)),
            Where(f"{thread_key(a)} IS NOT NULL"),
        ]
        if self.thread_id is not None:
            parts.append(Where(f"{thread_key(a)} = ?", (self.thread_id,)))
        if self.window is not None:
            low, high, inclusive = self.window
            parts.append(Where(f"{a}.start_time >= ? AND {a}.start_time {'<=' if inclusive else '<'} ?", (low, high)))
        parts += [self._filter(text, key, a) for key, text in self.root_filters]
        parts += [self._in_tree(text, key, a) for key, text in self.tree_filters]
        return Where.all_of(parts)

    def matching(self, alias: str = "r") -> Where | None:
        """For one root over ``<alias>``: whether its trace makes its thread eligible (None: every thread is)."""
        parts = []
        if self.trace_filter is not None:
            parts.append(self._filter(self.trace_filter, "trace_filter", alias))
        if self.tree_filter is not None:
            parts.append(self._in_tree(self.tree_filter, "tree_filter", alias))
        return Where.all_of(parts) if parts else None

    def eligible_roots(self, alias: str = "r") -> Where:
        """The roots counted, of eligible threads only: :meth:`roots`, and with ``trace_filter`` or
        ``tree_filter`` a thread that has a matching trace among its roots."""
        roots = self.roots(alias)
        matching = self.matching("m")
        if matching is None:
            return roots
        inner = Where.all_of([self.roots("m"), matching])
        return Where.all_of(
            [
                roots,
                Where(
                    f"{thread_key(alias)} IN (SELECT {thread_key('m')} FROM runs AS m WHERE m.posted = 1 AND ({inner.sql}))",
                    inner.params,
                ),
            ]
        )

    def having(self) -> Where:
        """For :meth:`RunStore.threads <._store.RunStore.threads>` (grouping ``r``): the eligible threads."""
        matching = self.matching("r")
        if matching is None:
            return Where("1")
        return Where(f"SUM(CASE WHEN ({matching.sql}) THEN 1 ELSE 0 END) > 0", matching.params)

    def _filter(self, text: str, key: str, alias: str) -> Where:
        try:
            return parse_filter(text, key, alias)
        except QueryError as exc:
            raise QueryError((self.where, *exc.loc[1:]), exc.msg) from None

    def _in_tree(self, text: str, key: str, alias: str) -> Where:
        inner = self._filter(text, key, f"{alias}_tree")
        return Where(
            f"{alias}.trace_id IN (SELECT {alias}_tree.trace_id FROM runs AS {alias}_tree"
            f" WHERE {alias}_tree.posted = 1 AND ({inner.sql}))",
            inner.params,
        )


@dataclass(frozen=True)
class ThreadsQuery:
    """A checked ``POST /api/v2/threads/query``."""

    roots: RootsWhere
    page_size: int
    after: tuple[str, str] | None


def _filters(values: Mapping[str, Any], where: str, keys: Sequence[str]) -> tuple[tuple[str, str], ...]:
    return tuple((key, _text(values[key], (where, key))) for key in keys if key in values)


def _one(values: Mapping[str, Any], where: str, key: str) -> str | None:
    return _text(values[key], (where, key)) if key in values else None


def _project_roots(body: Mapping[str, Any], purpose: str, now: datetime | None) -> RootsWhere:
    """The root runs of a project's threads that a threads body names: its window and its three filters."""
    if "project_id" not in body:
        raise QueryError(("body", "project_id"), f"project_id is required: the project whose threads to {purpose}")
    low, high, _ = time_window("body", body.get("min_start_time"), body.get("max_start_time"), now=now or _now())
    roots = RootsWhere(
        one_id(body["project_id"], ("body", "project_id")),
        window=(low, high, False),
        root_filters=_filters(body, "body", ("filter",)),
        trace_filter=_one(body, "body", "trace_filter"),
        tree_filter=_one(body, "body", "tree_filter"),
    )
    _check_filters(roots)
    return roots


def parse_threads_query(body: Any, *, now: datetime | None = None) -> ThreadsQuery:
    """Check a ``POST /api/v2/threads/query`` body.

    >>> q = parse_threads_query({"project_id": "0190b3c5f1b87a3e9c1d2e3f4a5b6c7d", "page_size": 5})
    >>> q.page_size, q.roots.project_id
    (5, '0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d')
    """
    allowed = (
        "project_id", "filter", "trace_filter", "tree_filter", "min_start_time", "max_start_time", "page_size", "cursor",
    )
    body = check_body(body, allowed)
    roots = _project_roots(body, "list", now)
    page_size, after = page_of(body, "body", "threads", (str, str))
    return ThreadsQuery(roots, page_size, after)


def _check_filters(roots: RootsWhere) -> None:
    # Parsed once up front, so a bad expression is a 422 before any query runs.
    roots.roots()
    roots.matching()


@dataclass(frozen=True)
class ThreadTraces:
    """A checked ``GET /api/v2/threads/{id}/traces``."""

    thread: RootsWhere
    listed: RootsWhere
    selects: tuple[str, ...]
    page_size: int
    after: tuple[str, int] | None


def parse_thread_traces(thread_id: str, query: str) -> ThreadTraces:
    """Check ``GET /api/v2/threads/{id}/traces``: ``thread`` is every trace of the thread (for turn numbers),
    ``listed`` the ones the filters keep."""
    params = _params(
        query,
        ("project_id", "cursor", "filter", "page_size", "selects", "trace_filter", "tree_filter"),
        ("selects",),
    )
    if "project_id" not in params:
        raise QueryError(("query", "project_id"), "project_id is required: the project the thread is in")
    project_id = one_id(params["project_id"], ("query", "project_id"))
    thread = RootsWhere(project_id, thread_id=thread_id, where="query")
    # Here each filter applies to the thread's traces one by one: filter and trace_filter to the root run.
    listed = RootsWhere(
        project_id,
        thread_id=thread_id,
        where="query",
        root_filters=_filters(params, "query", ("filter", "trace_filter")),
        tree_filters=_filters(params, "query", ("tree_filter",)),
    )
    _check_filters(listed)
    page_size, after = page_of(params, "query", "thread-traces", (str, int))
    selects = selects_of(params.get("selects"), ("query", "selects"), TRACE_SELECTS)
    return ThreadTraces(thread, listed, selects, page_size, after)


@dataclass(frozen=True)
class ThreadStatsQuery:
    """A checked ``GET /api/v2/threads/{id}/stats``."""

    roots: RootsWhere
    selects: tuple[str, ...]


def parse_thread_stats(thread_id: str, query: str) -> ThreadStatsQuery:
    """Check ``GET /api/v2/threads/{id}/stats`` (``session_id`` is the project; at least one select)."""
    params = _params(query, ("session_id", "selects", "filter"), ("selects",))
    if "session_id" not in params:
        raise QueryError(("query", "session_id"), "session_id is required: the project the thread is in")
    selects = selects_of(params.get("selects"), ("query", "selects"), THREAD_STATS_SELECTS)
    if not selects:
        raise QueryError(("query", "selects"), f"selects is required: one or more of {', '.join(THREAD_STATS_SELECTS)}")
    roots = RootsWhere(
        one_id(params["session_id"], ("query", "session_id")),
        thread_id=thread_id,
        where="query",
        root_filters=_filters(params, "query", ("filter",)),
    )
    _check_filters(roots)
    return ThreadStatsQuery(roots, selects)


@dataclass(frozen=True)
class AggregateStatsQuery:
    """A checked ``POST /api/v2/threads/stats``."""

    roots: RootsWhere
    select: tuple[str, ...]


def parse_aggregate_stats(body: Any, *, now: datetime | None = None) -> AggregateStatsQuery:
    """Check a ``POST /api/v2/threads/stats`` body."""
    allowed = ("project_id", "select", "filter", "trace_filter", "tree_filter", "min_start_time", "max_start_time")
    body = check_body(body, allowed)
    select = selects_of(body.get("select"), ("body", "select"), AGGREGATE_STATS_SELECTS)
    if not select:
        raise QueryError(("body", "select"), f"select is required: one or more of {', '.join(AGGREGATE_STATS_SELECTS)}")
    return AggregateStatsQuery(_project_roots(body, "summarize", now), select)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def thread_summary(
    thread_id: str,
    count: int,
    first_start: str,
    last_start: str,
    *,
    first_trace_id: str | None,
    last_trace_id: str | None,
    first_inputs: str | None,
    last_outputs: str | None,
    last_error: str | None,
    errors: int,
    latency_p50: float | None,
    latency_p99: float | None,
    total_tokens: int,
    total_cost: float | None = None,
) -> dict[str, Any]:
    """One item of ``/threads/query``: what the SDK's ``Thread`` holds, from the thread's roots (the texts are
    :func:`._v2.preview`'s of the first turn's inputs, the last turn's outputs and the last failed turn's error)."""
    return {
        "thread_id": thread_id,
        "count": count,
        "min_start_time": first_start or None,
        "max_start_time": last_start or None,
        "start_time": last_start or None,
        "first_trace_id": first_trace_id,
        "last_trace_id": last_trace_id,
        "trace_id": last_trace_id,
        "first_inputs": first_inputs,
        "last_outputs": last_outputs,
        "last_error": last_error,
        "num_errored_turns": errors,
        "latency_p50": latency_p50,
        "latency_p99": latency_p99,
        "total_tokens": total_tokens,
        "total_cost": total_cost,
        "total_cost_details": None,
        "total_token_details": None,
        "feedback_stats": None,
        "query_metadata": None,
    }
