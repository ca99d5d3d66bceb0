"""The local service's HTTP framing: connections, bodies, encodings and the request log.

Built on :class:`http.server.ThreadingHTTPServer` so the package needs no web
framework: one daemon thread per connection (up to ``max_connections``, past which a
503 goes out without a thread), HTTP/1.1 keep-alive, and every answer carries a
Content-Length so clients reuse connections.

A thread per connection means a slow client holds a slot, so what a client may take
is bounded (:class:`ConnectionLimits`): a request head has a total deadline, a body a
minimum rate, and when every slot is taken a new connection takes the slot of the
oldest unfinished head (else the oldest idle connection) instead of being refused.
:class:`ConnectionSlots` keeps that count, and a separate one for long-lived answers.

This module knows nothing of routes. Each request becomes an :class:`Exchange`
handed to the service's ``app`` (:class:`._dispatch.Dispatcher`), which decides
whether the body is read (:meth:`Exchange.read_body`: Content-Length or strictly
chunked, bounded), thrown away (:meth:`Exchange.discard_body`) or decoded
(:func:`decode_body`: gzip, deflate, zstd, with the output bounded too), and returns
a :class:`~._reply.Reply`. The framing sends it, or closes the connection for status 0,
and appends the request to the :class:`RequestLog` before answering.
"""

from __future__ import annotations

import io
import logging
import re
import selectors
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import orjson

from .. import __version__
from ._numbers import plain_int
from ._reply import DROP, Refuse, Reply, detail

__all__ = ["ConnectionLimits", "ConnectionSlots", "Exchange", "RequestLog", "HttpServer", "decode_body", "App"]

logger = logging.getLogger(__name__)

# A refused request's body is read (to keep the connection) only up to this; past it the
# connection is closed, so an unauthenticated client cannot make us read megabytes.
_DISCARD_MAX = 64 * 1024
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_CHUNK_LINE_MAX = 64
_MAX_TRAILERS = 32
_READ_CHUNK = 1 << 16
_REQUEST_LOG_MAX = 10_000


def zstd_available() -> bool:
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
        raise Refuse(
            415,
            detail("Content-Encoding zstd needs the optional zstandard package: pip install 'otel-runs-exporter[zstd]'"),
        ) from None
    try:
        window = zstandard.get_frame_parameters(data).window_size
    except zstandard.ZstdError as exc:
        raise Refuse(400, detail(f"body is not valid zstd: {exc}")) from None
    if window > _ZSTD_MAX_WINDOW:
        raise Refuse(
            413,
            detail(f"zstd frame asks for a {window}-byte window; at most {_ZSTD_MAX_WINDOW} (zstd levels 1-19)",
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
                raise Refuse(413, detail("decompressed body too large", max_size=limit), close=True)
    except zstandard.ZstdError as exc:
        raise Refuse(400, detail(f"body is not valid zstd: {exc}")) from None
    return bytes(out)


def _decode_gzip(data: bytes, limit: int | None, wbits: int) -> bytes:
    decomp = zlib.decompressobj(wbits)
    try:
        out = decomp.decompress(data, (limit + 1) if limit is not None else 0)
        if limit is not None and (len(out) > limit or decomp.unconsumed_tail):
            raise Refuse(413, detail("decompressed body too large", max_size=limit), close=True)
        out += decomp.flush()
    except zlib.error as exc:
        raise Refuse(400, detail(f"body is not valid gzip/deflate: {exc}")) from None
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
            raise Refuse(415, detail(f"unsupported Content-Encoding {coding!r}; use gzip or zstd"))
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


@dataclass(frozen=True)
class ConnectionLimits:
    """What one client may take of the service: slots, and time.

    ``max_connections`` connections are served at once, a thread each. A connection
    waits ``idle_timeout_s`` for a request to begin (the first one, and each next one
    on a kept-alive connection); from its first byte the request head (request line
    and headers) has ``head_timeout_s`` in all, however the bytes trickle in. A body
    must keep coming: no pause longer than ``body_grace_s``, and after that grace
    period at least ``min_body_rate`` bytes/s on average since the head ended (else
    408 and the connection is closed). ``max_streams`` long-lived answers (server-sent
    events) are counted apart from the request slots.
    """

    max_connections: int = 512
    idle_timeout_s: float = 60.0
    head_timeout_s: float = 5.0
    min_body_rate: int = 1024
    body_grace_s: float = 5.0
    max_streams: int = 32

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_streams", "min_body_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "min_body_rate" else 1):
                raise ValueError(f"{name} must be a whole number of at least {0 if name == 'min_body_rate' else 1}, got {value!r}")
        for name in ("idle_timeout_s", "head_timeout_s", "body_grace_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ValueError(f"{name} must be a number of seconds greater than 0, got {value!r}")


# What a connection is doing, which decides how long its next read may wait and
# whether it may be closed to make room.
IDLE, HEAD, BODY, ANSWER = "idle", "head", "body", "answer"
# Connections closed to make room but whose threads have not ended yet: past this many, a
# new connection is refused (503) rather than closing more, so threads stay bounded.
_MAX_CLOSING = 64


class Connection:
    """One served connection: its phase, since when, and the body bytes it has sent."""

    __slots__ = ("sock", "phase", "since", "received", "closing", "stream", "_limits", "_lock")

    def __init__(self, sock: socket.socket, limits: ConnectionLimits, now: float, lock: threading.Lock) -> None:
        self.sock = sock
        self.phase = IDLE
        self.since = now
        self.received = 0
        self.closing = False
        self.stream = False  # holds a stream slot, not a request slot, until it ends
        self._limits = limits
        self._lock = lock  # the slots' lock: a connection is not chosen to close while it changes phase

    def waiting(self) -> None:
        """Answered: the connection waits for its next request."""
        with self._lock:
            self.phase, self.since = IDLE, time.monotonic()

    def reading_body(self) -> None:
        """The head is read; what is read next is the body."""
        with self._lock:
            self.phase, self.since, self.received = BODY, time.monotonic(), 0

    def answering(self) -> None:
        """The body is read (or not needed): no read is expected until the answer is sent."""
        self.phase = ANSWER

    def read_timeout(self, now: float) -> tuple[float, str]:
        """How long the next read may wait, and what was too slow when it cannot wait at all."""
        limits = self._limits
        if self.phase == HEAD:
            return self.since + limits.head_timeout_s - now, f"request head not finished within {limits.head_timeout_s:g}s"
        if self.phase == BODY:
            grace = limits.body_grace_s
            due = self.since + grace + (self.received / limits.min_body_rate if limits.min_body_rate else float("inf"))
            return min(due - now, grace), (
                f"request body arrived slower than {limits.min_body_rate} bytes/s (or paused more than {grace:g}s)"
            )
        return self.since + limits.idle_timeout_s - now, f"no request within {limits.idle_timeout_s:g}s"

    def got(self, count: int, now: float) -> None:
        if self.phase == IDLE:
            with self._lock:
                self.phase, self.since = HEAD, now  # the head's deadline runs from its first byte
        elif self.phase == BODY:
            self.received += count


class ConnectionSlots:
    """Counts the connections served: request slots, long-lived answer slots, and which to close to make room.

    A connection takes a request slot when accepted (:meth:`admit`). With every slot
    taken, a new connection closes the one whose unfinished head is oldest, else the
    connection idle longest, and takes its slot: slow clients cannot keep new ones
    out, and a connection in the middle of a body or an answer is never cut. A
    long-lived answer moves its connection to a stream slot (:meth:`open_stream`),
    capped apart, so streams never use up request slots nor request slots streams.
    """

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._live: dict[socket.socket, Connection] = {}
        self._requests = 0
        self._streams = 0
        self._closing = 0

    def admit(self, sock: socket.socket) -> Connection | None:
        """A request slot for a new connection, closing a slow one for it if need be; None when full."""
        now = time.monotonic()
        with self._lock:
            if self._requests >= self.limits.max_connections:
                victim = self._victim() if self._closing < _MAX_CLOSING else None
                if victim is None:
                    return None
                victim.closing = True
                self._requests -= 1
                self._closing += 1
                try:
                    # Wakes the victim's thread from its read (end of stream); it ends and releases.
                    victim.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            conn = Connection(sock, self.limits, now, self._lock)
            self._live[sock] = conn
            self._requests += 1
            return conn

    def _victim(self) -> Connection | None:
        oldest_head: Connection | None = None
        oldest_idle: Connection | None = None
        for conn in self._live.values():
            if conn.closing or conn.stream:
                continue
            if conn.phase == HEAD and (oldest_head is None or conn.since < oldest_head.since):
                oldest_head = conn
            elif conn.phase == IDLE and (oldest_idle is None or conn.since < oldest_idle.since):
                oldest_idle = conn
        return oldest_head or oldest_idle

    def get(self, sock: socket.socket) -> Connection | None:
        with self._lock:
            return self._live.get(sock)

    def release(self, conn: Connection) -> None:
        """The connection's thread has ended: its slot is free."""
        with self._lock:
            if self._live.pop(conn.sock, None) is None:
                return
            if conn.stream:
                self._streams -= 1
            elif conn.closing:
                self._closing -= 1
            else:
                self._requests -= 1

    def open_stream(self, conn: Connection) -> bool:
        """Move a connection from its request slot to a stream slot, held until it ends; False at the streams' cap."""
        with self._lock:
            if conn.stream or conn.closing or conn.sock not in self._live:
                return conn.stream
            if self._streams >= self.limits.max_streams:
                return False
            self._streams += 1
            self._requests -= 1
            conn.stream = True
            return True

    def counts(self) -> dict[str, int]:
        """Connections holding request slots, stream slots, and closed to make room but not yet ended."""
        with self._lock:
            return {"requests": self._requests, "streams": self._streams, "closing": self._closing}

    def sockets(self) -> list[socket.socket]:
        with self._lock:
            return list(self._live)


class _PacedReader(io.RawIOBase):
    """A connection's socket as the handler reads it: each read waits only as long as the connection's phase allows.

    The socket's own timeout applies per read, so a byte every few seconds kept a
    head going for ever; here each read gets what is left of the phase's deadline.
    """

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self._conn = conn

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        conn = self._conn
        now = time.monotonic()
        timeout, why = conn.read_timeout(now)
        if timeout <= 0:
            raise socket.timeout(why)
        conn.sock.settimeout(timeout)
        try:
            count = conn.sock.recv_into(buffer)
        except socket.timeout:
            raise socket.timeout(why) from None
        conn.got(count, time.monotonic())
        return count


class HttpServer(ThreadingHTTPServer):
    """Serves connections on daemon threads and hands each request to ``app``; counts the requests in flight.

    :meth:`wait_idle` lets a stopping service finish what it answers before closing
    the connections (:meth:`close_connections`) and the store.
    """

    daemon_threads = True
    allow_reuse_address = True
    # The stdlib's listen backlog of 5 reset connections under 50 concurrent clients.
    request_queue_size = 1024

    def __init__(
        self, address: tuple[str, int], app: App, request_log: RequestLog, limits: ConnectionLimits | None = None
    ) -> None:
        self.app = app
        self.request_log = request_log
        # One thread per connection, up to this many; past it a slow connection is closed
        # for the new one, or a 503 with Retry-After (which clients honour) when none is slow.
        self.slots = ConnectionSlots(limits if limits is not None else ConnectionLimits())
        self._refuser = _Refuser()
        self._inflight = 0
        self._idle = threading.Condition()
        super().__init__(address, _Handler)

    @property
    def limits(self) -> ConnectionLimits:
        return self.slots.limits

    def enter(self) -> None:
        """A request is being answered."""
        with self._idle:
            self._inflight += 1

    def exit(self) -> None:
        with self._idle:
            self._inflight -= 1
            self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the requests being answered to finish."""
        with self._idle:
            return self._idle.wait_for(lambda: self._inflight == 0, timeout)

    def process_request(self, request: Any, client_address: Any) -> None:
        conn = self.slots.admit(request)
        if conn is None:
            self._refuser.refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release(conn)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            conn = self.slots.get(request)
            if conn is not None:
                self.slots.release(conn)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("error while serving %s", client_address, exc_info=True)

    def close_connections(self) -> None:
        """Shut every open connection so idle keep-alive threads stop reading."""
        for conn in self.slots.sockets():
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


App = Callable[["Exchange"], Reply]
"""What the framing calls for each request: the service's dispatcher."""


_ERROR_TEXT_MAX = 300


def _error_text(reply: Reply) -> str | None:
    """What a 4xx or 5xx answer said, for the request log: its first detail message, clipped.

    >>> _error_text(Reply(422, {"detail": [{"loc": ["body", "is_root"], "msg": "is_root must be true or false"}]}))
    'body.is_root: is_root must be true or false'
    >>> _error_text(Reply(202, {"post": []})) is None
    True
    """
    if reply.status < 400 or not isinstance(reply.body, dict):
        return None
    found = reply.body.get("detail")
    if isinstance(found, list) and found and isinstance(found[0], dict):
        loc = found[0].get("loc")
        where = ".".join(str(p) for p in loc) + ": " if isinstance(loc, list) and loc else ""
        found = where + str(found[0].get("msg", ""))
    if not isinstance(found, str):
        return None
    return found if len(found) <= _ERROR_TEXT_MAX else found[: _ERROR_TEXT_MAX - 1] + "…"


class RequestLog:
    """The last 10,000 answered requests, oldest first, and each as a JSON line in ``path`` when given.

    The file is for measuring a client's pacing from another process; see
    :meth:`LocalService.requests <._app.LocalService.requests>` for the entries' fields.
    """

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._entries: deque[dict[str, Any]] = deque(maxlen=_REQUEST_LOG_MAX)
        self._lock = threading.Lock()
        self._file: Any = None

    def open(self) -> None:
        """Open the file (append, line-buffered), if there is one and it is not open."""
        with self._lock:
            if self.path is not None and self._file is None:
                self._file = open(self.path, "a", encoding="utf-8", buffering=1)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def append(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._entries.append(entry)
            if self._file is not None:
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
                    "error": entry.get("error"),
                }
                self._file.write(orjson.dumps(line).decode() + "\n")

    def entries(self) -> list[dict[str, Any]]:
        """Copies of the entries, oldest first."""
        with self._lock:
            return [dict(e) for e in self._entries]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class Exchange:
    """One request as the framing received it: what the dispatcher reads, and the body on demand.

    ``path`` is the URL path as sent (no query), ``headers`` has lower-case names,
    ``log`` is this request's entry in the :class:`RequestLog` (the dispatcher and the
    handlers note ``run_ids``, ``part_names``, ``fault`` and ``body_bytes`` in it).
    """

    def __init__(self, handler: _Handler, path: str, query: str, headers: dict[str, str], log: dict[str, Any]) -> None:
        self._handler = handler
        self.method: str = handler.command
        self.path = path
        self.query = query
        self.headers = headers
        self.client_ip: str = handler.client_address[0] if isinstance(handler.client_address, tuple) else ""
        self.log = log

    @property
    def local_ip(self) -> str:
        """The address the client connected to: one of ours, whatever the service is bound to."""
        try:
            return str(self._handler.connection.getsockname()[0])
        except (OSError, AttributeError, IndexError, TypeError):
            return ""

    def header_count(self, name: str) -> int:
        """How many times the header ``name`` was sent."""
        return len(self._handler.headers.get_all(name) or [])

    def _declared_length(self) -> int | None:
        values = self._handler.headers.get_all("Content-Length") or []
        if not values:
            return None
        raw = values[0].strip()
        # One value: two differing lengths are how request smuggling starts.
        length = plain_int(raw)
        if len(set(v.strip() for v in values)) != 1 or length is None:
            raise Refuse(400, detail(f"Content-Length {raw[:40]!r} is not a whole number of bytes"), close=True)
        return length

    def _framing(self) -> tuple[bool, int | None]:
        """(chunked, Content-Length) as the headers frame the body; 400 for any framing the service cannot trust.

        Checked on every route, read or not: a request whose end cannot be found
        must not be answered as if it were fine (an ``OPTIONS`` with a chunk size of
        -1 got 204), and the connection cannot be reused after it.
        """
        length = self._declared_length()
        encodings = self._handler.headers.get_all("Transfer-Encoding") or []
        if not encodings:
            return False, length
        codings = [c.strip().lower() for value in encodings for c in value.split(",")]
        if codings != ["chunked"]:
            raise Refuse(
                400,
                detail(f"Transfer-Encoding {', '.join(encodings)[:60]!r} is not supported; send a Content-Length or chunked"),
                close=True,
            )
        if length is not None:
            raise Refuse(400, detail("both Transfer-Encoding and Content-Length are set; send one of them"), close=True)
        return True, None

    def read_body(self, limit: int | None) -> bytes:
        """The body as sent (still encoded): 411 without a length on POST/PATCH/PUT, 413 past ``limit``, 408 too slow."""
        chunked, length = self._framing()
        try:
            if chunked:
                return self._read_chunked(limit)
            if length is None:
                if self.method in ("POST", "PATCH", "PUT"):
                    raise Refuse(411, detail("Content-Length required"), close=True)
                return b""
            if limit is not None and length > limit:
                raise Refuse(413, detail("request body too large", size=length, max_size=limit), close=True)
            data = self._handler.rfile.read(length)
        except socket.timeout as exc:
            raise self._too_slow(exc) from None
        if len(data) != length:
            raise Refuse(400, detail("body shorter than Content-Length"), close=True)
        return data

    @staticmethod
    def _too_slow(exc: socket.timeout) -> Refuse:
        return Refuse(408, detail(str(exc) or "request body too slow"), close=True)

    def _read_chunked(self, limit: int | None) -> bytes:
        """A chunked body, strictly: hex sizes only (no sign, no extensions), CRLF after each chunk."""
        rfile = self._handler.rfile
        out = bytearray()
        while True:
            line = rfile.readline(_CHUNK_LINE_MAX + 1)
            size_text = line.rstrip(b"\r\n")
            if not line.endswith(b"\n") or not _HEX.fullmatch(size_text):
                raise Refuse(
                    400, detail("malformed chunked body: a chunk size must be 1-16 hex digits, without extensions"), close=True
                )
            size = int(size_text, 16)
            if size == 0:
                for _ in range(_MAX_TRAILERS):
                    if not rfile.readline(_CHUNK_LINE_MAX).strip():
                        return bytes(out)
                raise Refuse(400, detail("too many trailer lines in a chunked body"), close=True)
            if limit is not None and len(out) + size > limit:
                raise Refuse(413, detail("request body too large", max_size=limit), close=True)
            chunk = rfile.read(size)
            if len(chunk) != size or rfile.read(2) != b"\r\n":
                raise Refuse(400, detail("malformed chunked body: a chunk is shorter than its size"), close=True)
            out += chunk

    def discard_body(self) -> None:
        """Throw the body away unread by anything: read up to 64 KiB of it, else close after answering.

        Reading an early-refused request's body keeps the connection usable; a body
        too large to bother with closes the connection instead. Malformed framing
        is a 400 here too, whatever the route.
        """
        chunked, length = self._framing()
        if chunked:
            try:
                self._read_chunked(_DISCARD_MAX)
            except Refuse as refusal:
                if refusal.status != 413:
                    raise
                self._handler.close_connection = True  # more than we read for nothing
            except socket.timeout as exc:
                raise self._too_slow(exc) from None
            return
        if length is None:
            return
        if length > _DISCARD_MAX:
            self._handler.close_connection = True
            return
        remaining = length
        try:
            while remaining > 0:
                chunk = self._handler.rfile.read(min(remaining, _READ_CHUNK))
                if not chunk:
                    break
                remaining -= len(chunk)
        except socket.timeout as exc:
            raise self._too_slow(exc) from None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes; with Nagle on, the body waits for the
    # client's delayed ACK (~40 ms per request on a kept-alive connection).
    disable_nagle_algorithm = True
    server_version = "otel-runs-local/" + __version__  # the package's one version (_version.py)
    server: HttpServer
    slot: Connection | None = None
    timeout = ConnectionLimits.idle_timeout_s  # per read, only if a connection had no slot (it always has)

    def setup(self) -> None:
        super().setup()
        # Reads wait as long as the connection's phase allows (ConnectionLimits), not a fixed time per read.
        self.slot = self.server.slots.get(self.connection)
        if self.slot is not None:
            self.rfile = io.BufferedReader(_PacedReader(self.slot))

    def _writing(self) -> None:
        # A read may have left a deadline's last fraction of a second as the socket's timeout.
        self.connection.settimeout(self.server.limits.idle_timeout_s)

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
        self._writing()
        super().send_error(code, message, explain)

    do_POST = do_PATCH = do_PUT = do_DELETE = do_OPTIONS = do_HEAD = do_GET

    def _handle(self) -> None:
        server = self.server
        started = time.monotonic()
        parts = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        entry: dict[str, Any] = {
            "method": self.command,
            "path": parts.path,
            "status": None,
            "content_encoding": headers.get("content-encoding"),
            "body_bytes": 0,
            "part_names": None,
            "run_ids": [],
            "fault": None,
            "client_port": self.client_address[1] if isinstance(self.client_address, tuple) else None,
        }
        slot = self.slot
        if slot is not None:
            slot.reading_body()
        server.enter()
        try:
            try:
                reply = server.app(Exchange(self, parts.path, parts.query, headers, entry))
            except Refuse as refusal:
                reply = refusal.reply()
            except (ConnectionError, socket.timeout):
                reply = DROP
            except Exception:
                logger.exception("local service failed on %s %s", self.command, parts.path)
                reply = Reply(500, detail("internal error in the local service"), close=True)
            if slot is not None:
                slot.answering()
            # Logged before answering, so a client that has its answer also finds the entry.
            entry["status"] = reply.status
            entry["error"] = _error_text(reply)
            entry["duration"] = round(time.monotonic() - started, 6)
            server.request_log.append(entry)
            if reply.status == 0:
                self._drop()
            else:
                self._send(reply)
        except OSError:
            self.close_connection = True  # the client went away mid-answer
        finally:
            if slot is not None:
                slot.waiting()
            server.exit()

    def _send(self, reply: Reply) -> None:
        body = reply.body
        if isinstance(body, (bytes, bytearray)):
            payload = bytes(body)
        else:
            payload = b"" if body is None else orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
        self._writing()
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.close:
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
