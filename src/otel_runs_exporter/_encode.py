"""Runs to bytes: JSON with coercion, multipart bodies, basic-tracing bodies.

Pure functions. A run dict becomes an :class:`EncodedRun` once, on the worker
thread; requests are then built by joining already-encoded parts, so splitting
a batch (413) or bisecting it (422) never serializes anything twice.

Multipart layout (spec 4.4)::

    --BOUNDARY\\r\\n
    Content-Disposition: form-data; name="post.<id>"\\r\\n
    Content-Type: application/json\\r\\n
    Content-Length: N\\r\\n
    \\r\\n
    {...}\\r\\n
    --BOUNDARY\\r\\n
    ... post.<id>.inputs, .outputs, .events when present ...
    --BOUNDARY--\\r\\n

    >>> enc = encode_run("post", {"id": "r1", "inputs": {"q": 1}})
    >>> [name for name, _ in enc.parts]
    ['post.r1', 'post.r1.inputs']
    >>> ctype, body = multipart_body([enc], "b")
    >>> ctype
    'multipart/form-data; boundary=b'
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import math
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from typing import Any, Iterable, Sequence

import orjson

from ._parsed import ParsedJson

__all__ = [
    "EncodedRun",
    "dumps",
    "json_value",
    "encode_run",
    "encoded",
    "multipart_body",
    "basic_body",
    "new_boundary",
    "TRUNCATION_MARKER",
]

TRUNCATION_MARKER = "...[truncated {n} chars]"
_MAX_DEPTH = 100  # orjson refuses past 255; keep well under and say where we cut
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_SEPARATE = ("inputs", "outputs", "events")
_PART_OVERHEAD = 160  # bytes object header, tuple, name string; also covers a part's multipart headers
_RUN_OVERHEAD = 250  # the EncodedRun, its parts list and id string
# Fields of a run's main part that identify and place it: never truncated.
_IDENTITY = frozenset(
    {"id", "trace_id", "parent_run_id", "dotted_order", "start_time", "end_time", "session_name", "session_id", "run_type"}
)


def json_value(value: Any) -> Any:
    """The one rule for a value JSON has no type for: what a user expects to read there.

    Every place that takes user values (the encoder's fallback and slow path, ``@traceable``'s
    inputs, outputs and metadata, the client instrumentors' messages and attributes) goes through
    this function, so a value reads the same wherever it was captured. One level at a time: what
    it returns may hold more such values, which the caller (orjson, :func:`_sanitize`) brings
    back here. Never raises.

    ==============================================  ==============================================
    ``bytes``, ``bytearray``, ``memoryview``        the UTF-8 text, else ``"base64:..."``
    ``set``, ``frozenset``                          a list
    ``Decimal``                                     see below
    ``pathlib`` paths, other ``os.PathLike``        the path as a string
    ``Enum`` members                                their value
    ``datetime``, ``date``, ``time``                ISO 8601 (``isoformat()``), as orjson writes them
    ``UUID``                                        its canonical string
    dataclass instances                             a dict of their fields
    exceptions                                      ``"TypeName: message"``
    other mappings                                  a dict
    pydantic v2 (``model_dump``)                    its JSON-mode dump (the plain dump if that fails)
    pydantic v1 (``dict()``), namedtuples           the dict
    numpy, pandas, torch (``tolist()``)             the list (a scalar for a 0-d array)
    anything else                                   its ``repr``: nothing better is known
    ==============================================  ==============================================

    A ``Decimal`` becomes a JSON number when that number reads back as the same value: an integer
    when it is integral and written without a fraction (``Decimal("3")`` is ``3``), else a float
    whose shortest form is the decimal's value (``Decimal("1.10")`` is ``1.1``, equal as numbers).
    Otherwise, when a float would change it (more digits than a float holds, NaN, infinities), it
    is the decimal's string, so no digit is silently lost (``"0.12345678901234567890"``).

    >>> from decimal import Decimal
    >>> from pathlib import PurePosixPath
    >>> [json_value(v) for v in (Decimal("1.10"), Decimal("3"), Decimal("1e-30000"), PurePosixPath("/tmp"))]
    [1.1, 3, '1E-30000', '/tmp']
    """
    try:
        return _json_value(value)
    except Exception:  # noqa: BLE001 - a user's object misbehaving in a way the rules did not foresee
        return _repr(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(raw).decode("ascii")
    if isinstance(value, (set, frozenset)):
        return list(value)
    if isinstance(value, Decimal):
        return _decimal(value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, os.PathLike):
        return _json_value(os.fspath(value))  # may be bytes
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Shallow, unlike dataclasses.asdict (which deep-copies and fails on what it cannot copy).
        return {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, type):  # a class has these as unbound methods
        found = _by_method(value)
        if found is not _NOTHING:
            return found
    return _repr(value)


_NOTHING = object()


def _by_method(value: Any) -> Any:
    """The conversion an object offers itself, or ``_NOTHING``: model_dump, dict, _asdict, tolist."""
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        for kwargs in ({"mode": "json"}, {}):  # JSON mode first; a look-alike may not take ``mode``
            try:
                dumped = model_dump(**kwargs)
            except Exception:  # noqa: BLE001 - a broken model_dump must not cost the rest
                continue
            if isinstance(dumped, dict):
                return dumped
    for attr in ("dict", "_asdict"):
        method = getattr(value, attr, None)
        if callable(method):
            try:
                result = method()
            except Exception:  # noqa: BLE001 - a user's object; try the next way
                continue
            if isinstance(result, dict):
                return result
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        try:
            listed = tolist()
        except Exception:  # noqa: BLE001
            return _NOTHING
        # A 0-d array gives its scalar; anything else of its own kind would come straight back here.
        if isinstance(listed, (list, tuple, str, int, float, bool)) or listed is None:
            return listed
    return _NOTHING


def _decimal(value: Decimal) -> Any:
    if not value.is_finite():
        return str(value)
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= 0:
        return int(value)
    as_float = float(value)
    if math.isfinite(as_float) and Decimal(repr(as_float)) == value:
        return as_float
    return str(value)


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # noqa: BLE001
        return f"<{type(value).__name__} object>"


def _sanitize(value: Any, limit: int, depth: int, seen: set[int], keep: frozenset[str] = frozenset()) -> Any:
    """Slow path: a copy orjson always accepts, with long strings truncated.

    Used only when the fast path fails or the output is large enough that a
    string may exceed ``limit``; handles cycles, excessive depth, lone
    surrogates and non-finite floats. Dict keys are never cut, nor the
    top-level fields named in ``keep`` (ids and dotted_order must stay whole).
    """
    if isinstance(value, str):
        if limit and len(value) > limit:
            value = value[:limit] + TRUNCATION_MARKER.format(n=len(value) - limit)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)  # orjson's integer range
    if isinstance(value, float):
        # float(): orjson refuses float subclasses, and this copy is dumped without a fallback.
        return float(value) if math.isfinite(value) else str(value)
    if depth >= _MAX_DEPTH:
        return "[too deep]"
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        marker = id(value)
        if marker in seen:
            return "[cycle]"
        seen.add(marker)
        try:
            if isinstance(value, dict):
                return {
                    _sanitize(k if isinstance(k, str) else str(k), 0, depth + 1, seen): _sanitize(
                        v, 0 if k in keep else limit, depth + 1, seen
                    )
                    for k, v in value.items()
                }
            return [_sanitize(v, limit, depth + 1, seen) for v in value]
        finally:
            seen.discard(marker)
    return _sanitize(json_value(value), limit, depth + 1, seen)


def dumps(value: Any, max_value_chars: int = 0, keep: frozenset[str] = frozenset()) -> bytes:
    """Serialize with orjson; never raises.

    Strings longer than ``max_value_chars`` (0: no limit) are cut with a marker
    that says how much was cut; dict keys and the top-level fields in ``keep``
    never are. NaN and Infinity become strings; what JSON has no type for
    follows :func:`json_value` (a Decimal a number, a path its string, a model
    its dict, ... and only what no rule knows its ``repr``).

    >>> dumps({"x": float("nan"), "b": b"hi", "s": {1}})
    b'{"x":"nan","b":"hi","s":[1]}'
    """
    try:
        out = orjson.dumps(value, default=json_value, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError, ValueError, RecursionError):
        return _exact(orjson.dumps(_sanitize(value, max_value_chars, 0, set(), keep), option=_OPTIONS))
    # orjson writes NaN/Infinity as null; only rebuild when a float could be one of them. What
    # orjson.loads made has none, and the scan for null costs as much as the dump on 64 KB of text.
    needs_fix = type(value) is not ParsedJson and b"null" in out and _has_nonfinite(value, 0)
    if needs_fix or (max_value_chars and len(out) > max_value_chars):
        out = orjson.dumps(_sanitize(value, max_value_chars, 0, set(), keep), option=_OPTIONS)
    return _exact(out)


def _exact(out: bytes) -> bytes:
    """A right-sized copy of a small orjson result.

    orjson's result keeps a buffer of at least 4 KiB behind it, so a queued run
    of three small parts would hold ~12 KiB for ~1 KiB of JSON and the byte cap
    would undercount memory tenfold. Copying costs a memcpy of the small ones.
    """
    return bytes(memoryview(out)) if len(out) < 65536 else out


def _has_nonfinite(value: Any, depth: int) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, dict):
        return any(_has_nonfinite(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_nonfinite(v, depth + 1) for v in value)
    return False


@dataclass(slots=True)
class EncodedRun:
    """One run operation, serialized: what a request is built from.

    ``parts`` are ``(part name, JSON bytes)``; the first is the main part.
    ``completes`` is true when this operation carries the run's end (a patch,
    or a post merged with its patch), which is what delivery counts.
    ``mark_free`` is true when no part holds :data:`_BOUNDARY_MARK` (see :func:`multipart_body`).
    """

    op: str
    run_id: str
    parts: list[tuple[str, bytes]]
    dotted_order: str = ""
    completes: bool = False
    size: int = field(default=0)
    mark_free: bool = False


def encode_run(op: str, run: dict[str, Any], max_value_chars: int = 0, completes: bool = False) -> EncodedRun:
    """Serialize a run dict into multipart parts.

    ``inputs``, ``outputs`` and ``events`` go to their own parts, sent only when
    present and not empty; everything else forms the main part. The dict is not
    modified.
    """
    run_id = str(run["id"])
    separate = [key for key in _SEPARATE if key in run]
    if separate:
        # A C-level copy less the separate keys keeps the main part's key order, at a
        # fraction of the cost of rebuilding the dict key by key.
        main = run.copy()
        for key in separate:
            del main[key]
    else:
        main = run
    prefix = f"{op}.{run_id}"
    parts = [(prefix, dumps(main, max_value_chars, _IDENTITY))]
    for key in separate:
        value = run[key]
        # Empty is absent (spec 4.4: "sent only when present"): an empty ``{}`` part
        # and its headers cost more bytes than a small run's whole main part.
        if value:
            parts.append((f"{prefix}.{key}", dumps(value, max_value_chars)))
    return encoded(op, run_id, parts, str(run.get("dotted_order") or ""), completes)


def encoded(op: str, run_id: str, parts: list[tuple[str, bytes]], dotted_order: str, completes: bool) -> EncodedRun:
    """An :class:`EncodedRun` with its size: the one rule for what a waiting run costs.

    The size is what the run costs in memory while it waits, not just its
    payload: each part's bytes, name and tuple, plus the run's own object and
    strings (tracemalloc: ~500 B beyond the payload for a three-part run). The
    same figure bounds request bodies, where it overstates part headers a little.
    """
    size = _RUN_OVERHEAD + len(dotted_order)
    mark_free = True
    for name, payload in parts:
        size += len(payload) + len(name) + _PART_OVERHEAD
        # Looked for here, where a payload was just written and is still in the CPU's cache.
        mark_free = mark_free and _BOUNDARY_MARK not in payload and _BOUNDARY_MARK_TEXT not in name
    return EncodedRun(op, run_id, parts, dotted_order, completes, size, mark_free)


# What every boundary we draw starts with. A body's check that its boundary occurs only where
# it delimits parts read the whole joined body again: on 64 KB runs ~31 us a run (0.49 ns a byte,
# a 20 MB body is read from memory), against ~6 us for this search in a payload just written.
# Capital letters from G to Z only: no CR, LF or dash, so the mark cannot straddle a payload and
# the delimiters or headers beside it; and a search for them skips over lowercase text and digits
# a whole needle at a time (CPython's search tables share a slot between bytes 64 apart: hex
# digits would share theirs with half the lowercase letters).
_BOUNDARY_MARK_TEXT = "OTLPRUNSXQZJKVWHMGYSTNPQRXZJKWVH"
_BOUNDARY_MARK = _BOUNDARY_MARK_TEXT.encode("ascii")


def new_boundary() -> str:
    """A boundary: the fixed mark, then 32 random hex digits, which make a collision with content negligible."""
    return _BOUNDARY_MARK_TEXT + os.urandom(16).hex()


def _pieces(runs: Iterable[EncodedRun], delimiter: bytes) -> list[bytes]:
    pieces: list[bytes] = []
    append = pieces.append
    for run in runs:
        for name, payload in run.parts:
            append(delimiter)
            append(
                b'Content-Disposition: form-data; name="%s"\r\n'
                b"Content-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % (name.encode("utf-8"), len(payload))
            )
            append(payload)
            append(b"\r\n")
    return pieces


def multipart_body(runs: Sequence[EncodedRun], boundary: str) -> tuple[str, bytes]:
    """``(content type, body)`` of a multipart request carrying ``runs``.

    If the boundary happens to occur inside a payload, a new one is drawn, so
    the result always parses back to the same parts. A boundary that starts with
    the mark cannot occur in runs whose parts hold no mark (``mark_free``): the
    mark's letters are in none of the headers and delimiters around them either,
    so an occurrence could not straddle two pieces; only then is the body not
    searched.
    """
    while True:
        delimiter = b"--" + boundary.encode("ascii") + b"\r\n"
        pieces = _pieces(runs, delimiter)
        pieces.append(b"--" + boundary.encode("ascii") + b"--\r\n")
        body = b"".join(pieces)
        if boundary.startswith(_BOUNDARY_MARK_TEXT) and all(r.mark_free for r in runs):
            return f"multipart/form-data; boundary={boundary}", body
        expected = sum(len(r.parts) for r in runs) + 1
        if body.count(b"--" + boundary.encode("ascii")) == expected:
            return f"multipart/form-data; boundary={boundary}", body
        boundary = new_boundary()


def _splice(main: bytes, extra: list[tuple[str, bytes]]) -> bytes:
    """Insert already-serialized fields into a serialized JSON object."""
    if not extra:
        return main
    inner = b",".join(b'"%s":%s' % (key.encode(), value) for key, value in extra)
    if main == b"{}":
        return b"{" + inner + b"}"
    return main[:-1] + b"," + inner + b"}"


def _separate_fields(run: EncodedRun) -> list[tuple[str, bytes]]:
    return [(name.rsplit(".", 1)[1], payload) for name, payload in run.parts[1:]]


def basic_body(run: EncodedRun) -> bytes:
    """JSON body of ``POST /runs`` or ``PATCH /runs/{id}``: the main part with its
    separate fields (inputs, outputs, events) spliced back in, without re-serializing.

    >>> basic_body(encode_run("post", {"id": "r1", "inputs": {"q": 1}}))
    b'{"id":"r1","inputs":{"q":1}}'
    """
    return _splice(run.parts[0][1], _separate_fields(run))
