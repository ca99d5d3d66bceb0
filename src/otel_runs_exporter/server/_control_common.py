"""What the local service's bulk exports, deployments and auth waits share: service time and refusals.

Everything in :mod:`._exports`, :mod:`._deployments` and :mod:`._auth_wait` runs on
a :class:`ServiceClock`, which tests speed up (``clock_speed=3600``: an hour a
second), freeze (``speed=0``) or push forward (:meth:`ServiceClock.advance`).
State does not move on a background thread: each part is brought up to the
clock's ``now`` when it is asked, so the same clock always gives the same
history, however slowly the test's requests arrive.

Each :class:`Part` keeps its own state and refuses a request by raising
:class:`~._reply.Refuse` (:func:`invalid` builds the 422 of spec 2.2); the HTTP
handlers that call the parts are in :mod:`._control`, their routes in :mod:`._routes`.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

import orjson

from ._reply import Refuse
from ._validate import MAX_JSON_DEPTH, json_depth_exceeds

__all__ = ["ServiceClock", "Part", "Refuse", "invalid", "iso", "json_body", "number", "split_local"]


class ServiceClock:
    """Service time in epoch seconds: real time times ``speed``, plus whatever was advanced.

    >>> clock = ServiceClock(speed=0, start=0.0)   # frozen: only advance() moves it
    >>> clock.advance(30); clock.now()
    30.0
    """

    def __init__(self, speed: float = 1.0, start: float | None = None, monotonic: Callable[[], float] = time.monotonic) -> None:
        if speed < 0:
            raise ValueError("clock speed must be 0 or more")
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._speed = float(speed)
        self._t0 = monotonic()
        self._base = time.time() if start is None else float(start)

    @property
    def speed(self) -> float:
        """Service seconds per real second (0 freezes the clock)."""
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        if value < 0:
            raise ValueError("clock speed must be 0 or more")
        with self._lock:
            # Re-base so changing speed never makes time jump or run backwards.
            now_real = self._monotonic()
            self._base += (now_real - self._t0) * self._speed
            self._t0 = now_real
            self._speed = float(value)

    def now(self) -> float:
        with self._lock:
            return self._base + (self._monotonic() - self._t0) * self._speed

    def advance(self, seconds: float) -> None:
        """Move service time forward (e.g. past the 72 h workflow timeout) at once."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._base += seconds

    def real_seconds(self, service_seconds: float) -> float:
        """How long ``service_seconds`` take in real time (infinite when frozen)."""
        return float("inf") if self._speed == 0 else service_seconds / self._speed


class Part:
    """One part of the control plane: its own state under its own lock, on the clock all parts share.

    A part forgets everything on :meth:`reset`, which also sets the state up.
    """

    def __init__(self, clock: ServiceClock) -> None:
        self.clock = clock
        self._lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        raise NotImplementedError


def invalid(loc: list[Any], msg: str, kind: str) -> Refuse:
    """A 422 with the HTTPValidationError shape of spec 2.2."""
    return Refuse(422, {"detail": [{"loc": loc, "msg": msg, "type": kind}]})


def iso(t: float | None) -> str | None:
    """Epoch seconds as the ISO 8601 UTC text the service answers with."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat()


def split_local(body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A create or patch body's fields, and apart from them its ``local`` knobs ({} when absent); else a 422.

    ``local`` holds what only this service reads (a failure to inject, a speed); the fields are what
    the real service would be sent. Both must be JSON objects.
    """
    if not isinstance(body, dict):
        raise invalid(["body"], "Input should be a JSON object", "dict_type")
    fields = dict(body)
    local = fields.pop("local", None) or {}
    if not isinstance(local, dict):
        raise invalid(["body", "local"], "Input should be a JSON object", "dict_type")
    return fields, local


def number(local: Mapping[str, Any], name: str, default: float) -> float:
    """A ``local`` knob of a create or patch body: a number of 0 or more, else a 422."""
    value = local.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise invalid(["body", "local", name], "a number of 0 or more", "float_type")
    return float(value)


def json_body(data: bytes) -> Any:
    """The request body as JSON (None when empty), else a 422."""
    try:
        value = orjson.loads(data) if data else None
    except orjson.JSONDecodeError as exc:
        raise invalid(["body"], f"body is not valid JSON ({exc})", "json_invalid") from None
    # orjson reads 1,024 levels but writes 255: a deeper body would be accepted here and
    # fail (500) where it is stored again as JSON.
    if json_depth_exceeds(value):
        raise invalid(["body"], f"JSON nested more than {MAX_JSON_DEPTH} levels deep", "json_depth")
    return value
