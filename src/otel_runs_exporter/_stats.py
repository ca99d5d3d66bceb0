"""Delivery counters: what was sent, retried and dropped, and why."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

__all__ = ["ExporterStats", "Counters"]


@dataclass(frozen=True)
class ExporterStats:
    """A snapshot of an exporter's or processor's delivery counters.

    ``sent`` counts run operations delivered (a ``post`` or a ``patch``; a post
    that already carries the run's end counts once); ``completed`` counts the
    runs whose end reached the service. ``dropped`` maps a reason
    (``queue_full``, ``queue_bytes_full``, ``rejected``, ``too_large``,
    ``unauthorized``, ``shutdown``, ...) to a count of runs whose end was lost:
    an early post that is refused is not counted, since the run's last
    operation carries everything again. So, for ended spans,
    ``completed + sum(dropped) == spans``; nothing is dropped without a reason.
    ``spooled`` counts operations written to the durable spool, ``replayed``
    those delivered from it (by this process, whoever wrote them).
    """

    queued: int = 0
    sent: int = 0
    completed: int = 0
    retried: int = 0
    failed: int = 0
    requests: int = 0
    dropped: Mapping[str, int] = field(default_factory=dict)
    held: int = 0
    orphaned: int = 0
    spooled: int = 0
    replayed: int = 0

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())


class Counters:
    """Thread-safe counters behind :class:`ExporterStats`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent = 0
        self.completed = 0
        self.orphaned = 0
        self.spooled = 0
        self.replayed = 0
        self._dropped: dict[str, int] = {}

    def drop(self, reason: str, count: int = 1) -> None:
        if count:
            with self._lock:
                self._dropped[reason] = self._dropped.get(reason, 0) + count

    def delivered(self, ops: int, completed: int) -> None:
        with self._lock:
            self.sent += ops
            self.completed += completed

    def dropped(self) -> Mapping[str, int]:
        with self._lock:
            return MappingProxyType(dict(self._dropped))
