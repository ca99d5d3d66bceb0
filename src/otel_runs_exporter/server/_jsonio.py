"""JSON in and out of the local service for values of any size: orjson for the small, the standard library past 1 MiB.

orjson sets aside eight times a string's length before it writes the string, and when
that allocation fails it crashes the process: a 20 MB string under a 1 GiB address-space
limit, or the issue's 1.57 GB answer (a segfault, nothing in the log). It parses with a
buffer of about ten times the text's length (a 20 MB run took 165 to 330 MB of address
space). The standard library needs about the length of what it makes, raises
``MemoryError`` when it cannot have it, and is as fast at these sizes (20 MB: 25 ms to
parse, 80 ms to write); it is slower for the many small values every request carries,
which stay with orjson.

Only values that came from JSON (or the service's own fields) pass here: no NaN, no lone
surrogates, so both write the same values.

>>> dump({"a": [1, "é"]}, large=True), dump({"a": [1, "é"]}, large=False)
(b'{"a":[1,"\\xc3\\xa9"]}', b'{"a":[1,"\\xc3\\xa9"]}')
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

__all__ = ["LARGE", "dump", "loads", "parse"]

LARGE = 1 << 20
"""Bytes of JSON past which a value is written and read by the standard library."""


def _native(value: Any) -> Any:
    # What orjson writes of a value json does not know (a dataclass, a datetime, a UUID), as plain JSON values.
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))


_CAREFUL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_native)


def dump(value: Any, large: bool) -> bytes:
    """``value`` as JSON; ``large=False`` only for a value known to be small (under :data:`LARGE`)."""
    if not large:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    return _CAREFUL.encode(value).encode()


def loads(text: str | bytes) -> Any:
    """JSON the service wrote, read back."""
    return json.loads(text) if len(text) > LARGE else orjson.loads(text)


# A \uD800-\uDFFF escape: lone ones are what the standard library takes and orjson refuses; a body with any is
# left to orjson, which checks them (pairs, as other encoders write emoji, are fine either way).
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_U64 = 1 << 64
_I64 = 1 << 63


def _number(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:40]} is infinity when parsed as a double")
    return value


def _integer(text: str) -> int | float:
    value = int(text)
    return value if -_I64 <= value < _U64 else _number(text)  # as orjson reads one past 64 bits


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(data: bytes) -> Any:
    """A request body's JSON, read as orjson reads it, whatever its size; ValueError (or RecursionError, too
    deep for the standard library) when it is not JSON.

    Past :data:`LARGE`, by the standard library, told to refuse what orjson refuses (NaN and
    Infinity, a number too large for a double) and to read integers as orjson does.
    """
    if len(data) <= LARGE or _SURROGATE.search(data):
        return orjson.loads(data)
    return json.loads(data, parse_float=_number, parse_int=_integer, parse_constant=_constant)
