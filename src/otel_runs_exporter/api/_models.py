"""Typed views of what the bulk-export and control-plane endpoints answer.

The spec shows only some fields (an export's ``status``, a run's ``errors``, a
deployment's ``id`` and ``latest_revision_id``, a revision's ``status``), so every
model keeps the whole answer in ``raw`` and the fields it does not name in
``extra``: nothing the service sends is dropped.

>>> run = ExportRun.from_json({"id": "r1", "status": "RUNNING",
...                            "errors": {"retry_10": "c", "retry_2": "b", "retry_0": "a"}})
>>> list(run.errors)
['retry_0', 'retry_2', 'retry_10']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Mapping

__all__ = [
    "ExportStatus",
    "Export",
    "ExportRun",
    "Deployment",
    "Revision",
    "AuthWaitStatus",
    "AuthWaitResult",
]

REVISION_DEPLOYED = "DEPLOYED"
_RETRY_KEY = re.compile(r"^retry_(\d+)$")


class ExportStatus(str, Enum):
    """Spec 3.1: the status of an export and of each of its runs."""

    CREATED = "CREATED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEDOUT = "TIMEDOUT"

    @property
    def is_final(self) -> bool:
        """True once nothing more will happen: COMPLETED, FAILED, CANCELLED or TIMEDOUT."""
        return self not in (ExportStatus.CREATED, ExportStatus.RUNNING)

    @classmethod
    def _missing_(cls, value: object) -> ExportStatus | None:
        # The cancel request spells it "Cancelled"; accept any case on the way in.
        if isinstance(value, str):
            return cls.__members__.get(value.strip().upper())
        return None

    def __str__(self) -> str:
        return self.value


def _status(value: Any) -> ExportStatus | str:
    """The enum member, or the string itself for a status this version does not know."""
    try:
        return ExportStatus(value)
    except ValueError:
        return str(value)


class _KeepsRaw:
    """A model that keeps the whole answer in ``raw``; its ``_KNOWN`` fields are the ones it names."""

    raw: Mapping[str, Any]
    _KNOWN: ClassVar[tuple[str, ...]] = ()

    @property
    def extra(self) -> dict[str, Any]:
        """Fields the model does not name (an export's start_time, destination, ...), as the service sent them."""
        return {k: v for k, v in self.raw.items() if k not in self._KNOWN}


class _HasExportStatus(_KeepsRaw):
    """An export or one of its runs: both move through :class:`ExportStatus`."""

    status: ExportStatus | str

    @property
    def is_final(self) -> bool:
        """Nothing more will happen; a status this version does not know never counts as final."""
        return isinstance(self.status, ExportStatus) and self.status.is_final


@dataclass(frozen=True)
class Export(_HasExportStatus):
    """A bulk export job (spec 2.4). An unknown ``status`` is kept as a string, never final."""

    id: str
    status: ExportStatus | str
    created_at: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    _KNOWN = ("id", "status", "created_at")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Export:
        return cls(
            id=str(data.get("id") or data.get("export_id") or ""),
            status=_status(data.get("status")),
            created_at=data.get("created_at"),
            raw=dict(data),
        )


def _ordered_errors(errors: Any) -> dict[str, str]:
    """``retry_N`` keys by N (retry_2 before retry_10), then any other keys by name."""
    if not isinstance(errors, Mapping):
        return {}

    def key(name: str) -> tuple[int, int, str]:
        match = _RETRY_KEY.match(name)
        return (0, int(match.group(1)), "") if match else (1, 0, name)

    return {name: errors[name] for name in sorted((str(k) for k in errors), key=key)}


@dataclass(frozen=True)
class ExportRun(_HasExportStatus):
    """One date partition of an export (spec 2.5); ``errors`` in retry order."""

    id: str
    status: ExportStatus | str
    created_at: str | None = None
    rows_exported: int | None = None
    errors: Mapping[str, str] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    _KNOWN = ("id", "status", "created_at", "rows_exported", "errors")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExportRun:
        rows = data.get("rows_exported")
        metadata = data.get("metadata")
        if rows is None and isinstance(metadata, Mapping):
            rows = metadata.get("rows_exported")  # spec 2.5 lists it with the progress metadata
        return cls(
            id=str(data.get("id") or data.get("run_id") or ""),
            status=_status(data.get("status")),
            created_at=data.get("created_at"),
            rows_exported=int(rows) if isinstance(rows, (int, float)) and not isinstance(rows, bool) else None,
            errors=_ordered_errors(data.get("errors")),
            raw=dict(data),
        )

    @property
    def retries(self) -> int:
        """Failed attempts so far (each left a ``retry_N`` error)."""
        return sum(1 for k in self.errors if _RETRY_KEY.match(k))

    @property
    def last_error(self) -> str | None:
        return next(reversed(list(self.errors.values())), None) if self.errors else None


@dataclass(frozen=True)
class Deployment(_KeepsRaw):
    """A control-plane deployment (spec 2.6): its ``id`` and ``latest_revision_id``."""

    id: str
    latest_revision_id: str | None = None
    name: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    _KNOWN = ("id", "latest_revision_id", "name")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Deployment:
        latest = data.get("latest_revision_id")
        return cls(
            id=str(data.get("id") or ""),
            latest_revision_id=str(latest) if latest else None,
            name=data.get("name") if isinstance(data.get("name"), str) else None,
            raw=dict(data),
        )


@dataclass(frozen=True)
class Revision(_KeepsRaw):
    """A deployment revision (spec 2.6, 3.3). ``status`` stays a string: only DEPLOYED is shown.

    A status of ``FAILED``, ``INTERRUPTED`` or ending in ``_FAILED`` (``BUILD_FAILED``,
    ``DEPLOY_FAILED``, ...) counts as failed.
    """

    id: str
    status: str
    deployment_id: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    _KNOWN = ("id", "status", "deployment_id")

    @classmethod
    def from_json(cls, data: Mapping[str, Any], deployment_id: str | None = None) -> Revision:
        return cls(
            id=str(data.get("id") or ""),
            status=str(data.get("status") or ""),
            deployment_id=str(data.get("deployment_id") or deployment_id or "") or None,
            raw=dict(data),
        )

    @property
    def is_deployed(self) -> bool:
        return self.status.upper() == REVISION_DEPLOYED

    @property
    def is_failed(self) -> bool:
        status = self.status.upper()
        return status in ("FAILED", "INTERRUPTED") or status.endswith("_FAILED")


class AuthWaitStatus(str, Enum):
    """Spec 2.1: how an auth wait ended."""

    COMPLETED = "completed"
    PENDING = "pending"
    TIMEOUT = "timeout"
    NOT_FOUND = "not_found"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class AuthWaitResult:
    """An AuthWaitResponse. ``token`` is a credential: it is left out of the repr and of ``raw``.

    >>> AuthWaitResult(AuthWaitStatus.COMPLETED, token="s3cret")
    AuthWaitResult(status=<AuthWaitStatus.COMPLETED: 'completed'>, token=<set>)
    """

    status: AuthWaitStatus | str
    token: str | None = field(default=None, repr=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuthWaitResult:
        status: AuthWaitStatus | str
        try:
            status = AuthWaitStatus(data.get("status"))
        except ValueError:
            status = str(data.get("status"))
        token = data.get("token")
        return cls(
            status=status,
            token=str(token) if token is not None else None,
            raw={k: v for k, v in data.items() if k != "token"},
        )

    @property
    def completed(self) -> bool:
        return self.status == AuthWaitStatus.COMPLETED

    def __repr__(self) -> str:
        return f"AuthWaitResult(status={self.status!r}, token=<{'set' if self.token else 'unset'}>)"

    __str__ = __repr__
