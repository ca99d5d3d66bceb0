"""The spool's files: their layout and their names, read and written without touching the disk.

A file is one JSON header line describing the runs and their parts' lengths,
then the parts' bytes back to back. The header names its format (``"v": 1``);
a file of another format (a newer or an older version's) is
:class:`SpoolVersion`, never guessed at.

A name carries what replay needs without a read: the time it was written
(names sort oldest first), the writer's pid and a random part (together the
file's *stem*, the same whatever state its name later says), the operation
count and the count of runs it completes::

    00001767225600000000000-4242-0badf00d-n12-c10.spool

``-orphan`` before the suffix marks a file returned once from a process that
died replaying it (``_spool``).

    >>> from ._encode import encode_run
    >>> runs = [encode_run("post", {"id": "r1"}, completes=True)]
    >>> [r.run_id for r in deserialize(serialize(runs))]
    ['r1']
    >>> runs_in_name(file_name("00000000000000000001", runs).replace("-orphan", ""))
    1
"""

from __future__ import annotations

import os
import re

import orjson

from ._encode import EncodedRun, encoded

__all__ = [
    "SpoolCorrupt", "SpoolVersion", "serialize", "deserialize", "groups", "file_name", "marked", "unmarked",
    "is_marked", "count_in_name", "runs_in_name", "waiting", "STEM", "SUFFIX", "MIN_RUN_BYTES",
]

SUFFIX = ".spool"
_ORPHAN = "-orphan"  # before the suffix: returned once from a process that died holding it
_FORMAT = 1  # the header's "v": the one layout this version reads and writes


class SpoolCorrupt(ValueError):
    """A spool file that does not parse (it should not happen; such a file is set aside)."""


class SpoolVersion(SpoolCorrupt):
    """A spool file of another format than this version's (``spool_version``)."""


def serialize(runs: list[EncodedRun]) -> bytes:
    """The bytes of one spool file."""
    header = [
        [r.op, r.run_id, r.dotted_order, r.completes, [[name, len(payload)] for name, payload in r.parts]] for r in runs
    ]
    return orjson.dumps({"v": _FORMAT, "runs": header}) + b"\n" + b"".join(p for r in runs for _, p in r.parts)


def deserialize(data: bytes) -> list[EncodedRun]:
    """Runs back from a spool file; raises :class:`SpoolCorrupt` if it is not whole."""
    newline = data.find(b"\n")
    if newline < 0:
        raise SpoolCorrupt("no header line")
    try:
        header = orjson.loads(data[:newline])
        version = header.get("v")
        entries = header["runs"]
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise SpoolCorrupt(f"bad header: {exc}") from None
    if version != _FORMAT:
        if type(version) is not int:
            raise SpoolVersion(f"written in a format this version does not know ({str(version)[:20]!r}), "
                               f"not format {_FORMAT}") from None
        newer = "a newer" if version > _FORMAT else "an older"
        raise SpoolVersion(f"written by {newer} version (format {version}; this version reads format {_FORMAT})")
    offset = newline + 1
    runs: list[EncodedRun] = []
    try:
        for op, run_id, dotted_order, completes, parts_meta in entries:
            if not (isinstance(op, str) and isinstance(run_id, str) and isinstance(dotted_order, str)):
                raise SpoolCorrupt("bad header entry")
            parts = []
            for name, length in parts_meta:
                if not isinstance(name, str) or not isinstance(length, int) or length < 0:
                    raise SpoolCorrupt("bad part entry")
                payload = data[offset : offset + length]
                if len(payload) != length:
                    raise SpoolCorrupt("truncated payload")
                parts.append((name, payload))
                offset += length
            if not parts:
                raise SpoolCorrupt("a run without parts")
            runs.append(encoded(op, run_id, parts, dotted_order, bool(completes)))
    except (TypeError, ValueError) as exc:  # the header's shape is not ours
        if isinstance(exc, SpoolCorrupt):
            raise
        raise SpoolCorrupt(f"bad header: {exc}") from None
    if offset != len(data):
        raise SpoolCorrupt("trailing bytes")
    return runs


def groups(runs: list[EncodedRun], batch_bytes: int, max_items: int = 0) -> list[list[EncodedRun]]:
    """``runs`` in order, cut into groups of at most ``batch_bytes`` and, when given, ``max_items`` runs (a larger
    run alone): a spool file's batches, and the requests a replay sends."""
    groups: list[list[EncodedRun]] = []
    group: list[EncodedRun] = []
    size = 0
    for run in runs:
        if group and (size + run.size > batch_bytes or 0 < max_items <= len(group)):
            groups.append(group)
            group, size = [], 0
        group.append(run)
        size += run.size
    if group:
        groups.append(group)
    return groups


def marked(name: str) -> str:
    return name[: -len(SUFFIX)] + _ORPHAN + SUFFIX if name.endswith(SUFFIX) else name


def unmarked(name: str) -> str:
    return name.replace(_ORPHAN + SUFFIX, SUFFIX)


def is_marked(name: str) -> bool:
    return name.endswith(_ORPHAN + SUFFIX)


def file_name(prefix: str, runs: list[EncodedRun]) -> str:
    # The name carries the operation count (to tell a partial give-back) and the
    # count of runs it completes (what is lost if the file is), so neither needs a read.
    completing = sum(1 for r in runs if r.completes)
    return f"{prefix}-{os.getpid()}-{os.urandom(4).hex()}-n{len(runs)}-c{completing}{SUFFIX}"


# What names one file across its life (pooled, claimed, marked as an orphan): its time, writer and random part.
STEM = re.compile(r"(\d{1,20}-\d{1,10}-[0-9a-f]{8})-n\d")
# The fewest bytes a run takes in a spool file: its entry in the header alone holds its 36-character id.
MIN_RUN_BYTES = 40
_COUNTS = re.compile(r"-n(\d{1,12})(?:-c(\d{1,12}))?(?:-|\.)")


def waiting(directory: str) -> tuple[int, int]:
    """(files, runs) waiting in a spool directory, read from the names only: nothing is opened or changed.

    For ``otel-runs doctor``; a directory that cannot be listed holds nothing it can count.
    """
    try:
        names = [e.name for e in os.scandir(directory) if e.name.endswith(SUFFIX) and not e.name.startswith(".")]
    except OSError:
        return 0, 0
    return len(names), sum(runs_in_name(name) for name in names)


def count_in_name(name: str) -> int:
    """Operations in a spool file, from its name."""
    found = _COUNTS.search(name)
    return int(found.group(1)) if found else 0


def runs_in_name(name: str) -> int:
    """Runs a spool file completes, from its name (files of older versions: their operations)."""
    found = _COUNTS.search(name)
    if found is None:
        return 0
    return int(found.group(2) if found.group(2) is not None else found.group(1))
