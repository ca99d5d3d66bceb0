"""Batches held while the service cannot take them: one compressed multipart body each.

During an outage every run waits, and a waiting :class:`EncodedRun` costs its
JSON parts plus Python objects (~1.5 KB for a small run). Sealed, a batch is
the request body it will be sent as, compressed: ~80 bytes a small run with
zstd. Sealing builds the body once; sending a sealed batch to a service that
takes zstd sends it as it is. Only when the service refuses it in part (413,
400/422) or we fall back to ``POST /runs`` is it opened: decompressed and
split back into its parts (never re-serialized).

Pure functions.

    >>> from ._codec import codec
    >>> from ._encode import encode_run
    >>> runs = [encode_run("post", {"id": "r1", "inputs": {"q": 1}}, completes=True)]
    >>> sealed = seal(runs, "b0", codec("gzip"))
    >>> (sealed.ops, sealed.completing)
    (1, 1)
    >>> [(r.run_id, [n for n, _ in r.parts]) for r in sealed.open()]
    [('r1', ['post.r1', 'post.r1.inputs'])]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import orjson

from ._codec import Codec
from ._encode import EncodedRun, encoded, multipart_body

__all__ = ["SealedBatch", "seal", "split_multipart"]

_OVERHEAD = 300  # the object, its bytes headers and strings (measured with tracemalloc: ~260)


@dataclass(slots=True, eq=False)
class SealedBatch:
    """A batch as its compressed multipart body, with what counting needs.

    ``completes`` has one byte per operation, in body order: 1 when the
    operation carries its run's end (what delivery counts in runs).
    """

    data: bytes
    codec: Codec
    boundary: str
    completes: bytes
    raw_size: int
    size: int
    #: When the oldest of its runs began to wait (the delivery's clock): its export timeout runs from then.
    since: float = 0.0
    #: Its write-ahead file (``Spool.write_ahead``), when it has one.
    wal: Any = None

    @property
    def ops(self) -> int:
        return len(self.completes)

    @property
    def completing(self) -> int:
        return sum(self.completes)

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def body(self) -> bytes:
        """The uncompressed multipart body."""
        return self.codec.decompress(self.data)

    def open(self) -> list[EncodedRun]:
        """The runs again, as they were handed to :func:`seal` (parts split, not re-serialized)."""
        runs: list[EncodedRun] = []
        parts: list[tuple[str, bytes]] = []
        for name, payload in split_multipart(self.body(), self.boundary):
            if parts and not name.startswith(parts[0][0] + "."):
                runs.append(_run(parts, self.completes[len(runs)]))
                parts = []
            parts.append((name, payload))
        if parts:
            runs.append(_run(parts, self.completes[len(runs)]))
        return runs


def seal(runs: Sequence[EncodedRun], boundary: str, codec: Codec) -> SealedBatch:
    """The batch ``runs`` as one compressed multipart body."""
    content_type, body = multipart_body(runs, boundary)
    used = content_type.split("boundary=", 1)[1]  # another one if the first occurred in a payload
    data = codec.compress_runs(body, len(runs))
    completes = bytes(1 if r.completes else 0 for r in runs)
    return SealedBatch(data, codec, used, completes, len(body), len(data) + len(completes) + _OVERHEAD)


def split_multipart(body: bytes, boundary: str) -> list[tuple[str, bytes]]:
    """``(name, payload)`` of each part of a body built by :func:`~otel_runs_exporter._encode.multipart_body`.

    Reads the lengths our own encoder wrote; anything else is a ValueError.
    """
    delimiter = b"--" + boundary.encode("ascii")
    parts: list[tuple[str, bytes]] = []
    pos = 0
    while True:
        if body.startswith(delimiter + b"--", pos):
            return parts
        if not body.startswith(delimiter + b"\r\n", pos):
            raise ValueError(f"not a delimiter at byte {pos}")
        head_end = body.index(b"\r\n\r\n", pos)
        head = body[pos + len(delimiter) + 2 : head_end]
        name = head.split(b'name="', 1)[1].split(b'"', 1)[0].decode("utf-8")
        length = int(head.rsplit(b"Content-Length: ", 1)[1])
        start = head_end + 4
        parts.append((name, body[start : start + length]))
        pos = start + length + 2  # the payload's trailing CRLF


def _run(parts: list[tuple[str, bytes]], completes: int) -> EncodedRun:
    op, run_id = parts[0][0].split(".", 1)
    try:
        dotted_order = str(orjson.loads(parts[0][1]).get("dotted_order") or "")
    except (orjson.JSONDecodeError, AttributeError):
        dotted_order = ""
    return encoded(op, run_id, parts, dotted_order, bool(completes))
