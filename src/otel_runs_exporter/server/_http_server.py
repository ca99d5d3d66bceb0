"""The local service's HTTP framing: connections, bodies, encodings and the request log.

Built on :class:`http.server.ThreadingHTTPServer` so the package needs no web
framework: one daemon thread per connection (up to ``max_connections``, past which a
503 goes out without a thread), HTTP/1.1 keep-alive, and every answer carries a
Content-Length so clients reuse connections.

A thread per connection means a slow client holds a slot, so what a client may take
is bounded: :mod:`._connections` owns the slots and the deadlines.

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
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import orjson

from .._version import __version__
from ._answers import AnswerBounds, AnswerBudget, BUDGET_WAIT_S, Pieces
from ._connections import READ_CHUNK, Connection, ConnectionLimits, ConnectionSlots, PacedReader, Refuser
from ._numbers import plain_int
from ._once import once_a_minute
from ._reply import DROP, Refuse, Reply, detail

__all__ = ["Exchange", "RequestLog", "HttpServer", "decode_body", "App"]

logger = logging.getLogger(__name__)

# A refused request's body is read (to keep the connection) only up to this; past it the
# connection is closed, so an unauthenticated client cannot make us read megabytes.
_DISCARD_MAX = 64 * 1024
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_CHUNK_LINE_MAX = 64
_MAX_TRAILERS = 32
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
            chunk = reader.read(READ_CHUNK)
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
        self,
        address: tuple[str, int],
        app: App,
        request_log: RequestLog,
        limits: ConnectionLimits | None = None,
        bounds: AnswerBounds | None = None,
        budget: AnswerBudget | None = None,
    ) -> None:
        self.app = app
        self.request_log = request_log
        # What one answer may be (the framing refuses any past it) and what all of them may hold at once.
        self.bounds = bounds if bounds is not None else AnswerBounds()
        self.budget = budget if budget is not None else AnswerBudget()
        # One thread per connection, up to this many; past it a slow connection is closed
        # for the new one, or a 503 with Retry-After (which clients honour) when none is slow.
        self.slots = ConnectionSlots(limits if limits is not None else ConnectionLimits())
        self._refuser = Refuser()
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
        self.held = 0
        """Bytes of the answer budget this request holds, given back once its answer is sent."""

    def reserve(self, amount: int, stop: threading.Event | None = None) -> bool:
        """Room in the service's answer budget for ``amount`` more bytes of runs (:class:`~._answers.AnswerBudget`).

        A request that holds some already is told at once whether there is more (its page
        ends where it is); one that holds none waits up to :data:`~._answers.BUDGET_WAIT_S`.
        """
        wait = 0.0 if self.held else BUDGET_WAIT_S
        if not self._handler.server.budget.take(amount, wait, self.held, stop):
            return False
        self.held += amount
        return True

    def give_back(self, amount: int) -> None:
        """Return part of what :meth:`reserve` took (an item smaller than its stored size)."""
        amount = max(0, min(amount, self.held))
        self.held -= amount
        self._handler.server.budget.give(amount)

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
        """The body as sent (still encoded): 411 without a length on POST/PATCH/PUT, 413 past ``limit``, 408 too slow.

        A client that asked ``Expect: 100-continue`` is told to send it only now, when every
        check that could refuse the request unread (the key first) has passed.
        """
        if self._handler.awaits_continue:
            chunked, length = self._framing()
            if not chunked and length is not None and limit is not None and length > limit:
                raise Refuse(413, detail("request body too large", size=length, max_size=limit), close=True)
            self._handler.send_continue()
        data = self._read_body(limit)
        self._body_done()
        return data

    def discard_body(self) -> None:
        """Throw the body away unread by anything: read up to 64 KiB of it, else close after answering.

        Reading an early-refused request's body keeps the connection usable; a body
        too large to bother with closes the connection instead. Malformed framing
        is a 400 here too, whatever the route.
        """
        if self._handler.awaits_continue:
            self._framing()
            # Never told to go on, the client may send its body or not: the connection cannot be read after this.
            self._handler.close_connection = True
        else:
            self._discard_body()
        self._body_done()

    def _body_done(self) -> None:
        # From here the request is being answered: however long its handler takes, it is not a slow body.
        slot = self._handler.slot
        if slot is not None:
            slot.answering()

    def hold(self) -> bool:
        """Count this connection apart, as a long-lived answer (a long poll); False when those are at their cap.

        A held connection closes after its answer, so its slot is never a request slot again.
        """
        slot = self._handler.slot
        if slot is None:
            return True
        if not self._handler.server.slots.open_stream(slot):
            return False
        self._handler.close_connection = True
        return True

    def _read_body(self, limit: int | None) -> bytes:
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

    def _discard_body(self) -> None:
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
                chunk = self._handler.rfile.read(min(remaining, READ_CHUNK))
                if not chunk:
                    break
                remaining -= len(chunk)
        except socket.timeout as exc:
            raise self._too_slow(exc) from None


def _say_out_of_memory(method: str, path: str) -> None:
    if once_a_minute("out_of_memory"):
        logger.warning("out of memory answering %s %s: answered 503 with Retry-After (said once a minute)", method, path[:200])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes; with Nagle on, the body waits for the
    # client's delayed ACK (~40 ms per request on a kept-alive connection).
    disable_nagle_algorithm = True
    server_version = "otel-runs-local/" + __version__  # the package's one version (_version.py)
    server: HttpServer
    slot: Connection | None = None
    timeout = ConnectionLimits.idle_timeout_s  # per read, only if a connection had no slot (it always has)
    awaits_continue = False
    """The request asked ``Expect: 100-continue`` and has not been told to go on (:meth:`send_continue`)."""

    def setup(self) -> None:
        super().setup()
        # Reads wait as long as the connection's phase allows (ConnectionLimits), not a fixed time per read.
        self.slot = self.server.slots.get(self.connection)
        if self.slot is not None:
            self.rfile = io.BufferedReader(PacedReader(self.slot))

    def _writing(self) -> None:
        # A read may have left a deadline's last fraction of a second as the socket's timeout.
        self.connection.settimeout(self.server.limits.idle_timeout_s)

    def handle_expect_100(self) -> bool:
        # The stdlib says "100 Continue" as soon as it has read the head, before anything is checked: an
        # unauthenticated client was told to send its body. It is said when the body is read (send_continue).
        self.awaits_continue = True
        return True

    def send_continue(self) -> None:
        """Tell a client that asked ``Expect: 100-continue`` to send its body (once per request)."""
        if self.awaits_continue:
            self.awaits_continue = False
            self._writing()
            self.send_response_only(HTTPStatus.CONTINUE)
            self.end_headers()

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
        exchange = Exchange(self, parts.path, parts.query, headers, entry)
        try:
            try:
                reply = server.app(exchange)
            except Refuse as refusal:
                reply = refusal.reply()
            except (ConnectionError, socket.timeout):
                reply = DROP
            except MemoryError:
                # Out of memory for this request alone: the service stays up, and says so once a minute at most.
                _say_out_of_memory(self.command, parts.path)
                reply = Reply(503, detail("the local service has no memory for this request now; try again shortly"),
                              {"Retry-After": "1"}, close=True)
            except Exception:
                logger.exception("local service failed on %s %s", self.command, parts.path)
                reply = Reply(500, detail("internal error in the local service"), close=True)
            if slot is not None:
                slot.answering()
            pieces: tuple[bytes, ...] = ()
            size = 0
            if reply.status != 0:
                reply, pieces, size = self._payload(reply)
            # Logged before answering, so a client that has its answer also finds the entry.
            entry["status"] = reply.status
            entry["error"] = _error_text(reply)
            entry["duration"] = round(time.monotonic() - started, 6)
            server.request_log.append(entry)
            if reply.status == 0:
                self._drop()
            else:
                self._send(reply, pieces, size)
        except OSError:
            self.close_connection = True  # the client went away mid-answer
        finally:
            exchange.give_back(exchange.held)
            if self.awaits_continue:
                self.awaits_continue = False
                self.close_connection = True  # the body may still come: the next request cannot be found
            if slot is not None:
                slot.waiting()
            server.exit()

    def _payload(self, reply: Reply) -> tuple[Reply, tuple[bytes, ...], int]:
        """The answer's bytes (its pieces and their length); a 413 instead of one past the bound of any answer."""
        body = reply.body
        if isinstance(body, Pieces):
            parts, size = body.parts, body.size
        else:
            if isinstance(body, (bytes, bytearray)):
                payload = bytes(body)
            else:
                payload = b"" if body is None else orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
            parts, size = (payload,), len(payload)
        limit = self.server.bounds.item_bytes
        if size <= limit:
            return reply, parts, size
        # Every answer is bounded where it is built (._answers); one that is not is refused, not sent.
        logger.error(
            "an answer to %s %s was %d bytes, past the %d any answer may be; answered 413 instead",
            self.command, urlsplit(self.path).path[:200], size, limit,
        )
        refusal = detail(
            f"the answer would be {size} bytes, more than the {limit} one answer may be; ask for less",
            size=size, max_size=limit,
        )
        payload = orjson.dumps(refusal)
        return Reply(413, refusal, {}, reply.close), (payload,), len(payload)

    def _send(self, reply: Reply, parts: tuple[bytes, ...], size: int) -> None:
        self._writing()
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(size))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.close or self.close_connection:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            for part in parts:
                self.wfile.write(part)
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
