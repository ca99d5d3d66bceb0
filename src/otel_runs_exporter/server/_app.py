"""The local service: :class:`LocalService`, what starts it, stops it, and what tests read from it.

How it answers is split by concern: the HTTP framing (connections, bodies,
encodings, the request log) in :mod:`._http_server`; the order of checks every request
goes through (rate limits, auth, faults) in :mod:`._dispatch`; the routes, one
table naming each route's handler and policies, in :mod:`._routes`; the handlers
in :mod:`._handlers` and :mod:`._control`.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections.abc import Sequence
from typing import Any

from .._cost import PriceTable
from ._answers import ANSWER_MEMORY_BYTES, MAX_ANSWER_BYTES, AnswerBounds, AnswerBudget
from ._attachments import AttachmentLinks
from ._changes import LIVE_WINDOW_S
from ._control import ControlPlane, ServiceClock
from ._dispatch import Credentials, Dispatcher
from ._faults import FaultConfig
from ._connections import ConnectionLimits
from ._http_server import HttpServer, RequestLog, zstd_available
from ._modes import Validation, mode_from_flags
from ._origins import PagePolicy
from ._otlp import OtlpIngest
from ._otlp_hold import OtlpHold
from ._ratelimit import DEFAULT_RULES, SPEC_RULES, RateLimiter, RateRule, scaled
from ._shares import ShareTable
from ._store import RunStore, unavailable
from ._validate import canonical_id

__all__ = ["LocalService"]

logger = logging.getLogger(__name__)

# The service version /info reports, which is what the service's client gates features on (langsmith 0.15):
# 0.8.10 or later sends feedback with a trace_id in multipart ingest (and the rest to POST /feedback); 0.16.0 is the lowest version
# its client.runs, .traces and .threads resources ask for, whose /api/v2 routes this service serves. Higher
# would claim what it does not serve: client.annotation_queues wants 0.16.14, client.sessions 0.18.0.
_SERVICE_API_VERSION = "0.16.0"
_DEFAULT_SIZE_LIMIT = 20 * 1024 * 1024
BATCH_ITEMS = 1_000
"""Runs (posts and patches) and feedback items in one ingest request at most: /info's ``size_limit``. The service's
SDK sends at most that many; the exporter sends 512 (``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``) and splits on the 413."""


class LocalService:
    """The tracing part of the service, on loopback, for tests, demos and offline use.

    Example::

        with LocalService() as svc:
            ...  # point an exporter at svc.url
            runs = svc.wait_for_runs(3)

    ``api_key`` and ``workspace_id`` turn on auth (401 for a missing or wrong
    ``x-api-key``, 403 for a missing or wrong ``x-tenant-id``). Every rule violation
    is recorded; by default a request is refused (422) only for what the hosted
    service refuses too, ``strict`` refuses it for any violation, ``lenient`` for
    none (:mod:`._modes`).
    ``rate_limits`` is True for spec 8.1's table or a sequence of :class:`RateRule`
    to use instead; ``rate_limit_scale`` divides every rule's count and
    ``rate_limit_window_scale`` its window, so a test reaches in seconds, with a
    few clients, what takes a fleet in production. ``request_log`` names a file
    to which each answered request is appended as one JSON line (``at``: Unix
    time it arrived, ``method``, ``path``, ``status``, ``runs`` and
    ``run_ids`` stored, ``body_bytes``, ``duration``, ``client_port``, ``error``), for measuring a client's pacing from another
    process. ``clock_speed`` runs bulk exports, deployments and auth waits
    (:attr:`control`, a :class:`~._control.ControlPlane`) that many times faster than
    real time; ``deploy_delay_s`` is how long a revision takes to reach DEPLOYED;
    ``bearer_token`` is accepted as ``Authorization: Bearer`` on ``/v2`` paths.
    ``multipart=False`` hides the multipart endpoint (404) so a client
    must fall back to basic tracing. ``max_body_bytes`` (default 20 MiB, what ``/info``
    advertises) answers larger bodies, raw or decompressed, with 413.
    ``max_connections`` bounds the connections served at once (one thread each);
    with all of them taken, a new connection closes the oldest unfinished request
    head (else the oldest idle connection) and takes its place, and when none is
    either it is answered 503 with ``Retry-After: 1`` and closed. ``head_timeout_s``
    (default 5) is the time a request head (request line and headers) has in all
    from its first byte; a body may pause at most ``body_grace_s`` (default 5), and
    after that grace period must have come at ``min_body_rate`` bytes/s (default
    1,024) on average, else 408 (:class:`~._connections.ConnectionLimits`).

    Web pages (:mod:`._origins`): a request whose ``Host`` is not a loopback name or
    address, an address the service listens on, or one of ``allow_hosts`` is a 403
    (``allow_hosts=["*"]`` turns that check off, with a warning); a page of another
    origin than the service's own is a 403 too, except pages of ``cors_origins``
    (``http://localhost:5173``...), which may call the routes whose ``browsers``
    column names them and get CORS headers. ValueError names a malformed host or origin.

    ``prices`` is a price file (or a :class:`~otel_runs_exporter._cost.PriceTable`) whose rows replace or add to
    the shipped table's: every model run is priced with it, those stored before included (:mod:`otel_runs_exporter._cost`).
    Without it new runs get the shipped table's prices and stored ones keep theirs.

    OTLP (``POST /otel/v1/traces``, :mod:`._otlp`): a span whose parent has not arrived waits in memory at most
    ``otlp_hold_s`` seconds (default 30, like the exporter path's hold), with at most ``otlp_hold_spans`` spans
    (10,000) and ``otlp_hold_bytes`` bytes (64 MiB) waiting; past a bound, or at :meth:`stop`, it is stored as the
    root of its own tree with its OTel parent ids in its metadata.

    ``live_window_s`` (default 600): the viewer marks a trace live while it has an open run and a run of it was
    stored within this many seconds (:mod:`._changes`), not every trace whose runs never ended.

    What it holds is bounded whatever it is sent or asked (:mod:`._answers`): an ingest request carries at most
    ``batch_items`` runs and feedback items (default 1,000, ``/info``'s ``size_limit``; 413 past it); a run's post
    and patches together are at most ``max_run_bytes`` of JSON (default twice ``max_body_bytes``; 413 past it); a
    page of runs holds at most ``max_answer_bytes`` of JSON (16 MiB), fewer runs with the cursor when they are
    large; all reads together load at most ``answer_memory_bytes`` (128 MiB) of stored runs at once.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        workspace_id: str | None = None,
        db: str = ":memory:",
        lenient: bool = False,
        strict: bool = False,
        rate_limits: bool | Sequence[RateRule] = False,
        rate_limit_scale: float = 1.0,
        rate_limit_window_scale: float = 1.0,
        request_log: str | None = None,
        multipart: bool = True,
        max_body_bytes: int | None = None,
        faults: FaultConfig | None = None,
        clock_speed: float = 1.0,
        deploy_delay_s: float = 3.0,
        bearer_token: str | None = None,
        max_connections: int = 512,
        head_timeout_s: float = 5.0,
        min_body_rate: int = 1024,
        body_grace_s: float = 5.0,
        allow_hosts: Sequence[str] = (),
        cors_origins: Sequence[str] = (),
        prices: str | os.PathLike[str] | PriceTable | None = None,
        otlp_hold_s: float = 30.0,
        otlp_hold_spans: int = 10_000,
        otlp_hold_bytes: int = 64 * 1024 * 1024,
        live_window_s: float = LIVE_WINDOW_S,
        batch_items: int = BATCH_ITEMS,
        max_run_bytes: int | None = None,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        answer_memory_bytes: int = ANSWER_MEMORY_BYTES,
    ) -> None:
        if isinstance(allow_hosts, str) or isinstance(cors_origins, str):
            raise TypeError("allow_hosts and cors_origins are lists of names, e.g. allow_hosts=['devbox.lan']")
        self.pages = PagePolicy.build(host, allow_hosts, cors_origins)
        if self.pages.any_host:
            logger.warning(
                "the Host check is off (allow_hosts '*'): a web page that points a DNS name of its own at this "
                "address (DNS rebinding) can read and write every run; name the hosts you use instead"
            )
        # A price file is read now, so a bad one is a ValueError (PriceFileError) naming it before anything starts.
        self.prices = PriceTable.load(prices) if isinstance(prices, (str, os.PathLike)) else prices
        if isinstance(live_window_s, bool) or not isinstance(live_window_s, (int, float)) or not 0 < live_window_s < float("inf"):
            raise ValueError(f"live_window_s must be a number of seconds above 0, got {live_window_s!r}")
        self.live_window_s = float(live_window_s)
        self.host = host
        self.port = port
        self._credentials = Credentials(api_key, bearer_token)
        self.workspace_id = workspace_id
        self.db = str(db)
        self.validation: Validation = mode_from_flags(strict=strict, lenient=lenient)
        self.multipart = multipart
        # The limit /info advertises is the one enforced, raw and again while decompressing.
        self.max_body_bytes = max_body_bytes if max_body_bytes is not None else _DEFAULT_SIZE_LIMIT
        for name, value in (("batch_items", batch_items), ("answer_memory_bytes", answer_memory_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number above 0, got {value!r}")
        self.batch_items = batch_items
        self.max_run_bytes = max_run_bytes if max_run_bytes is not None else 2 * self.max_body_bytes
        self.answers = AnswerBounds.build(max_answer_bytes, self.max_run_bytes)
        self.answer_memory_bytes = answer_memory_bytes
        self.faults = faults if faults is not None else FaultConfig()
        self.max_connections = max_connections
        self.limits = ConnectionLimits(
            max_connections=max_connections,
            head_timeout_s=head_timeout_s,
            min_body_rate=min_body_rate,
            body_grace_s=body_grace_s,
        )
        self.control = ControlPlane(ServiceClock(clock_speed), deploy_delay_s=deploy_delay_s)
        # Signs the attachment download addresses the read API hands out (the SDK fetches them without a key).
        self.attachment_links = AttachmentLinks(secrets.token_bytes(32))
        k, w = rate_limit_scale, rate_limit_window_scale
        if rate_limits is True:
            self.rate_limiter: RateLimiter | None = RateLimiter(scaled(SPEC_RULES, k, w), scaled(DEFAULT_RULES, k, w))
        elif rate_limits:
            self.rate_limiter = RateLimiter(scaled(rate_limits, k, w), ())
        else:
            self.rate_limiter = None
        self._request_log = RequestLog(request_log)
        # A ValueError here names a bound that cannot hold anything.
        self.otlp = OtlpIngest(OtlpHold(otlp_hold_s, otlp_hold_spans, otlp_hold_bytes))
        self._sweeper: threading.Thread | None = None
        self._store: RunStore | None = None
        self._server: HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._dispatcher = Dispatcher(self, self._credentials, self._stopping)

    def __repr__(self) -> str:
        # The api key stays out: reprs end up in logs and test reports.
        auth = "on" if self._credentials.api_key is not None else "off"
        return f"LocalService(url={self.url if self._server else None!r}, db={self.db!r}, auth={auth})"

    @property
    def strict(self) -> bool:
        """Whether every rule violation is refused (``validation == "strict"``)."""
        return self.validation == "strict"

    @property
    def lenient(self) -> bool:
        """Whether no rule violation is refused (``validation == "lenient"``)."""
        return self.validation == "lenient"

    @property
    def requires_api_key(self) -> bool:
        """Whether requests need an ``x-api-key`` (the key itself is not exposed)."""
        return self._credentials.api_key is not None

    # --- lifecycle --------------------------------------------------------------

    def start(self) -> LocalService:
        """Open the store, bind, and serve on a daemon thread; returns self."""
        if self._server is not None:
            return self
        self._stopping.clear()
        self._store = RunStore(self.db, prices=self.prices, max_run_bytes=self.max_run_bytes)
        self._request_log.open()
        try:
            self._server = HttpServer(
                (self.host, self.port), self._dispatcher, self._request_log, self.limits, self.answers,
                AnswerBudget(self.answer_memory_bytes),
            )
        except BaseException:
            self._store.close()
            self._store = None
            self._request_log.close()
            raise
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="otel-runs-local-service", daemon=True
        )
        self._thread.start()
        self._sweeper = threading.Thread(target=self._sweep_otlp, name="otel-runs-otlp-hold", daemon=True)
        self._sweeper.start()
        logger.info("local service listening on %s (db %s)", self.url, self.db)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, let requests in flight finish (up to ``timeout``), close the store."""
        server = self._server
        if server is None:
            return
        self._stopping.set()  # also cuts short slow-answer faults
        server.shutdown()
        server.wait_idle(timeout)
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout)
        self._server = None
        self._thread = None
        if self._sweeper is not None:
            self._sweeper.join(timeout)
            self._sweeper = None
        if self._store is not None:
            # What still waits for a parent is stored as the root of its own tree: never lost to a restart.
            self.otlp.sweep(self._store, self.validation, everything=True)
            self._store.close()
            self._store = None
        self._request_log.close()
        logger.info("local service stopped")

    def _sweep_otlp(self) -> None:
        """Store the OTLP spans whose parents did not come within the hold's bounds; until the service stops."""
        hold = self.otlp.hold
        while not self._stopping.wait(min(1.0, hold.max_s / 4)):
            store = self._store
            if store is None:
                return
            try:
                self.otlp.sweep(store, self.validation)
            except Exception as exc:  # noqa: BLE001 - the next sweep tries again; a failing one must not end the thread
                why = unavailable(exc)
                if why is not None:
                    store.note_unavailable(why.reason)  # a full disk is said once, not every second
                else:
                    logger.exception("could not store the OTLP spans that waited past the hold's bounds")

    def __enter__(self) -> LocalService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base address, e.g. ``http://127.0.0.1:1984``; append ``/runs/multipart`` and so on."""
        host = self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def store(self) -> RunStore:
        """The run store (only while started)."""
        if self._store is None:
            raise RuntimeError("the local service is not running; call start() first")
        return self._store

    @property
    def shares(self) -> ShareTable:
        """The shared traces (:mod:`._shares`), kept in the store (only while started)."""
        return self.store.shares

    # --- what tests look at -----------------------------------------------------

    def info(self) -> dict[str, Any]:
        """The ``GET /info`` body: what the service's own client may use here.

        Multipart ingest (and zstd when ``zstandard`` is importable), and both read
        APIs: ``ch_query_enabled`` and ``sdb_query_enabled`` together tell the client
        that ``GET /runs/{id}`` and ``POST /runs/query`` answer (``read_run``,
        ``list_runs``) and so does ``/api/v2`` (``client.runs``, ``evaluate``'s
        reads). The version is explained at ``_SERVICE_API_VERSION``.
        """
        return {
            "version": _SERVICE_API_VERSION,
            "license_expiration_time": None,
            "batch_ingest_config": {
                "use_multipart_endpoint": self.multipart,
                "scale_up_qsize_trigger": 1000,
                "scale_up_nthreads_limit": 16,
                "scale_down_nempty_trigger": 4,
                "size_limit": self.batch_items,
                "size_limit_bytes": self.max_body_bytes,
            },
            "instance_flags": {
                "zstd_compression_enabled": self.multipart and zstd_available(),
                "ch_query_enabled": True,
                "sdb_query_enabled": True,
            },
            "local": True,
        }

    def runs(self) -> list[dict[str, Any]]:
        """Posted runs merged with their patches, in order of arrival."""
        return self.store.runs()

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        """One run by id (32-hex or hyphenated), or None."""
        canon = canonical_id(run_id)
        return self.store.get_run(canon) if canon else None

    def trace(self, trace_id: str) -> list[dict[str, Any]]:
        """The runs of one trace in dotted_order (tree) order."""
        canon = canonical_id(trace_id)
        return self.store.runs(trace_id=canon) if canon else []

    def wait_for_runs(self, n: int, timeout: float = 10.0, completed: bool = True) -> list[dict[str, Any]]:
        """Block until at least ``n`` runs are stored (with an end_time when ``completed``).

        Returns the runs counted (posted, and completed when asked). Raises
        TimeoutError saying what did arrive, to tell a slow exporter from a broken one.
        """
        store = self.store

        def current() -> list[dict[str, Any]]:
            return store.completed_runs() if completed else store.runs()

        if store.wait(lambda: len(current()) >= n, timeout):
            return current()
        runs = store.runs()
        done = [r for r in runs if r.get("end_time") is not None]
        check = store.check()
        statuses: dict[int, int] = {}
        for entry in self.requests():
            statuses[entry["status"]] = statuses.get(entry["status"], 0) + 1
        raise TimeoutError(
            f"waited {timeout:g}s for {n} {'completed ' if completed else ''}runs; "
            f"stored {len(runs)} posted runs ({len(done)} completed), "
            f"{len(check['patched_not_posted'])} patched but never posted; "
            f"requests by status {statuses or '{} (no requests reached the service)'}; "
            f"{len(self.violations())} violations"
            + (f", first: {self.violations()[0]['msg']}" if self.violations() else "")
        )

    def violations(self) -> list[dict[str, Any]]:
        """Recorded violations (run_id, rule, msg, loc, path, accepted, at), oldest first."""
        return self.store.violations()

    def requests(self) -> list[dict[str, Any]]:
        """The request log, oldest first.

        Each entry: method, path, status (0 when the connection was dropped),
        content_encoding, body_bytes (as received), part_names (multipart only),
        run_ids, fault (which injected fault fired, or None), client_port (one per
        connection, so keep-alive reuse is visible), duration in seconds, and
        error: for a 4xx or 5xx answer, its first detail message (where, then what;
        clipped), to see why a client was refused without its body.
        """
        return self._request_log.entries()

    def duplicate_posts(self) -> dict[str, int]:
        """run id -> number of extra posts of an already-posted run."""
        return self.store.duplicate_posts()

    def feedback(self) -> list[dict[str, Any]]:
        """Every feedback item kept (multipart ``feedback.<id>`` parts and ``POST /feedback``), oldest first."""
        return self.store.feedback()

    def check(self) -> dict[str, list[Any]]:
        """The ``otel-runs runs check`` report: patched_not_posted, never_completed, missing_parents, ..."""
        return self.store.check()

    def reset(self) -> None:
        """Forget runs, violations, feedback, shares, the request log, rate-limit windows, exports, deployments, auth
        waits, and the OTLP spans waiting for their parents."""
        self.otlp = OtlpIngest(OtlpHold(self.otlp.hold.max_s, self.otlp.hold.max_spans, self.otlp.hold.max_bytes))
        self.store.reset()
        self.control.reset()
        self._request_log.clear()
        if self.rate_limiter is not None:
            self.rate_limiter.reset()
