"""Issue 38, the local service: every answer bounded in bytes, a batch's items limited, runs that fit.

One service with small bounds (a page holds 64 KiB, a body 128 KiB, so a run 256 KiB)
over a world whose every listing is larger than that: each read route of the route table
is asked for it and answers within the bound. The table is read, not copied: a route
added without a request here fails the first test. The same bounds at their defaults,
under a 1 GiB address-space limit, are tests/server/test_server_bounds_prlimit.py.
"""

from __future__ import annotations

import doctest
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
import requests

from otel_runs_exporter.server import LocalService
from otel_runs_exporter.server import _answers, _jsonio
from otel_runs_exporter.server._routes import ROUTES
from otel_runs_exporter.server._validate import Violation

from .server_helpers import multipart, part, post_multipart

KiB = 1024
PAGE = 64 * KiB
BODY = 128 * KiB
T0 = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=1)
TEXT = 11 * KiB  # each run holds two such values: ~22 KB, three a page


def _dotted(at: datetime, run_id: str) -> str:
    return at.strftime("%Y%m%dT%H%M%S%fZ") + run_id


@dataclass
class World:
    """What the bounded service holds, and the ids a request names."""

    svc: LocalService
    project_id: str = ""
    traces: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    lone: str = ""
    token: str = ""
    feedback_id: str = ""
    attachment: str = ""
    attached: str = ""
    export_id: str = ""

    def trace_runs(self, trace: int) -> int:
        return 20 if trace == 0 else 5


def _post(svc: LocalService, path: str, body: Any) -> requests.Response:
    return requests.post(svc.url + path, data=orjson.dumps(body), headers={"Content-Type": "application/json"}, timeout=30)


def _trace(world: World, index: int, size: int) -> None:
    """A trace of the thread ``conv``: its root and ``size - 1`` children, each with ~22 KB of inputs and outputs."""
    root_id = str(uuid.uuid4())
    start = T0 + timedelta(minutes=index)
    root_dotted = _dotted(start, root_id)
    runs: list[dict[str, Any]] = []
    for i in range(size):
        run_id = root_id if i == 0 else str(uuid.uuid4())
        at = start + timedelta(milliseconds=i)
        runs.append({
            "id": run_id, "trace_id": root_id, "dotted_order": root_dotted if i == 0 else f"{root_dotted}.{_dotted(at, run_id)}",
            "parent_run_id": None if i == 0 else root_id, "name": f"run-{index}-{i}", "run_type": "chain",
            "start_time": at.isoformat(), "end_time": (at + timedelta(seconds=1)).isoformat(),
            "inputs": {"text": "i" * TEXT}, "outputs": {"text": "o" * TEXT}, "session_name": "bounds",
            "extra": {"metadata": {"session_id": "conv"}}, "events": [{"name": "new_token", "time": at.isoformat()}],
        })
    for first in range(0, size, 4):  # a body holds 128 KiB
        assert _post(world.svc, "/runs/batch", {"post": runs[first : first + 4]}).status_code == 202
    world.traces.append(root_id)
    world.runs += [run["id"] for run in runs]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with LocalService(max_answer_bytes=PAGE, max_body_bytes=BODY, batch_items=50) as svc:
        world = World(svc)
        for index, size in enumerate((20, 5, 5)):
            _trace(world, index, size)
        store = svc.store
        world.project_id = str(store.project_of_run(world.runs[0]))
        root = world.traces[0]
        # A run larger than a page alone, answered alone.
        lone = str(uuid.uuid4())
        at = T0 + timedelta(minutes=30)
        lone_run = {"id": lone, "trace_id": lone, "dotted_order": _dotted(at, lone), "name": "lone", "run_type": "llm",
                    "start_time": at.isoformat(), "inputs": {"text": "l" * 100 * KiB}, "session_name": "bounds"}
        assert _post(svc, "/runs/batch", {"post": [lone_run]}).status_code == 202
        world.lone = lone
        # 120 feedback items of a kilobyte on the root, 110 projects with a kilobyte of description.
        for i in range(120):
            r = _post(svc, "/feedback", {"run_id": root, "key": "note", "score": 1, "comment": "c" * KiB})
            assert r.status_code == 200, r.text
            world.feedback_id = r.json()["id"]
        for i in range(110):
            assert _post(svc, "/sessions", {"name": f"p{i}", "description": "d" * KiB}).status_code == 201
        # 2,000 violations recorded for the root (a client sending one bad run again and again).
        store.record_violations([Violation(root, "field_types", "x" * 200) for _ in range(2000)], path="/runs", accepted=True)
        world.token = requests.put(svc.url + f"/runs/{root}/share", json={}, timeout=5).json()["share_token"]
        attached = str(uuid.uuid4())
        at = T0 + timedelta(minutes=31)
        with_file = {"id": attached, "trace_id": attached, "dotted_order": _dotted(at, attached), "name": "file",
                     "run_type": "tool", "start_time": at.isoformat(), "session_name": "bounds"}
        body = multipart([part(f"post.{attached}", with_file),
                          part(f"attachment.{attached}.notes", b"a" * 40 * KiB, content_type="text/plain", raw=True)])
        assert post_multipart(svc, body).status_code == 202
        links = requests.get(svc.url + f"/runs/{attached}", timeout=5).json()["s3_urls"]
        world.attachment = links["attachment.notes"]["presigned_url"].removeprefix(svc.url)
        world.attached = attached
        export = {"start_time": "2015-01-01T00:00:00Z", "end_time": "2015-01-05T00:00:00Z",
                  "destination": {"type": "s3", "bucket_name": "b"}, "filter": "f" * 8000}
        world.export_id = _post(svc, "/bulk-exports", export).json()["id"]
        yield world


Request = tuple[str, str, Any]  # method, path and query, JSON body (None: none)


def _w(world: World) -> dict[str, str]:
    window = (T0 - timedelta(hours=1)).isoformat()
    return {"min": window, "max": datetime.now(timezone.utc).isoformat()}


# Every read route: a request that reads more than one answer may hold. The key is the row's path and first method.
READS: dict[tuple[str, str], Callable[[World], Request]] = {
    ("/ok", "GET"): lambda w: ("GET", "/ok", None),
    ("/info", "GET"): lambda w: ("GET", "/info", None),
    ("/runs/query", "POST"): lambda w: ("POST", "/runs/query", {"session": [w.project_id], "limit": 100}),
    ("/runs/stats", "POST"): lambda w: ("POST", "/runs/stats", {"session": [w.project_id]}),
    ("/runs/changes", "GET"): lambda w: ("GET", f"/runs/changes?trace={w.traces[0]}&after=other.0&wait=0", None),
    ("/runs/charts", "POST"): lambda w: ("POST", "/runs/charts", {"session": [w.project_id], "start_time": _w(w)["min"]}),
    ("/runs/trace-ids", "POST"): lambda w: ("POST", "/runs/trace-ids", {"prefixes": [t[:8] for t in w.traces], "limit": 100}),
    ("/runs/check", "GET"): lambda w: ("GET", "/runs/check", None),
    ("/runs/{run_id}", "GET"): lambda w: ("GET", f"/runs/{w.traces[0]}", None),
    ("/runs/{run_id}/violations", "GET"): lambda w: ("GET", f"/runs/{w.traces[0]}/violations", None),
    ("/runs/{run_id}/share", "GET"): lambda w: ("GET", f"/runs/{w.traces[0]}/share", None),
    ("/sessions", "GET"): lambda w: ("GET", "/sessions?limit=100&include_stats=true", None),
    ("/sessions/{project_id}", "GET"): lambda w: ("GET", f"/sessions/{w.project_id}?include_stats=true", None),
    ("/feedback", "GET"): lambda w: ("GET", f"/feedback?run={w.traces[0]}&limit=100", None),
    ("/feedback/{feedback_id}", "GET"): lambda w: ("GET", f"/feedback/{w.feedback_id}", None),
    ("/attachments/{run_id}/{name}", "GET"): lambda w: ("GET", w.attachment, None),
    ("/public/{share_token}/run", "GET"): lambda w: ("GET", f"/public/{w.token}/run", None),
    ("/public/{share_token}/run/{run_id}", "GET"): lambda w: ("GET", f"/public/{w.token}/run/{w.runs[3]}", None),
    ("/public/{share_token}/runs/query", "POST"): lambda w: ("POST", f"/public/{w.token}/runs/query", {"limit": 100}),
    ("/public/{share_token}/runs/stats", "POST"): lambda w: ("POST", f"/public/{w.token}/runs/stats", {}),
    ("/public/{share_token}/r", "GET"): lambda w: ("GET", f"/public/{w.token}/r", None),
    ("/api/v2/runs/query", "POST"): lambda w: (
        "POST", "/api/v2/runs/query",
        {"project_ids": [w.project_id], "selects": ["INPUTS", "OUTPUTS"], "page_size": 1000,
         "min_start_time": _w(w)["min"], "max_start_time": _w(w)["max"]},
    ),
    ("/api/v2/runs/{run_id}", "GET"): lambda w: (
        "GET", f"/api/v2/runs/{w.traces[0]}?project_id={w.project_id}&selects=INPUTS&selects=OUTPUTS", None
    ),
    ("/api/v2/runs/{run_id}/url", "GET"): lambda w: (
        "GET", f"/api/v2/runs/{w.traces[0]}/url?project_id={w.project_id}&trace_id={w.traces[0]}", None
    ),
    ("/api/v2/public/{share_token}/run/{run_id}", "GET"): lambda w: (
        "GET", f"/api/v2/public/{w.token}/run/{w.runs[2]}?selects=INPUTS", None
    ),
    ("/api/v2/public/{share_token}/runs/query", "POST"): lambda w: (
        "POST", f"/api/v2/public/{w.token}/runs/query", {"selects": ["INPUTS", "OUTPUTS"]}
    ),
    ("/api/v2/traces/query", "POST"): lambda w: (
        "POST", "/api/v2/traces/query",
        {"project_id": w.project_id, "selects": ["INPUTS", "OUTPUTS", "TOTAL_TOKENS", "FIRST_TOKEN_TIME"], "page_size": 100,
         "min_start_time": _w(w)["min"], "max_start_time": _w(w)["max"]},
    ),
    ("/api/v2/traces/{trace_id}/runs", "GET"): lambda w: (
        "GET", f"/api/v2/traces/{w.traces[0]}/runs?project_id={w.project_id}&selects=INPUTS&selects=OUTPUTS", None
    ),
    ("/api/v2/threads/query", "POST"): lambda w: (
        "POST", "/api/v2/threads/query",
        {"project_id": w.project_id, "min_start_time": _w(w)["min"], "max_start_time": _w(w)["max"]},
    ),
    ("/api/v2/threads/stats", "POST"): lambda w: (
        "POST", "/api/v2/threads/stats",
        {"project_id": w.project_id, "select": ["THREAD_COUNT", "TRACE_COUNT"], "min_start_time": _w(w)["min"],
         "max_start_time": _w(w)["max"]},
    ),
    ("/api/v2/threads/{thread_id}/traces", "GET"): lambda w: (
        "GET", f"/api/v2/threads/conv/traces?project_id={w.project_id}&selects=INPUTS&selects=OUTPUTS&page_size=100", None
    ),
    ("/api/v2/threads/{thread_id}/stats", "GET"): lambda w: (
        "GET", f"/api/v2/threads/conv/stats?session_id={w.project_id}&selects=TURNS", None
    ),
    ("/bulk-exports", "GET"): lambda w: ("GET", "/bulk-exports", None),
    ("/bulk-exports/{export_id}", "GET"): lambda w: ("GET", f"/bulk-exports/{w.export_id}", None),
    ("/bulk-exports/{export_id}/runs", "GET"): lambda w: ("GET", f"/bulk-exports/{w.export_id}/runs", None),
    ("/v2/deployments/{deployment_id}", "GET"): lambda w: ("GET", f"/v2/deployments/{uuid.uuid4()}", None),
    ("/v2/deployments/{deployment_id}/revisions/{revision_id}", "GET"): lambda w: (
        "GET", f"/v2/deployments/{uuid.uuid4()}/revisions/{uuid.uuid4()}", None
    ),
    ("/v2/auth/wait/{auth_id}", "GET"): lambda w: ("GET", f"/v2/auth/wait/{uuid.uuid4()}?timeout=0", None),
}
# The rest answer what they were sent, or less: ids stored, the item written, nothing. A body holds at most
# max_body_bytes, and the framing refuses any answer past what one run may be.
WRITES = {
    ("/runs", "POST"), ("/runs/batch", "POST"), ("/runs/multipart", "POST"), ("/otel/v1/traces", "POST"),
    ("/runs/{run_id}", "PATCH"), ("/runs/{run_id}/share", "PUT"), ("/runs/{run_id}/share", "DELETE"),
    ("/sessions", "POST"), ("/sessions/{project_id}", "DELETE"), ("/feedback", "POST"),
    ("/feedback/{feedback_id}", "PATCH"), ("/feedback/{feedback_id}", "DELETE"),
    ("/api/v2/runs/{run_id}/share", "POST"), ("/api/v2/runs/{run_id}/share", "DELETE"),
    ("/bulk-exports", "POST"), ("/bulk-exports/{export_id}", "PATCH"), ("/v2/deployments", "POST"),
    ("/v2/deployments/{deployment_id}", "PATCH"),
}


def _ask(svc: LocalService, request: Request) -> requests.Response:
    method, path, body = request
    data = orjson.dumps(body) if body is not None else None
    return requests.request(method, svc.url + path, data=data, headers={"Content-Type": "application/json"}, timeout=30)


def test_every_read_route_of_the_table_answers_within_a_page(world: World) -> None:
    """Each read row of the route table, asked for more than an answer holds: at most a page, never a 5xx.

    Before (main at 7021ee6): 11 of the 38 read routes answered more than a page here, up to 807 kB
    (/runs/query; the v2 runs query, a run's violations, the public queries, the trace's runs, the check
    report, the traces query, /sessions, /feedback, a thread's traces).
    """
    rows = {(row.path, row.methods[0]) for row in ROUTES}
    assert rows == set(READS) | WRITES, "a route of the table has no request here: say how its answer is bounded"
    sizes = {}
    for key, build in READS.items():
        answer = _ask(world.svc, build(world))
        assert answer.status_code < 500, (key, answer.status_code, answer.text[:300])
        assert len(answer.content) <= PAGE, (key, len(answer.content))
        sizes[key] = (answer.status_code, len(answer.content))
    # What was cut says so: a 413 where the client pages by offset or there is no cursor, a cursor elsewhere.
    assert sizes[("/sessions", "GET")][0] == 413 and sizes[("/feedback", "GET")][0] == 413
    assert sizes[("/api/v2/traces/{trace_id}/runs", "GET")][0] == 413
    assert sizes[("/api/v2/public/{share_token}/runs/query", "POST")][0] == 413
    assert _ask(world.svc, ("GET", "/sessions?limit=20", None)).status_code == 200  # fewer at a time: answered


def _pages(svc: LocalService, path: str, body: dict[str, Any], key: str, cursor: Callable[[Any], Any]) -> list[list[Any]]:
    pages = []
    while True:
        answer = _ask(svc, ("POST", path, body))
        assert answer.status_code == 200 and len(answer.content) <= PAGE or len(answer.json()[key]) == 1, answer.text[:200]
        found = answer.json()
        pages.append(found[key])
        following = cursor(found)
        if not following:
            return pages
        body = {**body, "cursor": following}


def test_pages_of_large_runs_are_cut_by_size_and_the_cursor_reads_every_run(world: World) -> None:
    svc = world.svc
    every = set(world.runs) | {world.lone, world.attached}
    pages = _pages(svc, "/runs/query", {"session": [world.project_id], "limit": 100}, "runs", lambda a: a["cursors"]["next"])
    assert {run["id"] for page in pages for run in page} == every and len(pages) > 10
    alone = [page for page in pages if any(run["id"] == world.lone for run in page)]
    assert len(alone[0]) == 1  # larger than a page: answered alone
    window = {"min_start_time": _w(world)["min"], "max_start_time": _w(world)["max"]}
    v2 = _pages(svc, "/api/v2/runs/query", {"project_ids": [world.project_id], "selects": ["ID", "INPUTS"], **window},
                "items", lambda a: a["next_cursor"])
    assert {run["id"] for page in v2 for run in page} == every
    traces = _pages(svc, "/api/v2/traces/query", {"project_id": world.project_id, "selects": ["INPUTS", "OUTPUTS"], **window},
                    "items", lambda a: a["next_cursor"])
    assert len([item for page in traces for item in page]) == 5  # three traces, the lone run, the file
    public = _pages(svc, f"/public/{world.token}/runs/query", {"limit": 100}, "runs", lambda a: a["cursors"]["next"])
    assert len([run for page in public for run in page]) == 20
    # The changes feed: the trace's 20 runs, a page at a time, "more" until the last.
    seen, after = [], "other.0"
    while True:
        answer = requests.get(svc.url + f"/runs/changes?trace={world.traces[0]}&after={after}&wait=0", timeout=10)
        assert len(answer.content) <= PAGE
        found = answer.json()
        seen += [run["id"] for run in found["runs"]]
        after = found["cursor"]
        if not found["more"]:
            break
    assert sorted(seen) == sorted(world.runs[:20])
    # Few fields of large runs: a full page by count.
    light = _ask(svc, ("POST", "/runs/query", {"session": [world.project_id], "limit": 100, "select": ["name"]})).json()
    assert len(light["runs"]) == 32 and light["cursors"]["next"] is None


def test_a_run_is_at_most_twice_the_body_limit_and_one_larger_is_a_413_naming_its_fields(world: World) -> None:
    svc = world.svc
    run_id = str(uuid.uuid4())
    at = T0 + timedelta(minutes=40)
    run = {"id": run_id, "trace_id": run_id, "dotted_order": _dotted(at, run_id), "name": "grows", "run_type": "chain",
           "start_time": at.isoformat(), "inputs": {"text": "i" * 120 * KiB}, "session_name": "bounds"}
    assert _post(svc, "/runs/batch", {"post": [run]}).status_code == 202
    ids: dict[str, Any] = {"trace_id": run_id, "dotted_order": run["dotted_order"]}
    assert requests.patch(svc.url + f"/runs/{run_id}", json={**ids, "outputs": {"t": "o" * 120 * KiB}}, timeout=10).status_code == 202
    # Patches merge their metadata key by key: one more would take the run past 256 KiB.
    grown = requests.patch(svc.url + f"/runs/{run_id}", json={**ids, "extra": {"metadata": {"k": "m" * 30 * KiB}}}, timeout=10)
    assert grown.status_code == 413, grown.text
    assert grown.json()["max_size"] == 2 * BODY and run_id in grown.json()["detail"]
    assert "k" not in (svc.get_run(run_id) or {}).get("extra", {}).get("metadata", {})  # nothing of it stored
    # A database written before the limit may hold a larger one: answered 413 naming its largest fields.
    store = svc.store
    huge = {**run, "inputs": {"text": "h" * 400 * KiB}}
    with store._lock:  # a run written before this version (no limit): straight into the table
        store._db.execute("UPDATE runs SET post_data = ?, size = ? WHERE id = ?", (orjson.dumps(huge).decode(), 400 * KiB, run_id))
    answer = requests.get(svc.url + f"/runs/{run_id}", timeout=10)
    assert answer.status_code == 413 and answer.json()["fields"][0] == "inputs", answer.text[:300]
    assert "select" in answer.json()["detail"]
    light = _ask(svc, ("POST", "/runs/query", {"id": [run_id], "select": ["name", "outputs"]}))
    assert light.status_code == 200 and light.json()["runs"][0]["name"] == "grows"


def test_a_batch_holds_at_most_what_info_says_and_its_errors_are_capped(world: World) -> None:
    svc = world.svc
    limit = requests.get(svc.url + "/info", timeout=5).json()["batch_ingest_config"]["size_limit"]
    assert limit == 50
    many = [{"id": str(uuid.uuid4())} for _ in range(51)]
    refused = _post(svc, "/runs/batch", {"post": many})
    assert refused.status_code == 413 and refused.json()["max_size"] == 50
    # 50 runs, each breaking three rules or more: the first 100 violations listed and the rest counted.
    bad = _post(svc, "/runs/batch", {"post": [{**run, "name": 1, "tags": 2} for run in many[:50]]})
    assert bad.status_code == 422
    detail = bad.json()["detail"]
    recorded = sum(1 for v in svc.violations() if v["run_id"] in {run["id"] for run in many})
    assert recorded >= 150 and len(detail) == 101
    assert detail[-1]["type"] == "runs.more" and detail[-1]["count"] == recorded - 100
    parts = [part(f"post.{uuid.uuid4()}", {}) for _ in range(501)]
    assert post_multipart(svc, multipart(parts)).status_code == 413  # counted before the parts are parsed


@pytest.mark.parametrize("module", [_answers, _jsonio])
def test_doctests(module: Any) -> None:
    assert doctest.testmod(module).failed == 0
