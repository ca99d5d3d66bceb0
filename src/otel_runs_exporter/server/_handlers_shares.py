"""Handlers of sharing (:mod:`._shares`): the SDK's two share APIs, the public reads, and the viewer's shared page.

Sharing, with the key (langsmith 0.15 calls both APIs)::

    PUT    /runs/{run_id}/share              {"run_id", "share_token"}   -> {"run_id", "share_token"}   share_run
    GET    /runs/{run_id}/share                                          -> the same, or null           read_run_shared_link
    DELETE /runs/{run_id}/share                                          -> {}                          unshare_run
    POST   /api/v2/runs/{run_id}/share       {"session_id", "trace_id"}  -> {"share_token"}             runs.share.create
    DELETE /api/v2/runs/{trace_id}/share     {"session_id"}              -> 204, shared or not          runs.share.delete

Reading, with the token instead of a key (the dispatcher checks it first: ``Auth.SHARE_TOKEN``)::

    GET  /public/{token}/run                 the shared run (v1)                       read_shared_run
    GET  /public/{token}/run/{run_id}        a run of the shared trace (v1)            read_shared_run(run_id=)
    POST /public/{token}/runs/query          the trace's runs, a page (v1)             list_shared_runs; the viewer
    POST /public/{token}/runs/stats          the trace's counts (v1's stats)           the viewer
    GET  /api/v2/public/{token}/run/{run_id} ?selects=&start_time=  one run (v2)       public.runs.retrieve
    POST /api/v2/public/{token}/runs/query   {"selects"}  every run, start order (v2)  public.runs.query
    GET  /public/{token}/r                   the viewer, read-only, on that trace      the link share_run returns

Every public answer is built by the same code as its keyed counterpart (``runs_page``,
``one_run``, ``stats_of``, ``one_v2_run``, ``trace_items``), narrowed to the share's trace, without feedback,
and bounded in bytes as they are (:mod:`._answers`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ._handlers import one_run, run_body, runs_page, stats_of
from ._handlers_v2 import one_v2_run, trace_items
from ._query import QueryError, Where, parse_run_query
from ._reply import Reply, detail
from ._routing import Request, Service
from ._run_stats import parse_stats_query
from ._shares import NO_SHARE, Share
from ._v2 import check_body, one_id, parse_params, selects_of
from ._validate import canonical_id
from ._viewer import viewer_reply

__all__ = [
    "share_run",
    "read_share",
    "unshare_run",
    "share_trace_v2",
    "unshare_trace_v2",
    "public_run",
    "public_run_of_trace",
    "public_query",
    "public_stats",
    "public_run_v2",
    "public_query_v2",
    "shared_page",
]

# What a public v1 query may ask: enough to page through the trace (the viewer) or pick runs by id (the SDK).
# Not filters: feedback_key in a filter would tell a reader which runs have feedback.
_PUBLIC_QUERY_KEYS = frozenset(
    {"id", "trace", "parent_run", "run_type", "is_root", "error", "start_time", "select", "limit", "order", "cursor"}
)


def _stored(service: Service, raw_id: str) -> dict[str, Any] | None:
    run_id = canonical_id(raw_id)
    return service.store.get_run(run_id) if run_id is not None else None


def _not_found(raw_id: str) -> Reply:
    return Reply(404, detail(f"run {raw_id[:60]} not found (a run is shared once it is stored)"))


# --- sharing (keyed) ---------------------------------------------------------------------


def share_run(request: Request, service: Service) -> Reply:
    """``PUT /runs/{run_id}/share``: share the run's trace; a token the client chose is kept when it is a UUID."""
    run = _stored(service, request.params["run_id"])
    if run is None:
        return _not_found(request.params["run_id"])
    run_id = run["id"]
    body = request.body if isinstance(request.body, dict) else {}
    if canonical_id(body.get("run_id")) not in (None, run_id):
        raise QueryError(("body", "run_id"), f"run_id {str(body['run_id'])[:60]!r} is not the run in the path")
    token = body.get("share_token")
    if token is not None and canonical_id(token) is None:
        raise QueryError(("body", "share_token"), "share_token must be a UUID (or left out: the service draws one)")
    share = service.store.shares.create(run["trace_id"], service.store.project_of_run(run_id), run_id, token)
    return Reply(200, {"run_id": run_id, "share_token": share.token})


def read_share(request: Request, service: Service) -> Reply:
    """``GET /runs/{run_id}/share``: the share of the run's trace, or null."""
    run = _stored(service, request.params["run_id"])
    if run is None:
        return _not_found(request.params["run_id"])
    share = service.store.shares.of_trace(run["trace_id"])
    if share is None:
        return Reply(200, b"null")
    return Reply(200, {"run_id": run["id"], "share_token": share.token})


def unshare_run(request: Request, service: Service) -> Reply:
    """``DELETE /runs/{run_id}/share``: the run's trace is no longer shared (from the next request on)."""
    run = _stored(service, request.params["run_id"])
    if run is None:
        return _not_found(request.params["run_id"])
    service.store.shares.revoke(run["trace_id"])
    return Reply(200, {})


def share_trace_v2(request: Request, service: Service) -> Reply:
    """``POST /api/v2/runs/{run_id}/share``: creates or returns the share of the run's trace."""
    body = check_body(request.body, ("session_id", "trace_id"))
    for name in ("session_id", "trace_id"):
        if name not in body:
            raise QueryError(("body", name), f"{name} is required: the project and trace that hold the run")
    project_id = one_id(body["session_id"], ("body", "session_id"))
    trace_id = one_id(body["trace_id"], ("body", "trace_id"))
    run = _stored(service, request.params["run_id"])
    store = service.store
    if run is None or run["trace_id"] != trace_id or store.project_of_run(run["id"]) != project_id:
        return Reply(404, detail(f"run {request.params['run_id'][:60]} not found in trace {trace_id} of project {project_id}"))
    share = store.shares.create(trace_id, project_id, run["id"])
    return Reply(200, {"share_token": share.token})


def unshare_trace_v2(request: Request, service: Service) -> Reply:
    """``DELETE /api/v2/runs/{trace_id}/share``: 204 whether or not the trace was shared, as the hosted API answers."""
    body = check_body(request.body, ("session_id",))
    if "session_id" not in body:
        raise QueryError(("body", "session_id"), "session_id is required: the project that holds the trace")
    project_id = one_id(body["session_id"], ("body", "session_id"))
    trace_id = one_id(request.params["run_id"], ("path", "trace_id"))  # the path is the POST's: {run_id}
    shares = service.store.shares
    share = shares.of_trace(trace_id)
    if share is not None and share.project_id == project_id:
        shares.revoke(trace_id)
    return Reply(204)


# --- reading a share (its token, no key) ---------------------------------------------------


def _share(request: Request, service: Service) -> Share:
    # The dispatcher let the request in for this token; it may have been revoked since, a moment ago.
    share = service.store.shares.find(request.params["share_token"])
    if share is None:
        raise QueryError(("path", "share_token"), NO_SHARE)
    return share


def _in_trace(share: Share) -> Where:
    return Where("r.trace_id = ?", (share.trace_id,))


def _of_trace(service: Service, share: Share, raw_id: str) -> str | None:
    """The id of a stored run of the shared trace, or None (a run of another trace is not there for the token)."""
    run_id = canonical_id(raw_id)
    if run_id is None:
        return None
    found = service.store.rows("SELECT id FROM runs WHERE id = ? AND trace_id = ? AND posted = 1", (run_id, share.trace_id))
    return run_id if found else None


def _public_run(request: Request, service: Service, share: Share, raw_id: str) -> Reply:
    run_id = _of_trace(service, share, raw_id)
    found = one_run(request, service, run_id, lambda run: run_body(request, service, run, feedback=False)) if run_id else None
    return found or _not_found(raw_id)


def public_run(request: Request, service: Service) -> Reply:
    """``GET /public/{token}/run``: the run that was shared (v1)."""
    share = _share(request, service)
    return _public_run(request, service, share, share.run_id)


def public_run_of_trace(request: Request, service: Service) -> Reply:
    """``GET /public/{token}/run/{run_id}``: any run of the shared trace (v1); 404 for one of another trace."""
    share = _share(request, service)
    return _public_run(request, service, share, request.params["run_id"])


def _public_body(body: Any) -> Any:
    if isinstance(body, dict):
        asked = sorted(k for k, v in body.items() if v is not None and k not in _PUBLIC_QUERY_KEYS)
        if asked:
            raise QueryError(
                ("body", asked[0]),
                f"{asked[0]} is not taken on a shared trace; it takes {', '.join(sorted(_PUBLIC_QUERY_KEYS))}",
            )
    return body


def public_query(request: Request, service: Service) -> Reply:
    """``POST /public/{token}/runs/query``: a page of the shared trace's runs, as ``/runs/query`` answers (v1)."""
    share = _share(request, service)
    query = parse_run_query(_public_body(request.body))
    return runs_page(request, service, replace(query, where=Where.all_of([query.where, _in_trace(share)])), feedback=False)


def public_stats(request: Request, service: Service) -> Reply:
    """``POST /public/{token}/runs/stats``: the shared trace's counts (the viewer's header), as ``/runs/stats``."""
    share = _share(request, service)
    query = parse_stats_query(_public_body(request.body))
    return stats_of(service, Where.all_of([query.where, _in_trace(share)]))


def public_run_v2(request: Request, service: Service) -> Reply:
    """``GET /api/v2/public/{token}/run/{run_id}``: one run of the shared trace, its ``selects`` (v2)."""
    share = _share(request, service)
    params = parse_params(request.query, ("selects", "start_time"), ("selects",))
    selects = selects_of(params.get("selects"), ("query", "selects"))
    raw_id = request.params["run_id"]
    run_id = _of_trace(service, share, raw_id)
    found = one_v2_run(request, service, run_id, None, selects) if run_id else None
    return found or _not_found(raw_id)


def public_query_v2(request: Request, service: Service) -> Reply:
    """``POST /api/v2/public/{token}/runs/query``: every run of the shared trace in start order, its ``selects``."""
    share = _share(request, service)
    body = check_body(request.body, ("selects",))
    return trace_items(
        request, service, _in_trace(share), selects_of(body.get("selects"), ("body", "selects")),
        how="page through them with POST /public/{token}/runs/query, or ask for fewer selects",
    )


def shared_page(request: Request, service: Service) -> Reply:
    """``GET /public/{token}/r``: the viewer's page, which reads the trace through the public routes (no key)."""
    page = viewer_reply("/")
    assert page is not None
    return page
