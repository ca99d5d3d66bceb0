"""The one HTTP client: the retry loop, over a one-method network seam.

The exporter's run sender (``_transport``) and the API clients
(``otel_runs_exporter.api``) both send through :class:`HttpClient`, so there is
one retry policy and one loop that implements it. The retry matrix, pinned by
``tests/core/test_http.py`` (on a scripted network) and
``tests/core/test_transport.py`` (against the real local service):

=========================  =======================================================
2xx, 3xx other than a      returned to the caller (which judges it: see
redirect, 4xx other than   ``_transport`` for runs, ``api._client`` for API calls)
408 and 429
408, 429, 5xx,             retried with exponential backoff and equal jitter
connection error,          (:class:`Backoff`) until the deadline; Retry-After, in
timeout                    seconds or as an HTTP date, is a floor on the wait
                           (429 backs off even without it); every wait is capped
                           at ``max_wait_s``. When the next try would pass the
                           deadline, one last try starts just before it if the
                           service's Retry-After allows; otherwise
                           :class:`RetryLater` (with the last answer, if any)
429 with ``paced=True``    :class:`RetryLater` at once; its Retry-After is kept
                           as the earliest time of the next request, for the
                           caller's pacer (``_pacing``) to decide when to come back
``retry=False``            a retryable answer is returned as it is; a connection
(non-idempotent calls)     error raises :class:`RetryLater` at once
redirect (301, 302, 303,   followed (at most 5) only to the same scheme and host,
307, 308)                  so credentials never travel elsewhere; a redirect
                           elsewhere is returned to the caller, not followed
``wake`` set               a backoff wait is cut short: :class:`RetryLater` with
                           ``interrupted`` (new work or shutdown; the caller decides)
connection refused, a      (no service will answer: nothing listens at the address,
name that does not         or this machine is offline, or the service is not the
resolve, a network that    one trusted) retried like any connection error while the
is unreachable, a TLS      app runs; after :meth:`HttpClient.at_exit`, only until
certificate refused        the exit budget given there, counted from shutdown (0: not
                           retried at all); then :class:`RetryLater`, the cause in
                           :attr:`HttpClient.unreachable`. An answer, or a connection
                           that times out (a slow or distant service), keeps the
                           caller's whole deadline
=========================  =======================================================

Besides the status, what an answer says about our request rate is noted for a
caller that paces itself (``slow_downs``, ``slow_down_wait_s``): a 429 with its
Retry-After, and a successful answer whose rate-limit headers say no request is
left in the window (see :func:`quota_left` for the headers read; the interface
names none, so the 429 alone must be, and is, enough).

The network is a seam, as httpx's transports are: anything with
``handle(request) -> response`` and ``close()`` (:class:`Network`). The default,
:class:`SessionNetwork`, sends over one :class:`requests.Session`; a test passes
one that answers from a table or records what was sent, instead of patching::

    >>> import requests, time
    >>> class Refusing:
    ...     def handle(self, request: Request) -> requests.Response:
    ...         raise requests.ConnectionError("refused")
    ...     def close(self) -> None:
    ...         pass
    >>> client = HttpClient(Refusing(), "http://service.invalid", timeout_s=1.0)
    >>> client.request("POST", "/runs", time.monotonic() + 5, retry=False)
    Traceback (most recent call last):
    ...
    otel_runs_exporter._http_client.RetryLater: gave up retrying before the deadline
    >>> client.counts
    RequestCounts(requests=1, retried=0, failed=1, throttled=0)

Waits and deadlines go through the ``clock`` (``_clock``): on a
:class:`~otel_runs_exporter._clock.FakeClock` minutes of backoff take no time.
"""

from __future__ import annotations

import errno
import logging
import math
import random
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple, Protocol
from urllib.parse import urljoin, urlsplit

import requests

from ._clock import SYSTEM_CLOCK, Clock
from ._logging import RateLimitedLog
from ._settings import Settings
from ._stats import RequestCounts
from ._version import USER_AGENT  # the one version (_version.py); re-exported here

__all__ = [
    "Answer",
    "BODY_LIMIT",
    "Backoff",
    "HttpClient",
    "Network",
    "REDIRECTS",
    "RETRYABLE",
    "Request",
    "RetryLater",
    "SessionNetwork",
    "USER_AGENT",
    "backoff_of",
    "new_session",
    "origin",
    "quota_left",
    "read_bounded",
    "retry_after_seconds",
    "unreachable_cause",
]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)


RETRYABLE = frozenset({408, 429, 500, 502, 503, 504}) | frozenset(range(505, 600))
"""Statuses the loop retries (with 408 and 429, every 5xx but 501 Not Implemented)."""
REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS = 5
BODY_LIMIT = 64 * 1024  # of an answer we only judge: enough for any error message a service writes


# --- the seam ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One HTTP request as the client hands it to the network (which never follows redirects).

    ``timeout`` is what :mod:`requests` takes: seconds, or ``(connect, read)``.
    ``stream``: leave the body unread for the client to read bounded.
    """

    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    params: Mapping[str, Any] | None = None
    timeout: float | tuple[float, float] = 10.0
    stream: bool = False


class Network(Protocol):
    """Where requests go: one answer per request, or a :class:`requests.RequestException` when none came."""

    def handle(self, request: Request) -> requests.Response: ...

    def close(self) -> None: ...


class SessionNetwork:
    """The real network: one :class:`requests.Session` (its headers, TLS settings and connection pool).

    What requests would look up in the environment on every request (proxies and
    ``NO_PROXY``, a ``REQUESTS_CA_BUNDLE``, ``~/.netrc``) is read once per origin,
    on the first request there, as OTel's exporters read their settings once: the
    look-ups cost ~0.2 ms of CPU a request, about as much as sending a batch of
    small runs to loopback. A proxy set after that is not seen until a new session.
    """

    def __init__(self, session: requests.Session) -> None:
        self.session = session
        # requests lets REQUESTS_CA_BUNDLE override a session's CA bundle; a bundle
        # the user configured for this exporter must win, so it goes on each request.
        self._verify = session.verify if isinstance(session.verify, str) else None
        self._trust_env = session.trust_env
        session.trust_env = False  # from here on, the environment comes from _environment
        self._environments: dict[str, _Environment] = {}

    def handle(self, request: Request) -> requests.Response:
        env = self._environment(request.url)
        return self.session.request(
            request.method,
            request.url,
            data=request.body,
            headers=dict(request.headers),
            params=dict(request.params) if request.params else None,
            timeout=request.timeout,
            allow_redirects=False,
            stream=request.stream,
            proxies=env.proxies,
            verify=env.verify,
            cert=env.cert,
            auth=env.auth,
        )

    def _environment(self, url: str) -> "_Environment":
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        env = self._environments.get(origin)
        if env is not None:
            return env
        session = self.session
        if self._trust_env:
            # requests' own reading of the environment, done once here instead of per request.
            session.trust_env = True
            try:
                merged = session.merge_environment_settings(url, {}, None, self._verify, None)
            finally:
                session.trust_env = False
            auth = requests.utils.get_netrc_auth(url) if session.auth is None else None
            env = _Environment(merged["proxies"], merged["verify"], merged["cert"], auth)
        else:
            env = _Environment({}, self._verify, None, None)
        if len(self._environments) >= 16:
            self._environments.clear()  # redirects to ever new hosts are refused anyway; stay bounded
        self._environments[origin] = env
        return env

    def close(self) -> None:
        self.session.close()


class _Environment(NamedTuple):
    proxies: dict[str, str]
    verify: Any
    cert: Any
    auth: Any


def new_session(settings: Settings) -> requests.Session:
    """A session carrying our User-Agent, the user's extra headers and the auth headers."""
    session = requests.Session()
    session.headers["User-Agent"] = USER_AGENT
    if settings.headers:
        session.headers.update(settings.headers)
    if settings.api_key:
        session.headers["x-api-key"] = settings.api_key
    if settings.workspace_id:
        session.headers["x-tenant-id"] = settings.workspace_id
    # TLS verification stays on (requests' default); a CA bundle only narrows what is trusted.
    if settings.certificate:
        session.verify = settings.certificate
    if settings.client_certificate:
        session.cert = (
            (settings.client_certificate, settings.client_key) if settings.client_key else settings.client_certificate
        )
    return session


# --- the retry loop ---------------------------------------------------------------------


@dataclass(frozen=True)
class Backoff:
    """The loop's schedule: steps doubling from ``base_s`` up to ``max_s``, with equal jitter.

    ``last_try_margin_s``: when the next try would come after the deadline, one last
    try starts this long before it, so its answer can still come in time.

    >>> [Backoff().step(attempt) for attempt in range(8)]
    [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    """

    base_s: float = 0.5
    max_s: float = 30.0
    last_try_margin_s: float = 1.0

    def step(self, attempt: int) -> float:
        return min(self.max_s, self.base_s * 2.0 ** min(attempt, 16))

    def delay(self, attempt: int) -> float:
        """The wait before try ``attempt + 1``: "equal jitter", never less than half the
        step, so a crowd of clients spreads out without any of them hammering."""
        step = self.step(attempt)
        return step / 2 + random.uniform(0, step / 2)


def backoff_of(settings: Settings) -> Backoff:
    """The schedule the settings ask for (``retry_backoff``), else the default one."""
    if settings.retry_backoff is None:
        return Backoff()
    first, cap = settings.retry_backoff
    return Backoff(base_s=float(first), max_s=float(cap))


class RetryLater(Exception):
    """The deadline (or an interruption) came before the request could succeed.

    ``response`` is the last retryable answer of the call, if there was one (for its
    status and Retry-After), even when a later attempt got none (a connection error,
    a timeout cut short by the deadline); None when no attempt was answered.
    """

    def __init__(self, response: requests.Response | None = None, interrupted: bool = False) -> None:
        super().__init__("interrupted" if interrupted else "gave up retrying before the deadline")
        self.response = response
        self.interrupted = interrupted


class HttpClient:
    """One base address, one network, the one retry loop (the matrix above).

    The backoff state is kept between calls, so a caller that comes back after
    :class:`RetryLater` does not hammer a struggling service. ``wake`` cuts a
    backoff wait short; waits and deadlines go through ``clock``. ``backoff``
    is the schedule (a test passes a shorter one, or runs on a fake clock).
    """

    def __init__(
        self,
        network: Network,
        base_url: str,
        timeout_s: float,
        *,
        wake: threading.Event | None = None,
        clock: Clock = SYSTEM_CLOCK,
        backoff: Backoff = Backoff(),
        max_wait_s: float | None = None,
        finish_in_flight: bool = False,
    ) -> None:
        """``max_wait_s`` caps one wait, Retry-After included: a service asking for hours
        is honoured up to that, and the caller's runs wait for a later cycle meanwhile.

        The deadline bounds when a request may start. By default a request is also cut
        off at the deadline; with ``finish_in_flight`` (a background sender nobody
        waits on) a request once sent may take its whole ``timeout_s`` to be answered:
        cut off, a request the service was still storing would be sent again, and
        its runs stored twice."""
        self.network = network
        self.base = base_url.rstrip("/")
        self.origin = origin(self.base)
        self._timeout_s = timeout_s
        self._wake = wake or threading.Event()
        self._clock = clock
        self._backoff_schedule = backoff
        self._attempt = 0
        self._not_before = 0.0
        self._max_wait_s = max_wait_s
        self._finish_in_flight = finish_in_flight
        # Why the last attempt could not reach the service when no wait would help (see at_exit;
        # None otherwise), and the exit budget's end once shutdown has begun.
        self._unreachable: str | None = None
        self._exit_by: float | None = None
        self._stop_at: float | None = None  # stop_now()
        self.counts = RequestCounts()
        # For a caller that paces itself: how many answers told us to slow down (429s, and
        # answers saying no request is left), and the wait the last one asked for, capped.
        self.slow_downs = 0
        self.slow_down_wait_s: float | None = None

    def close(self) -> None:
        self.network.close()

    def reset_backoff(self) -> None:
        self._attempt = 0
        self._not_before = 0.0

    @property
    def unreachable(self) -> str | None:
        """Why the last attempt could not reach the service, when waiting would not help (see :func:`unreachable_cause`); else None."""
        return self._unreachable

    def at_exit(self, budget_s: float) -> None:
        """Shutdown has begun: a service that cannot be reached is retried only until ``budget_s`` from now.

        Cannot be reached: nothing listens at the address (a service not started,
        or stopped), the name does not resolve or the network is unreachable (a
        laptop offline, a CI job without egress), or its TLS certificate is
        refused. Waiting the whole deadline of a shutdown for any of them keeps
        the process from exiting for nothing. A service that answers, however
        slowly, and a connection that times out keep the caller's deadline.
        The first call counts. A backoff grown against such failures before
        shutdown is dropped, so the next request is tried at once.
        """
        if self._exit_by is not None:
            return
        if self._unreachable is not None:
            self._not_before = 0.0
            self._unreachable = None
        self._exit_by = self._clock.now() + budget_s

    def stop_now(self) -> None:
        """No request is started or retried from now on, whatever answers (Ctrl-C at exit); a backoff wait ends.

        A request in flight runs to its answer: it cannot be taken back.
        """
        self._stop_at = self._clock.now()
        self._wake.set()

    def request(
        self,
        method: str,
        path: str,
        deadline: float,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
        retry: bool = True,
        stream: bool = False,
        paced: bool = False,
    ) -> requests.Response:
        """Send one request, retrying what is worth retrying until ``deadline`` (a ``clock`` value).

        Returns the final response (2xx, or an answer the caller must judge).
        Raises :class:`RetryLater` when the deadline comes first. With
        ``retry=False`` (a non-idempotent call) a retryable answer is returned
        as it is, and a connection error raises :class:`RetryLater` at once.
        With ``stream=True`` the body is left unread for the caller (see
        :meth:`request_bounded`); the bodies of retried answers are then read
        only up to a small bound. With ``paced=True`` a 429 raises
        :class:`RetryLater` at once, its Retry-After kept as the earliest time
        of the next request: the caller's pacer decides when to come back.
        """
        url = self.base + path
        counts = self.counts
        # What the caller is told at the deadline: the last answer, not the last attempt's silence
        # (the last try, started just before the deadline, may be cut short by it).
        last: requests.Response | None = None
        while True:
            limit = self._limit(deadline)
            self._wait_until(self._not_before, limit, last)
            remaining = limit - self._clock.now()
            if remaining <= 0:
                raise RetryLater(last)
            retry_after: float | None = None
            try:
                bounded = min(self._timeout_s, remaining)
                timeout: float | tuple[float, float] = (
                    (bounded, self._timeout_s) if self._finish_in_flight else bounded
                )
                resp = self._follow(Request(method, url, headers or {}, body, params, timeout, stream))
                counts.requests += 1
            except requests.RequestException as exc:
                counts.requests += 1
                self._unreachable = unreachable_cause(exc, url)
                _rl.warning("conn", "could not reach %s: %s", self.origin, self._unreachable or type(exc).__name__)
                if not retry:
                    counts.failed += 1
                    raise RetryLater() from None
            else:
                self._unreachable = None
                status = resp.status_code
                if status == 429:
                    counts.throttled += 1
                if status not in RETRYABLE or not retry:
                    if status < 400:
                        self.reset_backoff()
                        left, reset = quota_left(resp.headers)
                        if left == 0:
                            self._slow_down(reset)
                    else:
                        counts.failed += 1
                    return resp
                retry_after = retry_after_seconds(resp)
                _let_go(resp, stream)
                last = resp
                if status == 429:
                    self._slow_down(retry_after)
                    if paced:
                        # Not a retry here: the pacer sends again later, with a larger batch.
                        counts.failed += 1
                        counts.retried += 1
                        self._not_before = self._clock.now() + self._capped(retry_after or 0.0)
                        raise RetryLater(resp)
                _rl.warning("status_%d" % status, "the service answered %d; retrying", status)
            counts.failed += 1
            counts.retried += 1  # now, or on a later call if the wait passes the deadline
            now = self._clock.now()
            self._not_before = now + self._backoff(retry_after)
            limit = self._limit(deadline)
            if self._not_before >= limit:
                last_try = self._last_try(now, retry_after, limit)
                if last_try is None:
                    raise RetryLater(last)
                self._not_before = last_try

    def request_bounded(self, method: str, path: str, deadline: float, **kwargs: Any) -> Answer:
        """:meth:`request`, reading at most :data:`BODY_LIMIT` bytes of the answer.

        For callers that only judge the status and show a line of the body: a
        hostile or broken service answering with a huge body costs a bounded
        read, and the connection is kept only when the body was read whole.
        """
        resp = self.request(method, path, deadline, stream=True, **kwargs)
        body, whole = read_bounded(resp)
        return Answer(resp.status_code, resp.headers, body, truncated=not whole)

    def _last_try(self, now: float, retry_after: float | None, deadline: float) -> float | None:
        """When to try once more, now that the backoff would pass the deadline; None: give up.

        The jitter is ours to shorten, the service's Retry-After is not. Without
        this, a 60 s force_flush whose backoff had grown to 15-30 s gave up at 45 s,
        its time not over, and returned False for runs the next attempt delivered.
        The last try starts ``last_try_margin_s`` before the deadline so its answer
        can still come in time; once that has passed, the caller gets the runs back.
        """
        last = deadline - self._backoff_schedule.last_try_margin_s
        earliest = now + (self._capped(retry_after) if retry_after is not None else 0.0)
        return last if now < last and earliest <= last else None

    def _limit(self, deadline: float) -> float:
        """The deadline, or the exit budget's end when shutdown has begun and the service cannot be reached (see :meth:`at_exit`)."""
        if self._stop_at is not None:
            deadline = min(deadline, self._stop_at)
        if self._unreachable is not None and self._exit_by is not None:
            return min(deadline, self._exit_by)
        return deadline

    def _capped(self, wait: float) -> float:
        return wait if self._max_wait_s is None else min(wait, self._max_wait_s)

    def _slow_down(self, wait: float | None) -> None:
        self.slow_downs += 1
        self.slow_down_wait_s = self._capped(wait) if wait is not None else None

    def _backoff(self, retry_after: float | None) -> float:
        delay = self._backoff_schedule.delay(self._attempt)
        self._attempt += 1
        if retry_after is not None:
            delay = max(delay, retry_after)
        return self._capped(delay)

    def _wait_until(self, when: float, deadline: float, last: requests.Response | None = None) -> None:
        """Wait until ``when``; :class:`RetryLater` (with ``last``, the call's last answer) if that
        passes ``deadline``, or at once when the wake event is set."""
        while True:
            now = self._clock.now()
            if now >= when:
                return
            if when >= deadline:
                raise RetryLater(last)
            if self._clock.wait(self._wake, when - now):
                raise RetryLater(interrupted=True)  # new work or shutdown: let the caller decide

    def _follow(self, request: Request) -> requests.Response:
        """One request; redirects followed only within our own origin."""
        for _ in range(_MAX_REDIRECTS + 1):
            resp = self.network.handle(request)
            if resp.status_code not in REDIRECTS:
                return resp
            target = urljoin(request.url, resp.headers.get("Location", ""))
            if origin(target) != self.origin:
                _rl.warning(
                    "redirect",
                    "refused to follow a redirect from %s to another host (%s); the API key stays here",
                    self.origin,
                    origin(target),
                )
                return resp
            _let_go(resp, request.stream)
            # The Location carries its own query.
            request = Request(request.method, target, request.headers, request.body, None, request.timeout, request.stream)
        return resp


# --- reading answers --------------------------------------------------------------------


def origin(url: str) -> str:
    """``scheme://host[:port]``, lower-cased: what a redirect must keep to be followed.

    >>> origin("HTTPS://Api.Example.com:8443/api/v1?x=1")
    'https://api.example.com:8443'
    """
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}".lower()  # no user info: it may hold a password


def unreachable_cause(exc: BaseException, url: str) -> str | None:
    """Why a connection failed, in words for a log line, when no wait would help; None for the rest.

    Nothing listening (ECONNREFUSED), a name that does not resolve, a network or host
    that is unreachable, a TLS certificate refused. A timeout or a reset is not one of
    them: a slow or distant service may still answer. requests wraps the OS's error
    twice (ConnectionError, then urllib3's MaxRetryError whose ``reason`` is the
    connection error caused by it), so the chain is walked.

    >>> unreachable_cause(requests.ConnectionError(socket.gaierror(-2, "Name or service not known")), "https://api.example.com/x")
    'could not resolve api.example.com: no network or DNS?'
    >>> unreachable_cause(requests.ConnectionError(ConnectionRefusedError(111, "refused")), "http://127.0.0.1:1984/x")
    'connection refused (nothing listening)'
    >>> unreachable_cause(requests.ConnectTimeout("timed out"), "http://h/") is None
    True
    """
    host = urlsplit(url).hostname or url
    seen: set[int] = set()
    pending: list[object] = [exc]
    while pending:
        current = pending.pop()
        if not isinstance(current, BaseException) or id(current) in seen or len(seen) > 16:
            continue
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return "connection refused (nothing listening)"
        if isinstance(current, socket.gaierror) or type(current).__name__ == "NameResolutionError":
            return f"could not resolve {host}: no network or DNS?"
        if isinstance(current, OSError) and current.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return f"{host} is unreachable ({current.strerror or 'no route'}): no network?"
        if isinstance(current, ssl.SSLCertVerificationError):
            return f"the TLS certificate of {host} was refused ({current.verify_message or current.reason})"
        pending.extend((current.__cause__, current.__context__, getattr(current, "reason", None), *current.args))
    return None


def retry_after_seconds(resp: requests.Response) -> float | None:
    """Seconds the service asked us to wait (Retry-After as seconds or an HTTP date), or None."""
    value = resp.headers.get("Retry-After")
    if not value:
        return None
    try:
        seconds = float(value)
        # "inf", "nan" and 1e309 parse as floats; none is a wait a service can mean.
        return max(0.0, seconds) if math.isfinite(seconds) else None
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


_RATELIMIT_PARAM = re.compile(r";\s*([rt])\s*=\s*([0-9]+)")
_UNIX_TIME = 1e9  # an X-RateLimit-Reset above this is a date (seconds since 1970), not a delay


def quota_left(headers: Any) -> tuple[int | None, float | None]:
    """Requests left in the rate-limit window, and seconds until it resets, from an answer's headers.

    The interface names no rate-limit headers, so these are the ones services
    commonly send, read in this order, first found wins:
    ``RateLimit: "policy";r=<left>;t=<seconds>`` (IETF draft
    ``draft-ietf-httpapi-ratelimit-headers``, 07 and later; of several policies,
    the one with the fewest left), ``RateLimit-Remaining`` and ``RateLimit-Reset``
    (its earlier drafts, seconds), ``X-RateLimit-Remaining`` and
    ``X-RateLimit-Reset`` (common practice; a reset above 10^9 is a Unix time).
    ``(None, None)`` when there are none or they do not parse.

    >>> quota_left({"RateLimit": '"multipart";r=0;t=4'})
    (0, 4.0)
    >>> quota_left({"X-RateLimit-Remaining": "12"})
    (12, None)
    """
    structured = headers.get("RateLimit")
    if structured:
        best: tuple[int, float | None] | None = None
        for member in structured.split(","):
            params = dict(_RATELIMIT_PARAM.findall(member))
            if "r" in params and (best is None or int(params["r"]) < best[0]):
                best = (int(params["r"]), float(params["t"]) if "t" in params else None)
        if best is not None:
            return best
    for prefix in ("RateLimit-", "X-RateLimit-"):
        raw = headers.get(prefix + "Remaining")
        if raw is None:
            continue
        try:
            left = int(str(raw).strip())
        except ValueError:
            return None, None
        reset: float | None = None
        try:
            reset = float(str(headers.get(prefix + "Reset", "")).strip())
        except ValueError:
            pass
        if reset is not None and not math.isfinite(reset):
            reset = None
        if reset is not None and reset > _UNIX_TIME:
            reset = reset - time.time()
        return max(0, left), (max(0.0, reset) if reset is not None else None)
    return None, None


@dataclass(frozen=True)
class Answer:
    """The part of an HTTP answer a caller judges: status, headers and a bounded body."""

    status_code: int
    headers: Any
    body: bytes
    truncated: bool = False

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def _let_go(resp: requests.Response, stream: bool) -> None:
    """Done with an answer we will not use: a streamed one is read bounded (its connection may be kept)."""
    if stream:
        read_bounded(resp)
    else:
        resp.close()


def read_bounded(resp: requests.Response, limit: int = BODY_LIMIT) -> tuple[bytes, bool]:
    """Read at most ``limit`` bytes of a streamed answer; (bytes, whether that was all of it).

    A body read whole gives its connection back to the pool for reuse; a
    longer one is cut off and its connection closed, so it costs ``limit``
    bytes, not its size.
    """
    raw = resp.raw
    try:
        data = raw.read(limit + 1, decode_content=True) or b""
    except Exception:  # noqa: BLE001 - a reset mid-body: what we have is what there is
        data, whole = b"", False
    else:
        whole = len(data) <= limit
    if not whole:
        data = data[:limit]
        raw.close()  # not drained: this connection cannot be reused
    try:
        raw.release_conn()
    except Exception:  # noqa: BLE001
        pass
    return data, whole
