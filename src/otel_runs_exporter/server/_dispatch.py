"""The order of checks every request to the local service goes through; each step reads the route table.

Each step answers on its own when its check fails:

1. more than one ``Origin``: 400; the service is shutting down: 503, connection closed;
2. ``Host`` (:mod:`._origins`): more than one, 400; one that names no address or
   allowed name of this service (a DNS-rebinding page), 403 saying how to allow it;
3. the viewer's files (``GET``, ``HEAD``): served, public and outside the rate limits
   (they are not the service's interface, and a limited page could not say why it stopped);
4. the page that sent it (``Origin``, else ``Sec-Fetch-Site``): a page the row's
   ``browsers`` does not name, 403 (a preflight is judged by the row of the method it
   asks for). Before the rate limits, so a foreign page cannot use up the user's budget;
5. rate limits (``--rate-limits``): 429 with ``Retry-After``; the limiter finds the
   rule a route names in the table itself (:mod:`._ratelimit`);
6. ``OPTIONS``: 204 with ``Allow``, from the headers alone (a CORS preflight has no
   body), and the CORS answer for a ``--cors-origin`` page;
7. more than one ``x-api-key``: 400;
8. a ``PUBLIC`` route asks no key and reads no body (a zstd bomb sent to ``/info`` is
   never decompressed); a ``SHARE_TOKEN`` route asks no key but a live share's token in
   its path (404 for a wrong or revoked one, the body unread); any other request is
   authenticated: 401, 403;
9. from a browser, a ``Content-Type`` the row's body does not name: 415 listing the
   ones it does (``accepted_content_types``), the body unread;
10. the ``tracing`` faults of the route (:class:`~._faults.FaultConfig`), which may
    close the connection before the body is read;
11. the body: read (411, 413), a slow fault's wait, an injected status, then decoded
    (400, 413, 415);
12. no path matched, or the route is off (``enabled_by``): 404; another method: 405
    with ``Allow`` listing the path's methods;
13. the ``control`` faults (:meth:`ControlPlane.fail_next <._control.ControlPlane.fail_next>`);
14. the handler; a ``drop`` fault then closes the connection instead of answering.

A database that cannot answer now (a full disk, a lock another process holds) is a 503
with ``Retry-After`` at whichever step finds it, said once in the log (:func:`._store.unavailable`).

Every answer to a ``--cors-origin`` page, refusals included, carries
``Access-Control-Allow-Origin`` for it; no other answer carries a CORS header.
"""


from __future__ import annotations

import hmac
import sqlite3
import threading
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol

from ._faults import FaultDecision
from ._http_server import Exchange, decode_body
from ._origins import CORS_REQUEST_HEADERS, Caller, PagePolicy, is_browser, split_host
from ._reply import DROP, Refuse, Reply, detail
from ._routes import FILES, ROUTER
from ._routing import Auth, Faults, Files, Match, Pages, Request, Route, Router, Service
from ._shares import NO_SHARE
from ._store import unavailable

if TYPE_CHECKING:
    from ._ratelimit import RateLimiter
    from ._shares import ShareTable

__all__ = ["Credentials", "Dispatcher"]

_ANY_METHOD = "GET, POST, PATCH, PUT, DELETE, OPTIONS, HEAD"
_SERVE = FaultDecision()
# A path no row serves answers 404 to the service's own page and to --cors-origin pages, 403 to the rest.
_UNKNOWN_PATH: Pages = frozenset({Caller.SELF, Caller.CORS})


@dataclass(frozen=True)
class Credentials:
    """The secrets a request must carry; kept out of every repr."""

    api_key: str | None = field(default=None, repr=False)
    bearer_token: str | None = field(default=None, repr=False)


class DispatchedService(Service, Protocol):
    """What the dispatcher reads of the service, beyond what handlers may use."""

    rate_limiter: RateLimiter | None
    max_body_bytes: int
    pages: PagePolicy

    @property
    def shares(self) -> ShareTable: ...


@dataclass
class Dispatcher:
    """Answers one :class:`~._http_server.Exchange` by the steps above; the framing calls it for every request.

    ``stopping`` is the service's: set, it answers 503 and ends waits early.
    """

    service: DispatchedService
    credentials: Credentials
    stopping: threading.Event
    router: Router = ROUTER
    files: Files = FILES

    def __call__(self, exchange: Exchange) -> Reply:
        if exchange.header_count("origin") > 1:
            exchange.discard_body()  # which one is the page's? Neither is answered with CORS headers.
            raise Refuse(400, detail("more than one Origin header"), close=True)
        caller, origin = self.service.pages.caller(exchange.headers)
        if caller is not Caller.CORS:
            return self._answer(exchange, caller, origin)
        assert origin is not None
        try:
            reply = self._answer(exchange, caller, origin)
        except Refuse as refusal:
            reply = refusal.reply()
        if reply.status == 0:
            return reply
        # Refusals too: a page that cannot read its 403 or 429 cannot say why it stopped.
        headers = {**reply.headers, "Access-Control-Allow-Origin": origin, "Vary": "Origin"}
        if "Access-Control-Allow-Methods" not in headers:
            headers["Access-Control-Expose-Headers"] = "Retry-After"
        return replace(reply, headers=headers)

    def _answer(self, exchange: Exchange, caller: Caller, origin: str | None) -> Reply:
        try:
            return self._steps(exchange, caller, origin)
        except sqlite3.Error as exc:
            # A full disk, or a lock another process holds: a state that clears, so a 503 the clients retry.
            why = unavailable(exc)
            if why is None:
                raise
            self.service.store.note_unavailable(why.reason)
            raise Refuse(
                503, detail(f"{why.reason}; try again later", retry_after=why.retry_after),
                {"Retry-After": str(why.retry_after)},
            ) from None

    def _steps(self, exchange: Exchange, caller: Caller, origin: str | None) -> Reply:
        service = self.service
        method, path = exchange.method, exchange.path
        if self.stopping.is_set():
            exchange.discard_body()
            raise Refuse(503, detail("the local service is shutting down"), close=True)
        self._check_host(exchange)
        if method in self.files.methods:
            page = self.files.lookup(path)
            if page is not None:
                exchange.discard_body()
                _check_page(self.files.browsers, caller, origin, method, path, exchange)
                return page
        match = self.router.match(method, path)
        preflight = exchange.headers.get("access-control-request-method") if method == "OPTIONS" else None
        judged = self.router.match(preflight.strip().upper(), path) if preflight else match
        row = judged.route or judged.policy
        _check_page(row.browsers if row is not None else _UNKNOWN_PATH, caller, origin, method, path, exchange)
        limiter = service.rate_limiter
        if limiter is not None:
            refusal = limiter.hit(method, path, exchange.headers, exchange.client_ip)
            if refusal is not None:
                exchange.discard_body()
                raise Refuse(429, detail(refusal.message), {"Retry-After": str(refusal.retry_after)})
        if method == "OPTIONS":
            exchange.discard_body()
            if caller is Caller.CORS and preflight:
                allow = ", ".join(judged.allow) or _ANY_METHOD
                return Reply(204, None, {
                    "Allow": allow,
                    "Access-Control-Allow-Methods": allow,
                    "Access-Control-Allow-Headers": CORS_REQUEST_HEADERS,
                    "Access-Control-Max-Age": "600",
                })
            return Reply(204, None, {"Allow": _ANY_METHOD})
        if exchange.header_count("x-api-key") > 1:
            exchange.discard_body()
            raise Refuse(400, detail("more than one x-api-key header; send exactly one"), close=True)
        policy = match.policy
        auth = policy.auth if policy is not None else Auth.KEY
        # A method the path does not serve is a 405 whatever the token: no body read, nothing said about the token.
        if auth is Auth.PUBLIC or (auth is Auth.SHARE_TOKEN and match.route is None):
            exchange.discard_body()
            return self._serve(match, exchange, b"")
        if auth is Auth.SHARE_TOKEN:
            self._check_share(match, exchange)
        else:
            self._authenticate(exchange, bearer=auth is Auth.KEY_OR_BEARER)

        route = match.route
        if route is not None:
            _check_content_type(route, exchange)
        decision = service.faults.decide() if route is not None and route.faults is Faults.TRACING else _SERVE
        if decision.reason:
            exchange.log["fault"] = decision.reason
        if decision.action == "drop_before_read":
            return DROP
        limit = service.max_body_bytes
        raw = exchange.read_body(limit)
        exchange.log["body_bytes"] = len(raw)
        if decision.delay:
            self.stopping.wait(decision.delay)
        if decision.action == "status":
            assert decision.status is not None
            headers = {}
            if decision.status in (429, 503) and decision.retry_after is not None:
                headers["Retry-After"] = f"{decision.retry_after:g}"
            try:
                msg = HTTPStatus(decision.status).phrase
            except ValueError:
                msg = "Injected status"
            return Reply(decision.status, detail(f"{msg} (fault injection: {decision.reason})"), headers)
        data = decode_body(raw, exchange.headers.get("content-encoding"), limit) if raw else raw
        reply = self._serve(match, exchange, data)
        if decision.action == "drop":
            return DROP
        return reply

    def _check_host(self, exchange: Exchange) -> None:
        """Step 2: the Host names this service, or 403 saying how to allow the name."""
        if exchange.header_count("host") > 1:
            exchange.discard_body()
            raise Refuse(400, detail("more than one Host header"), close=True)
        host = exchange.headers.get("host")
        if self.service.pages.host_allowed(host, exchange.local_ip):
            return
        exchange.discard_body()
        assert host is not None
        name = host.strip()[:100]
        parts = split_host(name)
        allow = parts[0] if parts is not None else "NAME"
        raise Refuse(
            403,
            detail(
                f"Host {name!r} does not name this service. It answers loopback names (localhost, 127.0.0.1, [::1]) "
                "and the addresses it listens on, so that a web page cannot reach it under a DNS name of its own "
                f"(DNS rebinding). If you reach it by this name, start it with --allow-host {allow} "
                f"(LocalService(allow_hosts=[{allow!r}]))",
                host=name,
            ),
        )

    def _serve(self, match: Match, exchange: Exchange, data: bytes) -> Reply:
        """The route's answer: 404 without one, 405 with ``Allow`` for another method, else its handler's."""
        service = self.service
        policy = match.policy
        if policy is None or (policy.enabled_by is not None and not policy.enabled_by.on(service)):
            return Reply(404, detail("Not Found"))
        route = match.route
        if route is None:
            return Reply(405, detail("Method Not Allowed"), {"Allow": ", ".join(match.allow)})
        if route.faults is Faults.CONTROL:
            injected = service.control.take_injected()
            if injected is not None:
                return injected
        if route.streams and not exchange.hold():
            return Reply(
                503,
                detail("the local service is holding as many long-lived answers as it can; try again shortly"),
                {"Retry-After": "1"},
            )
        request = Request(exchange, match, data, self.stopping)
        return route.handler(request, service)

    def _check_share(self, match: Match, exchange: Exchange) -> None:
        """Step 8 for a ``SHARE_TOKEN`` route: its path names a live share, else the one 404 for every wrong token."""
        if self.service.shares.find(match.params.get("share_token", "")) is None:
            exchange.discard_body()
            raise Refuse(404, detail(NO_SHARE))

    def _authenticate(self, exchange: Exchange, bearer: bool) -> None:
        headers = exchange.headers
        key = self.credentials.api_key
        token = self.credentials.bearer_token
        # Spec 5: the control plane also lists a Bearer scheme; a right bearer token
        # stands in for the API key there (and a wrong one is refused, not ignored).
        given_bearer = headers.get("authorization", "")
        if bearer and token is not None and given_bearer:
            scheme, _, value = given_bearer.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
                exchange.discard_body()
                raise Refuse(401, detail("invalid bearer token"))
            key = None
        if key is not None:
            given = headers.get("x-api-key", "")
            if not hmac.compare_digest(given.encode(), key.encode()):
                exchange.discard_body()
                raise Refuse(401, detail("missing or invalid x-api-key"))
        workspace = self.service.workspace_id
        if workspace is not None and headers.get("x-tenant-id", "").lower() != workspace.lower():
            exchange.discard_body()
            raise Refuse(403, detail("x-tenant-id does not name this service's workspace"))


def _check_page(browsers: Pages, caller: Caller, origin: str | None, method: str, path: str,
                exchange: Exchange) -> None:
    """Step 4: a page the row's ``browsers`` does not name gets 403 (no page, a client, always passes)."""
    if caller is Caller.CLIENT or caller in browsers:
        return
    exchange.discard_body()
    who = f"a page of {origin}" if origin else "a page of another site (Sec-Fetch-Site)"
    if caller is Caller.SELF:
        why = f"{method} {path} is not for the service's own pages"
    else:
        why = f"{who} may not call {method} {path}: other sites must not read or write this service's runs"
    if Caller.CORS in browsers and origin == "null":
        # An opaque origin (a sandboxed frame, a file: page) names no site, so no flag can allow it.
        how = "a page with an opaque origin (null: a sandboxed frame or a file: page) cannot be allowed; serve it over http"
    elif Caller.CORS in browsers:
        origin_hint = origin or "ORIGIN"
        how = (
            f"to let a web app you trust call it, start the service with --cors-origin {origin_hint} "
            f"(LocalService(cors_origins=[{origin_hint!r}]))"
        )
    else:
        how = "no web page may call it; call it from a script or the command line"
    raise Refuse(403, detail(f"{why}; {how}", origin=origin))


def _check_content_type(route: Route, exchange: Exchange) -> None:
    """Step 9: a browser's body must come as a type the row names (types a page can send unasked are refused)."""
    accepted = route.body.content_types
    if not accepted or not is_browser(exchange.headers):
        return
    declared = exchange.headers.get("content-type", "")
    media = declared.split(";", 1)[0].strip().lower()
    if media in accepted:
        return
    exchange.discard_body()
    raise Refuse(
        415,
        detail(
            f"Content-Type {declared[:100]!r} is not accepted from a browser on {exchange.method} {exchange.path}; "
            f"send {' or '.join(accepted)} (compressed, if at all, with Content-Encoding gzip, deflate or zstd)",
            accepted_content_types=list(accepted),
        ),
    )
