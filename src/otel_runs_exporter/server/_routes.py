"""The local service's routes: one table that the dispatcher, the 405 answers, auth, rate limits and the docs read.

To add a route, write its handler (``handler(request, service) -> Reply``, in
:mod:`._handlers`, or :mod:`._control` for the control plane) and add one row
below; then ``python -m otel_runs_exporter.server._route_docs`` rewrites the route
list in ``docs/local-service.md`` (``tests/server/test_routes.py`` checks that it
matches). What each field means is in :class:`~._routing.Route`; the order the
checks run in, in :mod:`._dispatch`.

Every row is served at the root and under ``/api/v1``, with or without a trailing
slash, except where it says otherwise. A literal path comes before a parameter that
would also match it: ``/runs/query`` before ``/runs/{run_id}``.
"""

from __future__ import annotations

from ._control import (
    cancel_export,
    create_deployment,
    create_export,
    export_runs,
    list_exports,
    read_deployment,
    read_export,
    read_revision,
    update_deployment,
    wait_for_auth,
)
from ._handlers import (
    create_feedback,
    create_project,
    delete_feedback,
    info,
    list_feedback,
    list_projects,
    ok,
    patch_run,
    post_batch,
    post_multipart,
    post_run,
    query_runs,
    read_feedback,
    read_project,
    read_run,
    run_changes,
    run_charts,
    stats,
    update_feedback,
)
from ._handlers_shares import (
    public_query,
    public_query_v2,
    public_run,
    public_run_of_trace,
    public_run_v2,
    public_stats,
    read_share,
    share_run,
    share_trace_v2,
    shared_page,
    unshare_run,
    unshare_trace_v2,
)
from ._handlers_v2 import (
    delete_project,
    download_attachment,
    query_runs_v2,
    query_threads,
    query_traces,
    read_run_v2,
    run_url,
    run_violations,
    thread_stats,
    thread_traces,
    threads_stats,
    trace_runs,
)
from ._otlp import otlp_traces
from ._inspect import check_report, trace_ids
from ._routing import (
    ANY_PAGE,
    CONTROL_JSON,
    CORS_ORIGINS,
    DELETE,
    GET,
    GET_HEAD,
    JSON,
    MULTIPART,
    MULTIPART_ON,
    OTLP,
    PATCH,
    POST,
    PUT,
    SAME_ORIGIN,
    SAME_ORIGIN_OR_CORS,
    Auth,
    Faults,
    Files,
    Rate,
    Route,
    Router,
)
from ._viewer import PATHS, viewer_reply

__all__ = ["ROUTES", "FILES", "ROUTER"]

ROUTES: tuple[Route, ...] = (
    # What the service's client reads first (no key: it asks before it has one), and a health check.
    Route("/ok", ok, methods=GET_HEAD, auth=Auth.PUBLIC, trailing_slash=False, browsers=CORS_ORIGINS),
    Route("/info", info, methods=GET_HEAD, auth=Auth.PUBLIC, trailing_slash=False, rate=Rate.INFO, browsers=CORS_ORIGINS),
    # Ingest: the exporter and the service's SDK (spec 4.4, 4.5). Injected faults apply here only. No page
    # writes runs but a web app's SDK on a --cors-origin origin: the viewer never does.
    Route("/runs", post_run, methods=POST, body=JSON, rate=Rate.RUNS_POST, faults=Faults.TRACING, browsers=CORS_ORIGINS),
    Route("/runs/batch", post_batch, methods=POST, body=JSON, rate=Rate.RUNS_BATCH, faults=Faults.TRACING, browsers=CORS_ORIGINS),
    Route(
        "/runs/multipart", post_multipart, methods=POST, body=MULTIPART, rate=Rate.RUNS_MULTIPART, faults=Faults.TRACING,
        enabled_by=MULTIPART_ON, browsers=CORS_ORIGINS,
    ),
    # OTLP/HTTP from any language's OTel SDK, a Collector, or the service's SDK in its OTel mode (:mod:`._otlp`).
    Route(
        "/otel/v1/traces", otlp_traces, methods=POST, body=OTLP, rate=Rate.OTLP, faults=Faults.TRACING,
        browsers=CORS_ORIGINS,
    ),
    # The read API (the SDK's list_runs, get_run_stats, read_run, projects); the viewer's page calls some of them,
    # and only those let it in (tests/server/test_routes.py checks that against its api.js).
    Route("/runs/query", query_runs, methods=POST, body=JSON, rate=Rate.RUNS_QUERY, browsers=SAME_ORIGIN_OR_CORS),
    Route("/runs/stats", stats, methods=POST, body=JSON, rate=Rate.RUNS_STATS, browsers=SAME_ORIGIN_OR_CORS),
    # The viewer's own: a running trace's new and changed runs, held until there are some (a long poll: a slot
    # of its own). Before /runs/{run_id}, which the path would also match.
    Route("/runs/changes", run_changes, methods=GET_HEAD, browsers=SAME_ORIGIN, streams=True),
    # The viewer's project page: runs, errors, latency, tokens and cost over time, computed by SQLite. The spec's
    # "POST containing /charts" rows limit it.
    Route("/runs/charts", run_charts, methods=POST, body=JSON, rate=Rate.CHARTS, browsers=SAME_ORIGIN_OR_CORS),
    # otel-runs runs (:mod:`._inspect`): trace ids from their prefixes (runs tree 0190b3c5), and runs check's report.
    # A script's business: no page.
    Route("/runs/trace-ids", trace_ids, methods=POST, body=JSON),
    Route("/runs/check", check_report, methods=GET_HEAD),
    Route(
        "/runs/{run_id}", patch_run, methods=PATCH, body=JSON, rate=Rate.RUNS_PATCH, faults=Faults.TRACING, browsers=CORS_ORIGINS
    ),
    Route("/runs/{run_id}", read_run, methods=GET_HEAD, rate=Rate.RUNS_READ, browsers=SAME_ORIGIN_OR_CORS),
    # The rule violations recorded for a run, which the default mode stores despite: the viewer shows them.
    Route("/runs/{run_id}/violations", run_violations, methods=GET_HEAD, browsers=SAME_ORIGIN_OR_CORS),
    # Sharing a run's trace (the SDK's share_run, read_run_shared_link, unshare_run): :mod:`._shares`.
    Route("/runs/{run_id}/share", share_run, methods=PUT, body=JSON, browsers=CORS_ORIGINS),
    Route("/runs/{run_id}/share", read_share, methods=GET_HEAD, browsers=CORS_ORIGINS),
    Route("/runs/{run_id}/share", unshare_run, methods=DELETE, browsers=CORS_ORIGINS),
    Route("/sessions", list_projects, methods=GET_HEAD, browsers=SAME_ORIGIN_OR_CORS),
    Route("/sessions", create_project, methods=POST, body=JSON, browsers=CORS_ORIGINS),
    Route("/sessions/{project_id}", read_project, methods=GET_HEAD, browsers=CORS_ORIGINS),
    Route("/sessions/{project_id}", delete_project, methods=DELETE, rate=Rate.SESSIONS_DELETE, browsers=CORS_ORIGINS),
    # Feedback (the SDK's create_feedback without trace_id, list_feedback, read/update/delete_feedback). The viewer
    # adds a thumbs up or down and a comment, and reads a trace's feedback: its page may create and list, no more.
    Route("/feedback", create_feedback, methods=POST, body=JSON, rate=Rate.FEEDBACK_POST, browsers=SAME_ORIGIN_OR_CORS),
    Route("/feedback", list_feedback, methods=GET_HEAD, browsers=SAME_ORIGIN_OR_CORS),
    Route("/feedback/{feedback_id}", read_feedback, methods=GET_HEAD, browsers=CORS_ORIGINS),
    Route("/feedback/{feedback_id}", update_feedback, methods=PATCH, body=JSON, browsers=CORS_ORIGINS),
    Route("/feedback/{feedback_id}", delete_feedback, methods=DELETE, browsers=CORS_ORIGINS),
    # Where the read API's signed attachment addresses point. No key (the SDK downloads them without one):
    # the signature in the address is the credential. No page: the bytes are whatever a client sent.
    Route("/attachments/{run_id}/{name}", download_attachment, methods=GET_HEAD, auth=Auth.PUBLIC),
    # A shared trace, read with its token instead of the key (the SDK's read_shared_run, list_shared_runs), limited
    # per address. The viewer's page reads these for a share link, and serves the link itself (any page may link it).
    Route(
        "/public/{share_token}/run", public_run, methods=GET_HEAD, auth=Auth.SHARE_TOKEN, rate=Rate.PUBLIC,
        browsers=SAME_ORIGIN_OR_CORS,
    ),
    Route(
        "/public/{share_token}/run/{run_id}", public_run_of_trace, methods=GET_HEAD, auth=Auth.SHARE_TOKEN,
        rate=Rate.PUBLIC, browsers=SAME_ORIGIN_OR_CORS,
    ),
    Route(
        "/public/{share_token}/runs/query", public_query, methods=POST, body=JSON, auth=Auth.SHARE_TOKEN,
        rate=Rate.PUBLIC, browsers=SAME_ORIGIN_OR_CORS,
    ),
    Route(
        "/public/{share_token}/runs/stats", public_stats, methods=POST, body=JSON, auth=Auth.SHARE_TOKEN,
        rate=Rate.PUBLIC, browsers=SAME_ORIGIN_OR_CORS,
    ),
    Route(
        "/public/{share_token}/r", shared_page, methods=GET_HEAD, auth=Auth.SHARE_TOKEN, rate=Rate.PUBLIC,
        browsers=ANY_PAGE, api_v1=False, trailing_slash=False,
    ),
    # The v2 read API (client.runs, .traces, .threads; evaluate and get_test_results), at the root only, as the
    # SDK asks for it. The viewer's threads page reads threads; the rest is for scripts and --cors-origin apps.
    Route(
        "/api/v2/runs/query", query_runs_v2, methods=POST, body=JSON, rate=Rate.RUNS_QUERY, browsers=CORS_ORIGINS,
        api_v1=False,
    ),
    Route("/api/v2/runs/{run_id}", read_run_v2, methods=GET_HEAD, rate=Rate.RUNS_READ, browsers=CORS_ORIGINS, api_v1=False),
    Route("/api/v2/runs/{run_id}/url", run_url, methods=GET_HEAD, browsers=CORS_ORIGINS, api_v1=False),
    # client.runs.share.create(run_id) and .delete(trace_id): one path, so the DELETE's {run_id} is the trace's id.
    Route(
        "/api/v2/runs/{run_id}/share", share_trace_v2, methods=POST, body=JSON, browsers=CORS_ORIGINS, api_v1=False
    ),
    Route(
        "/api/v2/runs/{run_id}/share", unshare_trace_v2, methods=DELETE, body=JSON, browsers=CORS_ORIGINS,
        api_v1=False,
    ),
    # client.public.runs.retrieve and .query: a shared trace by its token.
    Route(
        "/api/v2/public/{share_token}/run/{run_id}", public_run_v2, methods=GET_HEAD, auth=Auth.SHARE_TOKEN,
        rate=Rate.PUBLIC, browsers=CORS_ORIGINS, api_v1=False,
    ),
    Route(
        "/api/v2/public/{share_token}/runs/query", public_query_v2, methods=POST, body=JSON, auth=Auth.SHARE_TOKEN,
        rate=Rate.PUBLIC, browsers=CORS_ORIGINS, api_v1=False,
    ),
    Route("/api/v2/traces/query", query_traces, methods=POST, body=JSON, browsers=CORS_ORIGINS, api_v1=False),
    Route("/api/v2/traces/{trace_id}/runs", trace_runs, methods=GET_HEAD, browsers=CORS_ORIGINS, api_v1=False),
    Route("/api/v2/threads/query", query_threads, methods=POST, body=JSON, browsers=SAME_ORIGIN_OR_CORS, api_v1=False),
    Route("/api/v2/threads/stats", threads_stats, methods=POST, body=JSON, browsers=CORS_ORIGINS, api_v1=False),
    Route(
        "/api/v2/threads/{thread_id}/traces", thread_traces, methods=GET_HEAD, browsers=SAME_ORIGIN_OR_CORS,
        api_v1=False,
    ),
    Route("/api/v2/threads/{thread_id}/stats", thread_stats, methods=GET_HEAD, browsers=CORS_ORIGINS, api_v1=False),
    # Bulk exports (spec 4.3), on the main API; ControlPlane.fail_next answers for them. Here and on the control
    # plane, no page at all (browsers left NO_PAGE): they move data out and deploy, a script's business.
    Route("/bulk-exports", list_exports, methods=GET, faults=Faults.CONTROL),
    Route("/bulk-exports", create_export, methods=POST, body=CONTROL_JSON, faults=Faults.CONTROL),
    Route("/bulk-exports/{export_id}", read_export, methods=GET, faults=Faults.CONTROL),
    Route("/bulk-exports/{export_id}", cancel_export, methods=PATCH, body=CONTROL_JSON, faults=Faults.CONTROL),
    Route("/bulk-exports/{export_id}/runs", export_runs, methods=GET, faults=Faults.CONTROL),
    # The control plane (spec 2.6, 4.1, 4.2): at the root only, and a bearer token may stand in for the key.
    Route(
        "/v2/deployments", create_deployment, methods=POST, body=CONTROL_JSON, auth=Auth.KEY_OR_BEARER,
        faults=Faults.CONTROL, api_v1=False,
    ),
    Route(
        "/v2/deployments/{deployment_id}", read_deployment, methods=GET, auth=Auth.KEY_OR_BEARER, faults=Faults.CONTROL,
        api_v1=False,
    ),
    Route(
        "/v2/deployments/{deployment_id}", update_deployment, methods=PATCH, body=CONTROL_JSON,
        auth=Auth.KEY_OR_BEARER, faults=Faults.CONTROL, api_v1=False,
    ),
    Route(
        "/v2/deployments/{deployment_id}/revisions/{revision_id}", read_revision, methods=GET,
        auth=Auth.KEY_OR_BEARER, faults=Faults.CONTROL, api_v1=False,
    ),
    Route(
        "/v2/auth/wait/{auth_id}", wait_for_auth, methods=GET, auth=Auth.KEY_OR_BEARER, faults=Faults.CONTROL, api_v1=False,
        streams=True,
    ),
)
"""Every route of the local service but the viewer's files, in the order paths are tried."""


FILES = Files(viewer_reply, PATHS, browsers=ANY_PAGE)
"""The trace viewer's page and files (:mod:`._viewer`), at the root, before any route; a link on any page opens them."""

ROUTER = Router(ROUTES)
