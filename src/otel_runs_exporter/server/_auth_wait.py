"""The local service's auth waits (spec 2.1, 4.1), on a :class:`~._control_common.ServiceClock`.

Auth waits are started in process (:meth:`AuthWaits.start`), since the spec does
not show how an auth_id is obtained. ``GET /v2/auth/wait/{auth_id}?timeout=N``
holds the request until the authentication completes or ``N`` service seconds pass.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from ._control_common import Part, ServiceClock, invalid

__all__ = ["AuthWaits", "timeout_param"]

# Bounded: int() refuses strings past 4,300 digits (a 500), and no wait needs more than 18.
_INT = re.compile(r"^[+-]?\d{1,18}$")
_MAX_AUTH_WAIT_S = 3600


@dataclass
class _AuthWait:
    token: str | None
    created_at: float
    completes_at: float | None
    expires_at: float | None

    def status(self, now: float) -> str:
        if self.completes_at is not None and now >= self.completes_at:
            return "completed"
        if self.expires_at is not None and now >= self.expires_at:
            return "timeout"
        return "pending"


class AuthWaits(Part):
    """Pending, completed and expired authentications, by auth_id."""

    def __init__(self, clock: ServiceClock) -> None:
        super().__init__(clock)
        self._auth_changed = threading.Condition(self._lock)

    def reset(self) -> None:
        """Forget every auth wait."""
        with self._lock:
            self._auth: dict[str, _AuthWait] = {}

    def start(
        self,
        token: str | None = None,
        *,
        complete_after_s: float | None = 0.0,
        expires_after_s: float | None = 600.0,
        auth_id: str | None = None,
    ) -> str:
        """Begin an auth wait and return its id (the spec does not show how one is obtained).

        ``complete_after_s=None`` keeps it pending until :meth:`complete`;
        after ``expires_after_s`` a pending one reads ``timeout``.
        """
        now = self.clock.now()
        with self._lock:
            auth_id = auth_id or uuid.uuid4().hex
            self._auth[auth_id] = _AuthWait(
                token=token if token is not None else "tok-" + uuid.uuid4().hex,
                created_at=now,
                completes_at=None if complete_after_s is None else now + complete_after_s,
                expires_at=None if expires_after_s is None else now + expires_after_s,
            )
            self._auth_changed.notify_all()
        return auth_id

    def complete(self, auth_id: str, token: str | None = None) -> None:
        """Complete a pending auth wait now; waiting requests answer at once."""
        with self._lock:
            wait = self._auth[auth_id]
            if token is not None:
                wait.token = token
            wait.completes_at = self.clock.now()
            self._auth_changed.notify_all()

    def wait(self, auth_id: str, timeout_s: float, stopping: threading.Event | None = None) -> dict[str, Any]:
        """Block up to ``timeout_s`` service seconds (and never longer in real time) for completion."""
        real_deadline = time.monotonic() + min(timeout_s, self.clock.real_seconds(timeout_s))
        service_deadline = self.clock.now() + timeout_s
        with self._lock:
            while True:
                wait = self._auth.get(auth_id)
                if wait is None:
                    return {"status": "not_found", "token": None}
                now = self.clock.now()
                status = wait.status(now)
                if status != "pending":
                    return {"status": status, "token": wait.token if status == "completed" else None}
                left = real_deadline - time.monotonic()
                if now >= service_deadline or left <= 0 or (stopping is not None and stopping.is_set()):
                    return {"status": "pending", "token": None}
                # Short naps: completion may come from the clock rather than a notify.
                self._auth_changed.wait(min(left, 0.02))


def timeout_param(query: str) -> float:
    """The ``timeout`` query parameter of an auth wait: whole seconds, 0 to 3600, 30 when absent; else a 422."""
    values = parse_qs(query, keep_blank_values=True).get("timeout")
    if not values:
        return 30.0
    raw = values[-1]
    if not _INT.match(raw.strip()):
        raise invalid(["query", "timeout"], "Input should be a valid integer, unable to parse string as an integer", "int_parsing")
    value = int(raw)
    if value < 0:
        raise invalid(["query", "timeout"], "Input should be greater than or equal to 0", "greater_than_equal")
    if value > _MAX_AUTH_WAIT_S:
        raise invalid(["query", "timeout"], f"Input should be less than or equal to {_MAX_AUTH_WAIT_S}", "less_than_equal")
    return float(value)
