"""Compression: on the wire (``Content-Encoding``) and for batches held in memory.

One place knows the codecs, so a batch sealed in memory with zstd goes on the
wire as it is when the service takes zstd, and is decompressed exactly once
when it does not.

    >>> c = codec("gzip")
    >>> c.decompress(c.compress(b"runs")) == b"runs"
    True
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from typing import Callable

__all__ = ["Codec", "codec", "memory_codec", "zstd_available"]

# zstd level 2's fast strategy with level 3's window (2 MiB) and a 2^17 hash table. Against
# level 3 (zstd's default) on the benchmark's bodies (bench/workloads.py; 16-512 small or GenAI
# runs, 10-300 runs of 64 KB): bytes within +0.7 % (512 small runs 6 % fewer), compressing CPU
# 12-30 % less (64 KB runs: 241 against 302 us a run). Level 3's window is kept: a GenAI body
# repeats messages far apart, and level 2's 1 MiB window made it 1.9x larger. Level 1 costs
# 30 % less again but sends 13 % more bytes of 64 KB runs and 2.1x more of GenAI ones.
_ZSTD_LEVEL = 2
_ZSTD_WINDOW_LOG = 21
_ZSTD_HASH_LOG = 17
_GZIP_LEVEL = 5


@dataclass(frozen=True)
class Codec:
    """A compression scheme: its ``Content-Encoding`` name, and its two directions.

    Not thread-safe (zstd's contexts are not): each owner (a transport, a delivery) makes its own.
    """

    name: str
    compress: Callable[[bytes], bytes]
    decompress: Callable[[bytes], bytes]


def zstd_available() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


def codec(name: str) -> Codec | None:
    """A new :class:`Codec` for ``zstd``, ``gzip`` or ``deflate`` (zlib, memory only); None if unavailable."""
    if name == "zstd":
        try:
            import zstandard
        except ImportError:
            return None
        params = zstandard.ZstdCompressionParameters.from_level(
            _ZSTD_LEVEL, window_log=_ZSTD_WINDOW_LOG, hash_log=_ZSTD_HASH_LOG
        )
        # It writes the content size (one-shot decompress works); one per Codec, reused for every body.
        compressor = zstandard.ZstdCompressor(compression_params=params)
        decompressor = zstandard.ZstdDecompressor()
        return Codec("zstd", compressor.compress, decompressor.decompress)
    if name == "gzip":
        return Codec("gzip", lambda data: gzip.compress(data, compresslevel=_GZIP_LEVEL), gzip.decompress)
    if name == "deflate":
        return Codec("deflate", lambda data: zlib.compress(data, 1), zlib.decompress)
    return None


def memory_codec() -> Codec:
    """What held batches are sealed with: zstd when installed (sent as is to a service
    that takes it), else the standard library's zlib at its fastest level."""
    found = codec("zstd") or codec("deflate")
    assert found is not None
    return found
