"""The local service's deployment control plane (spec 2.6, 3.3, 4.2), on a :class:`~._control_common.ServiceClock`.

A revision moves QUEUED -> BUILDING -> DEPLOYING -> DEPLOYED over ``deploy_delay_s``;
``{"local": {"fail": "BUILD_FAILED"}}`` (or ``DEPLOY_FAILED``) in a create or patch
body makes it fail. Every PATCH starts a new revision.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from ._control_common import Part, Refuse, ServiceClock, invalid, iso, number, split_local

__all__ = ["Deployments"]

_DEPLOY_FAILURES = frozenset({"BUILD_FAILED", "DEPLOY_FAILED"})


@dataclass
class _Revision:
    id: str
    deployment_id: str
    created_at: float
    delay_s: float
    fail: str | None
    fields: dict[str, Any]

    def status(self, now: float) -> str:
        # Three equal phases; a failure shows where it happens (build or deploy).
        elapsed = now - self.created_at
        if self.fail == "BUILD_FAILED" and elapsed >= self.delay_s * 2 / 3:
            return "BUILD_FAILED"
        if elapsed >= self.delay_s:
            return self.fail or "DEPLOYED"
        if elapsed >= self.delay_s * 2 / 3:
            return "DEPLOYING"
        if elapsed >= self.delay_s / 3:
            return "BUILDING"
        return "QUEUED"

    def as_json(self, now: float) -> dict[str, Any]:
        status = self.status(now)
        return {
            **self.fields,
            "id": self.id,
            "deployment_id": self.deployment_id,
            "status": status,
            "status_message": f"revision failed: {status}" if status in _DEPLOY_FAILURES else None,
            "created_at": iso(self.created_at),
        }


@dataclass
class _Deployment:
    id: str
    fields: dict[str, Any]
    created_at: float
    updated_at: float
    revisions: dict[str, _Revision] = field(default_factory=dict)
    latest_revision_id: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            **self.fields,
            "id": self.id,
            "latest_revision_id": self.latest_revision_id,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }


class Deployments(Part):
    """Deployments and their revisions; ``deploy_delay_s`` (service seconds) is how long a revision takes."""

    def __init__(self, clock: ServiceClock, *, deploy_delay_s: float = 3.0) -> None:
        self.deploy_delay_s = deploy_delay_s
        super().__init__(clock)

    def reset(self) -> None:
        """Forget every deployment."""
        with self._lock:
            self._deployments: dict[str, _Deployment] = {}

    def create(self, body: Any) -> dict[str, Any]:
        fields, local = _deployment_body(body)
        if not isinstance(fields.get("name"), str) or not fields["name"]:
            raise invalid(["body", "name"], "Field required", "missing")
        with self._lock:
            now = self.clock.now()
            deployment = _Deployment(id=str(uuid.uuid4()), fields=fields, created_at=now, updated_at=now)
            self._new_revision(deployment, local, now)
            self._deployments[deployment.id] = deployment
            return deployment.as_json()

    def get(self, deployment_id: str) -> dict[str, Any]:
        with self._lock:
            return self._deployment(deployment_id).as_json()

    def update(self, deployment_id: str, body: Any) -> dict[str, Any]:
        fields, local = _deployment_body(body)
        with self._lock:
            deployment = self._deployment(deployment_id)
            now = self.clock.now()
            deployment.fields.update(fields)
            deployment.updated_at = now
            self._new_revision(deployment, local, now)
            return deployment.as_json()

    def revision(self, deployment_id: str, revision_id: str) -> dict[str, Any]:
        with self._lock:
            revision = self._deployment(deployment_id).revisions.get(revision_id)
            if revision is None:
                raise Refuse(404, {"detail": f"revision {revision_id} of deployment {deployment_id} not found"})
            return revision.as_json(self.clock.now())

    def _new_revision(self, deployment: _Deployment, local: dict[str, Any], now: float) -> None:
        fail = local.get("fail")
        if fail is not None and fail not in _DEPLOY_FAILURES:
            raise invalid(["body", "local", "fail"], f"one of {sorted(_DEPLOY_FAILURES)}", "enum")
        revision = _Revision(
            id=str(uuid.uuid4()),
            deployment_id=deployment.id,
            created_at=now,
            delay_s=number(local, "deploy_seconds", self.deploy_delay_s),
            fail=fail,
            fields={"source": deployment.fields.get("source")} if "source" in deployment.fields else {},
        )
        deployment.revisions[revision.id] = revision
        deployment.latest_revision_id = revision.id

    def _deployment(self, deployment_id: str) -> _Deployment:
        deployment = self._deployments.get(deployment_id)
        if deployment is None:
            raise Refuse(404, {"detail": f"deployment {deployment_id} not found"})
        return deployment


def _deployment_body(body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    fields, local = split_local(body)
    for name in ("id", "latest_revision_id", "created_at", "updated_at"):
        fields.pop(name, None)  # the service's own fields
    return fields, local
