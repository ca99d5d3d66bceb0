"""A slow-client flood for the connection-slot tests, run as its own process: ``python trickle_flood.py PORT N INTERVAL``.

Holds N connections to 127.0.0.1:PORT, each sending a request head one byte every
INTERVAL seconds and never finishing it; a connection the server closes is opened
again at the next tick, so N stay open for as long as the flood runs (and at most N
are opened a tick: the flood is bounded). One thread and non-blocking
sockets, so 600 connections cost the test machine almost nothing. Prints ``ready``
once all N are open and have sent their first byte; stops when stdin closes, then
prints one JSON line: ``{"opened": ..., "closed_by_server": ...}``.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import time

HEAD = b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4000  # never ends: no blank line


def main() -> None:
    port, count, interval = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    conns: dict[socket.socket, int] = {}  # socket -> bytes of HEAD sent
    opened = closed = 0

    def open_one() -> None:
        nonlocal opened
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        conns[sock] = 0
        opened += 1

    for _ in range(count):
        open_one()
    ready = False
    next_tick = time.monotonic()
    while True:
        if select.select([sys.stdin], [], [], 0)[0] and not sys.stdin.readline():
            break  # the test is done with us
        now = time.monotonic()
        if now >= next_tick:
            next_tick = now + interval
            while len(conns) < count:
                open_one()
            for sock in list(conns):
                try:
                    sock.send(HEAD[conns[sock] : conns[sock] + 1])
                    conns[sock] = (conns[sock] + 1) % len(HEAD)
                except BlockingIOError:
                    pass  # not connected yet: next tick
                except OSError:
                    sock.close()
                    del conns[sock]
                    closed += 1
            if not ready and all(sent for sent in conns.values()):
                ready = True
                print("ready", flush=True)
        # A server that closes a connection makes it readable (EOF): open another in its place.
        poller = select.poll()
        by_fd = {sock.fileno(): sock for sock in conns}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(50):
            sock = by_fd[fd]
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            if not data:
                sock.close()
                del conns[sock]
                closed += 1
    print(json.dumps({"opened": opened, "closed_by_server": closed}), flush=True)


if __name__ == "__main__":
    main()
