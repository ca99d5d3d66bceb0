"""Handlers of the local service's ``/api/v2`` reads, project deletion, attachment downloads and violations.

The same calling convention as :mod:`._handlers` (``handler(request, service) -> Reply``);
requests are checked and answers shaped by :mod:`._v2` (runs, traces) and
:mod:`._threads`, whose docstrings show what each route takes. What is here is the
order of the store's queries for each answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

from ._answers import Page, RunPage, fill, peek
from ._filter import QueryError, Where
from ._reply import Reply, detail
from ._routing import Request, Service
from ._run_stats import percentile
from ._store import RunKey, RunStore, ThreadRow
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
    preview,
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
    "v2_shaper",
    "v2_page",
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


Shape = Callable[[RunKey, dict[str, Any]], Any]
"""What a page holds of one stored run (``shape(key, run)``)."""


def v2_shaper(request: Request, service: Service, keys: Sequence[RunKey], selects: Sequence[str]) -> Shape:
    """How each of the ``keys``' runs is answered as a v2 ``Run``: exactly the ``selects`` (:func:`._v2.v2_run`),
    with what the selects need of the store read for all of them at once."""
    ids = [key.run_id for key in keys]
    links: dict[str, dict[str, tuple[str, str]]] = {}
    if "ATTACHMENTS" in selects:
        links = attachment_urls(request, service, ids)
    usage = service.store.run_usage(ids) if any(s in COST_SELECTS for s in selects) else {}
    shared: dict[str, str | None] = {}
    base = base_url(request, service)

    def share_url(trace_id: str) -> str | None:
        if trace_id not in shared:
            share = service.store.shares.of_trace(trace_id)
            shared[trace_id] = share_link(base, share.token) if share is not None else None
        return shared[trace_id]

    def shape(key: RunKey, run: dict[str, Any]) -> dict[str, Any]:
        trace_id = str(run.get("trace_id"))
        return v2_run(
            run, key.project_id, selects, attachments={n: u for n, (u, _) in links.get(key.run_id, {}).items()},
            usage=usage.get(key.run_id), share_url=share_url(trace_id) if "SHARE_URL" in selects else None,
        )

    return shape


def v2_page(request: Request, service: Service, keys: Sequence[RunKey], shape: Shape) -> tuple[RunPage, RunKey | None, bool]:
    """A page of the ``keys``' runs as ``shape`` answers them, cut to the answer's bounds (:func:`._answers.fill`)."""
    page = RunPage(service.answers, request)
    last, cut = fill(page, keys, service.store.load_run, shape)
    return page, last, cut


def _keys(found: Sequence[RunKey], size: int) -> tuple[list[RunKey], bool]:
    """A page's keys (the store found one past them when there are more) and whether there are more."""
    return list(found[:size]), len(found) > size


def _next(kind: str, last: RunKey | None, more: bool) -> str | None:
    return encode_cursor(kind, list(last.position)) if more and last is not None else None


def query_runs_v2(request: Request, service: Service) -> Reply:
    query = parse_runs_query(request.body)
    keys, more = _keys(
        service.store.query_keys(query.where.sql, query.where.params, order="desc", after=query.after,
                                 limit=query.page_size + 1),
        query.page_size,
    )
    page, last, cut = v2_page(request, service, keys, v2_shaper(request, service, keys, query.selects))
    return Reply(200, page.body("items", {"next_cursor": _next("runs", last, more or cut)}))


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


def one_v2_run(
    request: Request, service: Service, run_id: str | None, project_id: str | None, selects: Sequence[str]
) -> Reply | None:
    """The answer that is one stored run as a v2 ``Run`` (of the project, when one is given); None if there is none."""
    key = service.store.run_key(run_id) if run_id is not None else None
    if key is None or (project_id is not None and key.project_id != project_id):
        return None
    page, last, _ = v2_page(request, service, [key], v2_shaper(request, service, [key], selects))
    return Reply(200, page.only()) if last is not None else None


def read_run_v2(request: Request, service: Service) -> Reply:
    raw_id = request.params["run_id"]
    project_id, selects = parse_run_retrieve(request.query)
    found = one_v2_run(request, service, canonical_id(raw_id), project_id, selects)
    return found or Reply(404, detail(f"run {raw_id[:60]} not found in project {project_id}"))


# --- traces ---------------------------------------------------------------------------


def _first_token_time(request: Request, store: RunStore, trace_id: str) -> list[dict[str, Any]]:
    """The first streamed token of the trace's runs whose stored JSON mentions streamed tokens, as a run each
    carrying its events (what :func:`._v2.trace_aggregates` reads): one run read at a time."""
    keys = store.query_keys(f"r.trace_id = ? AND {_TOKEN_EVENTS}", (trace_id,), order="asc", after=None, limit=MAX_TRACE_RUNS)
    found = []
    for key in keys:
        events = peek(request, key, store.load_run, lambda run: _token_events(run.get("events")))
        if events:
            found.append({"events": events})
    return found


def _token_events(events: Any) -> list[dict[str, Any]]:
    """The first ``new_token`` event of a run's events, alone (the rest of them are not kept)."""
    if isinstance(events, list):
        for event in events:
            if isinstance(event, dict) and event.get("name") == "new_token":
                return [{"name": "new_token", "time": event.get("time")}]
    return []


def query_traces(request: Request, service: Service) -> Reply:
    query = parse_traces_query(request.body)
    store = service.store
    keys, more = _keys(
        store.query_keys(query.where.sql, query.where.params, order="desc", after=query.after, limit=query.page_size + 1),
        query.page_size,
    )
    root = v2_shaper(request, service, keys, root_selects(query.selects))
    aggregates = any(s in AGGREGATE_SELECTS for s in query.selects)

    def shape(key: RunKey, run: dict[str, Any]) -> dict[str, Any]:
        item: dict[str, Any] = {"root_run": root(key, run)}
        if aggregates:
            trace_id = key.run_id
            streamed = _first_token_time(request, store, trace_id) if "FIRST_TOKEN_TIME" in query.selects else []
            totals = store.trace_totals("rt.id = ?", (trace_id,)).get(trace_id, {})
            item["trace_aggregates"] = trace_aggregates(totals, streamed, query.selects)
        return item

    page, last, cut = v2_page(request, service, keys, shape)
    return Reply(200, page.body("items", {"next_cursor": _next("traces", last, more or cut)}))


def trace_runs(request: Request, service: Service) -> Reply:
    query = parse_trace_runs(request.params["trace_id"], request.query)
    return trace_items(
        request, service, query.where, query.selects,
        how="page through them with POST /api/v2/runs/query and trace_id, or ask for fewer selects",
    )


def trace_items(request: Request, service: Service, where: Where, selects: Sequence[str], *, how: str) -> Reply:
    """A trace's runs ``where`` matches, in start-time order, as ``GET /api/v2/traces/{id}/runs`` answers them: in
    one answer (there is no cursor), so a trace larger than one answer is a 413 saying ``how`` to read it instead."""
    store = service.store
    keys = store.query_keys(where.sql, where.params, order="asc", after=None, limit=MAX_TRACE_RUNS + 1)
    if len(keys) > MAX_TRACE_RUNS:
        raise QueryError(
            ("path", "trace_id"),
            f"the trace has more than {MAX_TRACE_RUNS} runs, more than one answer holds here; "
            "page through them with POST /api/v2/runs/query and trace_id",
        )
    page, _, cut = v2_page(request, service, keys, v2_shaper(request, service, keys, selects))
    if cut:
        return Reply(
            413,
            detail(
                f"the trace's runs are more than the {service.answers.page_bytes} bytes one answer holds "
                f"({len(page)} of {len(keys)} fit); {how}",
                max_size=service.answers.page_bytes,
            ),
        )
    return Reply(200, page.body("items"))


# --- threads --------------------------------------------------------------------------


def _totals_of_traces(store: RunStore, roots: Where) -> dict[str, dict[str, Any]]:
    """trace id -> tokens and costs added up over its runs (:func:`._store_schema.usage_totals`), for the traces
    whose roots match ``roots`` (over ``runs AS rt``)."""
    return store.trace_totals(roots.sql, roots.params)


def _summed(totals: Mapping[str, Mapping[str, Any]], name: str) -> Any:
    """One usage field over traces: tokens added up; costs too, None when no trace had a price."""
    values = [t.get(name) for t in totals.values() if t.get(name) is not None]
    return sum(values) if values or name.endswith("tokens") else None


def _glance(request: Request, store: RunStore, run_id: str, field: str) -> tuple[str | None, str | None]:
    """A run's trace id and the preview of one of its fields (``inputs``, ``outputs``, ``error``), read within the
    answer budget: what a thread's summary shows of its first, last and last failed turns."""
    key = store.run_key(run_id)
    if key is None:
        return None, None

    def seen(run: dict[str, Any]) -> tuple[str | None, str | None]:
        value = run.get(field)
        shown = None if value is None else preview(str(value) if field == "error" else value)
        return run.get("trace_id"), shown

    return peek(request, key, store.load_run, seen) or (None, None)


def _thread_items(request: Request, store: RunStore, roots: RootsWhere, page: Sequence[ThreadRow]) -> list[dict[str, Any]]:
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
        first_trace, first_inputs = _glance(request, store, mine[0][0], "inputs") if mine else (None, None)
        last_trace, last_outputs = _glance(request, store, mine[-1][0], "outputs") if mine else (None, None)
        last_error = _glance(request, store, failed[-1][0], "error")[1] if failed else None
        items.append(
            thread_summary(
                row.thread_id,
                row.traces,
                row.first_start,
                row.last_start,
                first_trace_id=first_trace,
                last_trace_id=last_trace,
                first_inputs=first_inputs,
                last_outputs=last_outputs,
                last_error=last_error,
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
    found = rows[: query.page_size]
    page = Page(service.answers)
    last = None
    for row, item in zip(found, _thread_items(request, store, query.roots, found)):
        if not page.add(item, "thread"):
            break
        last = row
    more = len(rows) > query.page_size or len(page) < len(found)
    cursor = encode_cursor("threads", [last.last_start, last.thread_id]) if more and last is not None else None
    return Reply(200, page.body("items", {"next_cursor": cursor}))


def thread_traces(request: Request, service: Service) -> Reply:
    thread_id = unquote(request.params["thread_id"])
    query = parse_thread_traces(thread_id, request.query)
    store = service.store
    listed = query.listed.roots("r")
    keys, more = _keys(
        store.query_keys(listed.sql, listed.params, order="asc", after=query.after, limit=query.page_size + 1),
        query.page_size,
    )
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
    as_run = v2_shaper(request, service, keys, [_V2_OF_TRACE_SELECTS[s] for s in selects if s in _V2_OF_TRACE_SELECTS])

    def shape(key: RunKey, root: dict[str, Any]) -> dict[str, Any]:
        run = as_run(key, root)
        item: dict[str, Any] = {"trace_id": root.get("trace_id")}
        for name in selects:
            field = name.lower()
            if name in _V2_OF_TRACE_SELECTS:
                item[field] = run.get(_V2_OF_TRACE_SELECTS[name].lower())
            elif name in _USAGE_OF:
                mine = totals.get(str(root.get("trace_id")), {})
                item[field] = mine.get(_USAGE_OF[name], 0 if name.endswith("TOKENS") else None)
            elif name == "TURN_NUMBER":
                item[field] = turn_of.get(str(root.get("trace_id")))
            else:
                item[field] = None  # OP, token and cost details: not kept here
        return item

    page, last, cut = v2_page(request, service, keys, shape)
    return Reply(200, page.body("items", {"next_cursor": _next("thread-traces", last, more or cut)}))


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
    page = Page(service.answers)
    for violation in service.store.run_violations(run_id=run_id, limit=MAX_VIOLATIONS):
        if not page.add(violation, "violation"):
            break  # the oldest that fit: the viewer shows them; otel-runs runs check lists the rest
    return Reply(200, page.body(None))


MAX_VIOLATIONS = 1_000
"""A run's violations answered at most, oldest first (a client that sends one bad run again and again records more)."""
