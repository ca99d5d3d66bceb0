"""``ServiceClient``: bulk exports, deployments, auth waits and reading runs, over the exporter's own HTTP stack.

One :class:`requests.Session` (from :func:`~otel_runs_exporter._http_client.new_session`:
x-api-key, x-tenant-id, User-Agent, the user's extra headers), as one
:class:`~otel_runs_exporter._http_client.SessionNetwork`, is shared by the
:class:`~otel_runs_exporter._http_client.HttpClient` objects, one per base address, so
retries, backoff and redirect rules are the exporter's (the retry matrix in
``_http_client``), not a second copy.

What each answer does:

- GET: 408, 429 and 5xx are retried with backoff (Retry-After honoured) until the
  call's deadline; then the last answer is raised as its typed error.
- POST and PATCH: sent once (``retry=False``); a 429 or 5xx is raised at once,
  since repeating a create could make two exports or deployments. ``POST /runs/query``
  is the exception: a read sent as a POST, retried like a GET.
- Any other 4xx: raised via :func:`~otel_runs_exporter._errors.error_for_status` with
  the parsed JSON body as ``detail`` (a 422's loc/msg/type list is ``err.errors``).
- No answer at all (connection refused, every attempt timed out): :class:`NoAnswerError`.

Connecting has a timeout of its own (``connect_timeout_s``, 3.05 s), apart from
the read timeout (``OTEL_EXPORTER_RUNS_TIMEOUT``): an address that accepts no
connection is reported in seconds, while an answer may take as long as the read
timeout allows (an auth wait is held open on purpose). Until an address has
answered this client once, a failed connection ends the call at once with
:class:`NoAnswerError` (a wrong address, or a service that is not running: retrying
for the whole call timeout would only delay saying so); after that, a failed
connection is retried like a 5xx, so a long wait rides out a restart.

Bulk-export and read paths are ``/api/v1/bulk-exports...``, ``/api/v1/runs/query`` and
``/api/v1/sessions`` under ``endpoint``. An endpoint
that already ends in ``/api/v1`` (as self-hosted addresses often do) is not
doubled: the suffix is taken off first, so ``https://host/api/v1`` and
``https://host`` reach the same ``https://host/api/v1/bulk-exports``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterator, Mapping, Sequence

import orjson
import requests
from requests.adapters import HTTPAdapter

from .._errors import (
    ConfigError,
    DeploymentFailedError,
    NoAnswerError,
    ServiceError,
    WaitTimeoutError,
    error_for_status,
)
from .._settings import Settings, resolve, shown_url
from .._http_client import (
    HttpClient,
    RetryLater,
    SessionNetwork,
    backoff_of,
    new_session,
    retry_after_seconds,
)
from .._http_client import origin as url_origin
from ._models import AuthWaitResult, Deployment, Export, ExportRun, Revision

__all__ = ["ServiceClient", "NoAnswerError", "WaitTimeoutError", "DeploymentFailedError", "exports_base"]

logger = logging.getLogger(__name__)

_API_V1 = "/api/v1"
CONNECT_TIMEOUT_S = 3.05
"""Default seconds to establish a connection: just over 3 s, so one lost SYN (resent after 1 s, then 3 s) is survived."""
_JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def exports_base(endpoint: str) -> str:
    """The base address bulk-export paths (``/api/v1/bulk-exports``) are appended to.

    >>> exports_base("https://host/api/v1/")
    'https://host'
    >>> exports_base("https://api.smith.langchain.com")
    'https://api.smith.langchain.com'
    """
    base = endpoint.rstrip("/")
    return base[: -len(_API_V1)] if base.endswith(_API_V1) else base


class ServiceClient:
    """Bulk exports (spec 4.3), the deployment control plane (4.2) and auth waits (4.1).

    Built from the same settings as the exporter (``OTEL_EXPORTER_RUNS_ENDPOINT``,
    ``..._CONTROL_PLANE_URL``, ``..._API_KEY``, ``..._WORKSPACE_ID``,
    ``..._BEARER_TOKEN``, ``..._TIMEOUT``), or keyword overrides of them::

        client = ServiceClient(endpoint="http://127.0.0.1:1984", api_key="...")
        export = client.wait_for_export(export_id, timeout=3600, poll_interval=10)
        if export.status is not ExportStatus.COMPLETED:
            for run in client.list_export_runs(export_id):
                print(run.status, run.errors)

    ``call_timeout_s`` bounds one call with its retries (default: the exporter's
    ``OTEL_BSP_EXPORT_TIMEOUT``, 30 s); ``connect_timeout_s`` bounds establishing
    a connection (see the module docstring for what a failed first connection does).
    Both apply to the session the client builds; a ``session`` you pass keeps its own
    adapters, so only the read timeout and the retry rules apply to it. One client per
    thread: the session and the backoff state are not locked.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        call_timeout_s: float | None = None,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        session: requests.Session | None = None,
        **overrides: Any,
    ) -> None:
        if settings is not None and overrides:
            raise TypeError("pass either settings or keyword overrides of them, not both")
        if isinstance(connect_timeout_s, bool) or not isinstance(connect_timeout_s, (int, float)) or not connect_timeout_s > 0:
            raise ConfigError(f"connect_timeout_s must be a number of seconds above 0, got {connect_timeout_s!r}")
        self.settings = settings if settings is not None else resolve(overrides)
        self._connect = _ConnectAdapter(float(connect_timeout_s))
        if session is None:
            session = new_session(self.settings)
            session.mount("http://", self._connect)
            session.mount("https://", self._connect)
        self._session = session
        self._network = SessionNetwork(session)
        self.call_timeout_s = call_timeout_s if call_timeout_s is not None else self.settings.export_timeout_s
        self._api = self._http(exports_base(self.settings.endpoint), self.settings.timeout_s)
        self._control = self._http(self.settings.control_plane_url, self.settings.timeout_s)

    def __repr__(self) -> str:
        return f"ServiceClient(endpoint={shown_url(self._api.base)!r}, control_plane_url={shown_url(self._control.base)!r})"

    def close(self) -> None:
        self._network.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- bulk exports ----------------------------------------------------------------

    def get_export(self, export_id: str) -> Export:
        """``GET /api/v1/bulk-exports/{export_id}``."""
        return self._export(export_id)

    def _export(self, export_id: str, deadline: float | None = None) -> Export:
        return Export.from_json(self._call(self._api, "GET", f"{_API_V1}/bulk-exports/{_seg(export_id)}", deadline=deadline))

    def list_exports(self) -> list[Export]:
        """``GET /api/v1/bulk-exports``: every export of the workspace."""
        return [Export.from_json(item) for item in _items(self._call(self._api, "GET", f"{_API_V1}/bulk-exports", expect="list"))]

    def list_export_runs(self, export_id: str) -> list[ExportRun]:
        """``GET /api/v1/bulk-exports/{export_id}/runs``: one per date partition, errors in retry order."""
        body = self._call(self._api, "GET", f"{_API_V1}/bulk-exports/{_seg(export_id)}/runs", expect="list")
        return [ExportRun.from_json(item) for item in _items(body)]

    def create_export(self, body: Mapping[str, Any]) -> Export:
        """``POST /api/v1/bulk-exports`` (not in the spec; what the local service and the hosted one accept).

        >>> client.create_export({"start_time": "2025-01-01T00:00:00Z", "end_time": "2025-01-08T00:00:00Z",
        ...                       "bulk_export_destination_id": dest_id})  # doctest: +SKIP
        """
        return Export.from_json(self._call(self._api, "POST", f"{_API_V1}/bulk-exports", body=body))

    def cancel_export(self, export_id: str) -> Export:
        """``PATCH /api/v1/bulk-exports/{export_id}`` with ``{"status": "Cancelled"}``.

        A final export cannot be cancelled; the service's error (409 locally) is raised.
        """
        path = f"{_API_V1}/bulk-exports/{_seg(export_id)}"
        body = self._call(self._api, "PATCH", path, body={"status": "Cancelled"}, expect=None)
        if isinstance(body, Mapping) and "status" in body:
            return Export.from_json(body)
        return self.get_export(export_id)  # the answer's shape is not shown; read it back

    def wait_for_export(
        self,
        export_id: str,
        timeout: float = 3600.0,
        poll_interval: float = 10.0,
        progress: Callable[[Export], None] | None = None,
    ) -> Export:
        """Poll until the export is final and return it (whatever the final status).

        ``progress`` is called with each export read. Raises :class:`WaitTimeoutError`
        (carrying the last export) when ``timeout`` seconds pass first.
        """
        return self._poll(
            f"export {export_id}",
            lambda deadline: self._export(export_id, deadline),
            lambda export: export.is_final,
            timeout,
            poll_interval,
            progress,
        )

    # --- reading runs and projects ----------------------------------------------------

    def query_runs(self, body: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """``POST /api/v1/runs/query`` (the SDK's ``list_runs``): every run the query matches, page by page.

        ``body`` holds the query's keys (``session``, ``trace``, ``is_root``,
        ``start_time``, ``filter``, ``select``, ``order``, ``limit`` as the page
        size, ...); ``cursors.next`` is followed until the last page, lazily, so
        a caller that stops early asks for no more. The runs are the service's
        JSON, as it sent them::

            for run in client.query_runs({"trace": trace_id, "order": "asc"}):
                print(run["name"], run["status"])
        """
        query = dict(body)
        while True:
            # A read sent as a POST: retried like a GET, since asking twice changes nothing.
            page = self._call(self._api, "POST", f"{_API_V1}/runs/query", body=query, retry=True)
            runs = page.get("runs") if isinstance(page, Mapping) else None
            if not isinstance(runs, list):
                raise ServiceError(200, "POST", f"{_API_V1}/runs/query", "the answer has no runs list")
            yield from (run for run in runs if isinstance(run, dict))
            cursors = page.get("cursors")
            following = cursors.get("next") if isinstance(cursors, Mapping) else None
            if not following or not runs:
                return
            query["cursor"] = following

    def list_projects(self, *, name: str | None = None, project_id: str | None = None) -> list[dict[str, Any]]:
        """``GET /api/v1/sessions``: the projects (the service's JSON), those with this exact name or id when given."""
        params: dict[str, Any] = {}
        if name is not None:
            params["name"] = name
        if project_id is not None:
            params["id"] = project_id
        body = self._call(self._api, "GET", f"{_API_V1}/sessions", params=params, expect="list")
        return [dict(item) for item in _items(body)]

    def match_trace_ids(self, prefixes: Sequence[str], *, limit: int = 10) -> dict[str, list[str]]:
        """``POST /api/v1/runs/trace-ids``, the local service's own: each prefix's stored trace ids, in id order.

        At most ``limit`` a prefix (1 to 100); one id is the trace, several an ambiguous prefix::

            client.match_trace_ids(["0190b3c5"])  # {"0190b3c5": ["0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d"]}
        """
        body = {"prefixes": list(prefixes), "limit": limit}
        answer = self._call(self._api, "POST", f"{_API_V1}/runs/trace-ids", body=body, retry=True)
        matches = answer.get("matches") if isinstance(answer, Mapping) else None
        if not isinstance(matches, Mapping):
            raise ServiceError(200, "POST", f"{_API_V1}/runs/trace-ids", "the answer has no matches")
        return {str(k): [str(i) for i in v] for k, v in matches.items() if isinstance(v, list)}

    def check_runs(self) -> dict[str, Any]:
        """``GET /api/v1/runs/check``, the local service's own: the report ``otel-runs runs check`` prints.

        Runs patched but never posted, never completed, parents that never arrived, parent
        cycles and accepted rule violations, each list cut to 1,000, with ``counts`` of each.
        """
        return dict(self._call(self._api, "GET", f"{_API_V1}/runs/check"))

    # --- deployments ------------------------------------------------------------------

    def create_deployment(self, body: Mapping[str, Any]) -> Deployment:
        """``POST /v2/deployments``; the answer carries ``id`` and ``latest_revision_id``."""
        return Deployment.from_json(self._call(self._control, "POST", "/v2/deployments", body=body))

    def get_deployment(self, deployment_id: str) -> Deployment:
        """``GET /v2/deployments/{deployment_id}``."""
        return Deployment.from_json(self._call(self._control, "GET", f"/v2/deployments/{_seg(deployment_id)}"))

    def get_revision(self, deployment_id: str, revision_id: str) -> Revision:
        """``GET /v2/deployments/{deployment_id}/revisions/{revision_id}``."""
        return self._revision(deployment_id, revision_id)

    def _revision(self, deployment_id: str, revision_id: str, deadline: float | None = None) -> Revision:
        path = f"/v2/deployments/{_seg(deployment_id)}/revisions/{_seg(revision_id)}"
        return Revision.from_json(self._call(self._control, "GET", path, deadline=deadline), deployment_id=deployment_id)

    def update_deployment(self, deployment_id: str, patch: Mapping[str, Any]) -> Deployment:
        """``PATCH /v2/deployments/{deployment_id}`` (payload as the service defines it)."""
        return Deployment.from_json(self._call(self._control, "PATCH", f"/v2/deployments/{_seg(deployment_id)}", body=patch))

    def wait_until_deployed(
        self,
        deployment_id: str,
        revision_id: str | None = None,
        timeout: float = 900.0,
        poll_interval: float = 5.0,
        progress: Callable[[Revision], None] | None = None,
    ) -> Revision:
        """Poll a revision (the deployment's latest when none is given) until ``DEPLOYED``.

        Raises :class:`DeploymentFailedError` on a failed status and
        :class:`WaitTimeoutError` when ``timeout`` passes first.
        """
        if revision_id is None:
            revision_id = self.get_deployment(deployment_id).latest_revision_id
            if not revision_id:
                raise ServiceError(200, "GET", f"/v2/deployments/{deployment_id}", "the deployment has no latest_revision_id")
        rev_id = revision_id

        def read(deadline: float) -> Revision:
            revision = self._revision(deployment_id, rev_id, deadline)
            if revision.is_failed:
                raise DeploymentFailedError(revision)
            return revision

        return self._poll(
            f"revision {rev_id} of deployment {deployment_id}",
            read,
            lambda revision: revision.is_deployed,
            timeout,
            poll_interval,
            progress,
        )

    # --- auth wait --------------------------------------------------------------------

    def wait_for_auth(self, auth_id: str, timeout: int = 30) -> AuthWaitResult:
        """``GET /v2/auth/wait/{auth_id}?timeout=N``: the service waits up to ``timeout`` seconds.

        ``timeout`` and ``not_found`` come back as statuses, not exceptions; a 422
        raises :class:`~otel_runs_exporter.ValidationError` with the ``detail`` list.
        The token is a credential and never appears in a repr, log or message.
        """
        # The service holds the request for up to `timeout` seconds, so this one call
        # needs a longer read timeout than the shared client's: a client of its own on
        # the same session (no second retry loop; same HttpClient code).
        wait_s = timeout if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) else 0
        http = self._http(self.settings.control_plane_url, self.settings.timeout_s + max(0, wait_s))
        body = self._call(
            http,
            "GET",
            f"/v2/auth/wait/{_seg(auth_id)}",
            params={"timeout": timeout},
            call_timeout_s=self.call_timeout_s + max(0, wait_s),
        )
        return AuthWaitResult.from_json(body if isinstance(body, Mapping) else {})

    # --- plumbing -----------------------------------------------------------------------

    def _http(self, base_url: str, timeout_s: float) -> HttpClient:
        # The adapter's event is every client's wake: it ends a call whose address never answered.
        return HttpClient(
            self._network, base_url, timeout_s, wake=self._connect.unreachable, backoff=backoff_of(self.settings)
        )

    def _call(
        self,
        http: HttpClient,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        call_timeout_s: float | None = None,
        retry: bool | None = None,
        expect: str | None = "object",
        deadline: float | None = None,
    ) -> Any:
        """The answer's JSON; ``expect``: what a 2xx answer must be ("object", "list": a list or an
        object holding one, None: anything); ``deadline``: a wait's own end, which no retry outlasts."""
        headers = dict(_JSON_HEADERS)
        if http is not self._api and self.settings.bearer_token:
            # Only to the control plane: the main API has no bearer scheme, and the
            # credential should not travel further than it must.
            headers["Authorization"] = f"Bearer {self.settings.bearer_token}"
        data = orjson.dumps(dict(body)) if body is not None else None
        ends = time.monotonic() + (call_timeout_s if call_timeout_s is not None else self.call_timeout_s)
        deadline = ends if deadline is None else min(ends, deadline)
        if retry is None:
            retry = method in ("GET", "HEAD")
        self._connect.unreachable.clear()
        try:
            resp = http.request(
                method, path, deadline, body=data, headers=headers, params=dict(params) if params else None, retry=retry
            )
        except RetryLater as later:
            if later.response is None:
                raise NoAnswerError(method, path, http.origin, self._connect.last_failure) from None
            resp = later.response
        logger.debug("%s %s -> %d", method, path, resp.status_code)
        if resp.status_code >= 300:
            raise error_for_status(resp.status_code, method, path, _parse(resp), retry_after_seconds(resp))
        answer = _parse(resp)
        if expect is not None and not (isinstance(answer, Mapping) or (expect == "list" and isinstance(answer, list))):
            # A proxy's page, or an address that is not the service's: said so, never read as "nothing".
            shown = answer if isinstance(answer, str) else type(answer).__name__
            raise ServiceError(resp.status_code, method, path,
                               f"the answer is not a JSON {expect} (is {http.origin} the service's address?): {shown!r}"[:300])
        return answer

    def _poll(
        self,
        what: str,
        read: Callable[[float], Any],
        done: Callable[[Any], bool],
        timeout: float,
        poll_interval: float,
        progress: Callable[[Any], None] | None,
    ) -> Any:
        # poll_interval=0 polled 2,170 times in 2 s; -1 and NaN failed deep in time.sleep.
        for name, value, zero_ok in (("timeout", timeout, True), ("poll_interval", poll_interval, False)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                (value >= 0 if zero_ok else value > 0) and value < float("inf")
            ):
                raise ConfigError(f"{name} must be a number of seconds, {'0 or more' if zero_ok else 'above 0'}, got {value!r}")
        deadline = time.monotonic() + timeout
        current: Any = None
        while True:
            # Each read ends with the wait (a read retried its full call timeout, 30 s past --timeout 2),
            # but one begun at the end still gets a short look.
            try:
                current = read(max(deadline, time.monotonic() + _LAST_LOOK_S))
            except NoAnswerError:
                if current is None or time.monotonic() < deadline:
                    raise
                raise WaitTimeoutError(what, timeout, current) from None
            if progress is not None:
                progress(current)
            if done(current):
                return current
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeoutError(what, timeout, current)
            time.sleep(min(poll_interval, left))


class _ConnectAdapter(HTTPAdapter):
    """The client's transport adapter: a connect timeout of its own, and first contact reported at once.

    ``HttpClient`` passes one timeout per attempt (the read timeout, cut to the
    call's deadline); here it becomes requests' ``(connect, read)`` pair.

    ``unreachable`` is set when a connection to an address that has never answered
    fails. ``HttpClient`` takes it as its ``wake`` event, which cuts the retry loop's
    backoff wait short and hands the call back (``RetryLater``), so no second retry
    rule is needed here: the loop stays the only one.
    """

    def __init__(self, connect_timeout_s: float) -> None:
        super().__init__()
        self.connect_timeout_s = connect_timeout_s
        self.unreachable = threading.Event()
        self.last_failure: str | None = None
        self._answered: set[str] = set()

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float | None, float | None] | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        proxies: dict[str, str] | None = None,
    ) -> requests.Response:
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
            timeout = (min(self.connect_timeout_s, timeout), timeout)
        origin = url_origin(request.url or "")
        try:
            response = super().send(request, stream=stream, timeout=timeout, verify=verify, cert=cert, proxies=proxies)
        except requests.ConnectionError as exc:
            self.last_failure = _why(exc, self.connect_timeout_s)
            if origin not in self._answered:
                self.unreachable.set()
            raise
        self._answered.add(origin)
        self.last_failure = None
        return response


def _why(exc: requests.ConnectionError, connect_timeout_s: float) -> str:
    """Why a connection failed, in a few words: the OS's reason (refused, no such host) when there is one."""
    if isinstance(exc, requests.ConnectTimeout):
        return f"nothing accepted a connection within {connect_timeout_s:g} s"
    cause: BaseException | None = exc
    for _ in range(8):  # requests -> urllib3 MaxRetryError.reason -> NewConnectionError -> the OSError
        if cause is None:
            break
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror[:1].lower() + cause.strerror[1:]
        reason = getattr(cause, "reason", None)
        cause = reason if isinstance(reason, BaseException) else (cause.__cause__ or cause.__context__ or _first_arg(cause))
    return "the connection failed"


def _first_arg(exc: BaseException) -> BaseException | None:
    return exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else None


_LAST_LOOK_S = 2.0
"""How long a wait's read may take when it begins as the wait ends."""


def _seg(value: str) -> str:
    """One path segment: ids are quoted so a stray '/' or '?' cannot change the path."""
    from urllib.parse import quote

    text = str(value)
    if not text.strip():
        raise ConfigError("an id must not be empty: it would name the whole collection")
    return quote(text, safe="")


def _parse(resp: requests.Response) -> Any:
    """The JSON body, or the text when it is not JSON (kept short), or None when empty."""
    content = resp.content
    if not content:
        return None
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return resp.text[:500]


def _items(body: Any) -> list[Mapping[str, Any]]:
    """A list answer, or the first list inside an object (the spec does not show the envelope)."""
    if isinstance(body, list):
        return [item for item in body if isinstance(item, Mapping)]
    if isinstance(body, Mapping):
        for key in ("items", "exports", "runs", "data", "results"):
            if isinstance(body.get(key), list):
                return [item for item in body[key] if isinstance(item, Mapping)]
    return []
