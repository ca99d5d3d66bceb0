"""The ``/api/v2`` read API of the local service (runs and traces): requests checked, answers shaped.

Pure functions, like :mod:`._query` (whose filter expressions and :class:`~._query.QueryError`
they reuse): a route hands over the JSON body or the query string, gets back a checked
request (a WHERE fragment over ``runs AS r`` and what shapes the page), and after the
store has run it, shapes the answer as the service's SDK (langsmith 0.15: ``client.runs``,
``client.traces``, and through them ``evaluate`` and ``get_test_results``) reads it::

    POST /api/v2/runs/query        {"project_ids", "ids", "trace_id", "is_root", "has_error", "run_type",
                                    "reference_examples", "filter", "trace_filter", "tree_filter",
                                    "min_start_time", "max_start_time", "selects", "page_size", "cursor"}
                                   -> {"items": [run, ...], "next_cursor": "..." | null}
    GET  /api/v2/runs/{id}         ?project_id=&selects=ID&selects=NAME...&start_time=    -> run
    POST /api/v2/traces/query      {"project_id", "trace_ids", "trace_filter", "tree_filter",
                                    "min_start_time", "max_start_time", "selects", "page_size", "cursor"}
                                   -> {"items": [{"root_run": run, "trace_aggregates": {...}}], "next_cursor"}
    GET  /api/v2/traces/{id}/runs  ?project_id=&filter=&min_start_time=&max_start_time=&selects=...
                                   -> {"items": [run, ...]} in start-time order

A run answers exactly the fields named in ``selects`` (upper case, the SDK's
``RunSelectField``), only ``id`` when none are; fields this service does not keep
the data for (costs, token details, feedback stats, ...) are null. Times are
RFC 3339 in UTC. A key or a select this service does not know, or knows but
cannot honour (``ai_search``, ``sem_filter``, feedback times, datasets), is a 422
naming it: nothing is silently ignored.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qs

import orjson

from ._numbers import SQL_INT_MAX, plain_int
from ._query import QueryError, Where, api_run, flag, parse_filter
from ._render import token_counts
from ._store import sortable_time
from ._validate import canonical_id, parse_timestamp

__all__ = [
    "RUN_SELECTS",
    "AGGREGATE_SELECTS",
    "COST_SELECTS",
    "PagedQuery",
    "TraceRuns",
    "Params",
    "parse_params",
    "check_body",
    "parse_runs_query",
    "parse_run_retrieve",
    "parse_traces_query",
    "parse_trace_runs",
    "v2_run",
    "trace_aggregates",
    "root_selects",
    "preview",
    "encode_cursor",
    "decode_cursor",
    "filters",
    "time_window",
    "selects_of",
    "page_size_of",
    "page_of",
    "one_id",
]

RUN_SELECTS = (
    "ID", "NAME", "RUN_TYPE", "STATUS", "START_TIME", "END_TIME", "LATENCY_SECONDS", "FIRST_TOKEN_TIME", "ERROR",
    "ERROR_PREVIEW", "EXTRA", "METADATA", "EVENTS", "INPUTS", "INPUTS_PREVIEW", "OUTPUTS", "OUTPUTS_PREVIEW",
    "MANIFEST", "PARENT_RUN_IDS", "PROJECT_ID", "TRACE_ID", "THREAD_ID", "DOTTED_ORDER", "IS_ROOT",
    "REFERENCE_EXAMPLE_ID", "REFERENCE_DATASET_ID", "TOTAL_TOKENS", "PROMPT_TOKENS", "COMPLETION_TOKENS",
    "TOTAL_COST", "PROMPT_COST", "COMPLETION_COST", "PROMPT_TOKEN_DETAILS", "COMPLETION_TOKEN_DETAILS",
    "PROMPT_COST_DETAILS", "COMPLETION_COST_DETAILS", "PRICE_MODEL_ID", "TAGS", "APP_PATH", "ATTACHMENTS",
    "THREAD_EVALUATION_TIME", "IS_IN_DATASET", "LAST_QUEUED_AT", "SHARE_URL", "FEEDBACK_STATS", "LS_USER_ID",
)
"""The SDK's ``RunSelectField``: every field a v2 run may be asked for."""

AGGREGATE_SELECTS = ("TOTAL_TOKENS", "TOTAL_COST", "FIRST_TOKEN_TIME")
"""What ``/traces/query`` answers under ``trace_aggregates`` (over the whole trace) instead of on the root run."""

PREVIEW_CHARS = 500
"""Length of ``*_PREVIEW`` texts: inputs, outputs and errors cut to this many characters."""
MAX_TRACE_RUNS = 10_000
"""Runs ``/traces/{id}/runs`` answers at most, in one page; past that, page with ``/runs/query`` and ``trace_id``."""
_DAY = timedelta(days=1)
_MAX_LIST = 1_000

# Keys the hosted API takes that need what this service has no data or model for.
_NOT_SUPPORTED = {
    "ai_search": "AI search needs a model; use filter, or search(\"text\") in a filter",
    "sem_filter": "semantic filters need a model; use filter, or search(\"text\") in a filter",
    "min_feedback_modified_at": "feedback is not joined to runs here",
    "max_feedback_modified_at": "feedback is not joined to runs here",
    "reference_dataset_id": "there are no datasets here; use project_ids",
    "include_subtree_usage": "tokens are each run's own; ask TOTAL_TOKENS of /api/v2/traces/query for a trace's total",
    "thread_filter": "filters on a whole thread's summary are not supported; use filter, trace_filter or tree_filter",
}


# --- request pieces -----------------------------------------------------------------


Params = Mapping[str, list[str]]


def parse_params(query: str, allowed: Sequence[str], repeatable: Sequence[str] = ()) -> dict[str, list[str]]:
    """A query string checked against the names a route takes; each name once unless ``repeatable``.

    >>> parse_params("project_id=x&selects=ID&selects=NAME", ("project_id", "selects"), ("selects",))
    {'project_id': ['x'], 'selects': ['ID', 'NAME']}
    """
    params = parse_qs(query, keep_blank_values=True)
    for name, values in params.items():
        if name not in allowed:
            raise _unknown(("query", name), name, allowed)
        if len(values) > 1 and name not in repeatable:
            raise QueryError(("query", name), f"{name} is given {len(values)} times; give it once")
    return params


def _unknown(loc: Sequence[str], name: str, allowed: Sequence[str]) -> QueryError:
    why = _NOT_SUPPORTED.get(name)
    if why is not None:
        return QueryError(loc, f"{name} is not supported by the local service: {why}")
    return QueryError(loc, f"{name} is not supported by the local service; supported: {', '.join(allowed)}")


def check_body(body: Any, allowed: Sequence[str]) -> dict[str, Any]:
    """A JSON object body whose keys are all ``allowed`` (null ones dropped, as absent); else a 422 naming the key."""
    if not isinstance(body, dict):
        raise QueryError(("body",), "the body must be a JSON object")
    body = {k: v for k, v in body.items() if v is not None}
    for name in body:
        if name not in allowed:
            raise _unknown(("body", name), name, allowed)
    return body


def one_id(value: Any, loc: Sequence[str]) -> str:
    """A UUID (32-hex or hyphenated) as stored, or a 422 naming ``loc``."""
    canon = canonical_id(value) if isinstance(value, str) else None
    if canon is None:
        raise QueryError(loc, f"{loc[-1]} {str(value)[:60]!r} is not a UUID")
    return canon


def _ids(value: Any, loc: Sequence[str]) -> list[str]:
    if not isinstance(value, list):
        raise QueryError(loc, f"{loc[-1]} must be a list of UUIDs, got {type(value).__name__}")
    if len(value) > _MAX_LIST:
        raise QueryError(loc, f"{loc[-1]} lists {len(value)} ids; at most {_MAX_LIST} in one request")
    return [one_id(v, (*loc, str(i))) for i, v in enumerate(value)]


def _in(column: str, values: Sequence[str]) -> Where:
    if not values:
        return Where("0")
    return Where(f"{column} IN ({', '.join('?' * len(values))})", tuple(values))


def _time(value: Any, loc: Sequence[str]) -> str:
    moment = sortable_time(value) if isinstance(value, str) else None
    if moment is None:
        raise QueryError(loc, f"{loc[-1]} {str(value)[:60]!r} is not an RFC 3339 timestamp")
    return moment


def time_window(
    where: str, lowest: Any, highest: Any, *, now: datetime, upper_inclusive: bool = True, alias: str = "r"
) -> tuple[str, str, Where]:
    """``min_start_time`` and ``max_start_time`` (from ``where``: ``"body"`` or ``"query"``), defaulting as the hosted
    service does, to the last day: ``(low, high, condition on r.start_time)``.

    >>> now = datetime(2025, 3, 2, tzinfo=timezone.utc)
    >>> time_window("body", None, None, now=now)[:2]
    ('2025-03-01T00:00:00.000000Z', '2025-03-02T00:00:00.000000Z')
    """
    low = _time(lowest, (where, "min_start_time")) if lowest is not None else sortable_time((now - _DAY).isoformat())
    high = _time(highest, (where, "max_start_time")) if highest is not None else sortable_time(now.isoformat())
    assert low is not None and high is not None
    if high < low:
        raise QueryError((where, "max_start_time"), f"max_start_time {high} is before min_start_time {low}")
    op = "<=" if upper_inclusive else "<"
    return low, high, Where(f"{alias}.start_time >= ? AND {alias}.start_time {op} ?", (low, high))


def filters(
    values: Mapping[str, Any], where: str, keys: Sequence[str] = ("filter", "trace_filter", "tree_filter")
) -> list[Where]:
    """``filter`` (on the run), ``trace_filter`` (on its trace's root), ``tree_filter`` (on any run of its trace)."""
    parts: list[Where] = []
    for key in keys:
        if key not in values:
            continue
        text = values[key]
        try:
            inner = parse_filter(text, key, "r" if key == "filter" else "t")
        except QueryError as exc:
            raise QueryError((where, *exc.loc[1:]), exc.msg) from None
        if key == "filter":
            parts.append(inner)
        elif key == "trace_filter":
            parts.append(
                Where(
                    "r.trace_id IN (SELECT t.id FROM runs AS t WHERE t.posted = 1 AND t.parent_run_id IS NULL"
                    f" AND ({inner.sql}))",
                    inner.params,
                )
            )
        else:
            parts.append(
                Where(f"r.trace_id IN (SELECT t.trace_id FROM runs AS t WHERE t.posted = 1 AND ({inner.sql}))", inner.params)
            )
    return parts


def selects_of(values: Any, loc: Sequence[str], allowed: Sequence[str] = RUN_SELECTS) -> tuple[str, ...]:
    """Checked ``selects`` (upper-case names, each once, in the order given); empty means only the id."""
    if values is None:
        return ()
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise QueryError(loc, f"{loc[-1]} must be a list of field names such as \"ID\", \"NAME\"")
    unknown = [v for v in values if v not in allowed]
    if unknown:
        raise QueryError(loc, f"{loc[-1]}: unknown field {unknown[0][:60]!r}; supported: {', '.join(allowed)}")
    return tuple(dict.fromkeys(values))


def page_size_of(value: Any, loc: Sequence[str], default: int, highest: int) -> int:
    """A page size from 1 to ``highest`` (a JSON number, or digits in a query string)."""
    if value is None:
        return default
    number = plain_int(value) if isinstance(value, str) else value
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= highest:
        raise QueryError(loc, f"{loc[-1]} must be a whole number from 1 to {highest}, got {json.dumps(value)[:60]}")
    return number


def page_of(
    values: Mapping[str, Any], where: str, kind: str, shape: tuple[type, ...], default: int = 20, highest: int = 100
) -> tuple[int, tuple[Any, ...] | None]:
    """A listing's page size and the position its ``cursor`` names (None on the first page)."""
    after = decode_cursor(values["cursor"], kind, shape, (where, "cursor")) if "cursor" in values else None
    return page_size_of(values.get("page_size"), (where, "page_size"), default, highest), after


def _run_type(value: Any, loc: Sequence[str]) -> str:
    if not isinstance(value, str) or not value.strip():
        raise QueryError(loc, "run_type must be a run type such as \"LLM\" or \"CHAIN\"")
    return value.lower()


# --- cursors --------------------------------------------------------------------------


def encode_cursor(kind: str, position: Sequence[str | int]) -> str:
    """An opaque cursor: which listing it belongs to, and the sort key of the last item of the page.

    >>> decode_cursor(encode_cursor("runs", ["2025-03-01T12:00:00.000000Z", 7]), "runs", (str, int), ("body", "cursor"))
    ('2025-03-01T12:00:00.000000Z', 7)
    """
    return base64.urlsafe_b64encode(orjson.dumps([kind, *position])).decode().rstrip("=")


def decode_cursor(raw: Any, kind: str, shape: tuple[type, ...], loc: Sequence[str]) -> tuple[Any, ...]:
    """The position ``encode_cursor`` put in ``raw``, or a 422 saying to pass ``next_cursor`` unchanged."""
    bad = QueryError(loc, "cursor is not one this service handed out for this listing; pass next_cursor unchanged")
    if not isinstance(raw, str) or not raw or len(raw) > 2000:
        raise bad
    try:
        decoded = orjson.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (binascii.Error, ValueError):
        raise bad from None
    if not isinstance(decoded, list) or len(decoded) != len(shape) + 1 or decoded[0] != kind:
        raise bad
    values = decoded[1:]
    for value, expected in zip(values, shape):
        if isinstance(value, bool) or not isinstance(value, expected):
            raise bad
        if isinstance(value, int) and not 0 <= value <= SQL_INT_MAX:  # a forged one past 64 bits would reach SQLite
            raise bad
        if isinstance(value, str) and len(value) > 1000:
            raise bad
    return tuple(values)


# --- runs -----------------------------------------------------------------------------

_RUNS_KEYS = (
    "project_ids", "ids", "trace_id", "is_root", "has_error", "run_type", "reference_examples", "filter",
    "trace_filter", "tree_filter", "min_start_time", "max_start_time", "selects", "page_size", "cursor",
)
_RUNS_PAGE = 100
_RUNS_PAGE_MAX = 1000


@dataclass(frozen=True)
class PagedQuery:
    """A checked ``POST /api/v2/runs/query`` or ``/api/v2/traces/query`` (the latter's runs are roots).

    Newest first, keyset-paged on (start time, arrival).
    """

    where: Where
    selects: tuple[str, ...]
    page_size: int
    after: tuple[str, int] | None


def parse_runs_query(body: Any, *, now: datetime | None = None) -> PagedQuery:
    """Check a ``POST /api/v2/runs/query`` body.

    >>> q = parse_runs_query({"project_ids": ["0190b3c5f1b87a3e9c1d2e3f4a5b6c7d"], "is_root": True,
    ...                       "selects": ["ID", "NAME"], "page_size": 2})
    >>> q.selects, q.page_size
    (('ID', 'NAME'), 2)
    """
    body = check_body(body, _RUNS_KEYS)
    if "project_ids" not in body:
        raise QueryError(("body", "project_ids"), "project_ids is required: the projects whose runs to list")
    parts = [_in("r.project_id", _ids(body["project_ids"], ("body", "project_ids")))]
    if "ids" in body:
        parts.append(_in("r.id", _ids(body["ids"], ("body", "ids"))))
    if "trace_id" in body:
        parts.append(Where("r.trace_id = ?", (one_id(body["trace_id"], ("body", "trace_id")),)))
    if "reference_examples" in body:
        parts.append(_in("r.reference_example_id", _ids(body["reference_examples"], ("body", "reference_examples"))))
    if "run_type" in body:
        parts.append(Where("r.run_type = ?", (_run_type(body["run_type"], ("body", "run_type")),)))
    if "is_root" in body:
        parts.append(Where(f"r.parent_run_id IS {'' if flag(body['is_root'], 'is_root') else 'NOT '}NULL"))
    if "has_error" in body:
        parts.append(Where(f"r.error IS {'NOT ' if flag(body['has_error'], 'has_error') else ''}NULL"))
    parts += filters(body, "body")
    parts.append(
        time_window("body", body.get("min_start_time"), body.get("max_start_time"), now=now or _now())[2]
    )
    page_size, after = page_of(body, "body", "runs", (str, int), _RUNS_PAGE, _RUNS_PAGE_MAX)
    selects = selects_of(body.get("selects"), ("body", "selects"))
    return PagedQuery(Where.all_of(parts), selects, page_size, after)


def parse_run_retrieve(query: str) -> tuple[str, tuple[str, ...]]:
    """Check ``GET /api/v2/runs/{id}``'s query string: ``(project_id, selects)``; ``start_time`` is only a hint."""
    params = parse_params(query, ("project_id", "selects", "start_time"), ("selects",))
    if "project_id" not in params:
        raise QueryError(("query", "project_id"), "project_id is required: the project that owns the run")
    if "start_time" in params:
        _time(params["start_time"][0], ("query", "start_time"))
    return one_id(params["project_id"][0], ("query", "project_id")), selects_of(params.get("selects"), ("query", "selects"))


# --- traces ---------------------------------------------------------------------------

_TRACES_KEYS = (
    "project_id", "trace_ids", "trace_filter", "tree_filter", "min_start_time", "max_start_time", "selects",
    "page_size", "cursor",
)


def parse_traces_query(body: Any, *, now: datetime | None = None) -> PagedQuery:
    """Check a ``POST /api/v2/traces/query`` body (``trace_filter`` applies to the root runs themselves)."""
    body = check_body(body, _TRACES_KEYS)
    if "project_id" not in body:
        raise QueryError(("body", "project_id"), "project_id is required: the project whose traces to list")
    parts = [
        Where("r.parent_run_id IS NULL"),
        Where("r.project_id = ?", (one_id(body["project_id"], ("body", "project_id")),)),
    ]
    if "trace_ids" in body:
        parts.append(_in("r.trace_id", _ids(body["trace_ids"], ("body", "trace_ids"))))
    parts += filters(body, "body", ("trace_filter", "tree_filter"))
    parts.append(
        time_window(
            "body", body.get("min_start_time"), body.get("max_start_time"), now=now or _now(), upper_inclusive=False
        )[2]
    )
    page_size, after = page_of(body, "body", "traces", (str, int))
    selects = selects_of(body.get("selects"), ("body", "selects"))
    return PagedQuery(Where.all_of(parts), selects, page_size, after)


@dataclass(frozen=True)
class TraceRuns:
    """A checked ``GET /api/v2/traces/{id}/runs``."""

    where: Where
    selects: tuple[str, ...]


def parse_trace_runs(trace_id: str, query: str) -> TraceRuns:
    """Check ``GET /api/v2/traces/{id}/runs``: the trace's runs in the project, narrowed by ``filter`` and a window.

    The window is optional here, but both ends together, as the hosted API wants.
    """
    params = parse_params(
        query, ("project_id", "filter", "min_start_time", "max_start_time", "selects"), ("selects",)
    )
    if "project_id" not in params:
        raise QueryError(("query", "project_id"), "project_id is required: the project that owns the trace")
    parts = [
        Where("r.trace_id = ?", (one_id(trace_id, ("path", "trace_id")),)),
        Where("r.project_id = ?", (one_id(params["project_id"][0], ("query", "project_id")),)),
    ]
    single = {k: v[0] for k, v in params.items() if k != "selects"}
    parts += filters(single, "query", ("filter",))
    if ("min_start_time" in single) != ("max_start_time" in single):
        missing = "max_start_time" if "min_start_time" in single else "min_start_time"
        raise QueryError(("query", missing), "min_start_time and max_start_time go together; give both or neither")
    if "min_start_time" in single:
        parts.append(time_window("query", single["min_start_time"], single["max_start_time"], now=_now())[2])
    return TraceRuns(Where.all_of(parts), selects_of(params.get("selects"), ("query", "selects")))


# --- the answers ---------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(timezone.utc)


def preview(value: Any) -> str | None:
    """A short plain-text view of inputs, outputs or an error: the one text it holds, else compact JSON; clipped.

    >>> preview({"question": "why?"}), preview({"a": 1, "b": [2]}), preview(None)
    ('why?', '{"a":1,"b":[2]}', None)
    """
    if value is None:
        return None
    if isinstance(value, dict) and len(value) == 1 and isinstance(next(iter(value.values())), str):
        text = next(iter(value.values()))
    elif isinstance(value, str):
        text = value
    else:
        text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _first_token_time(run: Mapping[str, Any]) -> str | None:
    events = run.get("events")
    if not isinstance(events, list):
        return None
    for event in events:
        if isinstance(event, dict) and event.get("name") == "new_token":
            return sortable_time(event.get("time"))
    return None


def _object(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _tokens(run: Mapping[str, Any], label: str) -> int | None:
    return token_counts(run).get(label)


_Getter = Callable[[Mapping[str, Any], Mapping[str, Any]], Any]

# select -> value, from the stored run and what api_run computes (session_id, status, parent_run_ids, thread_id).
_VALUES: dict[str, _Getter] = {
    "ID": lambda run, c: run.get("id"),
    "NAME": lambda run, c: run.get("name"),
    "RUN_TYPE": lambda run, c: run["run_type"].upper() if isinstance(run.get("run_type"), str) else None,
    "STATUS": lambda run, c: str(c["status"]).upper(),
    "START_TIME": lambda run, c: sortable_time(run.get("start_time")),
    "END_TIME": lambda run, c: sortable_time(run.get("end_time")),
    "LATENCY_SECONDS": lambda run, c: c.get("latency"),
    "FIRST_TOKEN_TIME": lambda run, c: _first_token_time(run),
    "ERROR": lambda run, c: None if run.get("error") is None else str(run["error"]),
    "ERROR_PREVIEW": lambda run, c: preview(None if run.get("error") is None else str(run["error"])),
    "EXTRA": lambda run, c: _object(run.get("extra")),
    "METADATA": lambda run, c: _object((_object(run.get("extra")) or {}).get("metadata")),
    "EVENTS": lambda run, c: run.get("events") if isinstance(run.get("events"), list) else None,
    "INPUTS": lambda run, c: _object(run.get("inputs")),
    "INPUTS_PREVIEW": lambda run, c: preview(run.get("inputs")),
    "OUTPUTS": lambda run, c: _object(run.get("outputs")),
    "OUTPUTS_PREVIEW": lambda run, c: preview(run.get("outputs")),
    "MANIFEST": lambda run, c: _object(run.get("serialized")),
    "PARENT_RUN_IDS": lambda run, c: c["parent_run_ids"],
    "PROJECT_ID": lambda run, c: c["session_id"],
    "TRACE_ID": lambda run, c: run.get("trace_id"),
    "THREAD_ID": lambda run, c: c["thread_id"],
    "DOTTED_ORDER": lambda run, c: run.get("dotted_order"),
    "IS_ROOT": lambda run, c: run.get("parent_run_id") is None,
    "REFERENCE_EXAMPLE_ID": lambda run, c: canonical_id(run.get("reference_example_id")),
    "TOTAL_TOKENS": lambda run, c: _tokens(run, "total"),
    # A run's own cost (v2 answers a trace's under trace_aggregates), from the store's columns.
    "TOTAL_COST": lambda run, c: (c.get("usage") or {}).get("total_cost"),
    "PROMPT_COST": lambda run, c: (c.get("usage") or {}).get("prompt_cost"),
    "COMPLETION_COST": lambda run, c: (c.get("usage") or {}).get("completion_cost"),
    "PROMPT_TOKENS": lambda run, c: _tokens(run, "in"),
    "COMPLETION_TOKENS": lambda run, c: _tokens(run, "out"),
    "TAGS": lambda run, c: run.get("tags") if isinstance(run.get("tags"), list) else None,
    "ATTACHMENTS": lambda run, c: c.get("attachments"),
    "SHARE_URL": lambda run, c: c.get("share_url"),
    # No datasets here, so no run is in one.
    "IS_IN_DATASET": lambda run, c: False,
}
_NOT_KEPT = frozenset(RUN_SELECTS) - set(_VALUES)
"""Selects answered as null: token and cost details, feedback stats, price model, app path, queues."""
COST_SELECTS = frozenset({"TOTAL_COST", "PROMPT_COST", "COMPLETION_COST"})
"""The selects :func:`v2_run` answers from the store's usage of the run (``usage``)."""
assert _NOT_KEPT <= frozenset(RUN_SELECTS)


def v2_run(
    run: Mapping[str, Any],
    project_id: str | None,
    selects: Sequence[str],
    *,
    attachments: Mapping[str, str] | None = None,
    usage: Mapping[str, Any] | None = None,
    share_url: str | None = None,
) -> dict[str, Any]:
    """A stored run as a v2 ``Run``: exactly the ``selects`` (only ``id`` when there are none).

    ``attachments`` maps each attachment's name to its download address (``ATTACHMENTS``); ``usage`` is the
    store's for the run (:meth:`RunStore.run_usage <._store.RunStore.run_usage>`: its own costs); ``share_url``
    is its trace's share link, if the trace is shared (``SHARE_URL``).

    >>> v2_run({"id": "r1", "name": "agent", "run_type": "chain", "end_time": "2025-03-01T12:00:00Z"}, "p1",
    ...        ["NAME", "RUN_TYPE", "STATUS", "PROJECT_ID", "TOTAL_COST"])
    {'name': 'agent', 'run_type': 'CHAIN', 'status': 'SUCCESS', 'project_id': 'p1', 'total_cost': None}
    """
    if not selects:
        return {"id": run.get("id")}
    computed = api_run({"id": run.get("id"), **_computed_inputs(run)}, project_id)
    begun, ended = parse_timestamp(run.get("start_time")), parse_timestamp(run.get("end_time"))
    computed["latency"] = (ended - begun).total_seconds() if begun is not None and ended is not None else None
    computed["attachments"] = dict(attachments) if attachments else None
    computed["usage"] = usage
    computed["share_url"] = share_url
    out: dict[str, Any] = {}
    for name in selects:
        getter = _VALUES.get(name)
        out[name.lower()] = getter(run, computed) if getter is not None else None
    return out


def _computed_inputs(run: Mapping[str, Any]) -> dict[str, Any]:
    # api_run computes status, parent_run_ids and thread_id from these fields only.
    return {k: run.get(k) for k in ("error", "end_time", "dotted_order", "extra")}


def trace_aggregates(
    totals: Mapping[str, Any], streamed: Sequence[Mapping[str, Any]], selects: Sequence[str]
) -> dict[str, Any] | None:
    """``trace_aggregates`` of one trace for the aggregate ``selects``: its runs' tokens and cost added up
    (``totals``, :func:`._store_schema.usage_totals`), its first streamed token from the ``streamed`` runs."""
    wanted = [s for s in selects if s in AGGREGATE_SELECTS]
    if not wanted:
        return None
    out: dict[str, Any] = {}
    for name in wanted:
        if name == "TOTAL_TOKENS":
            out["total_tokens"] = totals.get("total_tokens", 0)
        elif name == "TOTAL_COST":
            out["total_cost"] = totals.get("total_cost")
        elif name == "FIRST_TOKEN_TIME":
            times = [t for t in (_first_token_time(run) for run in streamed) if t is not None]
            out["first_token_time"] = min(times) if times else None
        else:
            out[name.lower()] = None
    return out


def root_selects(selects: Sequence[str]) -> tuple[str, ...]:
    """The selects a trace's ``root_run`` answers: all but the aggregates (so only ``id`` when nothing else is left)."""
    return tuple(s for s in selects if s not in AGGREGATE_SELECTS)
