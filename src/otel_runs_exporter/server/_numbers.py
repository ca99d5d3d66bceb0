"""Whole numbers read from headers and parameters: one rule for every place that reads one."""

from __future__ import annotations

import re

_PLAIN = re.compile(r"[0-9]{1,19}")

SQL_INT_MAX = 2**63 - 1
"""The largest integer SQLite stores: a number past it from outside never reaches a query."""


def plain_int(raw: str) -> int | None:
    """``raw`` as an int when it is 1 to 19 ASCII digits, else None.

    Not ``str.isdigit()``: it accepts "²", which ``int()`` refuses, as it refuses
    4,301 digits; such input was a 500. Callers check their own bounds.

    >>> plain_int("42"), plain_int("\\u00b2"), plain_int("9" * 20)
    (42, None, None)
    """
    return int(raw) if _PLAIN.fullmatch(raw) else None
