"""The local service's bulk exports (spec 2.4, 2.5, 3.1, 4.3, 8.2), on a :class:`~._control_common.ServiceClock`.

What the spec leaves "not shown" is chosen here and listed in ``docs/api.md``::

    POST /api/v1/bulk-exports  {"start_time", "end_time", "destination" | "bulk_export_destination_id", ...}
      CREATED --(start_delay_s, and one of the workspace's 15 export slots)--> RUNNING
      RUNNING: one run per UTC day, at most 45 running at once, the rest CREATED (queued)
        run attempt fails -> errors["retry_<attempt>"], 30 s fixed delay, resume from checkpoint
        21st failure (20 retries spent) -> run FAILED -> export FAILED (other runs CANCELLED)
        every run COMPLETED -> export COMPLETED
        72 h since RUNNING -> export TIMEDOUT (not retried)
      PATCH {"status": "Cancelled"} from CREATED or RUNNING -> CANCELLED; 409 from a final status

State is a small discrete-event simulation brought up to the clock's ``now`` at
the start of every call (:meth:`BulkExports.sync`).
"""

from __future__ import annotations

import heapq
import itertools
import re
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any, Mapping

from ._control_common import ControlReply, ControlRequest, Part, Refuse, ServiceClock, invalid, iso, json_body, not_allowed, number

__all__ = ["BulkExports", "EXPORT_STATUSES"]

EXPORT_STATUSES = ("CREATED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEDOUT")
_FINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEDOUT"})
_ROUTE = re.compile(r"^/bulk-exports(?:/(?P<id>[^/]+)(?P<runs>/runs)?)?/?$")
_MAX_PARTITIONS = 3660  # ten years of days; more is surely a mistake in the request


def _parse_time(value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise invalid(["body", name], "Field required: an ISO 8601 timestamp", "missing" if value is None else "datetime_type")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise invalid(["body", name], f"Input should be a valid ISO 8601 datetime, got {value[:40]!r}", "datetime_parsing") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


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
            **_times(self),
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
            **_times(self),
            "runs_total": len(self.runs),
            "runs_completed": counts["COMPLETED"],
            "runs_running": counts["RUNNING"],
            "runs_failed": counts["FAILED"],
        }


def _times(item: _Run | _Export) -> dict[str, str | None]:
    """The four times an export and each of its runs answer with; updated_at is created_at until something changes."""
    return {
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at or item.created_at),
        "started_at": iso(item.started_at),
        "finished_at": iso(item.finished_at),
    }


class BulkExports(Part):
    """Bulk exports of every workspace, and their runs.

    Every duration is in service seconds; the limits default to spec 8.2.
    Attributes may be changed between requests, e.g. ``exports.run_seconds = 5 * 3600``
    to make every run overrun its 4 h limit.

    Example (a frozen clock, moved by hand)::

        exports = BulkExports(ServiceClock(speed=0))
        export = exports.create({"start_time": "2025-01-01T00:00:00Z",
                                 "end_time": "2025-01-03T00:00:00Z",
                                 "destination": {"type": "s3", "bucket_name": "b"}})
        exports.clock.advance(60)
        exports.get(export["id"])["status"]   # 'COMPLETED'
    """

    def __init__(
        self,
        clock: ServiceClock,
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
    ) -> None:
        self.start_delay_s = start_delay_s
        self.run_seconds = run_seconds
        self.rows_per_run = rows_per_run
        self.retries = retries
        self.retry_delay_s = retry_delay_s
        self.run_timeout_s = run_timeout_s
        self.workflow_timeout_s = workflow_timeout_s
        self.max_runs_per_export = max_runs_per_export
        self.max_exports_per_workspace = max_exports_per_workspace
        super().__init__(clock)

    def reset(self) -> None:
        """Forget every export."""
        with self._lock:
            self._exports: dict[str, _Export] = {}
            self._queues: dict[str, deque[str]] = {}
            self._events: list[tuple[float, int, str, str, int, int]] = []
            self._seq = itertools.count()

    def serve(self, request: ControlRequest) -> ControlReply | None:
        """Answer ``/bulk-exports...`` (main API paths, not ``/v2``); None for any other route."""
        match = _ROUTE.match(request.route)
        if not match or request.path.startswith("/v2/"):
            return None
        export_id, runs, method, workspace = match["id"], match["runs"], request.method, request.workspace
        if export_id is None:
            if method == "GET":
                return ControlReply(200, self.all(workspace))
            if method == "POST":
                return ControlReply(201, self.create(json_body(request.data), workspace))
        elif runs:
            if method == "GET":
                return ControlReply(200, self.runs(export_id, workspace))
        elif method == "GET":
            return ControlReply(200, self.get(export_id, workspace))
        elif method == "PATCH":
            body = json_body(request.data)
            if not isinstance(body, dict) or body.get("status") != "Cancelled":
                raise invalid(["body", "status"], "Input should be 'Cancelled'", "literal_error")
            return ControlReply(200, self.cancel(export_id, workspace))
        return not_allowed()

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
            except Refuse as refusal:
                raise ValueError(refusal.body["detail"][0]["msg"]) from None

    def create(self, body: Any, workspace: str = "default") -> dict[str, Any]:
        """Validate a create body and start an export; raises ``Refuse`` (422) on a bad body."""
        if not isinstance(body, dict):
            raise invalid(["body"], "Input should be a JSON object", "dict_type")
        body = dict(body)
        local = body.pop("local", None) or {}
        if not isinstance(local, dict):
            raise invalid(["body", "local"], "Input should be a JSON object", "dict_type")
        start = _parse_time(body.get("start_time"), "start_time")
        end = _parse_time(body.get("end_time"), "end_time")
        if end <= start:
            raise invalid(["body", "end_time"], "end_time must be after start_time", "value_error")
        dest, dest_id = body.get("destination"), body.get("bulk_export_destination_id")
        if not isinstance(dest, dict) and not (isinstance(dest_id, str) and dest_id):
            raise invalid(
                ["body", "destination"],
                "Field required: a destination object or a bulk_export_destination_id",
                "missing",
            )
        days = _partitions(start, end)
        if len(days) > _MAX_PARTITIONS:
            raise invalid(["body", "end_time"], f"at most {_MAX_PARTITIONS} daily partitions per export", "value_error")
        run_seconds = number(local, "run_seconds", self.run_seconds)
        rows = int(number(local, "rows_per_run", self.rows_per_run))
        error = local.get("destination_error")
        failures = local.get("fail_runs") or {}
        if not isinstance(failures, dict):
            raise invalid(["body", "local", "fail_runs"], "Input should be an object: partition -> failures", "dict_type")
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

    def get(self, export_id: str, workspace: str | None = None) -> dict[str, Any]:
        self.sync()
        with self._lock:
            return self._export(export_id, workspace).as_json()

    def all(self, workspace: str | None = None) -> list[dict[str, Any]]:
        self.sync()
        with self._lock:
            return [e.as_json() for e in self._exports.values() if workspace is None or e.workspace == workspace]

    def runs(self, export_id: str, workspace: str | None = None) -> list[dict[str, Any]]:
        self.sync()
        with self._lock:
            export = self._export(export_id, workspace)
            return [r.as_json(export) for r in export.runs]

    def cancel(self, export_id: str, workspace: str | None = None) -> dict[str, Any]:
        self.sync()
        with self._lock:
            export = self._export(export_id, workspace)
            if export.status in _FINAL:
                raise Refuse(
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
            raise Refuse(404, {"detail": f"export {export_id} not found"})
        return export

    def _select_runs(self, export: _Export, failures: Mapping[Any, Any]) -> list[_Run]:
        chosen = []
        for key in failures:
            run = _find_run(export, key)
            if run is None:
                raise invalid(["body", "local", "fail_runs", str(key)], "no such partition (a date or an index)", "value_error")
            chosen.append(run)
        return chosen


def _failures_for(run: _Run, failures: Mapping[Any, Any]) -> int:
    for key, times in failures.items():
        if str(key) in (run.partition, str(run.index)):
            if not isinstance(times, int) or isinstance(times, bool) or times < 0:
                raise invalid(["body", "local", "fail_runs", str(key)], "a whole number of failed attempts", "int_type")
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
