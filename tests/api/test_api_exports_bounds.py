"""Bulk exports under hostile use (issue 14, item 5): bounded per workspace, expiring, and range-independent in memory.

Found as: 300 creations with ten-year ranges grew the service by ~560 MB, and
nothing was ever removed. Each test attacks the same way, through the real
client over loopback, on a frozen clock moved by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from api.api_helpers import API_KEY, export_body

from otel_runs_exporter import ServiceError, ValidationError
from otel_runs_exporter.api import ExportStatus, ServiceClient
from otel_runs_exporter.server import LocalService

Advance = Callable[[float], None]
TEN_YEARS = {"start_time": "2015-01-01T00:00:00Z", "end_time": "2025-01-01T00:00:00Z", "destination": {"type": "s3", "bucket_name": "b"}}
DAY = 86400.0
RSS_BOUND_MB = 20.0  # before the fix, 100 ten-year exports alone took ~190 MB


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def refused(call: Callable[[], Any], status: int) -> ServiceError:
    with pytest.raises(ServiceError) as info:
        call()
    assert info.value.status == status, info.value
    return info.value


def test_300_ten_year_creations_stop_at_100_with_a_409_and_small_rss(client: ServiceClient, frozen: Advance) -> None:
    client.list_exports()  # the connection and the service's first-request allocations, before measuring
    before = rss_mb()
    created, refusals = [], []
    for _ in range(300):
        try:
            created.append(client.create_export(TEN_YEARS))
        except ServiceError as err:
            refusals.append(err)
    grown = rss_mb() - before
    assert len(created) == 100 and len(refusals) == 200
    assert all(e.raw["runs_total"] == 3653 for e in created)
    err = refusals[0]
    assert err.status == 409
    assert err.detail["limit"] == 100 and err.detail["unfinished"] == 100
    assert "100 exports not finished" in err.detail["detail"] and "Cancelled" in err.detail["detail"]
    assert grown < RSS_BOUND_MB, f"RSS grew {grown:.1f} MB for 100 ten-year exports"

    client.cancel_export(created[0].id)  # room again: the limit counts exports not finished
    assert client.create_export(TEN_YEARS).status is ExportStatus.CREATED
    refused(lambda: client.create_export(TEN_YEARS), 409)


# Run in a fresh interpreter: in this one, memory an earlier test allocated and
# freed is reused without growing RSS, which would hide a regression.
_MEASURE = """
import json, sys
from pathlib import Path
from otel_runs_exporter.api import ServiceClient
from otel_runs_exporter.server import LocalService

def rss_mb():
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024

body = json.loads(sys.argv[1])
with LocalService(api_key="k", clock_speed=0) as svc, ServiceClient(endpoint=svc.url, api_key="k") as client:
    svc.control.exports.max_unfinished_per_workspace = 1000  # only the per-export cost is measured
    client.list_exports()
    before = rss_mb()
    ids = [client.create_export(body).id for _ in range(300)]
    svc.control.clock.advance(1.0)
    running = [str(e.status) for e in client.list_exports()].count("RUNNING")
    grown = rss_mb() - before
    runs = client.list_export_runs(ids[0])
    print(json.dumps({"grown_mb": grown, "running": running, "runs": [[r.id, r.raw["partition"], str(r.status)] for r in runs]}))
"""


def measure_300(*bodies: dict[str, Any]) -> list[dict[str, Any]]:
    """One interpreter per body, all at once: each measures only its own RSS, so they need not take turns."""
    procs = [
        subprocess.Popen([sys.executable, "-c", _MEASURE, json.dumps(body)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for body in bodies
    ]
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        out.append(json.loads(stdout))
    return out


def test_memory_per_export_does_not_depend_on_its_range() -> None:
    one_day, ten_years = measure_300({**TEN_YEARS, "end_time": "2015-01-02T00:00:00Z"}, TEN_YEARS)
    assert ten_years["grown_mb"] < RSS_BOUND_MB, f"RSS grew {ten_years['grown_mb']:.1f} MB for 300 ten-year exports"
    assert ten_years["grown_mb"] < one_day["grown_mb"] + 5.0, (one_day["grown_mb"], ten_years["grown_mb"])
    assert ten_years["running"] == 15  # spec 8.2: 15 at once, the rest queue

    runs = ten_years["runs"]  # computed when asked, not stored
    assert len(runs) == 3653 and len({run_id for run_id, _, _ in runs}) == 3653
    assert [p for _, p, _ in runs[:2]] + [runs[-1][1]] == ["2015-01-01", "2015-01-02", "2024-12-31"]
    assert [s for _, _, s in runs].count("RUNNING") == 45


def test_run_ids_are_stable_across_reads(client: ServiceClient, frozen: Advance) -> None:
    export = client.create_export(export_body(days=100, run_seconds=10))
    first = [r.id for r in client.list_export_runs(export.id)]
    frozen(100.0)
    assert [r.id for r in client.list_export_runs(export.id)] == first and len(set(first)) == 100


def test_a_ten_year_export_runs_to_completion(client: ServiceClient, frozen: Advance) -> None:
    export = client.create_export({**TEN_YEARS, "local": {"fail_runs": {"2020-02-29": 2}}})
    frozen(1 + 82 * 2 + 2 * 30)  # 3653 runs of 2 s, 45 at a time; one run retried twice
    done = client.get_export(export.id)
    assert done.status is ExportStatus.COMPLETED and done.raw["runs_completed"] == 3653
    runs = {r.raw["partition"]: r for r in client.list_export_runs(export.id)}
    assert all(r.status is ExportStatus.COMPLETED and r.rows_exported == 1000 for r in runs.values())
    assert list(runs["2020-02-29"].errors) == ["retry_0", "retry_1"]
    assert sum(len(r.errors) for r in runs.values()) == 2


def test_finished_exports_expire_after_7_days_of_service_time(client: ServiceClient, svc: LocalService, frozen: Advance) -> None:
    completed = client.create_export(export_body(days=1))
    cancelled = client.create_export(export_body(days=1, run_seconds=10 * 3600))
    long = client.create_export(export_body(days=1, run_seconds=50 * 3600))  # finishes 50 h later
    frozen(1.0)
    client.cancel_export(cancelled.id)
    frozen(2.0)
    assert client.get_export(completed.id).status is ExportStatus.COMPLETED
    frozen(7 * DAY - 3.0)  # t = 7 days: `cancelled` finished at t=1 and `completed` at t=3, so both are still kept
    assert {e.id for e in client.list_exports()} == {completed.id, cancelled.id, long.id}
    frozen(3.0)
    assert [e.id for e in client.list_exports()] == [long.id]  # retention counts from finishing, not creating
    err = refused(lambda: client.get_export(completed.id), 404)
    assert "kept for 7 days" in err.detail["detail"]
    refused(lambda: client.list_export_runs(cancelled.id), 404)
    assert client.get_export(long.id).status is ExportStatus.COMPLETED
    frozen(50 * 3600 + 12 * 30)  # its 4 h attempts overran 12 times, 30 s apart
    assert client.list_exports() == []
    assert svc.control.exports.all() == []  # forgotten, not hidden


def test_unfinished_exports_never_expire(client: ServiceClient, svc: LocalService, frozen: Advance) -> None:
    svc.control.exports.retention_s = 10.0
    svc.control.exports.start_delay_s = 30 * DAY  # stays CREATED for a month
    export = client.create_export(export_body(days=1))
    frozen(20 * DAY)
    assert client.get_export(export.id).status is ExportStatus.CREATED


def test_finished_exports_past_the_per_workspace_cap_go_oldest_first(client: ServiceClient, svc: LocalService, frozen: Advance) -> None:
    svc.control.exports.max_finished_per_workspace = 3
    ids = []
    for _ in range(5):
        ids.append(client.create_export(export_body(days=1)).id)
        frozen(10.0)  # each finishes before the next is created
    waiting = client.create_export(export_body(days=1))  # not finished: never evicted
    assert [e.id for e in client.list_exports()] == ids[2:] + [waiting.id]
    refused(lambda: client.get_export(ids[0]), 404)
    with ServiceClient(endpoint=svc.url, api_key=API_KEY, workspace_id="team-b") as other:
        theirs = other.create_export(export_body(days=1))
        frozen(10.0)
        assert other.get_export(theirs.id).status is ExportStatus.COMPLETED  # another workspace's cap is its own
    assert [e.id for e in client.list_exports()] == ids[3:] + [waiting.id]  # `waiting` finished: ids[2] made room


def test_service_wide_caps_hold_across_workspaces(client: ServiceClient, svc: LocalService, frozen: Advance) -> None:
    # x-tenant-id is whatever the client sends when the service pins no workspace,
    # so per-workspace limits alone would not bound the process.
    svc.control.exports.max_unfinished_total = 4
    svc.control.exports.max_finished_total = 3
    clients = [ServiceClient(endpoint=svc.url, api_key=API_KEY, workspace_id=f"ws-{i}") for i in range(5)]
    try:
        made = [c.create_export(export_body(days=1)) for c in clients[:4]]
        err = refused(lambda: clients[4].create_export(export_body(days=1)), 409)
        assert "across all workspaces" in err.detail["detail"] and err.detail["limit"] == 4
        frozen(10.0)
        assert [c.get_export(e.id).status for c, e in zip(clients[1:4], made[1:4])] == [ExportStatus.COMPLETED] * 3
        refused(lambda: clients[0].get_export(made[0].id), 404)  # the oldest finished, over the 3 kept in all
        assert clients[4].create_export(export_body(days=1)).status is ExportStatus.CREATED
    finally:
        for c in clients:
            c.close()


def test_create_and_cancel_in_a_loop_stays_bounded(client: ServiceClient, svc: LocalService, frozen: Advance) -> None:
    # The per-workspace limit counts only unfinished exports, so cancelling makes room:
    # what a cancelled export leaves behind must not pile up either.
    exports = svc.control.exports
    exports.max_finished_per_workspace = 10
    for _ in range(15):
        client.create_export(export_body(days=1, run_seconds=10**6))  # every slot busy for the whole loop
    for _ in range(50):
        queued = client.create_export(export_body(days=1))
        frozen(1.0)  # started, so waiting in the workspace's queue
        client.cancel_export(queued.id)
    assert sum(len(space.queue) for space in exports._workspaces.values()) == 0
    for _ in range(400):
        client.cancel_export(client.create_export(export_body(days=1)).id)  # its start event is still due
    assert len(client.list_exports()) == 15 + 10
    assert len(exports._events) < 300  # not one stale start event per cancelled create (400)


def test_create_bodies_are_bounded_and_never_a_500(svc: LocalService) -> None:
    url, key = f"{svc.url}/api/v1/bulk-exports", {"x-api-key": API_KEY}
    big = {**TEN_YEARS, "destination": {"type": "s3", "bucket_name": "b", "note": "x" * 20_000}}
    resp = requests.post(url, json=big, headers=key, timeout=5)
    assert resp.status_code == 413 and resp.json()["max_size"] == 16 * 1024 and resp.json()["size"] > 20_000
    loud = {**TEN_YEARS, "local": {"fail_message": "x" * 501}}
    resp = requests.post(url, json=loud, headers=key, timeout=5)
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "local", "fail_message"]
    assert requests.delete(f"{url}/anything", headers=key, timeout=5).status_code == 405  # spec 4.3 has no DELETE


@pytest.mark.parametrize(
    ("start", "end", "loc", "says"),
    [
        ("0001-01-01T00:00:00+05:00", "0001-01-02T00:00:00Z", ["body", "start_time"], "out of range"),
        ("0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z", ["body", "end_time"], "at most 3660 daily partitions"),
        ("2015-01-01T00:00:00Z", "2025-01-09T00:00:00Z", ["body", "end_time"], "got 3661"),
    ],
    ids=["offset-below-year-1", "ten-thousand-years", "one-day-over"],
)
def test_ranges_out_of_bounds_are_422(client: ServiceClient, start: str, end: str, loc: list[str], says: str) -> None:
    with pytest.raises(ValidationError) as info:
        client.create_export({"start_time": start, "end_time": end, "destination": {}})
    assert info.value.errors[0]["loc"] == loc and says in info.value.errors[0]["msg"]


def test_fail_runs_refuses_runs_already_started(client: ServiceClient, svc: LocalService, frozen: Advance) -> None:
    export = client.create_export(export_body(days=100, run_seconds=10))
    frozen(1.0)  # runs 0-44 started
    with pytest.raises(ValueError, match="2025-01-01 .*already started"):
        svc.control.exports.fail_runs(export.id, {"0": 1})
    svc.control.exports.fail_runs(export.id, {"2025-04-10": 1})  # index 99: not started yet
    frozen(100.0)
    assert list(client.list_export_runs(export.id)[99].errors) == ["retry_0"]
