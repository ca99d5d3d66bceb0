"""Bulk exports through ServiceClient against the local service: the state machine of spec 3.1 and limits of 8.2."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from api.api_helpers import API_KEY, export_body

from otel_runs_exporter import ServiceError, ValidationError
from otel_runs_exporter.api import ExportStatus, ServiceClient, WaitTimeoutError
from otel_runs_exporter.server import LocalService

Advance = Callable[[float], None]


def statuses(client: ServiceClient, export_id: str) -> list[str]:
    return [str(r.status) for r in client.list_export_runs(export_id)]


def test_created_running_completed_through_daily_runs(client: ServiceClient, frozen: Advance) -> None:
    export = client.create_export(export_body(days=3))
    assert export.status is ExportStatus.CREATED
    assert export.extra["destination"]["bucket_name"] == "exports"  # fields beyond the spec are kept
    runs = client.list_export_runs(export.id)
    assert [r.raw["partition"] for r in runs] == ["2025-01-01", "2025-01-02", "2025-01-03"]
    assert all(r.status is ExportStatus.CREATED for r in runs)

    frozen(1.0)  # start delay
    assert client.get_export(export.id).status is ExportStatus.RUNNING
    assert statuses(client, export.id) == ["RUNNING"] * 3

    frozen(2.0)  # one run's work
    done = client.get_export(export.id)
    assert done.status is ExportStatus.COMPLETED and done.is_final
    runs = client.list_export_runs(export.id)
    assert all(r.status is ExportStatus.COMPLETED and r.rows_exported == 1000 and not r.errors for r in runs)
    assert [e.id for e in client.list_exports()] == [export.id]


def test_partial_days_make_one_partition_each() -> None:
    from otel_runs_exporter.server._control_common import ServiceClock
    from otel_runs_exporter.server._exports import BulkExports

    exports = BulkExports(ServiceClock(speed=0))  # the part alone: no HTTP, no other parts
    body = export_body()
    body.update(start_time="2025-01-01T12:00:00+00:00", end_time="2025-01-02T00:00:01Z")
    export = exports.create(body)
    assert [r["partition"] for r in exports.runs(export["id"])] == ["2025-01-01", "2025-01-02"]


def test_a_failing_run_retries_every_30_seconds_and_records_retry_n(
    client: ServiceClient, svc: LocalService, frozen: Advance
) -> None:
    export = client.create_export(export_body(days=2, fail_runs={"2025-01-02": 3}))
    frozen(1.0 + 1.0)  # start, then the first attempt fails halfway through its 2 s
    run = client.list_export_runs(export.id)[1]
    assert list(run.errors) == ["retry_0"] and run.status is ExportStatus.RUNNING
    frozen(29.9)
    assert client.list_export_runs(export.id)[1].raw["retries"] == 0  # still waiting out the fixed delay
    frozen(0.2)
    assert client.list_export_runs(export.id)[1].raw["retries"] == 1
    frozen(200)
    assert client.get_export(export.id).status is ExportStatus.COMPLETED
    run = client.list_export_runs(export.id)[1]
    assert list(run.errors) == ["retry_0", "retry_1", "retry_2"]
    assert run.rows_exported == 1000  # resumed from checkpoints: nothing exported twice
    assert len(run.raw["metadata"]["files"]) == 4


def test_retries_exhausted_fail_the_run_and_the_export(client: ServiceClient, frozen: Advance) -> None:
    export = client.create_export(export_body(days=3, fail_runs={"1": 21}, run_seconds=50))
    frozen(1 + 21 * 25 + 20 * 30)  # 21 attempts failing halfway, 20 fixed delays
    final = client.get_export(export.id)
    assert final.status is ExportStatus.FAILED
    runs = client.list_export_runs(export.id)
    failed = runs[1]
    assert failed.status is ExportStatus.FAILED
    assert list(failed.errors) == [f"retry_{i}" for i in range(21)]  # numeric order, not retry_10 after retry_1
    assert [r.status for r in runs] == [ExportStatus.COMPLETED, ExportStatus.FAILED, ExportStatus.COMPLETED]


def test_twenty_failures_still_complete(client: ServiceClient, svc: LocalService) -> None:
    svc.control.clock.speed = 100_000
    export = client.create_export(export_body(days=1, fail_runs={"0": 20}))
    final = client.wait_for_export(export.id, timeout=10, poll_interval=0.01)
    assert final.status is ExportStatus.COMPLETED
    assert len(client.list_export_runs(export.id)[0].errors) == 20


def test_other_runs_stop_when_one_fails_for_good(client: ServiceClient, frozen: Advance) -> None:
    # Run 1 fails even more often, so it is still retrying when run 0 runs out of retries.
    export = client.create_export(export_body(days=2, fail_runs={"0": 21, "1": 30}))
    frozen(1 + 21 * 1 + 20 * 30)
    assert client.get_export(export.id).status is ExportStatus.FAILED
    assert statuses(client, export.id) == ["FAILED", "CANCELLED"]


def test_destination_error_is_not_retried(client: ServiceClient, frozen: Advance) -> None:
    export = client.create_export(export_body(days=2, destination_error="bucket exports does not exist"))
    frozen(1.0)
    assert client.get_export(export.id).status is ExportStatus.FAILED
    run = client.list_export_runs(export.id)[0]
    assert run.errors == {"retry_0": "destination error: bucket exports does not exist"}


def test_workflow_timeout_after_72_hours(client: ServiceClient, frozen: Advance) -> None:
    export = client.create_export(export_body(days=1, run_seconds=100 * 3600))
    frozen(1 + 72 * 3600 - 1)
    run = client.list_export_runs(export.id)[0]
    assert client.get_export(export.id).status is ExportStatus.RUNNING
    assert run.errors  # each attempt overran the 4 h per-run limit and resumed
    assert "4 h limit" in run.last_error
    frozen(2)
    assert client.get_export(export.id).status is ExportStatus.TIMEDOUT
    assert statuses(client, export.id) == ["TIMEDOUT"]


def test_a_run_longer_than_4_hours_resumes_and_completes(client: ServiceClient, frozen: Advance) -> None:
    export = client.create_export(export_body(days=1, run_seconds=5 * 3600))
    frozen(1 + 4 * 3600 + 30 + 3600)
    assert client.get_export(export.id).status is ExportStatus.COMPLETED
    run = client.list_export_runs(export.id)[0]
    assert list(run.errors) == ["retry_0"] and run.rows_exported == 1000


def test_cancel_running_then_cancel_again_is_a_clear_409(client: ServiceClient, frozen: Advance) -> None:
    export = client.create_export(export_body(days=2, run_seconds=100))
    frozen(1.5)
    cancelled = client.cancel_export(export.id)
    assert cancelled.status is ExportStatus.CANCELLED
    assert statuses(client, export.id) == ["CANCELLED", "CANCELLED"]
    frozen(1000)
    assert client.get_export(export.id).status is ExportStatus.CANCELLED  # never restarts
    with pytest.raises(ServiceError) as info:
        client.cancel_export(export.id)
    assert info.value.status == 409
    assert "already CANCELLED" in str(info.value) and "new export" in str(info.value)


def test_cancel_a_queued_export(client: ServiceClient, frozen: Advance) -> None:
    export = client.create_export(export_body(days=1))
    assert client.cancel_export(export.id).status is ExportStatus.CANCELLED
    frozen(10)
    assert client.get_export(export.id).status is ExportStatus.CANCELLED


def test_cancel_body_must_say_cancelled(client: ServiceClient, svc: LocalService) -> None:
    import requests

    export = client.create_export(export_body(days=1))
    resp = requests.patch(
        f"{svc.url}/api/v1/bulk-exports/{export.id}", json={"status": "RUNNING"}, headers={"x-api-key": API_KEY}, timeout=5
    )
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"] == ["body", "status"]


def test_at_most_45_runs_of_an_export_at_once(client: ServiceClient, frozen: Advance) -> None:
    export = client.create_export(export_body(days=100, run_seconds=10))
    frozen(1)
    seen = statuses(client, export.id)
    assert seen.count("RUNNING") == 45 and seen.count("CREATED") == 55
    frozen(10)
    seen = statuses(client, export.id)
    assert (seen.count("COMPLETED"), seen.count("RUNNING"), seen.count("CREATED")) == (45, 45, 10)
    frozen(20)
    assert client.get_export(export.id).status is ExportStatus.COMPLETED


def test_at_most_15_exports_per_workspace_the_rest_queue(client: ServiceClient, svc: LocalService, frozen: Advance) -> None:
    exports = [client.create_export(export_body(days=1, run_seconds=1000)) for _ in range(16)]
    frozen(1)
    states = [client.get_export(e.id).status for e in exports]
    assert states.count(ExportStatus.RUNNING) == 15 and states[-1] is ExportStatus.CREATED
    # Another workspace has its own slots.
    with ServiceClient(endpoint=svc.url, api_key=API_KEY, workspace_id="team-b") as other:
        theirs = other.create_export(export_body(days=1))
        frozen(1)
        assert other.get_export(theirs.id).status is ExportStatus.RUNNING
        assert [e.id for e in other.list_exports()] == [theirs.id]  # workspaces see only their own
        with pytest.raises(ServiceError) as info:
            other.get_export(exports[0].id)
        assert info.value.status == 404
    client.cancel_export(exports[0].id)
    assert client.get_export(exports[-1].id).status is ExportStatus.RUNNING  # a slot freed


def test_wait_for_export_reports_progress_and_returns_the_final_export(client: ServiceClient) -> None:
    seen: list[str] = []
    export = client.create_export(export_body(days=5, run_seconds=200))  # 0.2 s of real time
    final = client.wait_for_export(export.id, timeout=10, poll_interval=0.01, progress=lambda e: seen.append(str(e.status)))
    assert final.status is ExportStatus.COMPLETED
    assert seen[-1] == "COMPLETED" and len(seen) >= 2


def test_wait_for_export_times_out_with_the_last_state(client: ServiceClient, frozen: Advance) -> None:
    export = client.create_export(export_body(days=1))
    with pytest.raises(WaitTimeoutError) as info:
        client.wait_for_export(export.id, timeout=0.2, poll_interval=0.05)
    assert info.value.last.status is ExportStatus.CREATED
    assert isinstance(info.value, TimeoutError)


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"end_time": "2025-01-02T00:00:00Z", "destination": {}}, ["body", "start_time"]),
        ({"start_time": "2025-01-02T00:00:00Z", "end_time": "2025-01-01T00:00:00Z", "destination": {}}, ["body", "end_time"]),
        ({"start_time": "2025-01-01T00:00:00Z", "end_time": "2025-01-02T00:00:00Z"}, ["body", "destination"]),
        ({"start_time": "yesterday", "end_time": "2025-01-02T00:00:00Z", "destination": {}}, ["body", "start_time"]),
    ],
)
def test_bad_create_bodies_are_422_with_locations(client: ServiceClient, body: dict, loc: list) -> None:
    with pytest.raises(ValidationError) as info:
        client.create_export(body)
    assert info.value.errors[0]["loc"] == loc


def test_fail_runs_knob_in_process(client: ServiceClient, svc: LocalService, frozen: Advance) -> None:
    export = client.create_export(export_body(days=2))
    svc.control.exports.fail_runs(export.id, {"2025-01-01": 1}, message="disk full")
    frozen(1 + 1 + 30 + 2)
    run = client.list_export_runs(export.id)[0]
    assert run.errors == {"retry_0": "disk full (attempt 1)"}
    assert client.get_export(export.id).status is ExportStatus.COMPLETED
    with pytest.raises(ValueError):
        svc.control.exports.fail_runs(export.id, {"2030-01-01": 1})
