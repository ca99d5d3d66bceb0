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

from ._answers import RunPage, bounded_list, fill, one
from ._jsonio import LARGE
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
from ._query import USAGE_SELECTS, QueryError, RunQuery, Where, api_run, encode_cursor, parse_run_query
from ._reply import Reply, detail
from ._routing import Request, Service
from ._run_stats import parse_stats_query, run_stats
from ._multipart import MultipartError, boundary_from_content_type
from ._store import ProjectExists, RunKey, RunTooLarge
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
    "errors",
    "too_many",
    "one_run",
    "MAX_ERRORS",
]

logger = logging.getLogger(__name__)


def ok(request: Request, service: Service) -> Reply:
    return Reply(200, {"ok": True})


def info(request: Request, service: Service) -> Reply:
    return Reply(200, service.info())


# --- ingest -------------------------------------------------------------------------


MAX_ERRORS = 100
"""Violations a 422 lists at most; one more item counts the rest (every one is recorded all the same)."""
PARTS_PER_ITEM = 10
"""Multipart parts per item counted before a body is parsed: a run's post and its fields, sent as parts of their own."""


def errors(violations: list[Any]) -> list[dict[str, Any]]:
    """The ``detail`` of a 422: the first :data:`MAX_ERRORS` violations, then one item saying how many more."""
    shown = [v.as_error() for v in violations[:MAX_ERRORS]]
    if len(violations) > MAX_ERRORS:
        more = len(violations) - MAX_ERRORS
        shown.append({"loc": ["body"], "msg": f"and {more} more violations, not listed", "type": "runs.more", "count": more})
    return shown


def too_many(count: int, limit: int, what: str) -> Reply:
    """413 for a batch of more items than ``/info``'s ``batch_ingest_config.size_limit``: send smaller batches."""
    return Reply(
        413,
        detail(
            f"{count} {what} in one request; at most {limit} (batch_ingest_config.size_limit in GET /info): "
            "send them in smaller batches; nothing in this request was stored",
            size=count, max_size=limit,
        ),
    )


def ingest(result: ReadResult, request: Request, service: Service) -> Reply:
    """Store what one request carried, or refuse all of it: too many items (413), injected rejections, then rule
    violations (422), then a run that would be larger than a run may be (413).

    Every violation is recorded; whether it refuses the request is the service's validation mode's call.
    """
    request.log["run_ids"] = sorted(result.run_ids)
    items = len(result.ops) + len(result.feedback)
    if items > service.batch_items:
        return too_many(items, service.batch_items, "runs and feedback items")
    rejected = service.faults.rejected(result.run_ids)
    if rejected:
        refused = [
            {
                "loc": ["body", run_id],
                "msg": f"run {run_id} rejected (fault injection: reject_run_ids); nothing in this request was stored",
                "type": "runs.rejected",
            }
            for run_id in rejected
        ]
        request.log["fault"] = "reject_run_ids"
        return Reply(422, {"detail": refused})
    store = service.store
    if result.violations:
        refused_whole = refuses(service.validation, result.violations)
        store.record_violations(result.violations, path=request.route, accepted=not refused_whole)
        for violation in result.violations[:5]:
            logger.info("rule violation on %s: %s", request.route, violation.as_error()["msg"])
        if refused_whole:
            return Reply(422, {"detail": errors(result.violations)})
    try:
        applied = store.apply(result.ops, result.feedback, result.attachments, large=len(request.data) > LARGE)
    except RunTooLarge as exc:
        return Reply(413, detail(str(exc), run_id=exc.run_id, size=exc.size, max_size=exc.max_size))
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


def multipart_boundary(content_type: str | None) -> str | None:
    """The body's boundary, or None when the Content-Type has none (the parser then says what is wrong)."""
    try:
        return boundary_from_content_type(content_type)
    except MultipartError:
        return None


def post_batch(request: Request, service: Service) -> Reply:
    body = request.body
    if isinstance(body, dict):
        # Counted before any run is read: a million items would take a minute and a gigabyte to judge one by one.
        count = sum(len(body[kind]) for kind in ("post", "patch") if isinstance(body.get(kind), list))
        if count > service.batch_items:
            return too_many(count, service.batch_items, "runs")
    return ingest(read_batch(body), request, service)


def post_multipart(request: Request, service: Service) -> Reply:
    boundary = multipart_boundary(request.headers.get("content-type"))
    if boundary is not None:
        # Counted before the body is parsed: each part becomes an object.
        parts_seen = request.data.count(b"\r\n--" + boundary.encode("ascii"))
        if parts_seen > service.batch_items * PARTS_PER_ITEM:
            return too_many(parts_seen, service.batch_items * PARTS_PER_ITEM, "multipart parts")
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
    return one_run(request, service, run_id, lambda run: run_body(request, service, run)) or Reply(
        404, detail(f"run {run_id} not found")
    )


def one_run(request: Request, service: Service, run_id: str, shape: Any) -> Reply | None:
    """The answer that is one stored run, ``shape(run)``, read within the answer budget; None if it is not stored."""
    store = service.store
    key = store.run_key(run_id)
    if key is None:
        return None
    page = RunPage(service.answers, request)
    run = page.load(key, store.load_run)
    if run is None:
        return None
    page.add(shape(run))
    return Reply(200, page.only())


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
    """One page of the runs ``query`` matches, as ``POST /runs/query`` answers it (``feedback``: as in :func:`run_body`).

    At most ``limit`` runs, and fewer when they are large: the page ends where its JSON would pass the service's
    ``max_answer_bytes`` (:mod:`._answers`), and ``cursors.next`` goes on from there.
    """
    store = service.store
    # One run past the page says whether a next page exists.
    keys = store.query_keys(
        query.where.sql, query.where.params, order=query.order, after=query.after, limit=query.page_size + 1
    )
    more = len(keys) > query.page_size
    keys = keys[: query.page_size]
    ids = [key.run_id for key in keys]
    usage = store.run_usage(ids) if _wants_usage(query.select) else {}
    stats = _feedback_stats(service, ids) if feedback and (query.select is None or "feedback_stats" in query.select) else None
    # The SDK downloads a run's attachments from s3_urls (selected by default), without its key.
    links = attachment_urls(request, service, ids) if query.select is None or "s3_urls" in query.select else {}

    def shape(key: RunKey, run: dict[str, Any]) -> dict[str, Any]:
        body = api_run(run, key.project_id, query.select, usage.get(key.run_id))
        if stats is not None:
            body["feedback_stats"] = stats.get(key.run_id)
        if key.run_id in links:
            body["s3_urls"] = s3_urls(links[key.run_id])
        return body

    page = RunPage(service.answers, request)
    last, cut = fill(page, keys, store.load_run, shape)
    following = encode_cursor(query.order, last.position) if (more or cut) and last is not None else None
    return Reply(200, page.body("runs", {"cursors": {"next": following}}))


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
    usage = store.run_usage([key.run_id for key, _ in found])
    written = dict((key.run_id, number) for key, number in found)
    page = RunPage(service.answers, request)
    last, cut = fill(
        page, [key for key, _ in found], store.load_run,
        lambda key, run: api_run(run, key.project_id, CHANGE_FIELDS, usage.get(key.run_id)),
    )
    if cut:
        # The page ended before every changed run: the next look goes on after the last one answered.
        version, more = (written[last.run_id] if last is not None else after), True
    live = is_live(store.rows, query.trace_id, service.live_window_s, time.time())
    return Reply(200, page.body("runs", {"cursor": cursor(store.store_id, version), "more": more, "live": live}))


def run_charts(request: Request, service: Service) -> Reply:
    """``POST /runs/charts`` (:mod:`._charts`): a project's traffic over time, every figure a SQL aggregate."""
    store = service.store
    return Reply(200, charts(parse_charts(request.body), store.rows))


def _wants_usage(select: frozenset[str] | None) -> bool:
    return select is None or bool(select & USAGE_SELECTS)


def _feedback_stats(service: Service, run_ids: list[str]) -> dict[str, Any]:
    """Each run's ``feedback_stats`` (missing: null, no feedback), from the feedback kept for it."""
    found = service.store.feedback_of_runs(run_ids)
    return {run_id: feedback_stats(items) for run_id, items in found.items()}


def _add_feedback_stats(service: Service, runs: list[dict[str, Any]]) -> None:
    stats = _feedback_stats(service, [run["id"] for run in runs])
    for run in runs:
        run["feedback_stats"] = stats.get(run["id"])


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
    listed = (api_project(p, tenant, counts.get(p["id"]), include_stats=query.include_stats) for p in projects)
    return Reply(200, bounded_list(listed, service.answers, what="project", how=_FEWER.format(what="projects")))


# A list paged by offset is never cut short: the SDK stops at a short page.
_FEWER = "ask for fewer {what} at a time (a smaller limit, then the next offset)"


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
    listed = (api_feedback(item) for item in items)
    return Reply(200, bounded_list(listed, service.answers, what="feedback item", how=_FEWER.format(what="items")))


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
