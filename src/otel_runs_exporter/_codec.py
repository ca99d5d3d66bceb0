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
# Batches whose runs average 16 KiB or more (documents, long prompts) compress with a 2^15 hash
# table: a 2^17 one no longer fits the CPU's cache, and large runs find their matches close by
# (a document's own words, a history repeated whole) where small runs find theirs in runs far
# back. On the benchmark's 64 KB runs: 26 % less compressing CPU for 2 % more bytes (0.348x
# OTLP's); runs repeating a growing history lose under 1 % (bench/codec.py). In the whole
# pipeline the gain was within the noise (BENCHMARKS.md): it costs nothing, so it stays.
_ZSTD_LARGE_RUN_BYTES = 16 * 1024
_ZSTD_LARGE_HASH_LOG = 15
_GZIP_LEVEL = 5


@dataclass(frozen=True)
class Codec:
    """A compression scheme: its ``Content-Encoding`` name, and its two directions.

    Not thread-safe (zstd's contexts are not): each owner (a transport, a delivery) makes its own.
    """

    name: str
    compress: Callable[[bytes], bytes]
    decompress: Callable[[bytes], bytes]
    compress_large: Callable[[bytes], bytes] | None = None  # for runs averaging _ZSTD_LARGE_RUN_BYTES

    def compress_runs(self, data: bytes, runs: int) -> bytes:
        """``data``, a body of ``runs`` runs, compressed the way its runs' size calls for."""
        if self.compress_large is not None and len(data) >= runs * _ZSTD_LARGE_RUN_BYTES:
            return self.compress_large(data)
        return self.compress(data)


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
        small, large = (
            # Each writes the content size (one-shot decompress works); one per Codec, reused for every body.
            zstandard.ZstdCompressor(
                compression_params=zstandard.ZstdCompressionParameters.from_level(
                    _ZSTD_LEVEL, window_log=_ZSTD_WINDOW_LOG, hash_log=hash_log
                )
            )
            for hash_log in (_ZSTD_HASH_LOG, _ZSTD_LARGE_HASH_LOG)
        )
        decompressor = zstandard.ZstdDecompressor()
        return Codec("zstd", small.compress, decompressor.decompress, large.compress)
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
