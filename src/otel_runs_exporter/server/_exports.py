"""The local service's bulk exports (spec 2.4, 2.5, 3.1, 4.3, 8.2), on a :class:`~._control_common.ServiceClock`.

What the spec leaves "not shown" is chosen here and listed in ``docs/api.md`` and
``docs/local-service.md``::

    POST /api/v1/bulk-exports  {"start_time", "end_time", "destination" | "bulk_export_destination_id", ...}
      CREATED --(start_delay_s, and one of the workspace's 15 export slots)--> RUNNING
      RUNNING: one run per UTC day, at most 45 running at once, the rest CREATED (queued)
        run attempt fails -> errors["retry_<attempt>"], 30 s fixed delay, resume from checkpoint
        21st failure (20 retries spent) -> run FAILED -> export FAILED (other runs CANCELLED)
        every run COMPLETED -> export COMPLETED
        72 h since RUNNING -> export TIMEDOUT (not retried)
      PATCH {"status": "Cancelled"} from CREATED or RUNNING -> CANCELLED; 409 from a final status
      at most 100 unfinished (CREATED or RUNNING) exports per workspace: 409 past it
      a finished export is forgotten 7 days (service time) after it finished, or
      earlier when its workspace already keeps 1000 finished ones (oldest first)

State is a small discrete-event simulation brought up to the clock's ``now`` at
the start of every call (:meth:`BulkExports.sync`).

Memory does not depend on an export's time range. Runs are never materialised:
run ``i`` is partition ``first_day + i``, and what happened to it is a pure
function of when it started (:func:`_history`), so an export keeps only
counters, the start times of its runs (run-length encoded: runs start in index
order, up to 45 at the same instant) and its injected failures in two flat
arrays. ``GET .../runs`` computes every run's record when asked.
"""

from __future__ import annotations

import heapq
import itertools
import re
import uuid
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any, Iterator, Mapping

import orjson

from ._control_common import Part, Refuse, ServiceClock, invalid, iso, number, split_local

__all__ = ["BulkExports", "EXPORT_STATUSES"]

EXPORT_STATUSES = ("CREATED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEDOUT")
_FINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEDOUT"})
_MAX_PARTITIONS = 3660  # ten years of days; more is surely a mistake in the request
_MAX_MESSAGE_CHARS = 500  # fail_message / destination_error: each is repeated in up to 21 errors per run
_INDEX_KEY = re.compile(r"0|[1-9][0-9]{0,6}")
_DATE_KEY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_UINT32_MAX = 2**32 - 1
_COMPACT_AFTER = 256  # stale events; compacting only when half the heap is stale keeps its cost amortised

# Events at one instant are applied in this order. Completions come before a
# timeout or a failure at the same instant so that a run's record (computed
# later from its history) and the export's counters always agree on it.
_COMPLETION, _START, _TIMEOUT, _FAILURE = 0, 1, 1, 2


def _parse_time(value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise invalid(["body", name], "Field required: an ISO 8601 timestamp", "missing" if value is None else "datetime_type")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise invalid(["body", name], f"Input should be a valid ISO 8601 datetime, got {value[:40]!r}", "datetime_parsing") from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    try:
        # An offset can push year 1 or 9999 out of datetime's range once in UTC.
        return moment.astimezone(timezone.utc)
    except OverflowError:
        raise invalid(["body", name], f"{value[:40]!r} is out of range once converted to UTC", "datetime_parsing") from None


@dataclass(frozen=True)
class _Attempt:
    """One attempt of a run: when it started and ended, the work checkpointed after it, and how it ended."""

    start: float
    end: float
    done_s: float
    error: str | None  # None: the run completed; "injected", "overrun" or "destination"
    last: bool  # the run ends here (completed, or failed for good)


@dataclass
class _Export:
    id: str
    workspace: str
    created_at: float
    fields_json: bytes  # the create body as sent (minus "local"): bytes, not parsed objects, to bound its size
    first_day: date
    total: int
    run_seconds: float
    rows_per_run: int
    run_timeout_s: float
    retries: int
    retry_delay_s: float
    destination_error: str | None
    status: str = "CREATED"
    updated_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    runs_to: str | None = None  # what the runs still in progress became when the export finished early
    failed_index: int | None = None  # the run whose failure failed the export
    next_index: int = 0  # runs [0, next_index) have started, in index order
    completed: int = 0
    pending: int = 0  # events of this export still in the heap
    # Run-length encoded start times: runs [starts_from[k], starts_from[k+1]) started at starts_at[k].
    starts_from: array[int] = field(default_factory=lambda: array("I"))
    starts_at: array[float] = field(default_factory=lambda: array("d"))
    # Injected failures, sorted by run index: fail_times[k] failed attempts for run fail_index[k].
    fail_index: array[int] = field(default_factory=lambda: array("I"))
    fail_times: array[int] = field(default_factory=lambda: array("I"))
    fail_message_id: array[int] = field(default_factory=lambda: array("H"))
    fail_messages: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        final = self.status in _FINAL
        return {
            **orjson.loads(self.fields_json),
            "id": self.id,
            "status": self.status,
            **_times(self.created_at, self.updated_at, self.started_at, self.finished_at),
            "runs_total": self.total,
            "runs_completed": self.completed,
            "runs_running": 0 if final else self.next_index - self.completed,
            "runs_failed": 0 if self.failed_index is None else 1,
        }

    def partition(self, index: int) -> str:
        return (self.first_day + timedelta(days=index)).isoformat()

    def started(self, index: int) -> float:
        return self.starts_at[bisect_right(self.starts_from, index) - 1]

    def note_start(self, index: int, at: float) -> None:
        if not self.starts_at or self.starts_at[-1] != at:
            self.starts_from.append(index)
            self.starts_at.append(at)

    def failures(self, index: int) -> tuple[int, str]:
        k = bisect_left(self.fail_index, index)
        if k < len(self.fail_index) and self.fail_index[k] == index:
            return self.fail_times[k], self.fail_messages[self.fail_message_id[k]]
        return 0, "injected failure"

    def set_failures(self, index: int, times: int, message: str) -> None:
        if message not in self.fail_messages:
            self.fail_messages.append(message)
        message_id = self.fail_messages.index(message)
        # More failures than attempts all mean "exhaust the retries"; clamping keeps them in 32 bits.
        times = min(times, self.retries + 1, _UINT32_MAX)
        k = bisect_left(self.fail_index, index)
        if k < len(self.fail_index) and self.fail_index[k] == index:
            self.fail_times[k], self.fail_message_id[k] = times, message_id
        else:
            self.fail_index.insert(k, index)
            self.fail_times.insert(k, times)
            self.fail_message_id.insert(k, message_id)

    def history(self, index: int) -> Iterator[_Attempt]:
        times, _ = self.failures(index)
        return _history(
            self.started(index),
            times,
            self.run_seconds,
            self.run_timeout_s,
            self.retry_delay_s,
            self.retries,
            self.destination_error is not None,
        )

    def run_json(self, index: int, now: float) -> dict[str, Any]:
        """Run ``index`` as it stands at ``now``, or as it stood when the export finished."""
        final = self.status in _FINAL
        cut = self.finished_at if final and self.finished_at is not None else now
        status, started_at, finished_at, updated_at = "CREATED", None, None, None
        attempts, done_s, files = 0, 0.0, 0
        errors: dict[str, str] = {}
        if index < self.next_index:
            status, started_at = "RUNNING", self.started(index)
            updated_at = started_at
            _, message = self.failures(index)
            for n, attempt in enumerate(self.history(index)):
                if attempt.start > cut:
                    break
                attempts += 1
                updated_at = attempt.start
                if attempt.end > cut:
                    break
                if attempt.last and attempt.error and final and index != self.failed_index:
                    break  # this failure and the export's end fell on one instant, and the end came first
                if attempt.error == "destination":
                    errors[f"retry_{n}"] = f"destination error: {self.destination_error}"
                else:
                    files += 1
                    done_s = attempt.done_s
                    if attempt.error == "injected":
                        errors[f"retry_{n}"] = f"{message} (attempt {n + 1})"
                    elif attempt.error == "overrun":
                        errors[f"retry_{n}"] = (
                            f"run exceeded its {self.run_timeout_s / 3600:g} h limit; resuming from the last checkpoint"
                        )
                updated_at = attempt.end
                if attempt.last:
                    status, finished_at = ("COMPLETED" if attempt.error is None else "FAILED"), attempt.end
                    break
        if status in ("CREATED", "RUNNING") and final:
            status, finished_at, updated_at = self.runs_to or "CANCELLED", self.finished_at, self.finished_at
        if self.run_seconds:
            rows = int(round(self.rows_per_run * min(1.0, done_s / self.run_seconds)))
        else:
            rows = self.rows_per_run if files else 0  # no work to divide: all rows at the first checkpoint
        partition = self.partition(index)
        return {
            "id": str(uuid.uuid5(uuid.UUID(self.id), str(index))),  # stable across reads, never stored
            "bulk_export_id": self.id,
            "status": status,
            **_times(self.created_at, updated_at, started_at, finished_at),
            "partition": partition,
            "rows_exported": rows,
            "retries": max(0, attempts - 1),
            "errors": errors,
            "metadata": {
                "latest_cursor": f"{partition}:{rows}" if rows else None,
                "rows_exported": rows,
                "files": [f"{self.id}/{partition}/part-{k:05d}.parquet" for k in range(files)],
            },
        }


def _history(
    start: float, failures: int, run_seconds: float, limit_s: float, delay_s: float, retries: int, destination_error: bool
) -> Iterator[_Attempt]:
    """Every attempt of a run that starts at ``start``: the single source of both the simulation and the run records.

    An injected failure strikes halfway through an attempt, after a checkpoint; an
    attempt longer than ``limit_s`` stops at the limit with a checkpoint; both are
    retried after ``delay_s`` from the checkpoint, ``retries`` times. A destination
    error fails the first attempt at once and is not retried (spec 3.1).
    """
    at, done = start, 0.0
    for attempt in range(retries + 1):
        if destination_error:
            yield _Attempt(at, at, done, "destination", True)
            return
        remaining = max(0.0, run_seconds - done)
        step = min(remaining, limit_s)
        if attempt < failures:
            done += step / 2
            end, error = at + step / 2, "injected"
        elif remaining > limit_s:
            done += step
            end, error = at + step, "overrun"
        else:
            yield _Attempt(at, at + remaining, run_seconds, None, True)
            return
        last = attempt >= retries
        yield _Attempt(at, end, done, error, last)
        at = end + delay_s


def _times(created: float, updated: float | None, started: float | None, finished: float | None) -> dict[str, str | None]:
    """The four times an export and each of its runs answer with; updated_at is created_at until something changes."""
    return {
        "created_at": iso(created),
        "updated_at": iso(updated or created),
        "started_at": iso(started),
        "finished_at": iso(finished),
    }


@dataclass
class _Workspace:
    """One workspace's share of the state: what bounds it, and its queue of exports waiting for a slot."""

    exports: dict[str, None] = field(default_factory=dict)  # ids in creation order: the list order
    finished: dict[str, None] = field(default_factory=dict)  # ids in finishing order: the eviction order
    queue: deque[str] = field(default_factory=deque)
    unfinished: int = 0
    running: int = 0


class BulkExports(Part):
    """Bulk exports of every workspace, and their runs.

    Every duration is in service seconds; the limits default to spec 8.2.
    ``retries``, ``retry_delay_s`` and ``run_timeout_s`` (like ``run_seconds``) are
    read when an export is created and apply to the exports created afterwards:
    a run's whole history follows from them and from when it started.

    Bounds (each an attribute, checked at every create, see ``docs/local-service.md``):
    ``max_unfinished_per_workspace`` (100) and ``max_unfinished_total`` (1,000)
    exports CREATED or RUNNING, past which a create is a 409;
    ``max_finished_per_workspace`` (1,000) and ``max_finished_total`` (5,000)
    finished exports kept, the oldest forgotten first; ``retention_s`` (7 days)
    after which a finished export is forgotten; ``max_create_body_bytes`` (16 KiB).

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
        max_unfinished_per_workspace: int = 100,
        max_unfinished_total: int = 1000,
        max_finished_per_workspace: int = 1000,
        max_finished_total: int = 5000,
        retention_s: float = 7 * 86400.0,
        max_create_body_bytes: int = 16 * 1024,
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
        self.max_unfinished_per_workspace = max_unfinished_per_workspace
        self.max_unfinished_total = max_unfinished_total
        self.max_finished_per_workspace = max_finished_per_workspace
        self.max_finished_total = max_finished_total
        self.retention_s = retention_s
        self.max_create_body_bytes = max_create_body_bytes
        super().__init__(clock)

    def reset(self) -> None:
        """Forget every export."""
        with self._lock:
            self._exports: dict[str, _Export] = {}
            self._workspaces: dict[str, _Workspace] = {}
            self._finished: dict[str, None] = {}  # every workspace's finished ids, in finishing order
            self._unfinished_total = 0
            self._events: list[tuple[float, int, int, str, str, int]] = []
            self._stale = 0  # events in the heap whose export has finished or been forgotten
            self._seq = itertools.count()

    def fail_runs(self, export_id: str, failures: Mapping[str | int, int], message: str = "injected failure") -> None:
        """Make runs of an export fail: partition (``"2025-01-02"`` or index) -> number of failed attempts.

        More than ``retries`` failures exhaust the run's retries, which fails the export.
        Only runs that have not started can be changed (a started run's history is fixed);
        a started one is a ValueError naming it.
        """
        self.sync()
        with self._lock:
            export = self._exports[export_id]
            try:
                chosen = self._select_runs(export, failures)
            except Refuse as refusal:
                raise ValueError(refusal.body["detail"][0]["msg"]) from None
            started = [export.partition(i) for i, _ in chosen if i < export.next_index]
            if started:
                raise ValueError(
                    f"runs {', '.join(started)} of export {export_id} have already started; "
                    "only runs not started yet can be made to fail"
                )
            for index, times in chosen:
                export.set_failures(index, times, message)

    def create(self, body: Any, workspace: str = "default") -> dict[str, Any]:
        """Validate a create body and start an export; raises ``Refuse``: 422 on a bad body, 413, or 409 past a limit."""
        body, local = split_local(body)
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
        first_day = start.date()
        total = ((end - timedelta(microseconds=1)).date() - first_day).days + 1  # UTC days [start, end) touches
        if total > _MAX_PARTITIONS:
            raise invalid(
                ["body", "end_time"],
                f"at most {_MAX_PARTITIONS} daily partitions (ten years) per export, got {total}; split the range",
                "value_error",
            )
        fields_json = orjson.dumps(body)
        self.check_create_size(len(fields_json))
        run_seconds = number(local, "run_seconds", self.run_seconds)
        rows = int(number(local, "rows_per_run", self.rows_per_run))
        error = _message(local, "destination_error")
        message = _message(local, "fail_message") or "injected failure"
        failures = local.get("fail_runs") or {}
        if not isinstance(failures, dict):
            raise invalid(["body", "local", "fail_runs"], "Input should be an object: partition -> failures", "dict_type")
        self.sync()
        with self._lock:
            self._check_room(workspace)
            now = self.clock.now()
            export = _Export(
                id=str(uuid.uuid4()),
                workspace=workspace,
                created_at=now,
                fields_json=fields_json,
                first_day=first_day,
                total=total,
                run_seconds=run_seconds,
                rows_per_run=rows,
                run_timeout_s=float(self.run_timeout_s),
                retries=max(0, int(self.retries)),  # a run has at least its first attempt
                retry_delay_s=float(self.retry_delay_s),
                destination_error=error,
            )
            for index, times in self._select_runs(export, failures):
                export.set_failures(index, times, message)
            self._exports[export.id] = export
            space = self._workspaces.setdefault(workspace, _Workspace())
            space.exports[export.id] = None
            space.unfinished += 1
            self._unfinished_total += 1
            self._push(now + self.start_delay_s, _START, "start", export)
            return export.as_json()

    def get(self, export_id: str, workspace: str | None = None) -> dict[str, Any]:
        self.sync()
        with self._lock:
            return self._export(export_id, workspace).as_json()

    def all(self, workspace: str | None = None) -> list[dict[str, Any]]:
        self.sync()
        with self._lock:
            if workspace is None:
                return [e.as_json() for e in self._exports.values()]
            space = self._workspaces.get(workspace)
            return [self._exports[i].as_json() for i in space.exports] if space else []

    def runs(self, export_id: str, workspace: str | None = None) -> list[dict[str, Any]]:
        self.sync()
        with self._lock:
            export = self._export(export_id, workspace)
            now = self.clock.now()
            return [export.run_json(i, now) for i in range(export.total)]

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
            self._finish(export, "CANCELLED", self.clock.now(), runs_to="CANCELLED")
            return export.as_json()

    # --- bounds ------------------------------------------------------------------------

    def _check_room(self, workspace: str) -> None:
        space = self._workspaces.get(workspace)
        unfinished = space.unfinished if space else 0
        how = (
            "wait for one to finish or cancel one (PATCH /api/v1/bulk-exports/{export_id} "
            'with {"status": "Cancelled"}), then create again'
        )
        if unfinished >= self.max_unfinished_per_workspace:
            raise Refuse(
                409,
                {
                    "detail": f"workspace {workspace!r} already has {unfinished} exports not finished (CREATED or RUNNING), "
                    f"the most one workspace may have; {how}",
                    "limit": self.max_unfinished_per_workspace,
                    "unfinished": unfinished,
                },
            )
        if self._unfinished_total >= self.max_unfinished_total:
            raise Refuse(
                409,
                {
                    "detail": f"the local service already holds {self._unfinished_total} exports not finished "
                    f"(CREATED or RUNNING) across all workspaces, the most it keeps; {how}",
                    "limit": self.max_unfinished_total,
                    "unfinished": self._unfinished_total,
                },
            )

    def check_create_size(self, size: int) -> None:
        """Refuse (413) a create body of ``size`` bytes past ``max_create_body_bytes``, before it is parsed."""
        if size <= self.max_create_body_bytes:
            return
        raise Refuse(
            413,
            {
                "detail": f"export create body is {size} bytes; at most {self.max_create_body_bytes} are kept per export "
                "(a destination and a few fields need far less)",
                "size": size,
                "max_size": self.max_create_body_bytes,
            },
        )

    def _expire(self, now: float) -> None:
        # Finished ids are in finishing order, so the expired ones are at the front.
        while self._finished:
            export = self._exports[next(iter(self._finished))]
            if export.finished_at is None or export.finished_at + self.retention_s > now:
                break
            self._forget(export)

    def _trim_finished(self, space: _Workspace) -> None:
        while space.finished and len(space.finished) > self.max_finished_per_workspace:
            self._forget(self._exports[next(iter(space.finished))])
        while self._finished and len(self._finished) > self.max_finished_total:
            self._forget(self._exports[next(iter(self._finished))])

    def _forget(self, export: _Export) -> None:
        del self._exports[export.id]
        self._finished.pop(export.id, None)
        space = self._workspaces[export.workspace]
        space.exports.pop(export.id, None)
        space.finished.pop(export.id, None)
        if not space.exports:
            del self._workspaces[export.workspace]

    # --- the simulation ------------------------------------------------------------

    def sync(self) -> None:
        """Apply every scheduled event up to the clock's now, in time order; then forget what has expired."""
        now = self.clock.now()
        with self._lock:
            while self._events and self._events[0][0] <= now:
                at, _, _, kind, export_id, index = heapq.heappop(self._events)
                export = self._exports.get(export_id)
                if export is None or export.status in _FINAL:
                    self._stale -= 1
                    continue
                export.pending -= 1
                if kind == "start":
                    self._on_start(export, at)
                elif kind == "timeout":
                    if export.status == "RUNNING":
                        self._finish(export, "TIMEDOUT", at, runs_to="TIMEDOUT")
                elif kind == "completed":
                    export.completed += 1
                    if export.completed == export.total:
                        self._finish(export, "COMPLETED", at, runs_to=None)
                    else:
                        self._fill_runs(export, at)
                elif kind == "failed":
                    export.failed_index = index
                    self._finish(export, "FAILED", at, runs_to="CANCELLED")
            self._expire(now)
            if self._stale > _COMPACT_AFTER and 2 * self._stale > len(self._events):
                self._compact()

    def _compact(self) -> None:
        # Finished exports' events would only be skipped when due (a timeout can be
        # 72 h away); without this, create-and-cancel in a loop would grow the heap.
        self._events = [e for e in self._events if (x := self._exports.get(e[4])) is not None and x.status not in _FINAL]
        heapq.heapify(self._events)
        self._stale = 0

    def _push(self, at: float, order: int, kind: str, export: _Export, index: int = -1) -> None:
        export.pending += 1
        heapq.heappush(self._events, (at, order, next(self._seq), kind, export.id, index))

    def _on_start(self, export: _Export, at: float) -> None:
        space = self._workspaces[export.workspace]
        space.queue.append(export.id)
        self._fill_workspace(space, at)

    def _fill_workspace(self, space: _Workspace, at: float) -> None:
        # Spec 8.2: at most 15 exports of a workspace run at once; the rest wait, first come first served.
        while space.queue and space.running < self.max_exports_per_workspace:
            export = self._exports.get(space.queue.popleft())
            if export is None or export.status != "CREATED":
                continue
            export.status, export.started_at, export.updated_at = "RUNNING", at, at
            space.running += 1
            self._push(at + self.workflow_timeout_s, _TIMEOUT, "timeout", export)
            self._fill_runs(export, at)

    def _fill_runs(self, export: _Export, at: float) -> None:
        # Spec 8.2: at most 45 runs of one export at once. A run waiting out its
        # retry delay keeps its slot: it is still in progress.
        while export.next_index < export.total and export.next_index - export.completed < self.max_runs_per_export:
            index = export.next_index
            export.next_index += 1
            export.note_start(index, at)
            *_, last = export.history(index)
            if last.error is None:
                self._push(last.end, _COMPLETION, "completed", export, index)
            else:
                self._push(last.end, _FAILURE, "failed", export, index)

    def _finish(self, export: _Export, status: str, at: float, runs_to: str | None) -> None:
        was_running = export.status == "RUNNING"
        export.status, export.finished_at, export.updated_at, export.runs_to = status, at, at, runs_to
        space = self._workspaces[export.workspace]
        space.unfinished -= 1
        self._unfinished_total -= 1
        self._stale += export.pending
        export.pending = 0
        if was_running:
            space.running -= 1
        elif export.id in space.queue:
            space.queue.remove(export.id)  # else create-and-cancel would grow the queue while every slot is busy
        space.finished[export.id] = None
        self._finished[export.id] = None
        self._trim_finished(space)
        if was_running:
            self._fill_workspace(space, at)

    def _export(self, export_id: str, workspace: str | None) -> _Export:
        export = self._exports.get(export_id)
        if export is None or (workspace is not None and export.workspace != workspace):
            raise Refuse(
                404,
                {
                    "detail": f"export {export_id[:60]} not found (a finished export is kept for {self.retention_s / 86400:g} "
                    f"days of service time, and at most {self.max_finished_per_workspace} finished ones per workspace)"
                },
            )
        return export

    def _select_runs(self, export: _Export, failures: Mapping[Any, Any]) -> list[tuple[int, int]]:
        """(run index, failed attempts) for each key of a ``fail_runs`` mapping; 422 naming a bad key or count."""
        chosen = []
        for key, times in failures.items():
            index = _run_index(export, str(key))
            if index is None:
                raise invalid(["body", "local", "fail_runs", str(key)], "no such partition (a date or an index)", "value_error")
            if not isinstance(times, int) or isinstance(times, bool) or times < 0:
                raise invalid(["body", "local", "fail_runs", str(key)], "a whole number of failed attempts", "int_type")
            chosen.append((index, times))
        return chosen


def _run_index(export: _Export, key: str) -> int | None:
    if _INDEX_KEY.fullmatch(key):
        index = int(key)
    elif _DATE_KEY.fullmatch(key):
        try:
            index = (date.fromisoformat(key) - export.first_day).days
        except ValueError:
            return None
    else:
        return None
    return index if 0 <= index < export.total else None


def _message(local: Mapping[str, Any], name: str) -> str | None:
    """A text knob of ``local``, bounded: it is repeated in every error of every run it applies to."""
    value = local.get(name)
    if not value:
        return None
    text = str(value)
    if len(text) > _MAX_MESSAGE_CHARS:
        raise invalid(["body", "local", name], f"at most {_MAX_MESSAGE_CHARS} characters, got {len(text)}", "string_too_long")
    return text
