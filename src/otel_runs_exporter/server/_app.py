"""The local service's HTTP side: routing, auth, rate limits, faults, body decoding.

Built on :class:`http.server.ThreadingHTTPServer` so the package needs no web
framework: one daemon thread per connection, HTTP/1.1 keep-alive, and every
answer carries a Content-Length so clients reuse connections.

Order of checks for a request, each answering on its own if it fails:
rate limit (429), auth (401/403), faults (tracing requests only), body size (413),
Content-Encoding (415), then the endpoint itself (422 for rule violations, and for
read requests :mod:`._query` and :mod:`._projects` cannot answer as asked).
"""

from __future__ import annotations

import hmac
import io
import logging
import re
import selectors
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import orjson

from ._control import ControlPlane, ServiceClock, is_control_route
from ._faults import FaultConfig, FaultDecision
from ._multipart import MultipartError, boundary_from_content_type, parse
from ._numbers import plain_int
from ._projects import NO_WORKSPACE, api_project, parse_project_create, parse_project_list, parse_project_read
from ._query import QueryError, api_run, page_body, parse_run_query
from ._ratelimit import DEFAULT_RULES, SPEC_RULES, RateLimiter, RateRule, scaled
from ._run_stats import parse_stats_query, run_stats
from ._store import ProjectExists, RunStore
from ._validate import (
    ReadResult,
    Violation,
    canonical_id,
    json_depth_exceeds,
    read_basic_patch,
    read_basic_post,
    read_batch,
    read_multipart,
    too_deep,
)
from ._viewer import ViewerFile, viewer_file

__all__ = ["LocalService"]

logger = logging.getLogger(__name__)

_VERSION = "0.1.0"
# The service version /info reports, which is what the service's client gates features on (langsmith 0.15):
# 0.8.10 or later sends feedback in multipart ingest, which this service accepts; 0.16.0 or later is what
# its client.runs / .threads / .traces ... resources want, and those call /api/v2 endpoints this
# service does not have, so the client's "backend older than" warning there is the truth.
_SERVICE_API_VERSION = "0.8.10"
_API_PREFIX = "/api/v1"
_RUN_PATH = re.compile(r"^/runs/(?P<id>[^/]+)/?$")
_SESSION_PATH = re.compile(r"^/sessions/(?P<id>[^/]+)/?$")
_PUBLIC_ROUTES = frozenset({"/ok", "/info"})
_DEFAULT_SIZE_LIMIT = 20 * 1024 * 1024
# A refused request's body is read (to keep the connection) only up to this; past it the
# connection is closed, so an unauthenticated client cannot make us read megabytes.
_DISCARD_MAX = 64 * 1024
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_CHUNK_LINE_MAX = 64
_MAX_TRAILERS = 32
_READ_CHUNK = 1 << 16
_REQUEST_LOG_MAX = 10_000


class _Reply(Exception):
    """Raised inside a handler to answer right away with a status and a JSON body."""

    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None, close: bool = False) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.close = close


def _detail(msg: str, **more: Any) -> dict[str, Any]:
    return {"detail": msg, **more}


def _zstd_available() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


# A zstd frame names the window its decoder must allocate before any output; libzstd
# allows 128 MiB by default, so one small authenticated body could make us allocate that.
# Levels 1-19 use at most 8 MiB (only --ultra levels ask for more).
_ZSTD_MAX_WINDOW = 1 << 23


def _decode_zstd(data: bytes, limit: int | None) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise _Reply(
            415,
            _detail("Content-Encoding zstd needs the optional zstandard package: pip install 'otel-runs-exporter[zstd]'"),
        ) from None
    try:
        window = zstandard.get_frame_parameters(data).window_size
    except zstandard.ZstdError as exc:
        raise _Reply(400, _detail(f"body is not valid zstd: {exc}")) from None
    if window > _ZSTD_MAX_WINDOW:
        raise _Reply(
            413,
            _detail(f"zstd frame asks for a {window}-byte window; at most {_ZSTD_MAX_WINDOW} (zstd levels 1-19)",
                    max_window_size=_ZSTD_MAX_WINDOW),
            close=True,
        )
    # A stream reader, because streaming compressors (the service's own client)
    # write frames without a content size, which ZstdDecompressor.decompress refuses.
    reader = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW).stream_reader(
        io.BytesIO(data), read_across_frames=True
    )
    out = bytearray()
    try:
        while True:
            chunk = reader.read(_READ_CHUNK)
            if not chunk:
                break
            out += chunk
            if limit is not None and len(out) > limit:
                raise _Reply(413, _detail("decompressed body too large", max_size=limit), close=True)
    except zstandard.ZstdError as exc:
        raise _Reply(400, _detail(f"body is not valid zstd: {exc}")) from None
    return bytes(out)


def _decode_gzip(data: bytes, limit: int | None, wbits: int) -> bytes:
    decomp = zlib.decompressobj(wbits)
    try:
        out = decomp.decompress(data, (limit + 1) if limit is not None else 0)
        if limit is not None and (len(out) > limit or decomp.unconsumed_tail):
            raise _Reply(413, _detail("decompressed body too large", max_size=limit), close=True)
        out += decomp.flush()
    except zlib.error as exc:
        raise _Reply(400, _detail(f"body is not valid gzip/deflate: {exc}")) from None
    return out


def decode_body(data: bytes, content_encoding: str | None, limit: int | None) -> bytes:
    """Undo the Content-Encoding codings, last applied first; 415 for unknown ones."""
    if not content_encoding:
        return data
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    for coding in reversed(codings):
        if coding == "identity":
            continue
        if coding in ("gzip", "x-gzip"):
            data = _decode_gzip(data, limit, 16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            data = _decode_gzip(data, limit, zlib.MAX_WBITS)
        elif coding == "zstd":
            data = _decode_zstd(data, limit)
        else:
            raise _Reply(415, _detail(f"unsupported Content-Encoding {coding!r}; use gzip or zstd"))
    return data


_BUSY_BODY = b'{"detail":"the local service is serving as many connections as it can"}'
_BUSY_ANSWER = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)
# How long a refused connection is drained before it is closed, and how many are drained at once.
_BUSY_DRAIN_S = 5.0
_BUSY_DRAIN_MAX = 1024


class _Refuser:
    """Answers connections past the worker limit with a 503, without a thread each.

    The answer goes out at once (it fits in the socket's send buffer); the request is
    then read and thrown away until the client closes, because closing a socket with
    unread bytes sends a TCP reset, which can destroy the 503 before the client reads it.
    """

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._deadlines: dict[socket.socket, float] = {}
        self._thread: threading.Thread | None = None

    def refuse(self, conn: socket.socket) -> None:
        try:
            conn.setblocking(False)
            conn.send(_BUSY_ANSWER)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            conn.close()
            return
        with self._lock:
            if len(self._deadlines) >= _BUSY_DRAIN_MAX:
                conn.close()  # the last resort: bounded even under a flood
                return
            self._deadlines[conn] = time.monotonic() + _BUSY_DRAIN_S
            self._selector.register(conn, selectors.EVENT_READ)
            if self._thread is None:
                self._thread = threading.Thread(target=self._drain, name="otel-runs-local-busy", daemon=True)
                self._thread.start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._deadlines:
                    self._thread = None
                    return
            for key, _ in self._selector.select(0.1):
                try:
                    more = key.fileobj.recv(_READ_CHUNK)  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                except OSError:
                    more = b""
                if not more:
                    self._forget(key.fileobj)  # type: ignore[arg-type]
            now = time.monotonic()
            with self._lock:
                late = [conn for conn, deadline in self._deadlines.items() if deadline < now]
            for conn in late:
                self._forget(conn)

    def _forget(self, conn: socket.socket) -> None:
        with self._lock:
            self._deadlines.pop(conn, None)
            try:
                self._selector.unregister(conn)
            except (KeyError, ValueError):
                pass
        conn.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The stdlib's listen backlog of 5 reset connections under 50 concurrent clients.
    request_queue_size = 1024
    service: LocalService

    def __init__(self, address: tuple[str, int], service: LocalService, max_connections: int) -> None:
        self.service = service
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        # One thread per connection, up to this many; past it a 503 with Retry-After
        # (which clients honour), so idle or slow connections cannot grow the threads without bound.
        self._slots = threading.BoundedSemaphore(max_connections)
        self._refuser = _Refuser()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuser.refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        try:
            super().finish_request(request, client_address)
        finally:
            with self._connections_lock:
                self._connections.discard(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("error while serving %s", client_address, exc_info=True)

    def close_connections(self) -> None:
        """Shut every open connection so idle keep-alive threads stop reading."""
        with self._connections_lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes; with Nagle on, the body waits for the
    # client's delayed ACK (~40 ms per request on a kept-alive connection).
    disable_nagle_algorithm = True
    server_version = "otel-runs-local/" + _VERSION
    timeout = 60  # idle keep-alive connections are closed after this many seconds
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        logger.debug("%s " + format, self.address_string(), *args)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass  # the peer or a dropped-connection fault already closed it

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._handle()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # The stdlib answers a method it has no do_X for with 501; that is the
        # client's mistake, and a 5xx would tell a retrying client to come back.
        if code == HTTPStatus.NOT_IMPLEMENTED:
            code, message = HTTPStatus.METHOD_NOT_ALLOWED, f"method {str(self.command)[:20]!r} is not supported"
        super().send_error(code, message, explain)

    do_POST = do_PATCH = do_PUT = do_DELETE = do_OPTIONS = do_HEAD = do_GET

    # --- plumbing ---------------------------------------------------------------

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None, close: bool = False) -> None:
        if isinstance(body, ViewerFile):
            payload, content_type, headers = body.data, body.content_type, {**body.headers, **(headers or {})}
        else:
            payload = b"" if body is None else orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
            content_type = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _declared_length(self) -> int | None:
        values = self.headers.get_all("Content-Length") or []
        if not values:
            return None
        raw = values[0].strip()
        # One value: two differing lengths are how request smuggling starts.
        length = plain_int(raw)
        if len(set(v.strip() for v in values)) != 1 or length is None:
            raise _Reply(400, _detail(f"Content-Length {raw[:40]!r} is not a whole number of bytes"), close=True)
        return length

    def _read_body(self, limit: int | None) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked(limit)
        length = self._declared_length()
        if length is None:
            if self.command in ("POST", "PATCH", "PUT"):
                raise _Reply(411, _detail("Content-Length required"), close=True)
            return b""
        if limit is not None and length > limit:
            raise _Reply(413, _detail("request body too large", size=length, max_size=limit), close=True)
        data = self.rfile.read(length)
        if len(data) != length:
            raise _Reply(400, _detail("body shorter than Content-Length"), close=True)
        return data

    def _read_chunked(self, limit: int | None) -> bytes:
        """A chunked body, strictly: hex sizes only (no sign, no extensions), CRLF after each chunk."""
        out = bytearray()
        while True:
            line = self.rfile.readline(_CHUNK_LINE_MAX + 1)
            size_text = line.rstrip(b"\r\n")
            if not line.endswith(b"\n") or not _HEX.fullmatch(size_text):
                raise _Reply(
                    400, _detail("malformed chunked body: a chunk size must be 1-16 hex digits, without extensions"), close=True
                )
            size = int(size_text, 16)
            if size == 0:
                for _ in range(_MAX_TRAILERS):
                    if not self.rfile.readline(_CHUNK_LINE_MAX).strip():
                        return bytes(out)
                raise _Reply(400, _detail("too many trailer lines in a chunked body"), close=True)
            if limit is not None and len(out) + size > limit:
                raise _Reply(413, _detail("request body too large", max_size=limit), close=True)
            chunk = self.rfile.read(size)
            if len(chunk) != size or self.rfile.read(2) != b"\r\n":
                raise _Reply(400, _detail("malformed chunked body: a chunk is shorter than its size"), close=True)
            out += chunk

    def _discard_body(self) -> None:
        # Reading an early-refused request's body keeps the connection usable; a
        # body too large to bother with closes the connection instead.
        try:
            length = self._declared_length()
        except _Reply:
            self.close_connection = True
            return
        if length is None and "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return
        if length is not None and length <= _DISCARD_MAX:
            remaining = length
            while remaining > 0:
                chunk = self.rfile.read(min(remaining, _READ_CHUNK))
                if not chunk:
                    break
                remaining -= len(chunk)
        else:
            self.close_connection = True

    # --- the request ------------------------------------------------------------

    def _handle(self) -> None:
        service = self.server.service
        started = time.monotonic()
        path = urlsplit(self.path).path
        route = path[len(_API_PREFIX) :] if path == _API_PREFIX or path.startswith(_API_PREFIX + "/") else path
        route = route or "/"
        headers = {k.lower(): v for k, v in self.headers.items()}
        entry: dict[str, Any] = {
            "method": self.command,
            "path": path,
            "status": None,
            "content_encoding": headers.get("content-encoding"),
            "body_bytes": 0,
            "part_names": None,
            "run_ids": [],
            "fault": None,
            "client_port": self.client_address[1] if isinstance(self.client_address, tuple) else None,
        }
        service._enter()
        try:
            try:
                status, body, extra_headers, close = self._dispatch(service, route, headers, entry)
            except _Reply as reply:
                status, body, extra_headers, close = reply.status, reply.body, reply.headers, reply.close
            except (ConnectionError, socket.timeout):
                status, body, extra_headers, close = 0, None, {}, True
            except Exception:
                logger.exception("local service failed on %s %s", self.command, path)
                status, body, extra_headers, close = 500, _detail("internal error in the local service"), {}, True
            # Logged before answering, so a client that has its answer also finds the entry.
            entry["status"] = status
            entry["duration"] = round(time.monotonic() - started, 6)
            service._log_request(entry)
            if status == 0:
                self._drop()
            else:
                self._send(status, body, extra_headers, close)
        except OSError:
            self.close_connection = True  # the client went away mid-answer
        finally:
            service._exit()

    def _dispatch(
        self, service: LocalService, route: str, headers: dict[str, str], entry: dict[str, Any]
    ) -> tuple[int, Any, dict[str, str], bool]:
        method = self.command
        if service._stopping.is_set():
            self._discard_body()
            raise _Reply(503, _detail("the local service is shutting down"), close=True)
        if method in ("GET", "HEAD"):
            # The viewer's files are public and outside the rate limits: they are not the
            # service's interface, and a limited page could not say why it stopped working.
            page = viewer_file(urlsplit(self.path).path)
            if page is not None:
                self._discard_body()
                return 200, page, {}, False
        if service.rate_limiter is not None:
            refusal = service.rate_limiter.hit(method, route, headers, self.client_address[0])
            if refusal is not None:
                self._discard_body()
                raise _Reply(429, _detail(refusal.message), {"Retry-After": str(refusal.retry_after)})
        if method == "OPTIONS":
            # A CORS preflight has no body to read: answer from the headers alone,
            # before any body is read, let alone decompressed.
            self._discard_body()
            return 204, None, {"Allow": "GET, POST, PATCH, PUT, DELETE, OPTIONS, HEAD"}, False
        if len(self.headers.get_all("x-api-key") or []) > 1:
            self._discard_body()
            raise _Reply(400, _detail("more than one x-api-key header; send exactly one"), close=True)
        if route in _PUBLIC_ROUTES:
            # No key is asked here, so no body is decoded either: a zstd bomb sent to /info
            # would otherwise be decompressed (to the body limit) for anyone.
            self._discard_body()
            status, body = self._route(service, method, route, headers, b"", entry)
            return status, body, {}, False
        self._authenticate(service, headers, control_plane=urlsplit(self.path).path.startswith("/v2/"))

        tracing = _is_tracing(method, route)
        decision = service.faults.decide() if tracing else FaultDecision()
        if decision.reason:
            entry["fault"] = decision.reason
        if decision.action == "drop_before_read":
            return 0, None, {}, True

        limit = service.max_body_bytes
        raw = self._read_body(limit)
        entry["body_bytes"] = len(raw)
        if decision.delay:
            service._stopping.wait(decision.delay)
        if decision.action == "status":
            assert decision.status is not None
            hdrs = {}
            if decision.status in (429, 503) and decision.retry_after is not None:
                hdrs["Retry-After"] = f"{decision.retry_after:g}"
            try:
                msg = HTTPStatus(decision.status).phrase
            except ValueError:
                msg = "Injected status"
            return decision.status, _detail(f"{msg} (fault injection: {decision.reason})"), hdrs, False

        data = decode_body(raw, headers.get("content-encoding"), limit) if raw else raw
        try:
            status, body = self._route(service, method, route, headers, data, entry)
        except QueryError as exc:  # a read request the service cannot answer as asked
            status, body = 422, exc.as_detail()
        if decision.action == "drop":
            return 0, None, {}, True
        return status, body, {}, False

    def _authenticate(self, service: LocalService, headers: dict[str, str], control_plane: bool = False) -> None:
        key = service._api_key
        bearer = service._bearer_token
        # Spec 5: the control plane also lists a Bearer scheme; a right bearer token
        # stands in for the API key there (and a wrong one is refused, not ignored).
        given_bearer = headers.get("authorization", "")
        if control_plane and bearer is not None and given_bearer:
            scheme, _, value = given_bearer.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), bearer.encode()):
                self._discard_body()
                raise _Reply(401, _detail("invalid bearer token"))
            key = None
        if key is not None:
            given = headers.get("x-api-key", "")
            if not hmac.compare_digest(given.encode(), key.encode()):
                self._discard_body()
                raise _Reply(401, _detail("missing or invalid x-api-key"))
        workspace = service.workspace_id
        if workspace is not None and headers.get("x-tenant-id", "").lower() != workspace.lower():
            self._discard_body()
            raise _Reply(403, _detail("x-tenant-id does not name this service's workspace"))

    def _route(
        self, service: LocalService, method: str, route: str, headers: dict[str, str], data: bytes, entry: dict[str, Any]
    ) -> tuple[int, Any]:
        if route == "/ok" and method in ("GET", "HEAD"):
            return 200, {"ok": True}
        parts = urlsplit(self.path)
        if is_control_route(parts.path, route):
            reply = service.control.handle(method, parts.path, route, parts.query, headers, data, service._stopping)
            if reply.headers:
                raise _Reply(reply.status, reply.body, reply.headers)
            return reply.status, reply.body
        if route == "/info" and method in ("GET", "HEAD"):
            return 200, service.info()
        if route in ("/runs/multipart", "/runs/multipart/"):
            if not service.multipart:
                return 404, _detail("Not Found")
            if method != "POST":
                return 405, _detail("Method Not Allowed")
            return service._ingest(self._read_multipart(data, headers, entry), route, entry)
        if route in ("/runs/batch", "/runs/batch/"):
            if method != "POST":
                return 405, _detail("Method Not Allowed")
            return service._ingest(read_batch(_json_body(data)), route, entry)
        if route in ("/runs/query", "/runs/query/"):
            if method != "POST":
                return 405, _detail("Method Not Allowed")
            return service._query_runs(_json_body(data))
        if route in ("/runs/stats", "/runs/stats/"):
            if method != "POST":
                return 405, _detail("Method Not Allowed")
            return service._run_stats(_json_body(data))
        if route in ("/sessions", "/sessions/"):
            if method in ("GET", "HEAD"):
                return service._list_projects(parts.query)
            if method == "POST":
                return service._create_project(_json_body(data), parts.query)
            return 405, _detail("Method Not Allowed")
        match = _SESSION_PATH.match(route)
        if match:
            if method not in ("GET", "HEAD"):
                return 405, _detail("Method Not Allowed")
            return service._read_project(match["id"], parts.query)
        if route in ("/runs", "/runs/"):
            if method != "POST":
                return 405, _detail("Method Not Allowed")
            result = read_basic_post(_json_body(data), service.store.get_run)
            status, body = service._ingest(result, route, entry)
            if status == 202 and result.ops:
                run = result.ops[0].data
                body = {"id": run["id"], "trace_id": run.get("trace_id"), "dotted_order": run.get("dotted_order")}
            return status, body
        match = _RUN_PATH.match(route)
        if match:
            if method == "PATCH":
                status, body = service._ingest(read_basic_patch(match["id"], _json_body(data)), route, entry)
                if status == 202:
                    body = {"id": canonical_id(match["id"])}
                return status, body
            if method in ("GET", "HEAD"):
                return service._read_run(match["id"])
            return 405, _detail("Method Not Allowed")
        return 404, _detail("Not Found")

    def _read_multipart(self, data: bytes, headers: dict[str, str], entry: dict[str, Any]) -> ReadResult:
        try:
            parts = parse(data, boundary_from_content_type(headers.get("content-type")))
        except MultipartError as exc:
            raise _Reply(422, {"detail": [Violation(None, "multipart", str(exc)).as_error()]}) from None
        entry["part_names"] = [p.name for p in parts]
        return read_multipart(parts)


def _json_body(data: bytes) -> Any:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise _Reply(422, {"detail": [Violation(None, "json", f"body is not valid JSON ({exc})").as_error()]}) from None
    if json_depth_exceeds(value):
        raise _Reply(422, {"detail": [too_deep(None, ("body",)).as_error()]})
    return value


def _is_tracing(method: str, route: str) -> bool:
    if method == "POST":
        return route.rstrip("/") in ("/runs", "/runs/multipart", "/runs/batch")
    return method == "PATCH" and _RUN_PATH.match(route) is not None


class LocalService:
    """The tracing part of the service, on loopback, for tests, demos and offline use.

    Example::

        with LocalService() as svc:
            ...  # point an exporter at svc.url
            runs = svc.wait_for_runs(3)

    ``api_key`` and ``workspace_id`` turn on auth (401 for a missing or wrong
    ``x-api-key``, 403 for a missing or wrong ``x-tenant-id``). ``lenient`` records
    rule violations and stores the runs anyway instead of answering 422.
    ``rate_limits`` is True for spec 8.1's table or a sequence of :class:`RateRule`
    to use instead; ``rate_limit_scale`` divides every rule's count and
    ``rate_limit_window_scale`` its window, so a test reaches in seconds, with a
    few clients, what takes a fleet in production. ``request_log`` names a file
    to which each answered request is appended as one JSON line (``at``: Unix
    time it arrived, ``method``, ``path``, ``status``, ``runs`` and
    ``run_ids`` stored, ``body_bytes``, ``duration``, ``client_port``), for measuring a client's pacing from another
    process. ``clock_speed`` runs bulk exports, deployments and auth waits
    (:attr:`control`, a :class:`~._control.ControlPlane`) that many times faster than
    real time; ``deploy_delay_s`` is how long a revision takes to reach DEPLOYED;
    ``bearer_token`` is accepted as ``Authorization: Bearer`` on ``/v2`` paths.
    ``multipart=False`` hides the multipart endpoint (404) so a client
    must fall back to basic tracing. ``max_body_bytes`` (default 20 MiB, what ``/info``
    advertises) answers larger bodies, raw or decompressed, with 413.
    ``max_connections`` bounds the connections served at once (one thread each);
    past it a connection is answered 503 with ``Retry-After: 1`` and closed.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        workspace_id: str | None = None,
        db: str = ":memory:",
        lenient: bool = False,
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
    ) -> None:
        self.host = host
        self.port = port
        self._api_key = api_key
        self.workspace_id = workspace_id
        self.db = str(db)
        self.lenient = lenient
        self.multipart = multipart
        # The limit /info advertises is the one enforced, raw and again while decompressing.
        self.max_body_bytes = max_body_bytes if max_body_bytes is not None else _DEFAULT_SIZE_LIMIT
        self.faults = faults if faults is not None else FaultConfig()
        self._bearer_token = bearer_token
        self.max_connections = max_connections
        self.control = ControlPlane(ServiceClock(clock_speed), deploy_delay_s=deploy_delay_s)
        k, w = rate_limit_scale, rate_limit_window_scale
        if rate_limits is True:
            self.rate_limiter: RateLimiter | None = RateLimiter(scaled(SPEC_RULES, k, w), scaled(DEFAULT_RULES, k, w))
        elif rate_limits:
            self.rate_limiter = RateLimiter(scaled(rate_limits, k, w), ())
        else:
            self.rate_limiter = None
        self._request_log_path = request_log
        self._request_log: Any = None
        self._store: RunStore | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._log: deque[dict[str, Any]] = deque(maxlen=_REQUEST_LOG_MAX)
        self._log_lock = threading.Lock()
        self._inflight = 0
        self._idle = threading.Condition()

    def __repr__(self) -> str:
        # The api key stays out: reprs end up in logs and test reports.
        auth = "on" if self._api_key is not None else "off"
        return f"LocalService(url={self.url if self._server else None!r}, db={self.db!r}, auth={auth})"

    @property
    def requires_api_key(self) -> bool:
        """Whether requests need an ``x-api-key`` (the key itself is not exposed)."""
        return self._api_key is not None

    # --- lifecycle --------------------------------------------------------------

    def start(self) -> LocalService:
        """Open the store, bind, and serve on a daemon thread; returns self."""
        if self._server is not None:
            return self
        self._stopping.clear()
        self._store = RunStore(self.db)
        if self._request_log_path is not None and self._request_log is None:
            self._request_log = open(self._request_log_path, "a", encoding="utf-8", buffering=1)
        try:
            self._server = _Server((self.host, self.port), self, self.max_connections)
        except BaseException:
            self._store.close()
            self._store = None
            if self._request_log is not None:
                self._request_log.close()
                self._request_log = None
            raise
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="otel-runs-local-service", daemon=True
        )
        self._thread.start()
        logger.info("local service listening on %s (db %s)", self.url, self.db)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, let requests in flight finish (up to ``timeout``), close the store."""
        server = self._server
        if server is None:
            return
        self._stopping.set()  # also cuts short slow-answer faults
        server.shutdown()
        with self._idle:
            self._idle.wait_for(lambda: self._inflight == 0, timeout)
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout)
        self._server = None
        self._thread = None
        if self._store is not None:
            self._store.close()
            self._store = None
        with self._log_lock:
            if self._request_log is not None:
                self._request_log.close()
                self._request_log = None
        logger.info("local service stopped")

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

    # --- what tests look at -----------------------------------------------------

    def info(self) -> dict[str, Any]:
        """The ``GET /info`` body: what the service's own client may use here.

        Multipart ingest (and zstd when ``zstandard`` is importable), and the v1
        read API: ``ch_query_enabled`` without ``sdb_query_enabled`` keeps the
        client's ``read_run``/``list_runs`` on ``GET /runs/{id}`` and
        ``POST /runs/query`` rather than the ``/api/v2`` endpoints it uses
        otherwise. The version is explained at ``_SERVICE_API_VERSION``.
        """
        return {
            "version": _SERVICE_API_VERSION,
            "license_expiration_time": None,
            "batch_ingest_config": {
                "use_multipart_endpoint": self.multipart,
                "scale_up_qsize_trigger": 1000,
                "scale_up_nthreads_limit": 16,
                "scale_down_nempty_trigger": 4,
                "size_limit": 100,
                "size_limit_bytes": self.max_body_bytes,
            },
            "instance_flags": {
                "zstd_compression_enabled": self.multipart and _zstd_available(),
                "ch_query_enabled": True,
                "sdb_query_enabled": False,
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
        connection, so keep-alive reuse is visible) and duration in seconds.
        """
        with self._log_lock:
            return [dict(e) for e in self._log]

    def duplicate_posts(self) -> dict[str, int]:
        """run id -> number of extra posts of an already-posted run."""
        return self.store.duplicate_posts()

    def feedback(self) -> list[dict[str, Any]]:
        """Feedback parts received in multipart requests."""
        return self.store.feedback()

    def check(self) -> dict[str, list[Any]]:
        """The ``otel-runs runs check`` report: patched_not_posted, never_completed, missing_parents, ..."""
        return self.store.check()

    def reset(self) -> None:
        """Forget runs, violations, feedback, the request log, rate-limit windows, exports, deployments and auth waits."""
        self.store.reset()
        self.control.reset()
        with self._log_lock:
            self._log.clear()
        if self.rate_limiter is not None:
            self.rate_limiter.reset()

    # --- called by the handler ---------------------------------------------------

    def _enter(self) -> None:
        with self._idle:
            self._inflight += 1

    def _exit(self) -> None:
        with self._idle:
            self._inflight -= 1
            self._idle.notify_all()

    def _log_request(self, entry: dict[str, Any]) -> None:
        with self._log_lock:
            self._log.append(entry)
            if self._request_log is not None:
                line = {
                    "at": round(time.time() - (entry.get("duration") or 0.0), 6),
                    "method": entry["method"],
                    "path": entry["path"],
                    "status": entry["status"],
                    "runs": len(entry["run_ids"]),
                    "run_ids": entry["run_ids"],
                    "body_bytes": entry["body_bytes"],
                    "duration": entry.get("duration"),
                    "client_port": entry["client_port"],
                }
                self._request_log.write(orjson.dumps(line).decode() + "\n")

    # --- the read API (runs and projects) -------------------------------------------

    @property
    def _tenant_id(self) -> str:
        return canonical_id(self.workspace_id) or NO_WORKSPACE

    def _read_run(self, raw_id: str) -> tuple[int, Any]:
        run_id = canonical_id(raw_id)
        run = self.store.get_run(run_id) if run_id else None
        if run is None:
            return 404, _detail(f"run {raw_id} not found")
        return 200, api_run(run, self.store.project_of_run(run["id"]))

    def _query_runs(self, body: Any) -> tuple[int, Any]:
        query = parse_run_query(body)
        # One run past the page says whether a next page exists.
        found = self.store.query_runs(
            query.where.sql, query.where.params, order=query.order, after=query.after, limit=query.page_size + 1
        )
        return 200, page_body(found, query)

    def _run_stats(self, body: Any) -> tuple[int, Any]:
        query = parse_stats_query(body)
        return 200, run_stats(self.store.summarize(query.where.sql, query.where.params))

    def _list_projects(self, query_string: str) -> tuple[int, Any]:
        query = parse_project_list(query_string)
        if query.match_none:
            return 200, []
        projects = self.store.projects(
            ids=query.ids, name=query.name, name_contains=query.name_contains, limit=query.limit, offset=query.offset
        )
        stats = self.store.project_stats([p["id"] for p in projects]) if query.include_stats else {}
        tenant = self._tenant_id
        return 200, [api_project(p, tenant, stats.get(p["id"]), include_stats=query.include_stats) for p in projects]

    def _read_project(self, raw_id: str, query_string: str) -> tuple[int, Any]:
        include_stats = parse_project_read(query_string)
        project_id = canonical_id(raw_id)
        if project_id is None:
            raise QueryError(("path", "project_id"), f"project id {raw_id[:60]!r} is not a UUID")
        project = self.store.project(project_id)
        if project is None:
            return 404, _detail(f"project {project_id} not found")
        stats = self.store.project_stats([project_id]).get(project_id) if include_stats else None
        return 200, api_project(project, self._tenant_id, stats, include_stats=include_stats)

    def _create_project(self, body: Any, query_string: str) -> tuple[int, Any]:
        wanted = parse_project_create(body, query_string)
        try:
            project, created = self.store.create_project(
                name=wanted.name,
                project_id=wanted.project_id,
                description=wanted.description,
                extra=wanted.extra,
                reference_dataset_id=wanted.reference_dataset_id,
                start_time=wanted.start_time,
                end_time=wanted.end_time,
                upsert=wanted.upsert,
            )
        except ProjectExists as exc:
            return 409, _detail(str(exc), id=exc.project["id"])
        return (201 if created else 200), api_project(project, self._tenant_id)

    def _ingest(self, result: ReadResult, path: str, entry: dict[str, Any]) -> tuple[int, Any]:
        entry["run_ids"] = sorted(result.run_ids)
        rejected = self.faults.rejected(result.run_ids)
        if rejected:
            detail = [
                {
                    "loc": ["body", run_id],
                    "msg": f"run {run_id} rejected (fault injection: reject_run_ids); nothing in this request was stored",
                    "type": "runs.rejected",
                }
                for run_id in rejected
            ]
            entry["fault"] = "reject_run_ids"
            return 422, {"detail": detail}
        store = self.store
        if result.violations:
            store.record_violations(result.violations, path=path, accepted=self.lenient)
            for violation in result.violations[:5]:
                logger.info("rule violation on %s: %s", path, violation.as_error()["msg"])
            if not self.lenient:
                return 422, {"detail": [v.as_error() for v in result.violations]}
        applied = store.apply(result.ops, result.feedback)
        return 202, {"post": applied.posted, "patch": applied.patched, "duplicates": applied.duplicates}
