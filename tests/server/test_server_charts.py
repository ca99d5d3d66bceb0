"""``POST /runs/charts`` (issue 28, part 4): a project's traffic over time, every figure a SQL aggregate.

A seeded day (a trace an hour, a model call under each, some failing) comes back per
hour: traces and errors, exact nearest-rank latency percentiles, tokens and cost,
per run type and per model, every bucket of the range answered; the range picks the
bucket, and what cannot be answered is a 422.
"""

from __future__ import annotations

import doctest
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests
from server.server_helpers import iso

from otel_runs_exporter.server import LocalService
from otel_runs_exporter.server import _charts as charts_module

DAY = datetime(2025, 3, 1, tzinfo=timezone.utc)


def seeded_day(url: str, project: str, day: datetime, *, hours: int = 24) -> None:
    """A trace at the start of each hour of ``day``: a root lasting (hour + 1) seconds, a gpt-4o-mini call of 1,000 in
    and 500 out under it, every sixth root failing; through the service's own batch route."""
    runs = []
    for hour in range(hours):
        start = day + timedelta(hours=hour, minutes=5)
        root_id, llm_id = str(uuid.uuid4()), str(uuid.uuid4())
        dotted = start.strftime("%Y%m%dT%H%M%S%fZ") + root_id
        root = {"id": root_id, "trace_id": root_id, "dotted_order": dotted, "name": "agent", "run_type": "chain",
                "start_time": iso(start), "end_time": iso(start + timedelta(seconds=hour + 1)), "session_name": project}
        if hour % 6 == 0:
            root["error"] = "boom"
        at = start + timedelta(milliseconds=10)
        llm = {"id": llm_id, "trace_id": root_id, "parent_run_id": root_id, "name": "chat", "run_type": "llm",
               "dotted_order": f"{dotted}.{at.strftime('%Y%m%dT%H%M%S%fZ')}{llm_id}", "start_time": iso(at),
               "end_time": iso(at + timedelta(milliseconds=500)), "session_name": project,
               "extra": {"metadata": {"ls_model_name": "gpt-4o-mini" if hour % 2 else "house-model"}},
               "outputs": {"usage_metadata": {"input_tokens": 1000, "output_tokens": 500}}}
        runs += [root, llm]
    assert requests.post(url + "/runs/batch", json={"post": runs}, timeout=10).status_code == 202


def _charts(svc: LocalService, project: str, **body: Any) -> requests.Response:
    project_id = requests.get(svc.url + f"/sessions?name={project}", timeout=5).json()[0]["id"]
    return requests.post(svc.url + "/runs/charts", json={"session": [project_id], **body}, timeout=10)


def test_a_seeded_day_per_hour(service: LocalService) -> None:
    seeded_day(service.url, "day", DAY)
    answer = _charts(service, "day", start_time=iso(DAY), end_time=iso(DAY + timedelta(days=1)))
    assert answer.status_code == 200, answer.text
    day = answer.json()
    assert day["bucket"] == "hour" and len(day["times"]) == 24 and day["times"][1] == "2025-03-01T01:00:00.000000Z"
    series = day["series"]
    assert series["traces"] == [1] * 24 and sum(series["errors"]) == 4 and series["errors"][6] == 1
    assert series["latency_p50"][:3] == [1.0, 2.0, 3.0] and series["tokens"] == [1500] * 24
    # gpt-4o-mini in the odd hours ($0.00045 a call); the house model has no price: null, not 0.
    assert series["cost"][0] is None and series["cost"][1] == pytest.approx(0.00045)
    assert day["totals"] == {"traces": 24, "runs": 48, "errors": 4, "failed_traces": 4, "tokens": 36000,
                             "cost": pytest.approx(12 * 0.00045), "unpriced": 12}
    assert set(day["by_run_type"]) == {"chain", "llm"} and day["by_run_type"]["llm"]["latency_p99"][0] == 0.5
    assert sum(day["by_model"]["gpt-4o-mini"]["runs"]) == 12 and sum(day["by_model"]["house-model"]["tokens"]) == 18000
    # A longer range in days: the trace latencies of the day, nearest rank over 24 values.
    month = _charts(service, "day", start_time=iso(DAY - timedelta(days=9)), end_time=iso(DAY + timedelta(days=1))).json()
    assert month["bucket"] == "day" and len(month["times"]) == 10 and month["series"]["traces"][-1] == 24
    assert month["series"]["latency_p50"][-1] == 12.0 and month["series"]["latency_p99"][-1] == 24.0
    minutes = _charts(service, "day", start_time=iso(DAY), end_time=iso(DAY + timedelta(hours=1))).json()
    assert minutes["bucket"] == "minute" and len(minutes["times"]) == 60 and minutes["series"]["traces"][5] == 1


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"start_time": "2025-03-02T00:00:00Z", "end_time": "2025-03-01T00:00:00Z"}, "must start before"),
        ({"start_time": "2024-01-01T00:00:00Z", "end_time": "2025-03-01T00:00:00Z"}, "at most 400 days"),
        ({"start_time": "2025-01-01T00:00:00Z", "end_time": "2025-03-01T00:00:00Z", "bucket": "minute"}, "more than 1500"),
        ({"bucket": "week"}, "bucket is one of"),
        ({"filter": "eq(name, 'x')"}, "not supported"),
    ],
)
def test_what_cannot_be_charted_is_a_422(service: LocalService, body: dict[str, Any], says: str) -> None:
    seeded_day(service.url, "day", DAY, hours=1)
    answer = _charts(service, "day", **body)
    assert answer.status_code == 422 and says in answer.json()["detail"][0]["msg"], answer.text
    no_project = requests.post(service.url + "/runs/charts", json={}, timeout=5)
    assert no_project.status_code == 422 and "session is required" in no_project.text


def test_doctests() -> None:
    assert doctest.testmod(charts_module).failed == 0
