"""Handlers of the local service's ``/api/v2`` reads, project deletion, attachment downloads and violations.

The same calling convention as :mod:`._handlers` (``handler(request, service) -> Reply``);
requests are checked and answers shaped by :mod:`._v2` (runs, traces) and
:mod:`._threads`, whose docstrings show what each route takes. What is here is the
order of the store's queries for each answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

from ._filter import QueryError, Where
from ._reply import Reply, detail
from ._routing import Request, Service
from ._run_stats import percentile
from ._store import QueriedRun, RunStore, ThreadRow
from ._threads import (
    RootsWhere,
    parse_aggregate_stats,
    parse_thread_stats,
    parse_thread_traces,
    parse_threads_query,
    thread_key,
    thread_summary,
)
from ._v2 import (
    AGGREGATE_SELECTS,
    COST_SELECTS,
    MAX_TRACE_RUNS,
    encode_cursor,
    one_id,
    parse_params,
    parse_run_retrieve,
    parse_runs_query,
    parse_trace_runs,
    parse_traces_query,
    root_selects,
    trace_aggregates,
    v2_run,
)
from ._validate import canonical_id
from ._viewer import share_link, viewer_link

__all__ = [
    "query_runs_v2",
    "read_run_v2",
    "run_url",
    "query_traces",
    "trace_runs",
    "query_threads",
    "thread_traces",
    "thread_stats",
    "threads_stats",
    "delete_project",
    "download_attachment",
    "run_violations",
    "attachment_urls",
    "s3_urls",
    "v2_items",
    "trace_items",
    "base_url",
]

# Runs whose stored JSON mentions streamed tokens: the only ones a first-token time can come from.
_TOKEN_EVENTS = (
    "(instr(COALESCE(r.post_data, ''), 'new_token') > 0 OR instr(COALESCE(r.patch_data, ''), 'new_token') > 0)"
)


# --- attachments ----------------------------------------------------------------------


def base_url(request: Request, service: Service) -> str:
    # The name the client reached this service by (the Host check has vetted it), so the address works for it.
    host = request.headers.get("host")
    return f"http://{host}" if host else service.url


def attachment_urls(request: Request, service: Service, run_ids: Sequence[str]) -> dict[str, dict[str, tuple[str, str]]]:
    """run id -> attachment name -> (signed download address, content type), for the runs that have attachments."""
    stored = service.store.attachments_of(list(dict.fromkeys(run_ids)))
    base = base_url(request, service)
    links = service.attachment_links
    return {
        run_id: {name: (links.url(base, run_id, name), content_type) for name, content_type, _size in items}
        for run_id, items in stored.items()
    }


def s3_urls(found: Mapping[str, tuple[str, str]]) -> dict[str, dict[str, str]]:
    """A run's attachments as v1's ``s3_urls``, which the SDK's ``read_run`` and ``list_runs`` download from."""
    return {
        f"attachment.{name}": {"presigned_url": url, "mime_type": content_type}
        for name, (url, content_type) in found.items()
    }


def download_attachment(request: Request, service: Service) -> Reply:
    """``GET /attachments/{run_id}/{name}``: the bytes, when the address is one the read API signed."""
    run_id = canonical_id(request.params["run_id"])
    name = unquote(request.params["name"])
    if run_id is None:
        return Reply(404, detail("no such attachment"))
    problem = service.attachment_links.problem(run_id, name, request.query)
    if problem is not None:
        return Reply(403, detail(problem))
    found = service.store.attachment(run_id, name)
    if found is None:
        return Reply(404, detail(f"run {run_id} has no attachment {name[:100]!r}"))
    content_type, data = found
    # The bytes are whatever a client sent: never rendered as a page of this origin, where the viewer keeps its key.
    headers = {
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "X-Content-Type-Options": "nosniff",
        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name, safe='')}",
        "Cache-Control": "private, no-store",
    }
    return Reply(200, data, headers, content_type=content_type)


# --- runs -----------------------------------------------------------------------------


def v2_items(
    request: Request, service: Service, found: Iterable[QueriedRun], selects: Sequence[str]
) -> list[dict[str, Any]]:
    """The ``found`` runs as v2 ``Run`` items: exactly the ``selects`` (:func:`._v2.v2_run`)."""
    found = list(found)
    ids = [q.run["id"] for q in found]
    links: dict[str, dict[str, tuple[str, str]]] = {}
    if "ATTACHMENTS" in selects:
        links = attachment_urls(request, service, ids)
    usage = service.store.run_usage(ids) if any(s in COST_SELECTS for s in selects) else {}
    shared: dict[str, str | None] = {}
    if "SHARE_URL" in selects:
        base = base_url(request, service)
        for trace_id in {str(q.run.get("trace_id")) for q in found}:
            share = service.store.shares.of_trace(trace_id)
            shared[trace_id] = share_link(base, share.token) if share is not None else None
    return [
        v2_run(
            q.run, q.project_id, selects, attachments={n: u for n, (u, _) in links.get(q.run["id"], {}).items()},
            usage=usage.get(q.run["id"]), share_url=shared.get(str(q.run.get("trace_id"))),
        )
        for q in found
    ]


def _page(found: Sequence[QueriedRun], size: int, kind: str) -> tuple[list[QueriedRun], str | None]:
    page = list(found[:size])
    more = len(found) > size and bool(page)
    return page, encode_cursor(kind, list(page[-1].position)) if more else None


def query_runs_v2(request: Request, service: Service) -> Reply:
    query = parse_runs_query(request.body)
    found = service.store.query_runs(
        query.where.sql, query.where.params, order="desc", after=query.after, limit=query.page_size + 1
    )
    page, cursor = _page(found, query.page_size, "runs")
    return Reply(200, {"items": v2_items(request, service, page, query.selects), "next_cursor": cursor})


def run_url(request: Request, service: Service) -> Reply:
    """``GET /api/v2/runs/{id}/url`` (``client.runs.get_url``, ``RunTree.get_url``): the run's page in the viewer.

    Computed, as the hosted service computes its own: the run need not be stored yet.
    """
    params = parse_params(request.query, ("project_id", "trace_id", "start_time"))
    for name in ("project_id", "trace_id"):
        if name not in params:
            raise QueryError(("query", name), f"{name} is required: the run's page is in its project and trace")
    one_id(params["project_id"][0], ("query", "project_id"))
    trace_id = one_id(params["trace_id"][0], ("query", "trace_id"))
    run_id = one_id(request.params["run_id"], ("path", "run_id"))
    return Reply(200, {"url": viewer_link(base_url(request, service), trace_id, run_id)})


def read_run_v2(request: Request, service: Service) -> Reply:
    raw_id = request.params["run_id"]
    project_id, selects = parse_run_retrieve(request.query)
    run_id = canonical_id(raw_id)
    store = service.store
    run = store.get_run(run_id) if run_id else None
    if run is None or store.project_of_run(run["id"]) != project_id:
        return Reply(404, detail(f"run {raw_id[:60]} not found in project {project_id}"))
    found = QueriedRun(run, project_id, ("", 0))
    return Reply(200, v2_items(request, service, [found], selects)[0])


# --- traces ---------------------------------------------------------------------------


def _streamed_runs(store: RunStore, trace_id: str) -> list[dict[str, Any]]:
    """The runs of a trace whose stored JSON mentions streamed tokens: the only ones a first-token time can come from."""
    streamed = store.query_runs(
        f"r.trace_id = ? AND {_TOKEN_EVENTS}", (trace_id,), order="asc", after=None, limit=MAX_TRACE_RUNS
    )
    return [q.run for q in streamed]


def query_traces(request: Request, service: Service) -> Reply:
    query = parse_traces_query(request.body)
    store = service.store
    found = store.query_runs(query.where.sql, query.where.params, order="desc", after=query.after, limit=query.page_size + 1)
    page, cursor = _page(found, query.page_size, "traces")
    roots = v2_items(request, service, page, root_selects(query.selects))
    items = []
    for queried, root in zip(page, roots):
        item: dict[str, Any] = {"root_run": root}
        if any(s in AGGREGATE_SELECTS for s in query.selects):
            trace_id = queried.run["id"]
            streamed = _streamed_runs(store, trace_id) if "FIRST_TOKEN_TIME" in query.selects else []
            totals = store.trace_totals("rt.id = ?", (trace_id,)).get(trace_id, {})
            item["trace_aggregates"] = trace_aggregates(totals, streamed, query.selects)
        items.append(item)
    return Reply(200, {"items": items, "next_cursor": cursor})


def trace_runs(request: Request, service: Service) -> Reply:
    query = parse_trace_runs(request.params["trace_id"], request.query)
    return trace_items(request, service, query.where, query.selects)


def trace_items(request: Request, service: Service, where: Where, selects: Sequence[str]) -> Reply:
    """A trace's runs ``where`` matches, in start-time order, as ``GET /api/v2/traces/{id}/runs`` answers them."""
    found = service.store.query_runs(where.sql, where.params, order="asc", after=None, limit=MAX_TRACE_RUNS + 1)
    if len(found) > MAX_TRACE_RUNS:
        raise QueryError(
            ("path", "trace_id"),
            f"the trace has more than {MAX_TRACE_RUNS} runs, more than one answer holds here; "
            "page through them with POST /api/v2/runs/query and trace_id",
        )
    return Reply(200, {"items": v2_items(request, service, found, selects)})


# --- threads --------------------------------------------------------------------------


def _totals_of_traces(store: RunStore, roots: Where) -> dict[str, dict[str, Any]]:
    """trace id -> tokens and costs added up over its runs (:func:`._store_schema.usage_totals`), for the traces
    whose roots match ``roots`` (over ``runs AS rt``)."""
    return store.trace_totals(roots.sql, roots.params)


def _summed(totals: Mapping[str, Mapping[str, Any]], name: str) -> Any:
    """One usage field over traces: tokens added up; costs too, None when no trace had a price."""
    values = [t.get(name) for t in totals.values() if t.get(name) is not None]
    return sum(values) if values or name.endswith("tokens") else None


def _thread_items(store: RunStore, roots: RootsWhere, page: Sequence[ThreadRow]) -> list[dict[str, Any]]:
    """The page's threads, summed up from their roots in a few set-wide queries (a query per thread was 6 s a
    page of 100 over 4,000 traces)."""
    if not page:
        return []
    ids = [row.thread_id for row in page]
    one_of = f"IN ({', '.join('?' * len(ids))})"
    counted = Where.all_of([roots.roots("r"), Where(f"{thread_key('r')} {one_of}", tuple(ids))])
    light = store.columns(
        f"r.id, {thread_key('r')}, r.latency, r.error IS NOT NULL", counted.sql, counted.params,
        order="COALESCE(r.start_time, ''), r.seq",
    )
    turns: dict[str, list[tuple[Any, ...]]] = {}
    for row in light:
        turns.setdefault(str(row[1]), []).append(row)
    in_threads = Where.all_of([roots.roots("rt"), Where(f"{thread_key('rt')} {one_of}", tuple(ids))])
    totals = _totals_of_traces(store, in_threads)
    items = []
    for row in page:
        mine = turns.get(row.thread_id, [])
        failed = [t for t in mine if t[3]]
        latencies = sorted(t[2] for t in mine if t[2] is not None)
        items.append(
            thread_summary(
                row.thread_id,
                row.traces,
                row.first_start,
                row.last_start,
                first=store.get_run(mine[0][0]) if mine else None,
                last=store.get_run(mine[-1][0]) if mine else None,
                last_failed=store.get_run(failed[-1][0]) if failed else None,
                errors=len(failed),
                latency_p50=percentile(latencies, 0.5),
                latency_p99=percentile(latencies, 0.99),
                total_tokens=sum(totals.get(str(t[0]), {}).get("total_tokens", 0) for t in mine),
                total_cost=_summed({str(t[0]): totals.get(str(t[0]), {}) for t in mine}, "total_cost"),
            )
        )
    return items


def query_threads(request: Request, service: Service) -> Reply:
    query = parse_threads_query(request.body)
    store = service.store
    roots, having = query.roots.roots("r"), query.roots.having()
    rows = store.threads(
        thread_key("r"), roots.sql, roots.params, having=having.sql, having_params=having.params,
        after=query.after, limit=query.page_size + 1,
    )
    page = rows[: query.page_size]
    cursor = encode_cursor("threads", [page[-1].last_start, page[-1].thread_id]) if len(rows) > query.page_size else None
    return Reply(200, {"items": _thread_items(store, query.roots, page), "next_cursor": cursor})


def thread_traces(request: Request, service: Service) -> Reply:
    thread_id = unquote(request.params["thread_id"])
    query = parse_thread_traces(thread_id, request.query)
    store = service.store
    listed = query.listed.roots("r")
    found = store.query_runs(listed.sql, listed.params, order="asc", after=query.after, limit=query.page_size + 1)
    page, cursor = _page(found, query.page_size, "thread-traces")
    selects = query.selects
    turn_of: dict[str, int] = {}
    if "TURN_NUMBER" in selects:
        # Turns count from the thread's first trace by start time, then trace id, whatever is listed.
        everything = query.thread.roots("r")
        ordered = store.columns(
            "r.trace_id", everything.sql, everything.params, order="COALESCE(r.start_time, ''), r.trace_id"
        )
        turn_of = {str(row[0]): number for number, row in enumerate(ordered, 1)}
    totals = _totals_of_traces(store, query.thread.roots("rt")) if any(s in _USAGE_OF for s in selects) else {}
    runs = v2_items(request, service, page, [_V2_OF_TRACE_SELECTS[s] for s in selects if s in _V2_OF_TRACE_SELECTS])
    items = []
    for queried, run in zip(page, runs):
        root = queried.run
        item: dict[str, Any] = {"trace_id": root.get("trace_id")}
        for name in selects:
            key = name.lower()
            if name in _V2_OF_TRACE_SELECTS:
                item[key] = run.get(_V2_OF_TRACE_SELECTS[name].lower())
            elif name in _USAGE_OF:
                mine = totals.get(str(root.get("trace_id")), {})
                item[key] = mine.get(_USAGE_OF[name], 0 if name.endswith("TOKENS") else None)
            elif name == "TURN_NUMBER":
                item[key] = turn_of.get(str(root.get("trace_id")))
            else:
                item[key] = None  # OP, token and cost details: not kept here
        items.append(item)
    return Reply(200, {"items": items, "next_cursor": cursor})


# ThreadTraceSelectField -> the RunSelectField answering it (LATENCY is LATENCY_SECONDS of the root run).
_V2_OF_TRACE_SELECTS = {
    "THREAD_ID": "THREAD_ID", "TRACE_ID": "TRACE_ID", "START_TIME": "START_TIME", "END_TIME": "END_TIME",
    "LATENCY": "LATENCY_SECONDS",
    "FIRST_TOKEN_TIME": "FIRST_TOKEN_TIME", "INPUTS_PREVIEW": "INPUTS_PREVIEW", "OUTPUTS_PREVIEW": "OUTPUTS_PREVIEW",
    "INPUTS": "INPUTS", "OUTPUTS": "OUTPUTS", "ERROR": "ERROR", "NAME": "NAME", "ERROR_PREVIEW": "ERROR_PREVIEW",
}
# A turn's tokens and costs: its trace's (every run's own, added up).
_USAGE_OF = {name: name.lower() for name in (
    "PROMPT_TOKENS", "COMPLETION_TOKENS", "TOTAL_TOKENS", "PROMPT_COST", "COMPLETION_COST", "TOTAL_COST"
)}


def thread_stats(request: Request, service: Service) -> Reply:
    query = parse_thread_stats(unquote(request.params["thread_id"]), request.query)
    store = service.store
    where = query.roots.roots("r")
    summary = store.summarize(where.sql, where.params)
    first, last, last_end = store.aggregate("MIN(r.start_time), MAX(r.start_time), MAX(r.end_time)", where.sql, where.params)
    totals = _totals_of_traces(store, query.roots.roots("rt"))
    values: dict[str, Any] = {
        "TURNS": summary.count,
        "FIRST_START_TIME": first,
        "LAST_START_TIME": last,
        "LAST_END_TIME": last_end,
        "LATENCY_P50": percentile(summary.latencies, 0.5),
        "LATENCY_P99": percentile(summary.latencies, 0.99),
        **{name: _summed(totals, field) for name, field in _USAGE_OF.items()},
    }
    names = {"LATENCY_P50": "latency_p50_seconds", "LATENCY_P99": "latency_p99_seconds"}
    return Reply(200, {names.get(s, s.lower()): values.get(s) for s in query.selects})


def threads_stats(request: Request, service: Service) -> Reply:
    query = parse_aggregate_stats(request.body)
    store = service.store
    where = query.roots.eligible_roots("r")
    threads, traces, errors = store.aggregate(
        f"COUNT(DISTINCT {thread_key('r')}), COUNT(*), COUNT(r.error)", where.sql, where.params
    )
    summary = store.summarize(where.sql, where.params)
    totals = _totals_of_traces(store, query.roots.eligible_roots("rt"))
    per_trace = sorted([t.get("total_tokens", 0) for t in totals.values()] + [0] * max(0, int(traces) - len(totals)))
    median = percentile(per_trace, 0.5)
    values: dict[str, Any] = {
        "THREAD_COUNT": int(threads),
        "TRACE_COUNT": int(traces),
        **{name: _summed(totals, field) for name, field in _USAGE_OF.items()},
        "ERROR_RATE": int(errors) / int(traces) if traces else None,
        "LATENCY_P50": percentile(summary.latencies, 0.5),
        "LATENCY_P99": percentile(summary.latencies, 0.99),
        "MEDIAN_TOKENS": int(median) if median is not None else None,
    }
    names = {
        "LATENCY_P50": "latency_p50_seconds", "LATENCY_P99": "latency_p99_seconds",
        "FIRST_TOKEN_P50": "first_token_p50_seconds", "FIRST_TOKEN_P99": "first_token_p99_seconds",
    }
    return Reply(200, {names.get(s, s.lower()): values.get(s) for s in query.select})


# --- projects and violations ----------------------------------------------------------


def delete_project(request: Request, service: Service) -> Reply:
    """``DELETE /sessions/{id}``: the project goes, with its runs and their feedback, attachments and violations."""
    raw_id = request.params["project_id"]
    project_id = canonical_id(raw_id)
    if project_id is None:
        raise QueryError(("path", "project_id"), f"project id {raw_id[:60]!r} is not a UUID")
    deleted = service.store.delete_project(project_id)
    if deleted is None:
        return Reply(404, detail(f"project {project_id} not found"))
    return Reply(202, {"id": project_id, "runs_deleted": deleted})


def run_violations(request: Request, service: Service) -> Reply:
    """``GET /runs/{run_id}/violations``: the rule violations recorded for a run (the viewer shows them)."""
    raw_id = request.params["run_id"]
    run_id = canonical_id(raw_id)
    if run_id is None:
        raise QueryError(("path", "run_id"), f"run id {raw_id[:60]!r} is not a UUID")
    return Reply(200, service.store.run_violations(run_id=run_id))
