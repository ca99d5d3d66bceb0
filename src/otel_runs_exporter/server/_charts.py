"""``POST /runs/charts``: a project's traffic over time, computed by SQLite, for the viewer's project page.

    POST /runs/charts  {"session": [project id], "start_time": "...", "end_time": "...", "bucket": "hour"}
    -> {"bucket": "hour", "times": [bucket starts], "series": {...}, "by_run_type": {...}, "by_model": {...},
        "totals": {...}}

Over the runs of the project that start in ``[start_time, end_time)`` (``end_time``
defaults to now, ``start_time`` to a day before it), counted per bucket of their start:
a ``minute`` for a range up to 2 hours, an ``hour`` up to 3 days, a ``day`` past that
(``bucket`` chooses; at most 1,500 buckets, a range at most 400 days). Every bucket of
the range is answered, empty ones as 0 (or null for latency and cost).

- ``series``: the traces (root runs): ``traces``, ``errors`` (traces that failed),
  ``latency_p50`` and ``latency_p99`` (seconds, nearest rank, of the traces that
  ended); and over every run, ``tokens`` and ``cost`` (null where no run had a price);
- ``by_run_type``: per run type, its runs' ``runs``, ``errors``, ``latency_p50``, ``latency_p99``;
- ``by_model``: per model (:mod:`otel_runs_exporter._cost`), its runs' ``runs``, ``tokens``, ``cost``;
- ``totals``: the range's ``traces``, ``runs``, ``errors`` (runs with an error, a tool's inside a trace that
  went on included), ``failed_traces`` (traces whose root failed, as ``series.errors``), ``tokens``, ``cost``
  and ``unpriced`` model runs.

Every figure is a SQL aggregate (percentiles by window functions over the bucket), so
the page draws what the store computed. The SQL is built here from fixed expressions,
every value bound; :meth:`RunStore.rows <._store.RunStore.rows>` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Literal

from .._convert import RUN_TYPES
from ._filter import QueryError
from ._store_schema import sortable_time
from ._v2 import check_body, one_id
from ._validate import parse_timestamp

__all__ = ["BUCKETS", "ChartsQuery", "parse_charts", "charts"]

Bucket = Literal["minute", "hour", "day"]
BUCKETS: dict[str, tuple[str, timedelta]] = {
    # The bucket's start, cut from start_time's fixed-width text: 2025-03-01T12:34:56.789012Z.
    "minute": ("substr(r.start_time, 1, 16) || ':00.000000Z'", timedelta(minutes=1)),
    "hour": ("substr(r.start_time, 1, 13) || ':00:00.000000Z'", timedelta(hours=1)),
    "day": ("substr(r.start_time, 1, 10) || 'T00:00:00.000000Z'", timedelta(days=1)),
}
_MAX_BUCKETS = 1_500
_MAX_RANGE = timedelta(days=400)
_LAST_MOMENT = datetime(9999, 12, 30, tzinfo=timezone.utc)  # a day's bucket past it is still a datetime
_TOP_MODELS = 12  # models answered by name; the rest summed as "other"
_MODEL_CHARS = 200


@dataclass(frozen=True)
class ChartsQuery:
    """A checked ``POST /runs/charts``."""

    project_id: str
    start: datetime
    end: datetime
    bucket: Bucket


def _auto(span: timedelta) -> Bucket:
    return "minute" if span <= timedelta(hours=2) else "hour" if span <= timedelta(days=3) else "day"


def parse_charts(body: Any, *, now: datetime | None = None) -> ChartsQuery:
    """Check the body.

    >>> q = parse_charts({"session": ["0190b3c5f1b87a3e9c1d2e3f4a5b6c7d"], "start_time": "2025-03-01T00:00:00Z",
    ...                   "end_time": "2025-03-02T00:00:00Z"})
    >>> q.bucket, q.project_id
    ('hour', '0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d')
    """
    body = check_body(body, ("session", "start_time", "end_time", "bucket"))
    sessions = body.get("session")
    if not isinstance(sessions, list) or len(sessions) != 1:
        raise QueryError(("body", "session"), "session is required: a list with the id of the one project to chart")
    project_id = one_id(sessions[0], ("body", "session", "0"))
    moments = {}
    for key in ("start_time", "end_time"):
        if key in body:
            moment = parse_timestamp(body[key]) if isinstance(body[key], str) else None
            if moment is None:
                raise QueryError(("body", key), f"{key} {str(body[key])[:60]!r} is not an ISO 8601 timestamp")
            moments[key] = moment
    end = moments.get("end_time") or now or datetime.now(timezone.utc)
    start = moments.get("start_time") or end - timedelta(days=1)
    if not start < end or end - start > _MAX_RANGE:
        raise QueryError(("body", "start_time"), f"the range must start before it ends and span at most {_MAX_RANGE.days} days")
    bucket = body.get("bucket", _auto(end - start))
    if bucket not in BUCKETS:
        raise QueryError(("body", "bucket"), f"bucket is one of {', '.join(BUCKETS)}")
    if (end - start) / BUCKETS[bucket][1] > _MAX_BUCKETS:
        raise QueryError(("body", "bucket"), f"{bucket} buckets over this range are more than {_MAX_BUCKETS}; choose a larger bucket")
    if end > _LAST_MOMENT:  # the buckets' times are counted past the end: they must stay within the calendar
        raise QueryError(("body", "end_time"), f"end_time must be no later than {_LAST_MOMENT.isoformat()}")
    return ChartsQuery(project_id, start, end, bucket)


def _floor(moment: datetime, bucket: Bucket) -> datetime:
    if bucket == "minute":
        return moment.replace(second=0, microsecond=0)
    if bucket == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _times(query: ChartsQuery) -> list[str]:
    step = BUCKETS[query.bucket][1]
    at, out = _floor(query.start, query.bucket), []
    while at < query.end:
        out.append(sortable_time(at.isoformat()) or "")
        at += step
    return out


def _percentiles(bucket_sql: str, group: str) -> str:
    """Nearest-rank p50 and p99 of ``r.latency`` per (bucket, ``group``): ``n`` is a value's rank, ``c`` the count."""
    return (
        f"SELECT t, g, MIN(CASE WHEN n * 100 >= c * 50 THEN v END), MIN(CASE WHEN n * 100 >= c * 99 THEN v END)"
        f" FROM (SELECT {bucket_sql} AS t, {group} AS g, r.latency AS v,"
        f" ROW_NUMBER() OVER (PARTITION BY {bucket_sql}, {group} ORDER BY r.latency) AS n,"
        f" COUNT(*) OVER (PARTITION BY {bucket_sql}, {group}) AS c"
        " FROM runs AS r WHERE {where} AND r.latency IS NOT NULL) GROUP BY t, g"
    )


Rows = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]


def charts(query: ChartsQuery, rows: Rows) -> dict[str, Any]:
    """The answer, from the store's ``rows(sql, params)``."""
    times = _times(query)
    index = {t: i for i, t in enumerate(times)}
    bucket_sql = BUCKETS[query.bucket][0]
    where = "r.posted = 1 AND r.project_id = ? AND r.start_time >= ? AND r.start_time < ?"
    params = (query.project_id, sortable_time(query.start.isoformat()), sortable_time(query.end.isoformat()))

    def empty(zero: Any) -> list[Any]:
        return [zero] * len(times)

    series = {"traces": empty(0), "errors": empty(0), "latency_p50": empty(None), "latency_p99": empty(None),
              "tokens": empty(0), "cost": empty(None)}
    by_type: dict[str, dict[str, list[Any]]] = {}
    by_model: dict[str, dict[str, list[Any]]] = {}
    roots = "(r.parent_run_id IS NULL)"
    sql = (
        f"SELECT {bucket_sql} AS t, SUM({roots}), SUM({roots} AND r.error IS NOT NULL), SUM(r.total_tokens),"
        f" SUM(r.total_cost), COUNT(*), SUM(r.error IS NOT NULL),"
        f" SUM(r.total_tokens IS NOT NULL AND r.total_cost IS NULL) FROM runs AS r WHERE {where} GROUP BY t"
    )
    totals = {"traces": 0, "runs": 0, "errors": 0, "failed_traces": 0, "tokens": 0, "cost": None, "unpriced": 0}
    for t, traces, errors, tokens, cost, count, failed, unpriced in rows(sql, params):
        i = index.get(t)
        if i is None:
            continue
        series["traces"][i], series["errors"][i], series["tokens"][i], series["cost"][i] = traces, errors, tokens or 0, cost
        totals["traces"] += traces
        totals["runs"] += count
        totals["errors"] += failed
        totals["failed_traces"] += errors
        totals["tokens"] += tokens or 0
        totals["unpriced"] += unpriced
        if cost is not None:
            totals["cost"] = (totals["cost"] or 0.0) + cost
    for t, _, p50, p99 in rows(_percentiles(bucket_sql, "0").format(where=f"{where} AND {roots}"), params):
        if t in index:
            series["latency_p50"][index[t]], series["latency_p99"][index[t]] = p50, p99
    # A --lenient store may hold any run type: the known ones by name, the rest as one, so the answer stays small.
    kind_sql = f"CASE WHEN r.run_type IN ({', '.join(repr(k) for k in sorted(RUN_TYPES))}) THEN r.run_type" \
        " WHEN r.run_type IS NULL THEN '?' ELSE 'other' END"
    type_sql = (
        f"SELECT {bucket_sql} AS t, {kind_sql}, COUNT(*), SUM(r.error IS NOT NULL) FROM runs AS r"
        f" WHERE {where} GROUP BY t, 2"
    )
    for t, kind, count, failed in rows(type_sql, params):
        entry = by_type.setdefault(kind, {"runs": empty(0), "errors": empty(0), "latency_p50": empty(None),
                                          "latency_p99": empty(None)})
        if t in index:
            entry["runs"][index[t]], entry["errors"][index[t]] = count, failed
    for t, kind, p50, p99 in rows(_percentiles(bucket_sql, kind_sql).format(where=where), params):
        if t in index and kind in by_type:
            by_type[kind]["latency_p50"][index[t]], by_type[kind]["latency_p99"][index[t]] = p50, p99
    # A model's name as the answer gives it: cut, so twelve of them stay small whatever a run named.
    model = f"substr(r.model, 1, {_MODEL_CHARS})"
    model_sql = (
        f"SELECT {model} AS m, SUM(r.total_cost), SUM(r.total_tokens) FROM runs AS r WHERE {where}"
        " AND r.model IS NOT NULL GROUP BY m ORDER BY 2 DESC, 3 DESC LIMIT ?"
    )
    top = [row[0] for row in rows(model_sql, (*params, _TOP_MODELS))]
    named = ", ".join("?" * len(top)) or "NULL"
    per_model = (
        f"SELECT {bucket_sql} AS t, CASE WHEN {model} IN ({named}) THEN {model} ELSE 'other' END AS m, COUNT(*),"
        f" SUM(r.total_tokens), SUM(r.total_cost) FROM runs AS r WHERE {where} AND r.model IS NOT NULL GROUP BY t, m"
    )
    for t, model, count, tokens, cost in rows(per_model, (*top, *params)):
        entry = by_model.setdefault(model, {"runs": empty(0), "tokens": empty(0), "cost": empty(None)})
        if t in index:
            i = index[t]
            entry["runs"][i], entry["tokens"][i], entry["cost"][i] = count, tokens or 0, cost
    return {
        "bucket": query.bucket,
        "start_time": sortable_time(query.start.isoformat()),
        "end_time": sortable_time(query.end.isoformat()),
        "times": times,
        "series": series,
        "by_run_type": dict(sorted(by_type.items())),
        "by_model": by_model,
        "totals": totals,
    }
