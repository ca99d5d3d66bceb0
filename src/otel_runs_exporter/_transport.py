"""Encoded runs to the service: HTTP, the one retry loop, splitting, fallback.

What each answer does (the retry matrix, pinned by ``tests/test_transport.py``):

======================  ==========================================================
2xx                     delivered
408, 429, 5xx,          retried with exponential backoff and jitter until the
connection error,       deadline; 429's Retry-After is honoured (and 429 backs off
timeout                 even without it). At the deadline the runs are handed
                        back to be kept and retried on a later flush.
429 on a paced send     handed back at once, for the worker's pacer (``_pacing``)
                        to send fewer, larger requests; Retry-After stays the
                        floor of the next request
413                     the batch is split in halves, each sent on its own; a
                        single run that is still too large is dropped (too_large)
400, 422                the batch is bisected to find the runs the service
                        rejects; only those are dropped (rejected)
401, 403                sending stops for good; one log line; runs dropped
                        (unauthorized)
404, 405 on multipart   (mode auto) switch once to POST /runs + PATCH /runs/{id}
404 on POST /runs       the base address is wrong: one error naming it; the
(or multipart, mode     batch is dropped (not_found)
multipart)
redirect                followed only to the same scheme and host; never carries
                        the key elsewhere (dropped: redirect_refused)
other 4xx               dropped (http_<status>)
======================  ==========================================================

Our own requests are never traced: instrumentation is suppressed while we send.

Besides the status, what an answer says about our request rate is noted for a
caller that paces itself (``SendResult.throttled``): a 429 with its
Retry-After, and a successful answer whose rate-limit headers say no request is
left in the window (see :func:`quota_left` for the headers read; the interface
names none, so the 429 alone must be, and is, enough).

:class:`HttpClient` is the one retry loop (backoff, jitter, Retry-After,
deadline, interruption, same-origin redirects). :class:`Transport` builds run
requests on it; the API clients (``otel_runs_exporter.api``) use it too.
"""

from __future__ import annotations

import logging
import math
import random
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import urljoin, urlsplit

import orjson
import requests
from opentelemetry import context as otel_context

from ._clock import SYSTEM_CLOCK, Clock
from ._codec import Codec, codec, zstd_available
from ._encode import EncodedRun, basic_body, multipart_body, new_boundary
from ._seal import SealedBatch
from ._logging import RateLimitedLog
from ._settings import US_ENDPOINT, Settings
from ._stats import RequestCounts

__all__ = [
    "Answer",
    "HttpClient",
    "RetryLater",
    "SendResult",
    "Transport",
    "USER_AGENT",
    "new_session",
    "quota_left",
    "read_bounded",
    "retry_after_seconds",
]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

from ._version import USER_AGENT  # noqa: E402 - the one version (_version.py); re-exported here
_RETRYABLE = frozenset({408, 429, 500, 502, 503, 504}) | frozenset(range(505, 600))
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS = 5

try:  # the SDK exports these keys; older versions spell them as plain strings
    from opentelemetry.context import _SUPPRESS_HTTP_INSTRUMENTATION_KEY, _SUPPRESS_INSTRUMENTATION_KEY
except ImportError:  # pragma: no cover
    _SUPPRESS_INSTRUMENTATION_KEY = otel_context.create_key("suppress_instrumentation")
    _SUPPRESS_HTTP_INSTRUMENTATION_KEY = otel_context.create_key("suppress_http_instrumentation")


def suppressed_context() -> otel_context.Context:
    """A context in which instrumented HTTP clients do not trace our exports."""
    ctx = otel_context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True)
    return otel_context.set_value(_SUPPRESS_HTTP_INSTRUMENTATION_KEY, True, ctx)


@dataclass
class SendResult:
    """What became of the runs handed to :meth:`Transport.send`."""

    delivered: list[EncodedRun] = field(default_factory=list)
    dropped: dict[str, list[EncodedRun]] = field(default_factory=dict)
    retry: list[EncodedRun] = field(default_factory=list)
    # True when the retry runs were handed back because the caller woke us, not
    # because the retry budget ran out (only the latter sends them to the spool).
    interrupted: bool = False
    # A sealed batch (see ``send_sealed``) delivered whole, or handed back whole.
    delivered_sealed: SealedBatch | None = None
    retry_sealed: SealedBatch | None = None
    # The service told us to slow down during this send (a 429, or no request left in the
    # window), and the wait it asked for, as honoured; for the worker's pacer.
    throttled: bool = False
    retry_after_s: float | None = None

    def drop(self, reason: str, runs: Sequence[EncodedRun]) -> None:
        self.dropped.setdefault(reason, []).extend(runs)


class RetryLater(Exception):
    """The deadline (or an interruption) came before the request could succeed.

    ``response`` is the last retryable answer, if there was one (for its status
    and Retry-After), or None after connection errors.
    """

    def __init__(self, response: requests.Response | None = None, interrupted: bool = False) -> None:
        super().__init__("interrupted" if interrupted else "gave up retrying before the deadline")
        self.response = response
        self.interrupted = interrupted


class HttpClient:
    """One HTTP session with the one retry loop.

    Retryable answers (408, 429, 5xx) and connection errors are retried with
    exponential backoff and jitter until the deadline; Retry-After is honoured.
    The backoff state is kept between calls, so a caller that comes back after
    :class:`RetryLater` does not hammer a struggling service. ``wake`` cuts a
    backoff wait short; waits and deadlines go through ``clock`` (a
    :class:`~otel_runs_exporter._clock.FakeClock` in tests). Redirects are followed only within the base address's
    scheme and host, so credentials never travel elsewhere.

    ``backoff_base_s`` / ``backoff_max_s`` are class attributes so tests can
    shorten them for every client at once.
    """

    backoff_base_s = 0.5
    backoff_max_s = 30.0
    last_try_margin_s = 1.0

    def __init__(
        self,
        session: requests.Session,
        base_url: str,
        timeout_s: float,
        *,
        wake: threading.Event | None = None,
        clock: Clock = SYSTEM_CLOCK,
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
        self.session = session
        # requests lets REQUESTS_CA_BUNDLE override a session's CA bundle; a bundle
        # the user configured for this exporter must win, so it goes on each request.
        self._verify = session.verify if isinstance(session.verify, str) else None
        self.base = base_url.rstrip("/")
        self.origin = _origin(self.base)
        self._timeout_s = timeout_s
        self._wake = wake or threading.Event()
        self._clock = clock
        self._attempt = 0
        self._not_before = 0.0
        self._max_wait_s = max_wait_s
        self._finish_in_flight = finish_in_flight
        self.counts = RequestCounts()
        # For a caller that paces itself: how many answers told us to slow down (429s, and
        # answers saying no request is left), and the wait the last one asked for, capped.
        self.slow_downs = 0
        self.slow_down_wait_s: float | None = None

    def reset_backoff(self) -> None:
        self._attempt = 0
        self._not_before = 0.0

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
        """Send one request, retrying what is worth retrying until ``deadline``.

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
        while True:
            self._wait_until(self._not_before, deadline)
            remaining = deadline - self._clock.now()
            if remaining <= 0:
                raise RetryLater()
            retry_after: float | None = None
            last: requests.Response | None = None
            try:
                bounded = min(self._timeout_s, remaining)
                timeout: Any = (bounded, self._timeout_s) if self._finish_in_flight else bounded
                resp = self._follow(method, url, body, headers or {}, params, timeout, stream)
                counts.requests += 1
            except requests.RequestException as exc:
                counts.requests += 1
                _rl.warning("conn", "could not reach %s: %s", self.origin, type(exc).__name__)
                if not retry:
                    counts.failed += 1
                    raise RetryLater() from None
            else:
                status = resp.status_code
                if status == 429:
                    counts.throttled += 1
                if status not in _RETRYABLE or not retry:
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
            if self._not_before >= deadline:
                last_try = self._last_try(now, retry_after, deadline)
                if last_try is None:
                    raise RetryLater(last)
                self._not_before = last_try

    def request_bounded(self, method: str, path: str, deadline: float, **kwargs: Any) -> "Answer":
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
        last = deadline - self.last_try_margin_s
        earliest = now + (self._capped(retry_after) if retry_after is not None else 0.0)
        return last if now < last and earliest <= last else None

    def _capped(self, wait: float) -> float:
        return wait if self._max_wait_s is None else min(wait, self._max_wait_s)

    def _slow_down(self, wait: float | None) -> None:
        self.slow_downs += 1
        self.slow_down_wait_s = self._capped(wait) if wait is not None else None

    def _backoff(self, retry_after: float | None) -> float:
        # Exponential with "equal jitter": never less than half the step, so a
        # crowd of clients spreads out without any of them hammering.
        step = min(self.backoff_max_s, self.backoff_base_s * (2 ** min(self._attempt, 16)))
        self._attempt += 1
        delay = step / 2 + random.uniform(0, step / 2)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return self._capped(delay)

    def _wait_until(self, when: float, deadline: float) -> None:
        while True:
            now = self._clock.now()
            if now >= when:
                return
            if when >= deadline:
                raise RetryLater()
            if self._clock.wait(self._wake, when - now):
                raise RetryLater(interrupted=True)  # new work or shutdown: let the caller decide

    def _follow(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: dict[str, str],
        params: dict[str, Any] | None,
        timeout: Any,
        stream: bool = False,
    ) -> requests.Response:
        """One request; redirects followed only within our own origin."""
        for _ in range(_MAX_REDIRECTS + 1):
            extra = {"verify": self._verify} if self._verify else {}
            resp = self.session.request(
                method,
                url,
                data=body,
                headers=headers,
                params=params,
                timeout=timeout,
                allow_redirects=False,
                stream=stream,
                **extra,
            )
            if resp.status_code not in _REDIRECTS:
                return resp
            target = urljoin(url, resp.headers.get("Location", ""))
            if _origin(target) != self.origin:
                _rl.warning(
                    "redirect",
                    "refused to follow a redirect from %s to another host (%s); the API key stays here",
                    self.origin,
                    _origin(target),
                )
                return resp
            _let_go(resp, stream)
            url = target
            params = None  # the Location carries its own query
        return resp


class Transport:
    """Sends encoded runs: builds multipart or basic-tracing requests and judges the answers.

    ``wake`` is an Event the caller may set to cut a backoff wait short (new work
    arrived, or shutdown); the interrupted send hands its runs back to retry.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        wake: threading.Event | None = None,
        clock: Clock = SYSTEM_CLOCK,
        session: requests.Session | None = None,
        finish_in_flight: bool = False,
    ) -> None:
        self._settings = settings
        self._wake = wake or threading.Event()
        self._clock = clock
        self._http = HttpClient(
            session or new_session(settings),
            settings.endpoint,
            settings.timeout_s,
            wake=self._wake,
            clock=clock,
            max_wait_s=settings.export_timeout_s,
            finish_in_flight=finish_in_flight,
        )
        self._base = self._http.base
        self._boundary = new_boundary()
        self._basic = settings.mode == "basic"
        self._auth_failed = False
        self._fallback_untold = 0  # the status that made us fall back to basic, until that is logged
        self._lock = threading.Lock()  # one send at a time: the backoff state is shared
        self._paced = False  # whether the send in progress is paced (set under the lock)
        # The wire's Content-Encoding. "auto" asks /info first (see _decide_codec).
        self._codec: Codec | None = None
        self._codec_decided = settings.compression != "auto"
        self._next_probe = 0.0
        if settings.compression in ("gzip", "zstd"):
            self._codec = codec(settings.compression)
            if self._codec is None:
                logger.warning(
                    "zstd compression needs the zstandard package (pip install 'otel-runs-exporter[zstd]'); "
                    "sending uncompressed"
                )

    @property
    def counts(self) -> RequestCounts:
        """The HTTP client's request counts (the same object, updated as it sends)."""
        return self._http.counts

    def __repr__(self) -> str:
        return f"Transport(endpoint={self._base!r}, mode={'basic' if self._basic else 'multipart'})"

    @property
    def mode(self) -> str:
        return "basic" if self._basic else "multipart"

    @property
    def wire_codec(self) -> str:
        """The Content-Encoding runs are sent with (``none`` while "auto" has not asked /info yet)."""
        return self._codec.name if self._codec is not None else "none"

    def close(self) -> None:
        self._http.session.close()

    # --- the public entry point ------------------------------------------------

    def send(self, runs: Sequence[EncodedRun], deadline: float, *, paced: bool = False) -> SendResult:
        """Deliver ``runs`` before ``deadline`` (a ``clock()`` value); never raises.

        ``paced``: a 429 hands the runs back at once instead of waiting to retry
        them (the caller paces itself; see ``_pacing``).
        """
        result = SendResult()
        if not runs:
            return result
        token = otel_context.attach(suppressed_context())
        try:
            with self._lock, self._noting_rate(paced, result):
                if self._auth_failed:
                    result.drop("unauthorized", runs)
                elif self._basic:
                    self._send_basic(list(runs), deadline, result)
                else:
                    self._decide_codec(deadline)
                    self._send_multipart(list(runs), deadline, result)
        except Exception:  # noqa: BLE001 - a bug of ours must not lose the batch or reach the app
            logger.exception("unexpected error while sending %d runs; they will be retried", len(runs))
            done = {id(r) for r in result.delivered} | {id(r) for rs in result.dropped.values() for r in rs}
            result.retry = [r for r in runs if id(r) not in done]
        finally:
            otel_context.detach(token)
        return result

    def send_sealed(self, batch: SealedBatch, deadline: float, *, paced: bool = False) -> SendResult:
        """Deliver a sealed batch before ``deadline``; never raises.

        Sent as it is (decompressed first only when the wire's encoding is
        another); delivered or handed back whole. Any other answer opens the
        batch into its runs and judges them as :meth:`send` would, without
        sending it again (413 splits, 422 bisects, 404/405 falls back).
        ``paced`` as for :meth:`send`.
        """
        result = SendResult()
        token = otel_context.attach(suppressed_context())
        try:
            with self._lock, self._noting_rate(paced, result):
                if self._auth_failed:
                    result.drop("unauthorized", batch.open())
                elif self._basic:
                    self._send_basic(batch.open(), deadline, result)
                else:
                    self._decide_codec(deadline)
                    self._send_sealed(batch, deadline, result)
        except Exception:  # noqa: BLE001 - a bug of ours must not lose the batch or reach the app
            logger.exception("unexpected error while sending %d sealed runs; they will be retried", batch.ops)
            if result.delivered or result.dropped or result.delivered_sealed is not None:
                # Opened and partly judged: what is left goes back as runs.
                done = {r.run_id + r.op for r in result.delivered} | {
                    r.run_id + r.op for rs in result.dropped.values() for r in rs
                }
                result.retry = [r for r in batch.open() if r.run_id + r.op not in done]
            else:
                result.retry_sealed = batch
        finally:
            otel_context.detach(token)
        return result

    def _send_sealed(self, batch: SealedBatch, deadline: float, result: SendResult) -> None:
        wire = self._codec
        headers = {"Content-Type": batch.content_type}
        if wire is not None and wire.name == batch.codec.name:
            body = batch.data
            headers["Content-Encoding"] = wire.name
        else:
            body = batch.body()
            if wire is not None:
                body = wire.compress(body)
                headers["Content-Encoding"] = wire.name
        try:
            resp = self._http.request_bounded(
                "POST", "/runs/multipart", deadline, body=body, headers=headers, paced=self._paced
            )
        except RetryLater as later:
            result.retry_sealed = batch
            result.interrupted |= later.interrupted
            return
        if 200 <= resp.status_code < 300:
            result.delivered_sealed = batch
        else:
            self._judge_multipart(resp, batch.open(), deadline, result)

    # --- the wire's encoding -----------------------------------------------------

    _PROBE_EVERY_S = 60.0  # while /info cannot be read (the service is down), ask again this often
    _PROBE_TIMEOUT_S = 3.0

    def _decide_codec(self, deadline: float) -> None:
        """compression=auto: zstd when ``zstandard`` is installed and ``GET /info`` says
        ``instance_flags.zstd_compression_enabled`` (as the service's own SDK decides);
        otherwise none. /info has no flag for gzip, so gzip only when configured.
        Until /info has answered, runs go uncompressed."""
        if self._codec_decided or self._clock.now() < self._next_probe:
            return
        if not zstd_available():
            self._codec_decided = True
            return
        self._next_probe = self._clock.now() + self._PROBE_EVERY_S
        try:
            resp = self._http.request_bounded(
                "GET", "/info", min(deadline, self._clock.now() + self._PROBE_TIMEOUT_S), retry=False
            )
        except RetryLater:
            return  # unreachable for now: ask again later
        if resp.status_code in _RETRYABLE:
            return
        self._codec_decided = True
        flags: Any = None
        if 200 <= resp.status_code < 300:
            try:
                info = orjson.loads(resp.body)
            except orjson.JSONDecodeError:
                info = None
            flags = info.get("instance_flags") if isinstance(info, dict) else None
        if isinstance(flags, dict) and flags.get("zstd_compression_enabled") is True:
            self._codec = codec("zstd")
            logger.debug("the service takes zstd (/info); compressing request bodies with it")

    # --- multipart -------------------------------------------------------------

    def _send_multipart(self, runs: list[EncodedRun], deadline: float, result: SendResult) -> None:
        content_type, body = multipart_body(runs, self._boundary)
        try:
            resp = self._request("POST", "/runs/multipart", body, content_type, deadline)
        except RetryLater as later:
            result.retry.extend(runs)
            result.interrupted |= later.interrupted
            return
        self._judge_multipart(resp, runs, deadline, result)

    def _judge_multipart(self, resp: "Answer", runs: list[EncodedRun], deadline: float, result: SendResult) -> None:
        """What the answer to a multipart request of ``runs`` does with them (the matrix above)."""
        status = resp.status_code
        if 200 <= status < 300:
            result.delivered.extend(runs)
        elif status == 415 and self._codec is not None and self._settings.compression == "auto":
            # The service advertised an encoding it then refused: stop compressing, send again.
            logger.warning("the service refused %s request bodies (415); sending them uncompressed", self._codec.name)
            self._codec = None
            self._send_multipart(runs, deadline, result)
        elif status == 413:
            if len(runs) == 1:
                _rl.warning("too_large", "run %s is too large for the service (413); dropped", runs[0].run_id)
                result.drop("too_large", runs)
            else:
                self._send_halves(runs, deadline, result)
        elif status in (400, 422):
            if len(runs) == 1:
                _rl.warning(
                    "rejected",
                    "the service rejected run %s (%d): %s",
                    runs[0].run_id,
                    status,
                    _detail(resp),
                )
                result.drop("rejected", runs)
            else:
                self._send_halves(runs, deadline, result)
        elif status == 404 and self._settings.mode == "multipart":
            self._endpoint_missing("/runs/multipart", runs, result)
        elif status in (404, 405) and self._settings.mode == "auto":
            # Said once the fallback works; if /runs is missing too, the one line
            # about a wrong address says it all.
            self._fallback_untold = status
            self._basic = True
            self._send_basic(runs, deadline, result)
        else:
            self._non_retryable(status, resp, runs, result)

    def _send_halves(self, runs: list[EncodedRun], deadline: float, result: SendResult) -> None:
        mid = len(runs) // 2
        for half in (runs[:mid], runs[mid:]):
            if self._clock.now() >= deadline:
                result.retry.extend(half)
            else:
                self._send_multipart(half, deadline, result)

    # --- basic tracing -----------------------------------------------------------

    def _send_basic(self, runs: list[EncodedRun], deadline: float, result: SendResult) -> None:
        # Parents before children: a parent's dotted_order is a prefix of its children's.
        ordered = sorted(runs, key=lambda r: (r.op != "post", r.dotted_order))
        for index, run in enumerate(ordered):
            if run.op == "post":
                method, path = "POST", "/runs"
            else:
                method, path = "PATCH", f"/runs/{run.run_id}"
            try:
                resp = self._request(method, path, basic_body(run), "application/json", deadline)
            except RetryLater as later:
                result.retry.extend(ordered[index:])
                result.interrupted |= later.interrupted
                return
            status = resp.status_code
            if 200 <= status < 300 or (status == 409 and run.op == "post"):
                result.delivered.append(run)  # 409: created by an earlier attempt
                if self._fallback_untold:
                    logger.warning(
                        "%s has no multipart endpoint (%d); sending with POST /runs and PATCH /runs/{id}",
                        self._base,
                        self._fallback_untold,
                    )
                    self._fallback_untold = 0
            elif status == 404 and run.op == "post":
                # POST /runs itself is missing (and, in auto mode, multipart was too):
                # the base address is wrong, so every other run of the batch would fail the same way.
                self._endpoint_missing(path, ordered[index:], result)
                return
            elif status in (400, 404, 413, 422):
                reason = "too_large" if status == 413 else "rejected"
                _rl.warning("basic_" + reason, "the service refused %s %s (%d): %s", method, path, status, _detail(resp))
                result.drop(reason, [run])
            else:
                self._non_retryable(status, resp, [run], result)
                if self._auth_failed:
                    result.drop("unauthorized", ordered[index + 1 :])
                    return

    def _endpoint_missing(self, path: str, runs: list[EncodedRun], result: SendResult) -> None:
        _rl.error(
            "not_found",
            "%s%s answered 404%s: the service has no such endpoint, so the base address is likely wrong. "
            "OTEL_EXPORTER_RUNS_ENDPOINT must be the API's base address (the hosted one is %s; "
            "self-hosted ones end in /api/v1), without /runs or other paths. %d runs dropped (not_found)",
            self._base,
            path,
            " (and so did /runs/multipart)" if self._fallback_untold else "",
            US_ENDPOINT,
            len(runs),
        )
        result.drop("not_found", runs)

    def _non_retryable(self, status: int, resp: "Answer", runs: list[EncodedRun], result: SendResult) -> None:
        if status in (401, 403):
            self._auth_failed = True
            logger.error(
                "the service refused the API key (%d); no more runs will be sent by this exporter. "
                "Check OTEL_EXPORTER_RUNS_API_KEY / OTEL_EXPORTER_RUNS_WORKSPACE_ID",
                status,
            )
            result.drop("unauthorized", runs)
        elif status in _REDIRECTS:
            result.drop("redirect_refused", runs)
        else:
            _rl.warning("http_%d" % status, "the service answered %d: %s; %d runs dropped", status, _detail(resp), len(runs))
            result.drop(f"http_{status}", runs)

    def _request(self, method: str, path: str, body: bytes, content_type: str, deadline: float) -> "Answer":
        headers = {"Content-Type": content_type}
        wire = self._codec
        if wire is not None:
            body = wire.compress(body)
            headers["Content-Encoding"] = wire.name
        return self._http.request_bounded(method, path, deadline, body=body, headers=headers, paced=self._paced)

    @contextmanager
    def _noting_rate(self, paced: bool, result: SendResult) -> Iterator[None]:
        """For one send (under the lock): its requests are paced or not, and what the
        service said about our rate meanwhile goes into ``result``."""
        http = self._http
        before = http.slow_downs
        self._paced = paced
        try:
            yield
        finally:
            self._paced = False
            if http.slow_downs > before:
                result.throttled = True
                result.retry_after_s = http.slow_down_wait_s


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


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


def _detail(resp: "Answer") -> str:
    return resp.text[:300]


BODY_LIMIT = 64 * 1024  # of an answer we only judge: enough for any error message a service writes


@dataclass(frozen=True)
class Answer:
    """The part of an HTTP answer the transport judges: status, headers and a bounded body."""

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

