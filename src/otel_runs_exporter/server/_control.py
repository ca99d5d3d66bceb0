"""The local service's bulk exports, deployments and auth waits behind one entry point (spec 2.1, 2.4-2.6, 3, 4.1-4.3, 8.2).

:class:`ControlPlane` routes each request to the part that owns its path
(:class:`~._exports.BulkExports`, :class:`~._deployments.Deployments`,
:class:`~._auth_wait.AuthWaits`), all on one :class:`~._control_common.ServiceClock`,
and can answer the next requests with injected statuses (:meth:`ControlPlane.fail_next`).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Mapping

from ._auth_wait import AuthWaits
from ._control_common import ControlReply, ControlRequest, Part, Refuse, ServiceClock
from ._deployments import Deployments
from ._exports import EXPORT_STATUSES, BulkExports

__all__ = ["ControlPlane", "ControlReply", "ServiceClock", "is_control_route", "EXPORT_STATUSES"]


def is_control_route(path: str, route: str) -> bool:
    """Whether a request belongs here: ``route`` is the path without ``/api/v1``, ``path`` the raw one.

    Bulk exports live on the main API (``/api/v1/bulk-exports``, also served at the
    root like every main-API path); the control plane's ``/v2/...`` paths only at the root.
    """
    return route.startswith("/bulk-exports") or path.startswith("/v2/")


class ControlPlane:
    """Bulk exports, deployments and auth waits on one clock, as one set of endpoints.

    Tests reach each part as an attribute: ``control.exports.create(body)``,
    ``control.deployments.deploy_delay_s = 10``, ``control.auth.start(token=...)``;
    ``control.clock`` moves them all.
    """

    def __init__(self, clock: ServiceClock | None = None, *, deploy_delay_s: float = 3.0) -> None:
        self.clock = clock or ServiceClock()
        self.exports = BulkExports(self.clock)
        self.deployments = Deployments(self.clock, deploy_delay_s=deploy_delay_s)
        self.auth = AuthWaits(self.clock)
        self._lock = threading.Lock()
        self._next_statuses: deque[tuple[int, float | None]] = deque()

    def reset(self) -> None:
        """Forget every export, deployment, auth wait and injected status."""
        self.exports.reset()
        self.deployments.reset()
        self.auth.reset()
        with self._lock:
            self._next_statuses.clear()

    def fail_next(self, *statuses: int, retry_after: float | None = None) -> None:
        """Answer the next control-plane and bulk-export requests with these statuses (then serve normally).

        ``retry_after`` (seconds) is sent as Retry-After with each of them.
        """
        with self._lock:
            self._next_statuses.extend((s, retry_after) for s in statuses)

    def handle(
        self,
        method: str,
        path: str,
        route: str,
        query: str,
        headers: Mapping[str, str],
        data: bytes,
        stopping: threading.Event | None = None,
    ) -> ControlReply:
        """Answer one request routed here (see :func:`is_control_route`)."""
        with self._lock:
            injected = self._next_statuses.popleft() if self._next_statuses else None
        if injected is not None:
            status, retry_after = injected
            extra = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
            return ControlReply(status, {"detail": f"injected status {status} (ControlPlane.fail_next)"}, extra)
        workspace = (headers.get("x-tenant-id") or "default").lower()
        request = ControlRequest(method, path, route, query, workspace, data, stopping)
        try:
            parts: tuple[Part, ...] = (self.exports, self.deployments, self.auth)
            for part in parts:
                reply = part.serve(request)
                if reply is not None:
                    return reply
        except Refuse as refusal:
            return ControlReply(refusal.status, refusal.body)
        return ControlReply(404, {"detail": "Not Found"})
