"""The order of checks every request to the local service goes through; each step reads the route table.

Each step answers on its own when its check fails:

1. the service is shutting down: 503, connection closed;
2. the viewer's files (``GET``, ``HEAD``): served, public and outside the rate limits
   (they are not the service's interface, and a limited page could not say why it stopped);
3. rate limits (``--rate-limits``): 429 with ``Retry-After``; the limiter finds the
   rule a route names in the table itself (:mod:`._ratelimit`);
4. ``OPTIONS``: 204 with ``Allow``, from the headers alone (a CORS preflight has no body);
5. more than one ``x-api-key``: 400;
6. a ``public`` route asks no key and reads no body (a zstd bomb sent to ``/info`` is
   never decompressed); any other request is authenticated: 401, 403;
7. the ``tracing`` faults of the route (:class:`~._faults.FaultConfig`), which may
   close the connection before the body is read;
8. the body: read (411, 413), a slow fault's wait, an injected status, then decoded
   (400, 413, 415);
9. no path matched, or the route is off (``enabled_by``): 404; another method: 405
   with ``Allow`` listing the path's methods;
10. the ``control`` faults (:meth:`ControlPlane.fail_next <._control.ControlPlane.fail_next>`);
11. the handler; a ``drop`` fault then closes the connection instead of answering.
"""

from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol

from ._faults import FaultDecision
from ._http import Exchange, decode_body
from ._reply import DROP, Refuse, Reply, detail
from ._routes import FILES, ROUTER
from ._routing import Files, Match, Request, Router, Service

if TYPE_CHECKING:
    from ._ratelimit import RateLimiter

__all__ = ["Credentials", "Dispatcher"]

_ANY_METHOD = "GET, POST, PATCH, PUT, DELETE, OPTIONS, HEAD"
_SERVE = FaultDecision()


@dataclass(frozen=True)
class Credentials:
    """The secrets a request must carry; kept out of every repr."""

    api_key: str | None = field(default=None, repr=False)
    bearer_token: str | None = field(default=None, repr=False)


class DispatchedService(Service, Protocol):
    """What the dispatcher reads of the service, beyond what handlers may use."""

    rate_limiter: RateLimiter | None
    max_body_bytes: int


@dataclass
class Dispatcher:
    """Answers one :class:`~._http.Exchange` by the steps above; the framing calls it for every request.

    ``stopping`` is the service's: set, it answers 503 and ends waits early.
    """

    service: DispatchedService
    credentials: Credentials
    stopping: threading.Event
    router: Router = ROUTER
    files: Files = FILES

    def __call__(self, exchange: Exchange) -> Reply:
        service = self.service
        method, path = exchange.method, exchange.path
        if self.stopping.is_set():
            exchange.discard_body()
            raise Refuse(503, detail("the local service is shutting down"), close=True)
        if method in self.files.methods:
            page = self.files.lookup(path)
            if page is not None:
                exchange.discard_body()
                return page
        limiter = service.rate_limiter
        if limiter is not None:
            refusal = limiter.hit(method, path, exchange.headers, exchange.client_ip)
            if refusal is not None:
                exchange.discard_body()
                raise Refuse(429, detail(refusal.message), {"Retry-After": str(refusal.retry_after)})
        if method == "OPTIONS":
            exchange.discard_body()
            return Reply(204, None, {"Allow": _ANY_METHOD})
        if exchange.header_count("x-api-key") > 1:
            exchange.discard_body()
            raise Refuse(400, detail("more than one x-api-key header; send exactly one"), close=True)
        match = self.router.match(method, path)
        policy = match.policy
        if policy is not None and policy.public:
            exchange.discard_body()
            return self._serve(match, exchange, b"")
        self._authenticate(exchange, bearer=policy is not None and policy.auth == "key-or-bearer")

        route = match.route
        decision = service.faults.decide() if route is not None and route.faults == "tracing" else _SERVE
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

    def _serve(self, match: Match, exchange: Exchange, data: bytes) -> Reply:
        """The route's answer: 404 without one, 405 with ``Allow`` for another method, else its handler's."""
        service = self.service
        policy = match.policy
        if policy is None or (policy.enabled_by is not None and not getattr(service, policy.enabled_by)):
            return Reply(404, detail("Not Found"))
        route = match.route
        if route is None:
            return Reply(405, detail("Method Not Allowed"), {"Allow": ", ".join(match.allow)})
        if route.faults == "control":
            injected = service.control.take_injected()
            if injected is not None:
                return injected
        request = Request(exchange, match, data, self.stopping)
        return route.handler(request, service)

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
