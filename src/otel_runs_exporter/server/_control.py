"""The local service's bulk exports, deployments and auth waits (spec 2.1, 2.4-2.6, 3, 4.1-4.3, 8.2).

Everything here runs on a :class:`ServiceClock`, which tests speed up
(``clock_speed=3600``: an hour a second), freeze (``speed=0``) or push forward
(:meth:`ServiceClock.advance`). State does not move on a background thread: it is
a small discrete-event simulation brought up to the clock's ``now`` at the start
of every request (:meth:`ControlPlane.sync`), so the same clock always gives the
same history, however slowly the test's requests arrive.

Bulk exports (what the spec leaves "not shown" is chosen here and listed in
``docs/api.md``)::

    POST /api/v1/bulk-exports  {"start_time", "end_time", "destination" | "bulk_export_destination_id", ...}
      CREATED --(start_delay_s, and one of the workspace's 15 export slots)--> RUNNING
      RUNNING: one run per UTC day, at most 45 running at once, the rest CREATED (queued)
        run attempt fails -> errors["retry_<attempt>"], 30 s fixed delay, resume from checkpoint
        21st failure (20 retries spent) -> run FAILED -> export FAILED (other runs CANCELLED)
        every run COMPLETED -> export COMPLETED
        72 h since RUNNING -> export TIMEDOUT (not retried)
      PATCH {"status": "Cancelled"} from CREATED or RUNNING -> CANCELLED; 409 from a final status

Deployments: a revision moves QUEUED -> BUILDING -> DEPLOYING -> DEPLOYED over
``deploy_delay_s``; ``{"local": {"fail": "BUILD_FAILED"}}`` (or ``DEPLOY_FAILED``)
in a create or patch body makes it fail. Every PATCH starts a new revision.

Auth waits are started in process (:meth:`ControlPlane.start_auth`), since the
spec does not show how an auth_id is obtained.
"""

from __future__ import annotations

import heapq
import itertools
import re
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable, Mapping
from urllib.parse import parse_qs

import orjson

__all__ = ["ServiceClock", "ControlPlane", "ControlReply", "is_control_route", "EXPORT_STATUSES"]

EXPORT_STATUSES = ("CREATED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEDOUT")
_FINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEDOUT"})
_DEPLOY_FAILURES = frozenset({"BUILD_FAILED", "DEPLOY_FAILED"})
_EXPORTS_ROUTE = re.compile(r"^/bulk-exports(?:/(?P<id>[^/]+)(?P<runs>/runs)?)?/?$")
_DEPLOYMENTS_ROUTE = re.compile(r"^/v2/deployments(?:/(?P<id>[^/]+)(?:/revisions/(?P<rev>[^/]+))?)?/?$")
_AUTH_ROUTE = re.compile(r"^/v2/auth/wait/(?P<id>[^/]+)/?$")
_INT = re.compile(r"^[+-]?\d+$")
_MAX_PARTITIONS = 3660  # ten years of days; more is surely a mistake in the request
_MAX_AUTH_WAIT_S = 3600


def is_control_route(path: str, route: str) -> bool:
    """Whether a request belongs here: ``route`` is the path without ``/api/v1``, ``path`` the raw one.

    Bulk exports live on the main API (``/api/v1/bulk-exports``, also served at the
    root like every main-API path); the control plane's ``/v2/...`` paths only at the root.
    """
    return route.startswith("/bulk-exports") or path.startswith("/v2/")


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


@dataclass
class ControlReply:
    """What the HTTP side sends back."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class _Refuse(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


def _invalid(loc: list[Any], msg: str, kind: str) -> _Refuse:
    """A 422 with the HTTPValidationError shape of spec 2.2."""
    return _Refuse(422, {"detail": [{"loc": loc, "msg": msg, "type": kind}]})


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat()


def _parse_time(value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise _invalid(["body", name], "Field required: an ISO 8601 timestamp", "missing" if value is None else "datetime_type")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise _invalid(["body", name], f"Input should be a valid ISO 8601 datetime, got {value[:40]!r}", "datetime_parsing") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


# --- bulk exports ----------------------------------------------------------------


@dataclass
class _Run:
    id: str
    index: int
    partition: str
    created_at: float
    status: str = "CREATED"
    updated_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    attempts: int = 0
    done_s: float = 0.0  # work checkpointed so far, in service seconds
    fail_times: int = 0
    fail_message: str = "injected failure"
    errors: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def as_json(self, export: _Export) -> dict[str, Any]:
        rows = int(round(export.rows_per_run * min(1.0, self.done_s / export.run_seconds))) if export.run_seconds else export.rows_per_run
        return {
            "id": self.id,
            "bulk_export_id": export.id,
            "status": self.status,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at or self.created_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
            "partition": self.partition,
            "rows_exported": rows,
            "retries": max(0, self.attempts - 1),
            "errors": dict(self.errors),
            "metadata": {"latest_cursor": f"{self.partition}:{rows}" if rows else None, "rows_exported": rows, "files": list(self.files)},
        }


@dataclass
class _Export:
    id: str
    workspace: str
    created_at: float
    fields: dict[str, Any]
    runs: list[_Run]
    run_seconds: float
    rows_per_run: int
    destination_error: str | None
    status: str = "CREATED"
    updated_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None

    def as_json(self) -> dict[str, Any]:
        counts = {s: 0 for s in EXPORT_STATUSES}
        for run in self.runs:
            counts[run.status] += 1
        return {
            **self.fields,
            "id": self.id,
            "status": self.status,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at or self.created_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
            "runs_total": len(self.runs),
            "runs_completed": counts["COMPLETED"],
            "runs_running": counts["RUNNING"],
            "runs_failed": counts["FAILED"],
        }


# --- deployments -----------------------------------------------------------------


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
            "created_at": _iso(self.created_at),
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
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
        }


# --- auth waits --------------------------------------------------------------------


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


class ControlPlane:
    """State and endpoints for bulk exports, deployments and auth waits.

    Every duration is in service seconds (see :class:`ServiceClock`); the limits
    default to spec 8.2. Attributes may be changed between requests, e.g.
    ``control.run_seconds = 5 * 3600`` to make every run overrun its 4 h limit.

    Example (a frozen clock, moved by hand)::

        control = ControlPlane(clock=ServiceClock(speed=0))
        export = control.create_export({"start_time": "2025-01-01T00:00:00Z",
                                        "end_time": "2025-01-03T00:00:00Z",
                                        "destination": {"type": "s3", "bucket_name": "b"}})
        control.clock.advance(60)
        control.get_export(export["id"])["status"]   # 'COMPLETED'
    """

    def __init__(
        self,
        clock: ServiceClock | None = None,
        *,
        start_delay_s: float = 1.0,
        run_seconds: float = 2.0,
        rows_per_run: int = 1000,
        retries: int = 20,
        retry_delay_s: float = 30.0,
        run_timeout_s: float = 4 * 3600.0,
        workflow_timeout_s: float = 72 * 3600.0,
        max_runs_per_export: int = 45,
        max_exports_per_workspace: int = 15,
        deploy_delay_s: float = 3.0,
    ) -> None:
        self.clock = clock or ServiceClock()
        self.start_delay_s = start_delay_s
        self.run_seconds = run_seconds
        self.rows_per_run = rows_per_run
        self.retries = retries
        self.retry_delay_s = retry_delay_s
        self.run_timeout_s = run_timeout_s
        self.workflow_timeout_s = workflow_timeout_s
        self.max_runs_per_export = max_runs_per_export
        self.max_exports_per_workspace = max_exports_per_workspace
        self.deploy_delay_s = deploy_delay_s
        self._lock = threading.RLock()
        self._auth_changed = threading.Condition(self._lock)
        self.reset()

    def reset(self) -> None:
        """Forget every export, deployment, auth wait and injected status."""
        with self._lock:
            self._exports: dict[str, _Export] = {}
            self._queues: dict[str, deque[str]] = {}
            self._events: list[tuple[float, int, str, str, int, int]] = []
            self._seq = itertools.count()
            self._deployments: dict[str, _Deployment] = {}
            self._auth: dict[str, _AuthWait] = {}
            self._next_statuses: deque[tuple[int, float | None]] = deque()

    # --- in-process knobs for tests -------------------------------------------------

    def fail_next(self, *statuses: int, retry_after: float | None = None) -> None:
        """Answer the next control-plane and bulk-export requests with these statuses (then serve normally).

        ``retry_after`` (seconds) is sent as Retry-After with each of them.
        """
        with self._lock:
            self._next_statuses.extend((s, retry_after) for s in statuses)

    def fail_runs(self, export_id: str, failures: Mapping[str | int, int], message: str = "injected failure") -> None:
        """Make runs of an export fail: partition (``"2025-01-02"`` or index) -> number of failed attempts.

        More than ``retries`` failures exhaust the run's retries, which fails the export.
        """
        with self._lock:
            export = self._exports[export_id]
            try:
                for run in self._select_runs(export, failures):
                    run.fail_times = _failures_for(run, failures)
                    run.fail_message = message
            except _Refuse as refusal:
                raise ValueError(refusal.body["detail"][0]["msg"]) from None

    def start_auth(
        self,
        token: str | None = None,
        *,
        complete_after_s: float | None = 0.0,
        expires_after_s: float | None = 600.0,
        auth_id: str | None = None,
    ) -> str:
        """Begin an auth wait and return its id (the spec does not show how one is obtained).

        ``complete_after_s=None`` keeps it pending until :meth:`complete_auth`;
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

    def complete_auth(self, auth_id: str, token: str | None = None) -> None:
        """Complete a pending auth wait now; waiting requests answer at once."""
        with self._lock:
            wait = self._auth[auth_id]
            if token is not None:
                wait.token = token
            wait.completes_at = self.clock.now()
            self._auth_changed.notify_all()

    # --- bulk exports ---------------------------------------------------------------

    def create_export(self, body: Any, workspace: str = "default") -> dict[str, Any]:
        """Validate a create body and start an export; raises ``_Refuse`` (422) on a bad body."""
        if not isinstance(body, dict):
            raise _invalid(["body"], "Input should be a JSON object", "dict_type")
        body = dict(body)
        local = body.pop("local", None) or {}
        if not isinstance(local, dict):
            raise _invalid(["body", "local"], "Input should be a JSON object", "dict_type")
        start = _parse_time(body.get("start_time"), "start_time")
        end = _parse_time(body.get("end_time"), "end_time")
        if end <= start:
            raise _invalid(["body", "end_time"], "end_time must be after start_time", "value_error")
        dest, dest_id = body.get("destination"), body.get("bulk_export_destination_id")
        if not isinstance(dest, dict) and not (isinstance(dest_id, str) and dest_id):
            raise _invalid(
                ["body", "destination"],
                "Field required: a destination object or a bulk_export_destination_id",
                "missing",
            )
        days = _partitions(start, end)
        if len(days) > _MAX_PARTITIONS:
            raise _invalid(["body", "end_time"], f"at most {_MAX_PARTITIONS} daily partitions per export", "value_error")
        run_seconds = _number(local, "run_seconds", self.run_seconds)
        rows = int(_number(local, "rows_per_run", self.rows_per_run))
        error = local.get("destination_error")
        failures = local.get("fail_runs") or {}
        if not isinstance(failures, dict):
            raise _invalid(["body", "local", "fail_runs"], "Input should be an object: partition -> failures", "dict_type")
        self.sync()
        with self._lock:
            now = self.clock.now()
            export_id = str(uuid.uuid4())
            runs = [_Run(id=str(uuid.uuid4()), index=i, partition=d.isoformat(), created_at=now) for i, d in enumerate(days)]
            export = _Export(
                id=export_id,
                workspace=workspace,
                created_at=now,
                fields=body,
                runs=runs,
                run_seconds=run_seconds,
                rows_per_run=rows,
                destination_error=str(error) if error else None,
            )
            for run in self._select_runs(export, failures):
                run.fail_times = _failures_for(run, failures)
                run.fail_message = str(local.get("fail_message") or "injected failure")
            self._exports[export_id] = export
            self._push(now + self.start_delay_s, "start", export_id)
            return export.as_json()

    def get_export(self, export_id: str, workspace: str | None = None) -> dict[str, Any]:
        self.sync()
        with self._lock:
            return self._export(export_id, workspace).as_json()

    def list_exports(self, workspace: str | None = None) -> list[dict[str, Any]]:
        self.sync()
        with self._lock:
            return [e.as_json() for e in self._exports.values() if workspace is None or e.workspace == workspace]

    def list_runs(self, export_id: str, workspace: str | None = None) -> list[dict[str, Any]]:
        self.sync()
        with self._lock:
            export = self._export(export_id, workspace)
            return [r.as_json(export) for r in export.runs]

    def cancel_export(self, export_id: str, workspace: str | None = None) -> dict[str, Any]:
        self.sync()
        with self._lock:
            export = self._export(export_id, workspace)
            if export.status in _FINAL:
                raise _Refuse(
                    409,
                    {
                        "detail": f"export {export_id} is already {export.status}; a finished export cannot be "
                        "cancelled (create a new export to run it again)",
                        "status": export.status,
                    },
                )
            now = self.clock.now()
            self._finish(export, "CANCELLED", now, runs_to="CANCELLED")
            return export.as_json()

    # --- the simulation ------------------------------------------------------------

    def sync(self) -> None:
        """Apply every scheduled event up to the clock's now, in time order."""
        now = self.clock.now()
        with self._lock:
            while self._events and self._events[0][0] <= now:
                at, _, kind, export_id, index, attempt = heapq.heappop(self._events)
                export = self._exports.get(export_id)
                if export is None:
                    continue
                if kind == "start":
                    self._on_start(export, at)
                elif kind == "timeout":
                    if export.status == "RUNNING":
                        self._finish(export, "TIMEDOUT", at, runs_to="TIMEDOUT")
                elif kind == "attempt_end":
                    self._on_attempt_end(export, export.runs[index], attempt, at)
                elif kind == "retry":
                    run = export.runs[index]
                    if export.status == "RUNNING" and run.status == "RUNNING" and run.attempts == attempt:
                        self._start_attempt(export, run, at)

    def _push(self, at: float, kind: str, export_id: str, index: int = -1, attempt: int = 0) -> None:
        heapq.heappush(self._events, (at, next(self._seq), kind, export_id, index, attempt))

    def _on_start(self, export: _Export, at: float) -> None:
        if export.status != "CREATED":
            return
        self._queues.setdefault(export.workspace, deque()).append(export.id)
        self._fill_workspace(export.workspace, at)

    def _fill_workspace(self, workspace: str, at: float) -> None:
        # Spec 8.2: at most 15 exports of a workspace run at once; the rest wait, first come first served.
        queue = self._queues.get(workspace, deque())
        running = sum(1 for e in self._exports.values() if e.workspace == workspace and e.status == "RUNNING")
        while queue and running < self.max_exports_per_workspace:
            export = self._exports[queue.popleft()]
            if export.status != "CREATED":
                continue
            export.status, export.started_at, export.updated_at = "RUNNING", at, at
            running += 1
            self._push(at + self.workflow_timeout_s, "timeout", export.id)
            self._fill_runs(export, at)

    def _fill_runs(self, export: _Export, at: float) -> None:
        # Spec 8.2: at most 45 runs of one export at once. A run waiting out its
        # retry delay keeps its slot: it is still in progress.
        active = sum(1 for r in export.runs if r.status == "RUNNING")
        for run in export.runs:
            if active >= self.max_runs_per_export:
                break
            if run.status == "CREATED":
                self._start_attempt(export, run, at)
                active += 1

    def _start_attempt(self, export: _Export, run: _Run, at: float) -> None:
        run.status, run.updated_at = "RUNNING", at
        if run.started_at is None:
            run.started_at = at
        run.attempts += 1
        if export.destination_error:
            duration = 0.0  # the destination refuses the first write
        else:
            remaining = max(0.0, export.run_seconds - run.done_s)
            duration = min(remaining, self.run_timeout_s)
            if run.fail_times > 0:
                duration /= 2  # an injected failure strikes halfway, after a checkpoint
        self._push(at + duration, "attempt_end", export.id, run.index, run.attempts)

    def _on_attempt_end(self, export: _Export, run: _Run, attempt: int, at: float) -> None:
        if export.status != "RUNNING" or run.status != "RUNNING" or run.attempts != attempt:
            return
        run.updated_at = at
        key = f"retry_{attempt - 1}"
        if export.destination_error:
            # Spec 3.1: storage and destination errors are not retried.
            run.errors[key] = f"destination error: {export.destination_error}"
            run.status, run.finished_at = "FAILED", at
            self._finish(export, "FAILED", at, runs_to="CANCELLED")
            return
        remaining = max(0.0, export.run_seconds - run.done_s)
        step = min(remaining, self.run_timeout_s)
        if run.fail_times > 0:
            run.fail_times -= 1
            run.done_s += step / 2
            self._checkpoint(export, run)
            error = f"{run.fail_message} (attempt {attempt})"
        elif remaining > self.run_timeout_s:
            run.done_s += step
            self._checkpoint(export, run)
            error = f"run exceeded its {self.run_timeout_s / 3600:g} h limit; resuming from the last checkpoint"
        else:
            run.done_s = export.run_seconds
            self._checkpoint(export, run)
            run.status, run.finished_at = "COMPLETED", at
            if all(r.status == "COMPLETED" for r in export.runs):
                self._finish(export, "COMPLETED", at, runs_to=None)
            else:
                self._fill_runs(export, at)
            return
        run.errors[key] = error
        if attempt - 1 < self.retries:
            self._push(at + self.retry_delay_s, "retry", export.id, run.index, attempt)
            return
        run.status, run.finished_at = "FAILED", at
        self._finish(export, "FAILED", at, runs_to="CANCELLED")

    def _checkpoint(self, export: _Export, run: _Run) -> None:
        run.files.append(f"{export.id}/{run.partition}/part-{len(run.files):05d}.parquet")

    def _finish(self, export: _Export, status: str, at: float, runs_to: str | None) -> None:
        was_running = export.status == "RUNNING"
        export.status, export.finished_at, export.updated_at = status, at, at
        if runs_to:
            for run in export.runs:
                if run.status not in _FINAL:
                    run.status, run.finished_at, run.updated_at = runs_to, at, at
        if was_running:
            self._fill_workspace(export.workspace, at)

    def _export(self, export_id: str, workspace: str | None) -> _Export:
        export = self._exports.get(export_id)
        if export is None or (workspace is not None and export.workspace != workspace):
            raise _Refuse(404, {"detail": f"export {export_id} not found"})
        return export

    def _select_runs(self, export: _Export, failures: Mapping[Any, Any]) -> list[_Run]:
        chosen = []
        for key in failures:
            run = _find_run(export, key)
            if run is None:
                raise _invalid(["body", "local", "fail_runs", str(key)], "no such partition (a date or an index)", "value_error")
            chosen.append(run)
        return chosen

    # --- deployments --------------------------------------------------------------

    def create_deployment(self, body: Any) -> dict[str, Any]:
        fields, local = _deployment_body(body)
        if not isinstance(fields.get("name"), str) or not fields["name"]:
            raise _invalid(["body", "name"], "Field required", "missing")
        with self._lock:
            now = self.clock.now()
            deployment = _Deployment(id=str(uuid.uuid4()), fields=fields, created_at=now, updated_at=now)
            self._new_revision(deployment, local, now)
            self._deployments[deployment.id] = deployment
            return deployment.as_json()

    def get_deployment(self, deployment_id: str) -> dict[str, Any]:
        with self._lock:
            return self._deployment(deployment_id).as_json()

    def update_deployment(self, deployment_id: str, body: Any) -> dict[str, Any]:
        fields, local = _deployment_body(body)
        with self._lock:
            deployment = self._deployment(deployment_id)
            now = self.clock.now()
            deployment.fields.update(fields)
            deployment.updated_at = now
            self._new_revision(deployment, local, now)
            return deployment.as_json()

    def get_revision(self, deployment_id: str, revision_id: str) -> dict[str, Any]:
        with self._lock:
            revision = self._deployment(deployment_id).revisions.get(revision_id)
            if revision is None:
                raise _Refuse(404, {"detail": f"revision {revision_id} of deployment {deployment_id} not found"})
            return revision.as_json(self.clock.now())

    def _new_revision(self, deployment: _Deployment, local: dict[str, Any], now: float) -> None:
        fail = local.get("fail")
        if fail is not None and fail not in _DEPLOY_FAILURES:
            raise _invalid(["body", "local", "fail"], f"one of {sorted(_DEPLOY_FAILURES)}", "enum")
        revision = _Revision(
            id=str(uuid.uuid4()),
            deployment_id=deployment.id,
            created_at=now,
            delay_s=_number(local, "deploy_seconds", self.deploy_delay_s),
            fail=fail,
            fields={"source": deployment.fields.get("source")} if "source" in deployment.fields else {},
        )
        deployment.revisions[revision.id] = revision
        deployment.latest_revision_id = revision.id

    def _deployment(self, deployment_id: str) -> _Deployment:
        deployment = self._deployments.get(deployment_id)
        if deployment is None:
            raise _Refuse(404, {"detail": f"deployment {deployment_id} not found"})
        return deployment

    # --- auth waits -----------------------------------------------------------------

    def wait_auth(self, auth_id: str, timeout_s: float, stopping: threading.Event | None = None) -> dict[str, Any]:
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

    # --- HTTP -------------------------------------------------------------------------

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
        try:
            return self._serve(method, path, route, query, headers, data, stopping)
        except _Refuse as refusal:
            return ControlReply(refusal.status, refusal.body)

    def _serve(
        self,
        method: str,
        path: str,
        route: str,
        query: str,
        headers: Mapping[str, str],
        data: bytes,
        stopping: threading.Event | None,
    ) -> ControlReply:
        workspace = (headers.get("x-tenant-id") or "default").lower()
        match = _EXPORTS_ROUTE.match(route)
        if match and not path.startswith("/v2/"):
            export_id, runs = match["id"], match["runs"]
            if export_id is None:
                if method == "GET":
                    return ControlReply(200, self.list_exports(workspace))
                if method == "POST":
                    return ControlReply(201, self.create_export(_json(data), workspace))
            elif runs:
                if method == "GET":
                    return ControlReply(200, self.list_runs(export_id, workspace))
            elif method == "GET":
                return ControlReply(200, self.get_export(export_id, workspace))
            elif method == "PATCH":
                body = _json(data)
                if not isinstance(body, dict) or body.get("status") != "Cancelled":
                    raise _invalid(["body", "status"], "Input should be 'Cancelled'", "literal_error")
                return ControlReply(200, self.cancel_export(export_id, workspace))
            return ControlReply(405, {"detail": "Method Not Allowed"})
        match = _DEPLOYMENTS_ROUTE.match(path)
        if match:
            deployment_id, revision_id = match["id"], match["rev"]
            if deployment_id is None:
                if method == "POST":
                    return ControlReply(201, self.create_deployment(_json(data)))
            elif revision_id is not None:
                if method == "GET":
                    return ControlReply(200, self.get_revision(deployment_id, revision_id))
            elif method == "GET":
                return ControlReply(200, self.get_deployment(deployment_id))
            elif method == "PATCH":
                return ControlReply(200, self.update_deployment(deployment_id, _json(data)))
            return ControlReply(405, {"detail": "Method Not Allowed"})
        match = _AUTH_ROUTE.match(path)
        if match:
            if method != "GET":
                return ControlReply(405, {"detail": "Method Not Allowed"})
            return ControlReply(200, self.wait_auth(match["id"], _timeout_param(query), stopping))
        return ControlReply(404, {"detail": "Not Found"})


def _failures_for(run: _Run, failures: Mapping[Any, Any]) -> int:
    for key, times in failures.items():
        if str(key) in (run.partition, str(run.index)):
            if not isinstance(times, int) or isinstance(times, bool) or times < 0:
                raise _invalid(["body", "local", "fail_runs", str(key)], "a whole number of failed attempts", "int_type")
            return times
    return 0


def _find_run(export: _Export, key: Any) -> _Run | None:
    for run in export.runs:
        if str(key) in (run.partition, str(run.index)):
            return run
    return None


def _partitions(start: datetime, end: datetime) -> list[date]:
    """One partition per UTC day the half-open range [start, end) touches."""
    first = start.astimezone(timezone.utc).date()
    last = (end.astimezone(timezone.utc) - timedelta(microseconds=1)).date()
    count = (last - first).days + 1
    if count > _MAX_PARTITIONS:
        return [first] * count  # only the length is looked at
    return [first + timedelta(days=i) for i in range(count)]


def _number(local: Mapping[str, Any], name: str, default: float) -> float:
    value = local.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise _invalid(["body", "local", name], "a number of 0 or more", "float_type")
    return float(value)


def _json(data: bytes) -> Any:
    try:
        return orjson.loads(data) if data else None
    except orjson.JSONDecodeError as exc:
        raise _invalid(["body"], f"body is not valid JSON ({exc})", "json_invalid") from None


def _deployment_body(body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(body, dict):
        raise _invalid(["body"], "Input should be a JSON object", "dict_type")
    fields = dict(body)
    local = fields.pop("local", None) or {}
    if not isinstance(local, dict):
        raise _invalid(["body", "local"], "Input should be a JSON object", "dict_type")
    for name in ("id", "latest_revision_id", "created_at", "updated_at"):
        fields.pop(name, None)  # the service's own fields
    return fields, local


def _timeout_param(query: str) -> float:
    values = parse_qs(query, keep_blank_values=True).get("timeout")
    if not values:
        return 30.0
    raw = values[-1]
    if not _INT.match(raw.strip()):
        raise _invalid(["query", "timeout"], "Input should be a valid integer, unable to parse string as an integer", "int_parsing")
    value = int(raw)
    if value < 0:
        raise _invalid(["query", "timeout"], "Input should be greater than or equal to 0", "greater_than_equal")
    if value > _MAX_AUTH_WAIT_S:
        raise _invalid(["query", "timeout"], f"Input should be less than or equal to {_MAX_AUTH_WAIT_S}", "less_than_equal")
    return float(value)
