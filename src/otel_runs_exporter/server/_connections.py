"""Who gets a connection slot of the local service, and for how long.

A thread per connection means a slow client holds a slot, so what a client may take
is bounded (:class:`ConnectionLimits`): a request head has a total deadline, a body a
minimum rate, and when every slot is taken a new connection takes the slot of the
oldest unfinished head (else the oldest idle connection) instead of being refused.
:class:`ConnectionSlots` keeps that count, and a separate one for long-lived answers;
:class:`PacedReader` is the socket as the request handler reads it, each read given
what is left of its phase's deadline; :class:`Refuser` answers 503 past the cap
without a thread each. :mod:`._http_server` frames requests over these.
"""

from __future__ import annotations

import io
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["ConnectionLimits", "Connection", "ConnectionSlots", "PacedReader", "Refuser", "READ_CHUNK"]

READ_CHUNK = 1 << 16
"""How much one read of a socket asks for."""

_BUSY_BODY = b'{"detail":"the local service is serving as many connections as it can"}'
_BUSY_ANSWER = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)
# How long a refused connection is drained before it is closed, and how many are drained at once.
_BUSY_DRAIN_S = 5.0
_BUSY_DRAIN_MAX = 1024


class Refuser:
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
                    more = key.fileobj.recv(READ_CHUNK)  # type: ignore[union-attr]
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
    408 and the connection is closed). A body that keeps just above that minimum is
    still slow: with every slot taken, the slowest body under ``fast_body_rate``
    bytes/s past its grace period gives up its slot to a new connection (see
    :class:`ConnectionSlots`), so trickled bodies cannot hold the service for hours.
    ``max_streams`` long-lived answers (a long poll such as the auth wait) are counted
    apart from the request slots.
    """

    max_connections: int = 512
    idle_timeout_s: float = 60.0
    head_timeout_s: float = 5.0
    min_body_rate: int = 1024
    body_grace_s: float = 5.0
    fast_body_rate: int = 64 * 1024
    max_streams: int = 32

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_streams", "min_body_rate", "fast_body_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name.endswith("_rate") else 1):
                raise ValueError(f"{name} must be a whole number of at least {0 if name.endswith('_rate') else 1}, got {value!r}")
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
    connection idle longest, else the one sending its body slowest (under
    ``fast_body_rate`` on average, past its grace period), and takes its slot: slow
    clients cannot keep new ones out. A body at a fast rate, and a request whose
    body is read and is being answered, are never cut. A long-lived answer moves its
    connection to a stream slot (:meth:`open_stream`), capped apart, so streams never
    use up request slots nor request slots streams.
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
                victim = self._victim(now) if self._closing < _MAX_CLOSING else None
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

    def _victim(self, now: float) -> Connection | None:
        oldest_head: Connection | None = None
        oldest_idle: Connection | None = None
        slowest_body: Connection | None = None
        slowest_rate = float(self.limits.fast_body_rate)
        for conn in self._live.values():
            if conn.closing or conn.stream:
                continue
            if conn.phase == HEAD and (oldest_head is None or conn.since < oldest_head.since):
                oldest_head = conn
            elif conn.phase == IDLE and (oldest_idle is None or conn.since < oldest_idle.since):
                oldest_idle = conn
            elif conn.phase == BODY and now - conn.since > self.limits.body_grace_s:
                rate = conn.received / (now - conn.since)
                if rate < slowest_rate:
                    slowest_body, slowest_rate = conn, rate
        return oldest_head or oldest_idle or slowest_body

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


class PacedReader(io.RawIOBase):
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
