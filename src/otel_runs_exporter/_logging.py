"""Rate-limited logging, so an outage produces a few lines, not one per batch."""

from __future__ import annotations

import logging
import threading
import time
import weakref

from ._fork import renew_in_child

__all__ = ["RateLimitedLog", "n_runs", "reset_all"]

_instances: "weakref.WeakSet[RateLimitedLog]" = weakref.WeakSet()


def n_runs(count: int) -> str:
    """``count`` runs, in words, for a log line: every message that counts runs says it this way.

    >>> n_runs(1), n_runs(4), n_runs(0)
    ('1 run', '4 runs', '0 runs')
    """
    return f"{count} run" if count == 1 else f"{count} runs"


def reset_all() -> None:
    """Forget what every rate-limited log has said (tests start from a clean slate)."""
    for instance in list(_instances):
        instance.reset()


class RateLimitedLog:
    """Logs a given key at most once per ``interval_s``, counting what it held back.

    >>> log = RateLimitedLog(logging.getLogger("x"), interval_s=60)
    >>> log.warning("queue_full", "queue full, dropped %d", 1)
    """

    def __init__(self, logger: logging.Logger, interval_s: float = 30.0) -> None:
        self._logger = logger
        self._interval = interval_s
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()
        _instances.add(self)
        renew_in_child(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    def _allow(self, key: str) -> int | None:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self._interval:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._held.pop(key, 0)

    def log(self, level: int, key: str, msg: str, *args: object, exc_info: bool = False) -> None:
        held = self._allow(key)
        if held is None:
            return
        if held:
            msg += " (%d similar messages suppressed)"
            args = (*args, held)
        self._logger.log(level, msg, *args, exc_info=exc_info)

    def warning(self, key: str, msg: str, *args: object, exc_info: bool = False) -> None:
        self.log(logging.WARNING, key, msg, *args, exc_info=exc_info)

    def error(self, key: str, msg: str, *args: object, exc_info: bool = False) -> None:
        self.log(logging.ERROR, key, msg, *args, exc_info=exc_info)

    def reset(self) -> None:
        with self._lock:
            self._last.clear()
            self._held.clear()
