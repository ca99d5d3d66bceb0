"""How the local service's route table is written and read: :class:`Route` rows, :class:`Request`, :class:`Router`.

A row declares one or more methods on one path, the handler that answers them, and
every policy the service applies before the handler runs (the table itself is
:data:`._routes.ROUTES`; the order of the checks is :mod:`._dispatch`)::

    Route("/runs/query", query_runs, methods=POST, body=JSON, rate=Rate.RUNS_QUERY, browsers=SAME_ORIGIN)

Static files (the viewer's page) are not rows but one :class:`Files` entry, served
before everything else.

Every policy is a typed value (:class:`Auth`, :class:`Rate`, :class:`Faults`,
:class:`Switch`, a set of :class:`~._origins.Caller`), so a row cannot name a
policy no check knows, and each check reads its column, never a string.

A handler is ``handler(request, service) -> Reply``: a :class:`Request` (method,
path parameters, query string, lower-case headers, the body decoded and parsed as
the row's :class:`Body` says), and the :class:`Service`, the service's public
surface. A handler answers by returning a :class:`~._reply.Reply` or raising
:class:`~._reply.Refuse`.

Paths: ``{name}`` is a path parameter (one segment), passed in ``request.params``.
A row is served at the root and under ``/api/v1`` (``api_v1=False``: at the root
only), with or without a trailing slash (``trailing_slash=False``: exactly as
written). Rows on the same path form one resource: the first path in the table
that matches a request decides, so a literal path must come before a parameter
that would also match it (``/runs/query`` before ``/runs/{run_id}``; the tests
check it). A method no row of the path serves is a 405 whose ``Allow`` lists the
methods that are.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, Protocol


from ._control_common import json_body as control_json_body
from ._jsonio import parse as parse_json
from ._multipart import MultipartError, boundary_from_content_type, parse
from ._origins import Caller
from ._reply import Refuse, Reply, detail
from ._validate import Violation, json_depth_exceeds, too_deep

if TYPE_CHECKING:
    from ._answers import AnswerBounds
    from ._attachments import AttachmentLinks
    from ._otlp import OtlpIngest
    from ._control import ControlPlane
    from ._modes import Validation
    from ._http_server import Exchange
    from ._faults import FaultConfig
    from ._store import RunStore

__all__ = [
    "API_PREFIX",
    "Auth",
    "Body",
    "CONTROL_JSON",
    "DELETE",
    "Faults",
    "Files",
    "GET",
    "GET_HEAD",
    "Handler",
    "JSON",
    "MULTIPART",
    "OTLP",
    "Match",
    "NO_BODY",
    "PATCH",
    "POST",
    "PUT",
    "Request",
    "Route",
    "Router",
    "ANY_PAGE",
    "CORS_ORIGINS",
    "NO_PAGE",
    "Pages",
    "Rate",
    "SAME_ORIGIN",
    "SAME_ORIGIN_OR_CORS",
    "Service",
    "Switch",
    "MULTIPART_ON",
]

API_PREFIX = "/api/v1"

GET_HEAD = ("GET", "HEAD")
GET = ("GET",)
POST = ("POST",)
PATCH = ("PATCH",)
PUT = ("PUT",)
DELETE = ("DELETE",)

class Auth(Enum):
    """What a route asks of the caller before it reads the body (the values are the docs' words)."""

    PUBLIC = "none"
    """No credentials asked, and no body read."""
    KEY = "key"
    """``x-api-key`` (and ``x-tenant-id``) when the service has them."""
    KEY_OR_BEARER = "key or bearer"
    """Also ``Authorization: Bearer`` when the service has a bearer token (spec 5's control plane)."""
    SHARE_TOKEN = "share token"
    """No key: the path's ``{share_token}`` must name a live share (:mod:`._shares`), checked before the body
    is read; a wrong or revoked token is the same 404."""


class Faults(Enum):
    """Which injected faults may answer instead of the handler."""

    TRACING = "tracing"
    """:class:`~._faults.FaultConfig`: rates, outages, scripted statuses, drops."""
    CONTROL = "control"
    """:meth:`ControlPlane.fail_next <._control.ControlPlane.fail_next>`."""


class Rate(Enum):
    """The rate-limit rule a row counts its requests under (:data:`._ratelimit.SPEC_RULES` rows with that ``route``)."""

    INFO = "info"
    RUNS_POST = "runs.post"
    RUNS_BATCH = "runs.batch"
    RUNS_MULTIPART = "runs.multipart"
    RUNS_PATCH = "runs.patch"
    RUNS_QUERY = "runs.query"
    RUNS_STATS = "runs.stats"
    RUNS_READ = "runs.read"
    CHARTS = "charts"
    SESSIONS_DELETE = "sessions.delete"
    FEEDBACK_POST = "feedback.post"
    OTLP = "otlp"
    PUBLIC = "public"


@dataclass(frozen=True)
class Switch:
    """A service option that turns a route on: ``name`` for the docs, ``on(service)`` for the dispatcher."""

    name: str
    on: Callable[[Service], bool] = field(compare=False)


MULTIPART_ON = Switch("multipart", lambda service: service.multipart)
"""``/runs/multipart`` is served only while the service offers multipart (``LocalService(multipart=False)``: 404)."""

Pages = frozenset[Caller]
"""The pages a route lets in (``Route.browsers``); a client (no page) always passes."""
NO_PAGE: Pages = frozenset()
"""``browsers`` for a route no page may call: clients only."""
SAME_ORIGIN: Pages = frozenset({Caller.SELF})
"""``browsers`` for a route the viewer's page calls: the service's own origin, whatever name it was opened under."""
CORS_ORIGINS: Pages = frozenset({Caller.CORS})
"""``browsers`` for a route a web app may call from an origin named with ``--cors-origin`` (the service's JS SDK)."""
SAME_ORIGIN_OR_CORS: Pages = SAME_ORIGIN | CORS_ORIGINS
ANY_PAGE: Pages = frozenset({Caller.SELF, Caller.CORS, Caller.FOREIGN})
"""``browsers`` for what any page may load: the viewer's files (a link from anywhere opens the viewer)."""


class Service(Protocol):
    """What a handler may use of the service: its public surface (:class:`~._app.LocalService`)."""

    faults: FaultConfig
    control: ControlPlane
    validation: Validation
    multipart: bool
    workspace_id: str | None
    attachment_links: AttachmentLinks
    otlp: OtlpIngest
    live_window_s: float
    answers: AnswerBounds
    batch_items: int

    @property
    def store(self) -> RunStore: ...

    @property
    def url(self) -> str: ...

    def info(self) -> dict[str, Any]: ...


Handler = Callable[["Request", Service], Reply]


@dataclass(frozen=True)
class Body:
    """What a route reads from its body: ``kind``, the content types it accepts, and its parser.

    ``content_types`` is enforced for browsers only (a request with ``Origin`` or a
    ``Sec-Fetch-*`` header): any other type is a 415 naming these, so a page cannot
    write with the types it may send without a preflight (``text/plain``,
    ``application/x-www-form-urlencoded``). Clients (the exporter, the SDKs, curl)
    are parsed whatever they declare, as they always were. Compression is the
    ``Content-Encoding``'s business, not the type's. ``parse(data, content_type)``
    turns the decoded bytes into ``request.body`` on first use, so a handler can
    check the raw size first.
    """

    kind: Literal["json", "multipart", "otlp", "none"]
    content_types: tuple[str, ...] = ()
    parse: Callable[[bytes, str | None], Any] | None = None


def _ingest_json(data: bytes, content_type: str | None) -> Any:
    """JSON for the tracing and read routes: 422 with the runs' rule names, as :mod:`._validate` words them."""
    try:
        value = parse_json(data)
    except RecursionError:
        raise Refuse(422, {"detail": [too_deep(None, ("body",)).as_error()]}) from None
    except ValueError as exc:  # orjson's JSONDecodeError, json's, a UnicodeDecodeError
        if str(exc).startswith("Not enough memory"):
            # orjson's parse buffer (about ten times the body) could not be had now: not the client's mistake.
            raise Refuse(503, detail("the local service has no memory to read this body now; try again shortly"),
                         {"Retry-After": "1"}) from None
        raise Refuse(422, {"detail": [Violation(None, "json", f"body is not valid JSON ({exc})").as_error()]}) from None
    if json_depth_exceeds(value):
        raise Refuse(422, {"detail": [too_deep(None, ("body",)).as_error()]})
    return value


def _multipart(data: bytes, content_type: str | None) -> Any:
    try:
        return parse(data, boundary_from_content_type(content_type))
    except MultipartError as exc:
        raise Refuse(422, {"detail": [Violation(None, "multipart", str(exc)).as_error()]}) from None


NO_BODY = Body("none")
JSON = Body("json", ("application/json",), _ingest_json)
"""A JSON body; an empty or malformed one is a 422 naming the rule (``runs.json``, ``runs.json_depth``)."""
CONTROL_JSON = Body("json", ("application/json",), lambda data, _type: control_json_body(data))
"""A JSON body as the control plane reads it: empty is None, malformed a 422 ``json_invalid``."""
MULTIPART = Body("multipart", ("multipart/form-data",), _multipart)
"""``multipart/form-data`` parsed into :class:`~._multipart.Part` objects; malformed is a 422 ``runs.multipart``."""
OTLP = Body("otlp", ("application/x-protobuf", "application/json"))
"""An OTLP export request, left to its handler (:mod:`._otlp`), which reads it by its type and answers in the same."""


@dataclass(frozen=True)
class Route:
    """One row of the table: methods on a path, the handler, and the policy each request gets.

    ``rate`` names the rate-limit rule (:data:`._ratelimit.SPEC_RULES` rows with that
    ``route``); None counts the request under the default rules. ``faults`` says which
    injected faults apply. ``browsers`` is the set of pages that may call the route
    (:mod:`._origins`): ``SAME_ORIGIN``, the viewer's own page; ``CORS_ORIGINS``, pages
    of the origins named with ``--cors-origin``; ``NO_PAGE``, no page at all (clients only).
    Any other page is refused with 403 before the rate limits, auth and the body.
    ``streams`` marks a long-lived answer (a long poll): its connection leaves its
    request slot for one of ``max_streams`` (503 when those are taken) and closes
    after the answer, so waiting clients never use up the request slots. ``enabled_by`` is the
    :class:`Switch` that turns the route on; while it is off, the path answers 404 to every method.
    """

    path: str
    handler: Handler
    methods: tuple[str, ...]
    auth: Auth = Auth.KEY
    rate: Rate | None = None
    faults: Faults | None = None
    body: Body = NO_BODY
    browsers: Pages = NO_PAGE
    streams: bool = False
    api_v1: bool = True
    trailing_slash: bool = True
    enabled_by: Switch | None = None
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.path.startswith("/"):
            raise ValueError(f"route path {self.path!r} must start with /")
        regex = "".join(
            f"(?P<{piece[1:-1]}>[^/]+)" if piece.startswith("{") else re.escape(piece)
            for piece in re.split(r"({[a-z_]+})", self.path)
            if piece
        )
        if self.trailing_slash and self.path != "/":
            regex += "/?"
        object.__setattr__(self, "pattern", re.compile(f"^{regex}$"))

    @property
    def public(self) -> bool:
        """No key asked: the route is open to anyone who can reach the service (a share token may still be needed)."""
        return self.auth in (Auth.PUBLIC, Auth.SHARE_TOKEN)


@dataclass(frozen=True)
class Files:
    """Static files at the root: public, not rate-limited, served to ``GET`` and ``HEAD`` before any route.

    ``browsers`` as for :class:`Route`; ``ANY_PAGE`` lets a link on any page open them.

    ``lookup(path)`` answers one of ``paths`` (a fixed list, so no request path reaches
    the filesystem), None for any other path, which then goes to the routes.
    """

    lookup: Callable[[str], Reply | None]
    paths: tuple[str, ...]
    browsers: Pages = NO_PAGE
    methods: tuple[str, ...] = GET_HEAD


class Request:
    """What a handler is given: one request, with its body decoded (``data``) and parsed on first use (``body``).

    ``path`` is the URL path as sent, ``route`` the same without ``/api/v1``, ``params``
    the path parameters, ``query`` the query string, ``headers`` lower-case. ``log`` is
    the request's entry in the request log (a handler notes ``run_ids``,
    ``part_names`` and ``fault`` there). ``stopping`` is set when the service shuts
    down: a handler that waits stops waiting. ``reserve`` and ``give_back`` take and
    return room in the service's answer budget (:meth:`Exchange.reserve <._http_server.Exchange.reserve>`),
    held until the answer is sent.
    """

    def __init__(self, exchange: Exchange, match: Match, data: bytes, stopping: threading.Event) -> None:
        self.method, self.path, self.query = exchange.method, exchange.path, exchange.query
        self.headers: Mapping[str, str] = exchange.headers
        self.log: dict[str, Any] = exchange.log
        self.reserve: Callable[[int, threading.Event | None], bool] = exchange.reserve
        self.give_back: Callable[[int], None] = exchange.give_back
        self.route, self.params = match.route_path, match.params
        self.data, self.stopping = data, stopping
        self._body = match.route.body if match.route is not None else NO_BODY

    @cached_property
    def body(self) -> Any:
        """The body parsed as the route's :class:`Body` says (None for ``none``); parsing errors are a 422."""
        if self._body.parse is None:
            return None
        return self._body.parse(self.data, self.headers.get("content-type"))


@dataclass(frozen=True)
class Match:
    """What the table says about one request.

    ``route`` is the row that serves the method, or None. ``rows`` are the rows of the
    path that matched (empty: no path matched, a 404); their methods are the ``allow``.
    """

    route: Route | None
    rows: tuple[Route, ...]
    params: dict[str, str]
    route_path: str

    @property
    def policy(self) -> Route | None:
        """The row whose policies apply: the one serving the method, else the path's first (for its 405)."""
        return self.route or (self.rows[0] if self.rows else None)

    @property
    def allow(self) -> tuple[str, ...]:
        return tuple(m for row in self.rows for m in row.methods)


def strip_prefix(path: str) -> str:
    """The path without ``/api/v1`` (``/`` for the prefix itself).

    >>> strip_prefix("/api/v1/runs"), strip_prefix("/api/v1"), strip_prefix("/api/v10")
    ('/runs', '/', '/api/v10')
    """
    if path == API_PREFIX or path.startswith(API_PREFIX + "/"):
        path = path[len(API_PREFIX) :]
    return path or "/"


class Router:
    """Finds the row for a request; the rows of one path are tried together, paths in table order.

    >>> from ._reply import Reply
    >>> ok = lambda request, service: Reply(200)
    >>> router = Router([Route("/runs/query", ok, methods=POST), Route("/runs/{run_id}", ok, methods=GET_HEAD)])
    >>> router.match("GET", "/api/v1/runs/query").allow
    ('POST',)
    >>> router.match("GET", "/runs/abc/").params
    {'run_id': 'abc'}
    """

    def __init__(self, routes: tuple[Route, ...] | list[Route]) -> None:
        self.routes = tuple(routes)
        paths: dict[tuple[str, bool, bool], list[Route]] = {}
        for row in self.routes:
            paths.setdefault((row.path, row.api_v1, row.trailing_slash), []).append(row)
        self._paths = [(rows[0].pattern, rows[0].api_v1, tuple(rows)) for rows in paths.values()]

    def match(self, method: str, path: str) -> Match:
        """The row serving ``method`` on ``path`` (the URL path as sent), the path's rows, its parameters."""
        route_path = strip_prefix(path)
        for pattern, api_v1, rows in self._paths:
            found = pattern.match(route_path if api_v1 else path)
            if found is not None:
                served = next((row for row in rows if method in row.methods), None)
                return Match(served, rows, found.groupdict(), route_path)
        return Match(None, (), {}, route_path)
