"""Encoded runs to the service: run requests, and what each answer does with the runs.

Requests go through the one HTTP client (``_http_client``), which retries what is worth
retrying until the deadline (the retry matrix is in its docstring). What the
final answer does with the runs (pinned by ``tests/core/test_transport.py``
against the real local service, and ``tests/core/test_delivery.py``):

======================  ==========================================================
2xx                     delivered
no answer in time       (the HTTP client's retries ran into the deadline, or
                        ``wake`` cut a wait short) the runs are handed back to be
                        kept and retried on a later flush
429 on a paced send     handed back at once, for the worker's pacer (``_pacing``)
                        to send fewer, larger requests; Retry-After stays the
                        floor of the next request
413                     the batch is split in halves, each sent on its own; a
                        single run that is still too large is dropped (too_large)
400, 422                the batch is bisected to find the runs the service
                        rejects; only those are dropped (rejected)
401, 403                sending stops for good; one log line saying whether no
                        key was set or the key was refused, with the runs
                        dropped (unauthorized)
404, 405 on multipart   (mode auto) switch once to POST /runs + PATCH /runs/{id}
404 on POST /runs       the base address is wrong: one error naming it; the
(or multipart, mode     batch is dropped (not_found)
multipart)
415                     (compression auto) the service refused the encoding
                        /info offered: sent again uncompressed, as is every
                        later request
redirect not followed   (to another host, or past 5; see ``_http_client``) dropped
                        (redirect_refused)
other 4xx               dropped (http_<status>)
======================  ==========================================================

Our own requests are never traced: instrumentation is suppressed while we send.
With ``compression=auto`` the wire's encoding is decided by asking ``GET /info``
once (see :meth:`Transport._decide_codec`).

What the service said about our request rate meanwhile (a 429, or no request
left in the window; see :func:`~otel_runs_exporter._http_client.quota_left`) is noted
for a caller that paces itself (``SendResult.throttled``).
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import orjson
from opentelemetry import context as otel_context

from ._clock import SYSTEM_CLOCK, Clock
from ._codec import Codec, codec, zstd_available
from ._encode import EncodedRun, basic_body, multipart_body, new_boundary
from ._http_client import (
    REDIRECTS,
    RETRYABLE,
    Answer,
    HttpClient,
    Network,
    RetryLater,
    SessionNetwork,
    backoff_of,
    new_session,
)
from ._logging import RateLimitedLog, n_runs
from ._seal import SealedBatch
from ._settings import US_ENDPOINT, Settings, shown_url
from ._stats import RequestCounts, completing

__all__ = ["SendResult", "Transport", "suppressed_context"]

logger = logging.getLogger(__name__)
_rl = RateLimitedLog(logger)

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


def what_is_lost(ops: Sequence[EncodedRun]) -> str:
    """Operations in words, as runs: only a run's completing operation counts it (as the ledger counts).

    Early posts and late patches are partial updates: losing one loses no run,
    whose completing operation carries it whole.

    >>> from otel_runs_exporter._encode import encoded
    >>> whole = encoded("post", "r1", [("post.r1", b"{}")], "d", True)
    >>> early = encoded("post", "r2", [("post.r2", b"{}")], "d", False)
    >>> what_is_lost([whole]), what_is_lost([whole, whole, early])
    ('1 run', '2 runs and 1 partial update')
    """
    runs = completing(ops)
    partial = len(ops) - runs
    if not partial:
        return n_runs(runs)
    updates = f"{partial} partial update" if partial == 1 else f"{partial} partial updates"
    return f"{n_runs(runs)} and {updates}" if runs else updates


class _Losses:
    """What one send dropped, said once it is over: one line per reason with its whole count.

    Said as they happened, the runs of a batch sent one request each (basic
    mode) made one rate-limited line each: the first said "1 run" and the rest
    were held back, however many were lost.
    """

    def __init__(self) -> None:
        self._said: dict[str, tuple[int, str, tuple[object, ...], str, list[EncodedRun]]] = {}

    def add(self, key: str, reason: str, runs: Sequence[EncodedRun], level: int, msg: str, *args: object) -> None:
        """``runs`` dropped for ``reason``; the first ``msg`` of a ``key`` is the one said."""
        entry = self._said.get(key)
        if entry is None:
            self._said[key] = (level, msg, args, reason, list(runs))
        else:
            entry[4].extend(runs)

    def say(self) -> None:
        said, self._said = self._said, {}
        for key, (level, msg, args, reason, runs) in said.items():
            _rl.log(level, key, msg + "; %s dropped (%s)", *args, what_is_lost(runs), reason)


class Transport:
    """Sends encoded runs: builds multipart or basic-tracing requests and judges the answers.

    ``wake`` is an Event the caller may set to cut a backoff wait short (new work
    arrived, or shutdown); the interrupted send hands its runs back to retry.
    ``network`` is the HTTP seam (``_http_client.Network``): by default a
    :class:`requests.Session` with the settings' headers and TLS; a test passes
    one that answers from a table. ``clock`` is the seam for waits and deadlines.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        wake: threading.Event | None = None,
        clock: Clock = SYSTEM_CLOCK,
        network: Network | None = None,
        finish_in_flight: bool = False,
    ) -> None:
        self._settings = settings
        self._wake = wake or threading.Event()
        self._clock = clock
        self._http = HttpClient(
            network or SessionNetwork(new_session(settings)),
            settings.endpoint,
            settings.timeout_s,
            wake=self._wake,
            clock=clock,
            backoff=backoff_of(settings),
            max_wait_s=settings.export_timeout_s,
            finish_in_flight=finish_in_flight,
        )
        self._base = shown_url(self._http.base)  # for messages only: requests go to self._http.base
        self._boundary = new_boundary()
        self._basic = settings.mode == "basic"
        self._auth_failed = False
        self._fallback_untold = 0  # the status that made us fall back to basic, until that is logged
        self._losses = _Losses()  # what the send in progress dropped (used under the lock)
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
    def clock(self) -> Clock:
        """The clock deadlines given to :meth:`send` are read on."""
        return self._clock

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
        self._http.close()

    @property
    def unreachable(self) -> str | None:
        """Why the last request could not reach the service, when no wait would help (``HttpClient.unreachable``)."""
        return self._http.unreachable

    def at_exit(self, budget_s: float) -> None:
        """Shutdown has begun: a service that cannot be reached is retried only for ``budget_s`` (see ``HttpClient.at_exit``)."""
        self._http.at_exit(budget_s)

    def stop_now(self) -> None:
        """Start and retry no request from now on (``HttpClient.stop_now``)."""
        self._http.stop_now()

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
            with self._lock, self._noting_rate(paced, result), self._saying_losses():
                if self._auth_failed:
                    result.drop("unauthorized", runs)
                elif self._basic:
                    self._send_basic(list(runs), deadline, result)
                else:
                    self._decide_codec(deadline)
                    self._send_multipart(list(runs), deadline, result)
        except Exception:  # noqa: BLE001 - a bug of ours must not lose the batch or reach the app
            logger.exception("unexpected error while sending %s; they will be retried", what_is_lost(runs))
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
            with self._lock, self._noting_rate(paced, result), self._saying_losses():
                if self._auth_failed:
                    result.drop("unauthorized", batch.open())
                elif self._basic:
                    self._send_basic(batch.open(), deadline, result)
                else:
                    self._decide_codec(deadline)
                    self._send_sealed(batch, deadline, result)
        except Exception:  # noqa: BLE001 - a bug of ours must not lose the batch or reach the app
            logger.exception(
                "unexpected error while sending a sealed batch of %s; they will be retried", n_runs(batch.completing)
            )
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
                body = wire.compress_runs(body, batch.ops)
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
        if resp.status_code in RETRYABLE:
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
            resp = self._request("POST", "/runs/multipart", body, content_type, deadline, runs=len(runs))
        except RetryLater as later:
            result.retry.extend(runs)
            result.interrupted |= later.interrupted
            return
        self._judge_multipart(resp, runs, deadline, result)

    def _judge_multipart(self, resp: Answer, runs: list[EncodedRun], deadline: float, result: SendResult) -> None:
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
            self._non_retryable(status, resp, runs, result, ("POST", "/runs/multipart"))

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
                resp = self._request(method, path, basic_body(run), "application/json", deadline, runs=1)
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
                self._losses.add(
                    "basic_" + reason, reason, [run], logging.WARNING,
                    "the service refused %s %s (%d): %s", method, path, status, _detail(resp),
                )
                result.drop(reason, [run])
            else:
                self._non_retryable(status, resp, [run], result, (method, path))
                if self._auth_failed:
                    rest = ordered[index + 1 :]
                    self._losses.add("unauthorized", "unauthorized", rest, logging.ERROR, "")  # counted in its line
                    result.drop("unauthorized", rest)
                    return

    def _endpoint_missing(self, path: str, runs: list[EncodedRun], result: SendResult) -> None:
        self._losses.add(
            "not_found", "not_found", runs, logging.ERROR,
            "%s%s answered 404%s: the service has no such endpoint, so the base address is likely wrong. "
            "OTEL_EXPORTER_RUNS_ENDPOINT must be the API's base address (the hosted one is %s; "
            "self-hosted ones end in /api/v1), without /runs or other paths",
            self._base,
            path,
            " (and so did /runs/multipart)" if self._fallback_untold else "",
            US_ENDPOINT,
        )
        result.drop("not_found", runs)

    def _non_retryable(
        self, status: int, resp: Answer, runs: list[EncodedRun], result: SendResult, request: tuple[str, str]
    ) -> None:
        if status in (401, 403):
            self._auth_failed = True
            if self._settings.api_key:
                self._losses.add(
                    "unauthorized", "unauthorized", runs, logging.ERROR,
                    "the service at %s refused the API key (%d); no more runs will be sent by this exporter. "
                    "Check OTEL_EXPORTER_RUNS_API_KEY (or LANGSMITH_API_KEY) and OTEL_EXPORTER_RUNS_WORKSPACE_ID",
                    self._base, status,
                )
            else:
                self._losses.add(
                    "unauthorized", "unauthorized", runs, logging.ERROR,
                    "the service at %s answered %d and no API key was set; no more runs will be sent by this "
                    "exporter. Set OTEL_EXPORTER_RUNS_API_KEY (or LANGSMITH_API_KEY)",
                    self._base, status,
                )
            result.drop("unauthorized", runs)
        elif status in REDIRECTS:
            result.drop("redirect_refused", runs)
        else:
            method, path = request
            self._losses.add(
                "http_%d" % status, f"http_{status}", runs, logging.WARNING,
                "the service answered %d to %s %s%s: %s", status, method, self._base, path, _detail(resp),
            )
            result.drop(f"http_{status}", runs)

    def _request(self, method: str, path: str, body: bytes, content_type: str, deadline: float, *, runs: int) -> Answer:
        headers = {"Content-Type": content_type}
        wire = self._codec
        if wire is not None:
            body = wire.compress_runs(body, runs)
            headers["Content-Encoding"] = wire.name
        return self._http.request_bounded(method, path, deadline, body=body, headers=headers, paced=self._paced)

    @contextmanager
    def _saying_losses(self) -> Iterator[None]:
        """For one send (under the lock): what it drops is said once it is over, one line per reason."""
        try:
            yield
        finally:
            self._losses.say()

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


def _detail(resp: Answer) -> str:
    return resp.text[:300]
