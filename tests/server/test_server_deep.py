"""The depth limit on every ingest route: a dotted_order past ``_ids.MAX_DEPTH`` entries is a 422 naming it.

Found: an 18.9 MB dotted_order (320k entries) was accepted by ``POST /runs/batch``,
and three chains 2,000/2,000/1,000 deep made an 823 MB database, since every run
stores its whole chain. The limit is a bound on what the service holds, not a rule
of the spec: a lenient service refuses it too.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
import requests
from server.server_helpers import T0, entry, iso, multipart, post_multipart, rules_of, run_parts

from otel_runs_exporter._ids import MAX_DEPTH, MAX_DOTTED_ORDER_CHARS
from otel_runs_exporter.server import LocalService


def _chain(depth: int) -> list[dict[str, Any]]:
    """Posts of ``depth`` runs, each the child of the one before, as a client that copies the chain sends them."""
    runs: list[dict[str, Any]] = []
    dotted, trace_id, parent = "", "", None
    for i in range(depth):
        run_id = str(uuid.uuid4())
        start = T0 + timedelta(microseconds=i)
        dotted = f"{dotted}.{entry(start, run_id)}" if dotted else entry(start, run_id)
        trace_id = trace_id or run_id
        run = {"id": run_id, "trace_id": trace_id, "dotted_order": dotted, "name": f"r{i}", "run_type": "chain",
               "start_time": iso(start), "session_name": "deep"}
        if parent is not None:
            run["parent_run_id"] = parent
        runs.append(run)
        parent = run_id
    return runs


@pytest.fixture(scope="module")
def chain() -> list[dict[str, Any]]:
    return _chain(MAX_DEPTH + 1)


def _refused(response: requests.Response) -> str:
    assert response.status_code == 422, response.text
    assert rules_of(response) == {"dotted_order_depth"}, response.json()
    msg = response.json()["detail"][0]["msg"]
    assert f"the limit is {MAX_DEPTH} entries ({MAX_DOTTED_ORDER_CHARS} characters)" in msg
    return msg


@pytest.mark.parametrize("route", ["batch", "multipart", "runs", "patch", "runs computed"])
def test_a_run_past_the_depth_limit_is_refused_on_every_ingest_route(
    service: LocalService, chain: list[dict[str, Any]], route: str
) -> None:
    *allowed, deepest = chain
    stored = requests.post(service.url + "/runs/batch", json={"post": allowed}, timeout=10)
    assert stored.status_code == 202, stored.text  # exactly MAX_DEPTH deep: accepted
    assert len(service.runs()) == MAX_DEPTH
    if route == "batch":
        response = requests.post(service.url + "/runs/batch", json={"post": [deepest]}, timeout=10)
    elif route == "multipart":
        response = post_multipart(service, multipart(run_parts("post", deepest)))
    elif route == "runs":
        response = requests.post(service.url + "/runs", json=deepest, timeout=10)
    elif route == "patch":
        leaf = allowed[-1]
        response = requests.patch(
            service.url + f"/runs/{leaf['id']}", json={"dotted_order": deepest["dotted_order"]}, timeout=10
        )
    else:  # POST /runs without ids: the service would compute a dotted_order one entry too deep
        body = {k: deepest[k] for k in ("id", "name", "run_type", "start_time", "session_name", "parent_run_id")}
        response = requests.post(service.url + "/runs", json=body, timeout=10)
        assert f"is {MAX_DEPTH} deep in its trace" in _refused(response)
    _refused(response)
    assert len(service.runs()) == MAX_DEPTH and service.get_run(deepest["id"]) is None


def test_a_lenient_service_refuses_it_too(chain: list[dict[str, Any]]) -> None:
    with LocalService(lenient=True) as svc:
        response = requests.post(svc.url + "/runs/batch", json={"post": [chain[-1]]}, timeout=10)
        _refused(response)
        assert svc.runs() == [] and [v["rule"] for v in svc.violations()] == ["dotted_order_depth"]


def test_the_issues_18_9_mb_dotted_order_is_refused_naming_the_limit(service: LocalService) -> None:
    # A valid chain of 320k distinct runs, as the issue sent it: before the limit, parsed entry by entry and stored.
    ids = [f"00000000-0000-4000-8000-{i:012x}" for i in range(320_000)]
    dotted = ".".join(f"20250301T120000123456Z{run_id}" for run_id in ids)
    run = {"id": ids[-1], "trace_id": ids[0], "parent_run_id": ids[-2], "dotted_order": dotted, "name": "deep",
           "run_type": "chain", "start_time": iso(T0), "session_name": "deep"}
    response = requests.post(service.url + "/runs/batch", json={"post": [run]}, timeout=60)
    assert "dotted_order has 320000 entries (18879999 characters)" in _refused(response)
    assert service.runs() == []
