"""The handlers of the local service's main API: ingest (spec 4.4, 4.5), the read API and projects.

Each is ``handler(request, service) -> Reply`` (the calling convention of
:mod:`._routing`); the route table (:mod:`._routes`) says which path and methods
each one serves and what is checked before it runs. The rules themselves live
elsewhere: reading a request into runs and violations in :mod:`._validate`, read
queries in :mod:`._query`, :mod:`._run_stats` and :mod:`._projects`, storage in
:mod:`._store`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ._changes import FIELDS as CHANGE_FIELDS
from ._changes import cursor, is_live, parse_changes
from ._charts import charts, parse_charts
from ._feedback import (
    api_feedback,
    feedback_stats,
    parse_feedback_create,
    parse_feedback_list,
    parse_feedback_update,
)
from ._handlers_v2 import attachment_urls, s3_urls
from ._ingest import ReadResult, read_basic_patch, read_basic_post, read_batch, read_multipart
from ._modes import refuses
from ._projects import NO_WORKSPACE, api_project, parse_project_create, parse_project_list, parse_project_read
from ._query import USAGE_SELECTS, QueryError, RunQuery, Where, api_run, page_body, parse_run_query
from ._reply import Reply, detail
from ._routing import Request, Service
from ._run_stats import parse_stats_query, run_stats
from ._store import ProjectExists
from ._validate import canonical_id

__all__ = [
    "ok",
    "info",
    "post_run",
    "patch_run",
    "post_batch",
    "post_multipart",
    "read_run",
    "run_body",
    "query_runs",
    "runs_page",
    "stats",
    "stats_of",
    "list_projects",
    "read_project",
    "create_project",
    "run_changes",
    "run_charts",
    "create_feedback",
    "list_feedback",
    "read_feedback",
    "update_feedback",
    "delete_feedback",
    "ingest",
]

logger = logging.getLogger(__name__)


def ok(request: Request, service: Service) -> Reply:
    return Reply(200, {"ok": True})


def info(request: Request, service: Service) -> Reply:
    return Reply(200, service.info())


# --- ingest -------------------------------------------------------------------------


def ingest(result: ReadResult, request: Request, service: Service) -> Reply:
    """Store what one request carried, or refuse all of it: injected rejections, then rule violations (422).

    Every violation is recorded; whether it refuses the request is the service's validation mode's call.
    """
    request.log["run_ids"] = sorted(result.run_ids)
    rejected = service.faults.rejected(result.run_ids)
    if rejected:
        errors = [
            {
                "loc": ["body", run_id],
                "msg": f"run {run_id} rejected (fault injection: reject_run_ids); nothing in this request was stored",
                "type": "runs.rejected",
            }
            for run_id in rejected
        ]
        request.log["fault"] = "reject_run_ids"
        return Reply(422, {"detail": errors})
    store = service.store
    if result.violations:
        refused = refuses(service.validation, result.violations)
        store.record_violations(result.violations, path=request.route, accepted=not refused)
        for violation in result.violations[:5]:
            logger.info("rule violation on %s: %s", request.route, violation.as_error()["msg"])
        if refused:
            return Reply(422, {"detail": [v.as_error() for v in result.violations]})
    applied = store.apply(result.ops, result.feedback, result.attachments)
    return Reply(202, {"post": applied.posted, "patch": applied.patched, "duplicates": applied.duplicates})


def post_run(request: Request, service: Service) -> Reply:
    """Basic tracing's post; answers the ids it computed (handy when the client sent none)."""
    result = read_basic_post(request.body, service.store.get_run)
    reply = ingest(result, request, service)
    if reply.status == 202 and result.ops:
        run = result.ops[0].data
        return Reply(202, {"id": run["id"], "trace_id": run.get("trace_id"), "dotted_order": run.get("dotted_order")})
    return reply


def patch_run(request: Request, service: Service) -> Reply:
    run_id = request.params["run_id"]
    reply = ingest(read_basic_patch(run_id, request.body), request, service)
    if reply.status == 202:
        return Reply(202, {"id": canonical_id(run_id)})
    return reply


def post_batch(request: Request, service: Service) -> Reply:
    return ingest(read_batch(request.body), request, service)


def post_multipart(request: Request, service: Service) -> Reply:
    parts = request.body
    request.log["part_names"] = [p.name for p in parts]
    return ingest(read_multipart(parts), request, service)


# --- the read API (runs and projects) ---------------------------------------------


def _tenant_id(service: Service) -> str:
    return canonical_id(service.workspace_id) or NO_WORKSPACE


def read_run(request: Request, service: Service) -> Reply:
    raw_id = request.params["run_id"]
    run_id = canonical_id(raw_id)
    if run_id is None:
        raise QueryError(("path", "run_id"), f"run id {raw_id[:60]!r} is not a UUID")
    run = service.store.get_run(run_id)
    if run is None:
        return Reply(404, detail(f"run {run_id} not found"))
    return Reply(200, run_body(request, service, run))


def run_body(request: Request, service: Service, run: dict[str, Any], *, feedback: bool = True) -> dict[str, Any]:
    """One stored run as ``GET /runs/{id}`` answers it; ``feedback=False`` (a shared trace) leaves its feedback out."""
    store = service.store
    body = api_run(run, store.project_of_run(run["id"]), usage=store.run_usage([run["id"]]).get(run["id"]))
    if feedback:
        _add_feedback_stats(service, [body])
    found = attachment_urls(request, service, [run["id"]]).get(run["id"])
    if found:
        body["s3_urls"] = s3_urls(found)
    return body


def query_runs(request: Request, service: Service) -> Reply:
    return runs_page(request, service, parse_run_query(request.body))


def runs_page(request: Request, service: Service, query: RunQuery, *, feedback: bool = True) -> Reply:
    """One page of the runs ``query`` matches, as ``POST /runs/query`` answers it (``feedback``: as in :func:`run_body`)."""
    # One run past the page says whether a next page exists.
    found = service.store.query_runs(
        query.where.sql, query.where.params, order=query.order, after=query.after, limit=query.page_size + 1
    )
    page = found[: query.page_size]
    usage = service.store.run_usage([q.run["id"] for q in page]) if _wants_usage(query.select) else None
    body = page_body(found, query, usage)
    if feedback and (query.select is None or "feedback_stats" in query.select):
        _add_feedback_stats(service, body["runs"])
    if query.select is None or "s3_urls" in query.select:
        # The SDK downloads a run's attachments from s3_urls (selected by default), without its key.
        links = attachment_urls(request, service, [run["id"] for run in body["runs"]])
        for run in body["runs"]:
            if run["id"] in links:
                run["s3_urls"] = s3_urls(links[run["id"]])
    return Reply(200, body)


def run_changes(request: Request, service: Service) -> Reply:
    """``GET /runs/changes`` (:mod:`._changes`): held until a run of the trace changes after the cursor, or ``wait``."""
    query = parse_changes(request.query)
    store = service.store
    if query.after is None:
        live = is_live(store.rows, query.trace_id, service.live_window_s, time.time())
        return Reply(200, {"runs": [], "cursor": cursor(store.store_id, store.version), "more": False, "live": live})
    # A cursor of another store (the service restarted) starts from the trace's beginning: runs again, never none.
    after = query.after[1] if query.after[0] == store.store_id else 0
    deadline = time.monotonic() + query.wait_s
    # In short waits, so a service stopping ends them at once; the store re-checks after each write.
    changed = lambda: store.changed_since(query.trace_id, after)  # noqa: E731 - the store's wait takes a predicate
    while not request.stopping.is_set():
        remaining = deadline - time.monotonic()
        if store.wait(changed, min(0.5, max(0.0, remaining))) or remaining <= 0:
            break
    found, version, more = store.changes(query.trace_id, after, query.limit)
    usage = store.run_usage([q.run["id"] for q in found])
    runs = [api_run(q.run, q.project_id, CHANGE_FIELDS, usage.get(q.run["id"])) for q in found]
    live = is_live(store.rows, query.trace_id, service.live_window_s, time.time())
    return Reply(200, {"runs": runs, "cursor": cursor(store.store_id, version), "more": more, "live": live})


def run_charts(request: Request, service: Service) -> Reply:
    """``POST /runs/charts`` (:mod:`._charts`): a project's traffic over time, every figure a SQL aggregate."""
    store = service.store
    return Reply(200, charts(parse_charts(request.body), store.rows))


def _wants_usage(select: frozenset[str] | None) -> bool:
    return select is None or bool(select & USAGE_SELECTS)


def _add_feedback_stats(service: Service, runs: list[dict[str, Any]]) -> None:
    """Each run's ``feedback_stats`` (null without feedback), from the feedback kept for it."""
    found = service.store.feedback_of_runs([run["id"] for run in runs])
    for run in runs:
        run["feedback_stats"] = feedback_stats(found[run["id"]]) if run["id"] in found else None


def stats(request: Request, service: Service) -> Reply:
    return stats_of(service, parse_stats_query(request.body).where)


def stats_of(service: Service, where: Where) -> Reply:
    """``POST /runs/stats``'s answer for the runs ``where`` matches."""
    store = service.store
    return Reply(200, run_stats(store.summarize(where.sql, where.params), store.prices.updated))


def list_projects(request: Request, service: Service) -> Reply:
    query = parse_project_list(request.query)
    if query.match_none:
        return Reply(200, [])
    store = service.store
    projects = store.projects(
        ids=query.ids, name=query.name, name_contains=query.name_contains, limit=query.limit, offset=query.offset
    )
    counts = store.project_stats([p["id"] for p in projects]) if query.include_stats else {}
    tenant = _tenant_id(service)
    body: list[Any] = [api_project(p, tenant, counts.get(p["id"]), include_stats=query.include_stats) for p in projects]
    return Reply(200, body)


def read_project(request: Request, service: Service) -> Reply:
    include_stats = parse_project_read(request.query)
    raw_id = request.params["project_id"]
    project_id = canonical_id(raw_id)
    if project_id is None:
        raise QueryError(("path", "project_id"), f"project id {raw_id[:60]!r} is not a UUID")
    store = service.store
    project = store.project(project_id)
    if project is None:
        return Reply(404, detail(f"project {project_id} not found"))
    counts = store.project_stats([project_id]).get(project_id) if include_stats else None
    return Reply(200, api_project(project, _tenant_id(service), counts, include_stats=include_stats))


def create_project(request: Request, service: Service) -> Reply:
    wanted = parse_project_create(request.body, request.query)
    try:
        project, created = service.store.create_project(
            name=wanted.name,
            project_id=wanted.project_id,
            description=wanted.description,
            extra=wanted.extra,
            reference_dataset_id=wanted.reference_dataset_id,
            start_time=wanted.start_time,
            end_time=wanted.end_time,
            upsert=wanted.upsert,
        )
    except ProjectExists as exc:
        return Reply(409, detail(str(exc), id=exc.project["id"]))
    return Reply(201 if created else 200, api_project(project, _tenant_id(service)))


# --- feedback (the SDK's create_feedback, list_feedback, read/update/delete_feedback; the viewer's thumbs) ----


def _feedback_id(request: Request) -> str:
    raw = request.params["feedback_id"]
    canon = canonical_id(raw)
    if canon is None:
        raise QueryError(("path", "feedback_id"), f"feedback id {raw[:60]!r} is not a UUID")
    return canon


def create_feedback(request: Request, service: Service) -> Reply:
    """``POST /feedback``: kept whether or not its run has arrived (the SDK sends runs in the background)."""
    item = parse_feedback_create(request.body)
    return Reply(200, api_feedback(service.store.add_feedback(item)))


def list_feedback(request: Request, service: Service) -> Reply:
    wanted = parse_feedback_list(request.query)
    items = service.store.list_feedback(
        runs=wanted.runs, traces=wanted.traces, keys=wanted.keys, sources=wanted.sources, sessions=wanted.sessions,
        limit=wanted.limit, offset=wanted.offset,
    )
    return Reply(200, [api_feedback(item) for item in items])


def read_feedback(request: Request, service: Service) -> Reply:
    feedback_id = _feedback_id(request)
    item = service.store.feedback_item(feedback_id)
    if item is None:
        return Reply(404, detail(f"feedback {feedback_id} not found"))
    return Reply(200, api_feedback(item))


def update_feedback(request: Request, service: Service) -> Reply:
    feedback_id = _feedback_id(request)
    item = service.store.update_feedback(feedback_id, parse_feedback_update(request.body))
    if item is None:
        return Reply(404, detail(f"feedback {feedback_id} not found"))
    return Reply(200, api_feedback(item))


def delete_feedback(request: Request, service: Service) -> Reply:
    feedback_id = _feedback_id(request)
    if not service.store.delete_feedback(feedback_id):
        return Reply(404, detail(f"feedback {feedback_id} not found"))
    return Reply(200, {"id": feedback_id})
