"""The local service's bulk exports, deployments and auth waits (spec 2.1, 2.4-2.6, 3, 4.1-4.3, 8.2), and their handlers.

:class:`ControlPlane` holds the three parts (:class:`~._exports.BulkExports`,
:class:`~._deployments.Deployments`, :class:`~._auth_wait.AuthWaits`) on one
:class:`~._control_common.ServiceClock`, and can answer the next requests with
injected statuses (:meth:`ControlPlane.fail_next`). The functions below are the
handlers the route table (:mod:`._routes`) names for ``/bulk-exports`` and ``/v2/...``:
each turns a request into one call on a part.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

from ._answers import bounded_list
from ._auth_wait import AuthWaits, timeout_param
from ._control_common import ServiceClock, invalid
from ._deployments import Deployments
from ._exports import EXPORT_STATUSES, BulkExports
from ._reply import Reply

if TYPE_CHECKING:
    from ._routing import Request, Service

__all__ = [
    "ControlPlane",
    "ServiceClock",
    "EXPORT_STATUSES",
    "list_exports",
    "create_export",
    "read_export",
    "cancel_export",
    "export_runs",
    "create_deployment",
    "read_deployment",
    "update_deployment",
    "read_revision",
    "wait_for_auth",
]


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

    def take_injected(self) -> Reply | None:
        """The answer :meth:`fail_next` queued for the next request, or None (the dispatcher asks before each one)."""
        with self._lock:
            injected = self._next_statuses.popleft() if self._next_statuses else None
        if injected is None:
            return None
        status, retry_after = injected
        extra = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        return Reply(status, {"detail": f"injected status {status} (ControlPlane.fail_next)"}, extra)


# --- handlers (rows in ._routes) ---------------------------------------------------


def _workspace(request: Request) -> str:
    # Without --workspace-id any x-tenant-id is a workspace of its own.
    return (request.headers.get("x-tenant-id") or "default").lower()


def list_exports(request: Request, service: Service) -> Reply:
    listed = service.control.exports.all(_workspace(request))
    return Reply(200, bounded_list(listed, service.answers, what="bulk export", how="cancel or wait for some"))


def create_export(request: Request, service: Service) -> Reply:
    exports = service.control.exports
    exports.check_create_size(len(request.data))  # before parsing it
    return Reply(201, exports.create(request.body, _workspace(request)))


def read_export(request: Request, service: Service) -> Reply:
    return Reply(200, service.control.exports.get(request.params["export_id"], _workspace(request)))


def cancel_export(request: Request, service: Service) -> Reply:
    body = request.body
    if not isinstance(body, dict) or body.get("status") != "Cancelled":
        raise invalid(["body", "status"], "Input should be 'Cancelled'", "literal_error")
    return Reply(200, service.control.exports.cancel(request.params["export_id"], _workspace(request)))


def export_runs(request: Request, service: Service) -> Reply:
    return Reply(200, service.control.exports.runs(request.params["export_id"], _workspace(request)))


def create_deployment(request: Request, service: Service) -> Reply:
    return Reply(201, service.control.deployments.create(request.body))


def read_deployment(request: Request, service: Service) -> Reply:
    return Reply(200, service.control.deployments.get(request.params["deployment_id"]))


def update_deployment(request: Request, service: Service) -> Reply:
    return Reply(200, service.control.deployments.update(request.params["deployment_id"], request.body))


def read_revision(request: Request, service: Service) -> Reply:
    params = request.params
    return Reply(200, service.control.deployments.revision(params["deployment_id"], params["revision_id"]))


def wait_for_auth(request: Request, service: Service) -> Reply:
    """``GET /v2/auth/wait/{auth_id}?timeout=N``: held until the authentication completes or N service seconds pass."""
    auth = service.control.auth
    return Reply(200, auth.wait(request.params["auth_id"], timeout_param(request.query), request.stopping))
