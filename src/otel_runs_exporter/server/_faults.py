"""Fault injection: what the local service does to a tracing request instead of serving it.

A :class:`FaultConfig` may be changed while the service runs (a test turns on an
outage, then off). Each tracing request asks it once, through :meth:`FaultConfig.decide`,
which reads every setting under one lock so a request never sees half an update.

Precedence, first match wins: ``outage`` (503), ``status_sequence`` (the next
listed status), then one seeded draw among ``rate_drop_before_read``,
``rate_500``, ``rate_429`` and ``rate_drop``. ``rate_slow`` is drawn separately and
adds ``slow_seconds`` of delay to whatever happens. ``reject_run_ids`` is applied
after the body is read, by the service itself.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["FaultConfig", "FaultDecision"]

Action = Literal["serve", "status", "drop", "drop_before_read"]


@dataclass(frozen=True)
class FaultDecision:
    """What to do with one request."""

    action: Action = "serve"
    status: int | None = None
    delay: float = 0.0
    retry_after: float | None = None
    reason: str = ""


_NO_FAULT = FaultDecision()


@dataclass
class FaultConfig:
    """Seeded fault rates and scripted failures for tracing requests.

    Rates are probabilities in [0, 1]. A dropped request (``rate_drop``) is read
    and stored, then the connection is closed without an answer, as when an answer
    is lost on the way back; ``rate_drop_before_read`` closes before reading the
    body, so nothing is stored.

    >>> faults = FaultConfig(status_sequence=[503, 429])
    >>> [faults.decide().status for _ in range(3)]
    [503, 429, None]
    """

    rate_500: float = 0.0
    rate_429: float = 0.0
    rate_drop: float = 0.0
    rate_drop_before_read: float = 0.0
    rate_slow: float = 0.0
    slow_seconds: float = 1.0
    seed: int | None = None
    retry_after: float | None = 1.0
    outage: bool = False
    status_sequence: list[int] = field(default_factory=list)
    reject_run_ids: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_lock", threading.RLock())
        object.__setattr__(self, "_rng", random.Random(self.seed))
        object.__setattr__(self, "_rng_seed", self.seed)
        self.reject_run_ids = set(self.reject_run_ids)
        self.status_sequence = list(self.status_sequence)

    def __setattr__(self, name: str, value: Any) -> None:
        # Writers take the same lock as decide(), so an update is seen whole.
        lock = self.__dict__.get("_lock")
        if lock is None:
            object.__setattr__(self, name, value)
            return
        with lock:
            object.__setattr__(self, name, value)

    def update(self, **settings: Any) -> None:
        """Change several settings at once, atomically with respect to requests."""
        with self._lock:  # type: ignore[attr-defined]
            for name, value in settings.items():
                if name.startswith("_") or name not in self.__dataclass_fields__:
                    raise AttributeError(f"FaultConfig has no setting {name!r}")
                setattr(self, name, value)

    def clear(self) -> None:
        """Turn every fault off (the seed is kept)."""
        self.update(
            rate_500=0.0,
            rate_429=0.0,
            rate_drop=0.0,
            rate_drop_before_read=0.0,
            rate_slow=0.0,
            outage=False,
            status_sequence=[],
            reject_run_ids=set(),
        )

    @property
    def active(self) -> bool:
        """Whether any fault can fire."""
        return bool(
            self.outage
            or self.status_sequence
            or self.reject_run_ids
            or self.rate_500
            or self.rate_429
            or self.rate_drop
            or self.rate_drop_before_read
            or self.rate_slow
        )

    def rejected(self, run_ids: set[str]) -> list[str]:
        """The run ids of a request that ``reject_run_ids`` refuses, sorted."""
        with self._lock:  # type: ignore[attr-defined]
            wanted = {str(r).lower() for r in self.reject_run_ids}
        return sorted(r for r in run_ids if r in wanted or r.replace("-", "") in wanted)

    def decide(self) -> FaultDecision:
        """Draw the fate of one tracing request."""
        with self._lock:  # type: ignore[attr-defined]
            if not self.active:
                return _NO_FAULT
            if self._rng_seed != self.seed:  # type: ignore[attr-defined]
                object.__setattr__(self, "_rng", random.Random(self.seed))
                object.__setattr__(self, "_rng_seed", self.seed)
            rng: random.Random = self._rng  # type: ignore[attr-defined]
            delay = self.slow_seconds if self.rate_slow and rng.random() < self.rate_slow else 0.0
            if self.outage:
                return FaultDecision("status", 503, delay, self.retry_after, "outage")
            if self.status_sequence:
                status = self.status_sequence.pop(0)
                return FaultDecision("status", status, delay, self.retry_after, "status_sequence")
            draw = rng.random()
            for action, status, rate, reason in (
                ("drop_before_read", None, self.rate_drop_before_read, "rate_drop_before_read"),
                ("status", 500, self.rate_500, "rate_500"),
                ("status", 429, self.rate_429, "rate_429"),
                ("drop", None, self.rate_drop, "rate_drop"),
            ):
                if draw < rate:
                    return FaultDecision(action, status, delay, self.retry_after, reason)  # type: ignore[arg-type]
                draw -= rate
            return FaultDecision("serve", None, delay, None, "rate_slow" if delay else "")
