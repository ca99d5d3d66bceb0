"""``ServiceClient.query_runs`` and ``list_projects``: the read API, against the local service."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import requests
from api.api_helpers import API_KEY

from otel_runs_exporter.api import ServiceClient
from otel_runs_exporter.server import LocalService


def _roots(n: int, project: str) -> list[dict[str, object]]:
    start = datetime(2025, 3, 1, tzinfo=timezone.utc)
    runs = []
    for i in range(n):
        run_id = str(uuid.uuid4())
        at = start + timedelta(seconds=i)
        runs.append({
            "id": run_id, "trace_id": run_id, "name": f"r{i}", "run_type": "chain", "start_time": at.isoformat(),
            "dotted_order": at.strftime("%Y%m%dT%H%M%S%fZ") + run_id, "session_name": project,
        })
    return runs


def test_query_runs_follows_the_cursor_lazily_and_projects_are_found_by_name(svc: LocalService) -> None:
    posted = requests.post(
        svc.url + "/runs/batch", json={"post": _roots(130, "paged")}, headers={"x-api-key": API_KEY}, timeout=10
    )
    assert posted.status_code == 202, posted.text
    with ServiceClient(endpoint=svc.url, api_key=API_KEY) as client:
        names = [run["name"] for run in client.query_runs({"order": "desc", "select": ["name"]})]
        assert names == [f"r{i}" for i in reversed(range(130))]  # two pages of 100 and 30
        first = next(iter(client.query_runs({"limit": 10})))
        assert first["name"] == "r129"
        project = client.list_projects(name="paged")
        assert [p["name"] for p in project] == ["paged"] and client.list_projects(name="absent") == []
        assert [p["name"] for p in client.list_projects(project_id=project[0]["id"])] == ["paged"]
    queries = [r for r in svc.requests() if r["path"].endswith("/runs/query")]
    assert len(queries) == 3  # the whole list's two pages, and one for the run taken from the second query
    assert all(r["path"] == "/api/v1/runs/query" for r in queries)
