"""``POST /runs/query`` for the local service: the request checked, its filters turned into SQL, runs shaped.

Pure functions, no I/O: the route hands over the JSON body, gets back a
:class:`RunQuery` (a WHERE fragment over ``runs AS r`` with its parameters, the
page size, the order, where the page starts) or a :class:`QueryError`; :func:`api_run`
shapes each run the store found and :func:`encode_cursor` the next page's cursor, for the
answer the service's client reads: ``{"runs": [...], "cursors": {"next": ...}}`` (the
handler cuts the page by size: :mod:`._answers`).

Body keys (those the SDK's ``Client.list_runs`` sends; a key set to null counts as absent)::

    session            list of project ids          r.project_id IN (...)
    session_id         a project id (or a list)     the same; read_run(load_child_runs=True) sends it
    id                 list of run ids              r.id IN (...)
    trace              a run id                     r.trace_id = ?
    parent_run         a run id                     r.parent_run_id = ?
    reference_example  list of example ids          r.reference_example_id IN (...)
    run_type           text                         r.run_type = ?
    is_root            true | false (or 1 | 0)      parent_run_id IS [NOT] NULL
    error              true | false (or 1 | 0)      error IS [NOT] NULL
    execution_order    1                            parent_run_id IS NULL (the key before dotted_order)
    start_time         ISO 8601                     the run started at or after it
    query              text                         like search(text) below
    filter             filter expression            on the run
    trace_filter       filter expression            on the root run of the run's trace
    tree_filter        filter expression            on any run of the run's trace
    select             list of field names          fields answered besides the ones always sent
    limit              1..                          page size, at most 100
    order              "desc" (default) | "asc"     by start_time, then arrival
    cursor             from a previous answer       the next page

Filter expressions (:mod:`._filter`), the documented syntax the SDK builds itself (``read_thread``'s
``and(eq(thread_id, "..."), <filter>)``) and shows in ``list_runs``' docstring::

    and(e, ...)   or(e, ...)   not(e)
    eq(field, value)   neq(field, value)          value: "text", 'text', number, true, false, null
    gt / gte / lt / lte(field, value)             start_time, end_time (ISO 8601), latency (seconds)
    has(tags, "tag")   has(metadata, '{"key": "value"}')   exists(metadata, "key")
    search("text")                                case-insensitive (ASCII), anywhere in the stored run

Anything else (another function, a field not in :data:`FIELDS`, a value of the
wrong type) is a :class:`QueryError` naming the body key and saying what is
supported; the route answers it with 422.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from ._filter import FIELDS, QueryError, Where, parse_filter, search_where
from ._glance import preview, requested_model
from ._numbers import SQL_INT_MAX
from ._store import sortable_time
from ._validate import canonical_id

__all__ = [
    "FIELDS",
    "SELECTABLE",
    "USAGE_SELECTS",
    "QueryError",
    "RunQuery",
    "Where",
    "parse_filter",
    "parse_run_query",
    "api_run",
    "encode_cursor",
    "flag",
]

MAX_PAGE = 100
"""Runs in one answer at most; the client follows ``cursors.next`` for more."""
_MAX_LIST = 1_000


# Fields every answered run carries: schemas.Run cannot be built without them.
_ALWAYS = ("id", "name", "run_type", "start_time", "trace_id")
_COMPUTED = ("session_id", "status", "parent_run_ids", "thread_id")
# From the store's columns (RunStore.run_usage): the service's own fields, a root's being its trace's totals; and
# the local service's own: the model it was priced by and the table's row (or "carried").
_USAGE = ("prompt_tokens", "completion_tokens", "total_tokens", "prompt_cost", "completion_cost", "total_cost")
_LOCAL = ("model", "priced_as")
# The local service's own, answered only when selected (:mod:`._glance`): a list's one-line preview of a run's input
# and output, and the model a model run asked for.
_GLANCE: dict[str, Callable[[Mapping[str, Any]], Any]] = {"preview": preview, "requested_model": requested_model}
_STORED = (
    "dotted_order", "end_time", "error", "events", "extra", "inputs", "outputs", "parent_run_id",
    "reference_example_id", "serialized", "tags",
)
# Known to the service's client but not kept here: answered as null.
_NOT_KEPT = (
    "app_path", "child_run_ids", "completion_cost_details", "completion_token_details", "feedback_stats",
    "first_token_time", "in_dataset", "manifest_id", "prompt_cost_details", "prompt_token_details", "s3_urls",
)
SELECTABLE = frozenset((*_ALWAYS, *_COMPUTED, *_USAGE, *_LOCAL, *_GLANCE, *_STORED, *_NOT_KEPT))
USAGE_SELECTS = frozenset((*_USAGE, *_LOCAL))
"""The selects answered from the store's usage columns (a query that selects none of them skips reading them)."""
"""Names ``select`` accepts: the SDK's default selection and the rest of its ``Run`` model."""

_BODY_KEYS = (
    "session", "session_id", "id", "trace", "parent_run", "reference_example", "run_type", "is_root", "error", "start_time",
    "query", "filter", "trace_filter", "tree_filter", "select", "limit", "order", "cursor", "execution_order",
)

# --- the request ------------------------------------------------------------------------


@dataclass(frozen=True)
class RunQuery:
    """A checked ``POST /runs/query`` body, ready for :meth:`RunStore.query_keys`."""

    where: Where
    page_size: int = MAX_PAGE
    order: Literal["asc", "desc"] = "desc"
    after: tuple[str, int] | None = None
    select: frozenset[str] | None = None


def _ids(body: Mapping[str, Any], key: str) -> list[str]:
    values = body[key]
    if not isinstance(values, list):
        raise QueryError(("body", key), f"{key} must be a list of UUIDs, got {type(values).__name__}")
    if len(values) > _MAX_LIST:
        raise QueryError(("body", key), f"{key} lists {len(values)} ids; at most {_MAX_LIST} in one query")
    out = []
    for index, value in enumerate(values):
        canon = canonical_id(value)
        if canon is None:
            raise QueryError(("body", key, index), f"{key}[{index}] {str(value)[:60]!r} is not a UUID")
        out.append(canon)
    return out


def _one_id(body: Mapping[str, Any], key: str) -> str:
    canon = canonical_id(body[key])
    if canon is None:
        raise QueryError(("body", key), f"{key} {str(body[key])[:60]!r} is not a UUID")
    return canon


# What the hosted service's request models take for a boolean: besides true and false, 0 and 1
# (list_runs' docstring shows is_root=1) and the usual words.
_TRUE_WORDS = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE_WORDS = frozenset({"0", "false", "f", "no", "n", "off"})


def flag(value: Any, key: str) -> bool:
    """A boolean as the hosted service reads one: ``true``/``false``, ``1``/``0``, or a word such as ``"yes"``.

    >>> flag(1, "is_root"), flag("False", "error")
    (True, False)
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    raise QueryError(("body", key), f"{key} must be true or false (or 1 or 0), got {json.dumps(value)[:60]}")


def _flag(body: Mapping[str, Any], key: str) -> bool:
    return flag(body[key], key)


def _in(column: str, values: Sequence[str]) -> Where:
    if not values:
        return Where("0")
    return Where(f"{column} IN ({', '.join('?' * len(values))})", tuple(values))


def parse_run_query(body: Any) -> RunQuery:
    """Check a ``POST /runs/query`` body and turn it into a :class:`RunQuery`; :class:`QueryError` if it cannot be.

    >>> q = parse_run_query({"trace": "0190b3c5f1b87a3e9c1d2e3f4a5b6c7d", "is_root": True, "limit": 2})
    >>> q.where.sql, q.page_size
    ('(r.trace_id = ?) AND (r.parent_run_id IS NULL)', 2)
    """
    if not isinstance(body, dict):
        raise QueryError(("body",), "the body must be a JSON object of query keys")
    body = {k: v for k, v in body.items() if v is not None}
    unknown = sorted(set(body) - set(_BODY_KEYS))
    if unknown:
        hint = "; for a start time range use start_time with filter lt(start_time, \"...\")" if "end_time" in unknown else ""
        raise QueryError(
            ("body", unknown[0]),
            f"{unknown[0]} is not supported by the local service; supported keys: {', '.join(_BODY_KEYS)}{hint}",
        )
    parts: list[Where] = []
    if "session" in body:
        parts.append(_in("r.project_id", _ids(body, "session")))
    if "session_id" in body:
        if isinstance(body["session_id"], list):
            parts.append(_in("r.project_id", _ids(body, "session_id")))
        else:
            parts.append(Where("r.project_id = ?", (_one_id(body, "session_id"),)))
    if "id" in body:
        parts.append(_in("r.id", _ids(body, "id")))
    if "reference_example" in body:
        parts.append(_in("r.reference_example_id", _ids(body, "reference_example")))
    if "trace" in body:
        parts.append(Where("r.trace_id = ?", (_one_id(body, "trace"),)))
    if "parent_run" in body:
        parts.append(Where("r.parent_run_id = ?", (_one_id(body, "parent_run"),)))
    if "run_type" in body:
        run_type = body["run_type"]
        if not isinstance(run_type, str) or not run_type:
            raise QueryError(("body", "run_type"), "run_type must be a run type such as \"llm\" or \"chain\"")
        parts.append(Where("r.run_type = ?", (run_type,)))
    if "is_root" in body:
        parts.append(Where(f"r.parent_run_id IS {'' if _flag(body, 'is_root') else 'NOT '}NULL"))
    if "error" in body:
        parts.append(Where(f"r.error IS {'NOT ' if _flag(body, 'error') else ''}NULL"))
    if "execution_order" in body:
        # The key before dotted_order: 1 was a trace's root. The SDK's docs still show execution_order=1.
        if body["execution_order"] != 1 or isinstance(body["execution_order"], bool):
            raise QueryError(
                ("body", "execution_order"),
                "execution_order: only 1 (the root runs) is supported; runs are ordered by dotted_order now",
            )
        parts.append(Where("r.parent_run_id IS NULL"))
    if "start_time" in body:
        since = sortable_time(body["start_time"])
        if since is None:
            raise QueryError(
                ("body", "start_time"), f"start_time {str(body['start_time'])[:60]!r} is not an ISO 8601 timestamp"
            )
        parts.append(Where("r.start_time >= ?", (since,)))
    if "query" in body:
        if not isinstance(body["query"], str):
            raise QueryError(("body", "query"), "query must be the text to search for")
        parts.append(search_where(body["query"], "r", "query"))
    if "filter" in body:
        parts.append(parse_filter(body["filter"], "filter", "r"))
    if "trace_filter" in body:
        inner = parse_filter(body["trace_filter"], "trace_filter", "t")
        parts.append(
            Where(
                "r.trace_id IN (SELECT t.id FROM runs AS t WHERE t.posted = 1 AND t.parent_run_id IS NULL"
                f" AND ({inner.sql}))",
                inner.params,
            )
        )
    if "tree_filter" in body:
        inner = parse_filter(body["tree_filter"], "tree_filter", "t")
        # Per trace, not as a list of every matching trace: the newest roots are walked (an index keeps them in that
        # order) until a page is found, so a text in most traces answers as fast as a rare one (bench/search.py).
        parts.append(
            Where(
                f"EXISTS (SELECT 1 FROM runs AS t WHERE t.trace_id = r.trace_id AND t.posted = 1 AND ({inner.sql}))",
                inner.params,
            )
        )
    order = body.get("order", "desc")
    if order not in ("asc", "desc"):
        raise QueryError(("body", "order"), f"order is \"asc\" or \"desc\", got {json.dumps(order)[:60]}")
    page = MAX_PAGE
    if "limit" in body:
        limit = body["limit"]
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise QueryError(("body", "limit"), f"limit must be a whole number of runs, 1 or more, got {json.dumps(limit)[:60]}")
        page = min(limit, MAX_PAGE)
    select = None
    if "select" in body:
        select = _select(body["select"])
    after = _decode_cursor(body["cursor"], order) if "cursor" in body else None
    return RunQuery(Where.all_of(parts), page, order, after, select)


def _select(value: Any) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise QueryError(("body", "select"), "select must be a list of field names")
    unknown = [v for v in value if v not in SELECTABLE]
    if unknown:
        raise QueryError(
            ("body", "select"),
            f"select: unknown field {unknown[0]!r}; supported: {', '.join(sorted(SELECTABLE))}",
        )
    return frozenset(value)


def encode_cursor(order: str, position: tuple[str, int]) -> str:
    """The ``cursors.next`` of a page whose last run is at ``position``, for a query in ``order``."""
    return base64.urlsafe_b64encode(orjson.dumps([order, position[0], position[1]])).decode().rstrip("=")


def _decode_cursor(cursor: Any, order: str) -> tuple[str, int]:
    bad = QueryError(("body", "cursor"), "cursor is not one this service handed out; pass cursors.next unchanged")
    if not isinstance(cursor, str) or len(cursor) > 1000:
        raise bad
    try:
        decoded = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise bad from None
    if (
        not isinstance(decoded, list)
        or len(decoded) != 3
        or decoded[0] not in ("asc", "desc")
        or not isinstance(decoded[1], str)
        or isinstance(decoded[2], bool)
        or not isinstance(decoded[2], int)
        or not 0 <= decoded[2] <= SQL_INT_MAX  # a forged one past 64 bits would reach SQLite
    ):
        raise bad
    if decoded[0] != order:
        raise QueryError(("body", "cursor"), f"cursor belongs to a query in {decoded[0]} order, not {order}")
    return decoded[1], decoded[2]


# --- the answer -----------------------------------------------------------------------------


def _parent_run_ids(dotted_order: Any) -> list[str] | None:
    if not isinstance(dotted_order, str) or not dotted_order:
        return None
    ids = []
    for entry in dotted_order.split(".")[:-1]:
        canon = canonical_id(entry.partition("Z")[2])
        if canon is None:
            return None
        ids.append(canon)
    return ids


def _thread_id(run: Mapping[str, Any]) -> str | None:
    extra = run.get("extra")
    metadata = extra.get("metadata") if isinstance(extra, dict) else None
    if not isinstance(metadata, dict):
        return None
    for key in ("session_id", "thread_id", "conversation_id"):
        if metadata.get(key) is not None:
            return str(metadata[key])
    return None


def _usage(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    """The usage fields a run answers: a root's are its trace's totals (a trace's cost is its root's)."""
    if usage is None:
        return dict.fromkeys((*_USAGE, *_LOCAL))
    totals = usage.get("trace") or usage
    out = {name: totals.get(name) for name in _USAGE}
    out.update(model=usage.get("model"), priced_as=usage.get("priced_as"))
    return out


def api_run(
    run: Mapping[str, Any],
    project_id: str | None,
    select: frozenset[str] | None = None,
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A stored run as the service's read API shows it, whole or only the ``select``-ed fields.

    ``attachments`` never leaves: the SDK builds ``Run(attachments=..., **answer)``
    from what it downloads through ``s3_urls``, so an ``attachments`` key in the
    answer (the SDK's own basic tracing posts ``"attachments": {}``) makes that a
    TypeError. ``s3_urls`` and the service's other own fields (:data:`_NOT_KEPT`) are never
    the stored run's: the handlers add the addresses of the run's attachments.
    ``session_id`` is the project's id, however the run named its project.
    ``usage`` is :meth:`RunStore.run_usage <._store.RunStore.run_usage>`'s for the run: tokens and costs.
    """
    computed = {
        "session_id": project_id,
        "status": "error" if run.get("error") is not None else "success" if run.get("end_time") is not None else "pending",
        "parent_run_ids": _parent_run_ids(run.get("dotted_order")),
        "thread_id": _thread_id(run),
        **_usage(usage),
    }
    if select is None:
        # What the service owns is never the client's to set: a stored s3_urls would have the
        # reader's SDK download whatever address a producer wrote (a handler adds the real ones).
        out = {k: v for k, v in run.items() if k != "attachments" and k not in _NOT_KEPT}
        out.update(computed)
        return out
    out = {}
    for name in (*_ALWAYS, *sorted(select)):
        if name in computed:
            out[name] = computed[name]
        elif name in _GLANCE:
            out[name] = _GLANCE[name](run)
        elif name in _NOT_KEPT:
            out[name] = None
        else:
            out[name] = run.get(name)
    return out
