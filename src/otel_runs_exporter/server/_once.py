"""What the local service logs at most once a minute, by reason.

A refusal that every request repeats (an exporter's batches refused one after
another, each request out of memory) would otherwise fill the log with one line
a request. The service does not use the exporter's rate-limited log: it imports
nothing of the exporter's but the conversion (tests/core/test_imports.py).
"""

from __future__ import annotations

import time

__all__ = ["once_a_minute"]

_INTERVAL_S = 60.0
#: reason -> when it was last said (time.monotonic). A handful of fixed reasons, never a request's data.
_said: dict[str, float] = {}


def once_a_minute(reason: str) -> bool:
    """True when ``reason`` was not said in the last minute (it counts as said from now).

    >>> once_a_minute("doctest"), once_a_minute("doctest")
    (True, False)
    """
    now = time.monotonic()
    last = _said.get(reason)
    if last is not None and now - last < _INTERVAL_S:
        return False
    _said[reason] = now
    return True
