"""The local service answers the langsmith SDK's read API: list_runs, read_run, projects, /info.

One service is filled once per module by three real writers (the SDK's RunTree,
its @traceable, and our exporter on an OTel TracerProvider); the SDK's own
``Client`` then reads everything back with each filter it offers. Bad requests
are sent raw, to see the 422 and what it names.
"""

from __future__ import annotations

import logging
import sqlite3
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest
import requests

from otel_runs_exporter import RunsSpanProcessor
from otel_runs_exporter.server import LocalService, RunStore
from otel_runs_exporter.server._store import project_id_for_name
from otel_runs_exporter.server._store_schema import SCHEMA_VERSION

from server.server_helpers import T0, Trace, good_trace_body, post_multipart

langsmith = pytest.importorskip("langsmith")
from langsmith import traceable  # noqa: E402
from langsmith.run_trees import RunTree  # noqa: E402
from langsmith.utils import LangSmithConflictError, LangSmithNotFoundError, get_env_var  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.trace import Status, StatusCode  # noqa: E402

KEY = "query-test-key"
BULK = 105  # more than one page of 100, so the SDK has to follow cursors.next

# list_runs and read_run are deprecated in the SDK in favour of its v2 API; they are what this service serves.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@dataclass
class World:
    svc: LocalService
    client: Any
    start: datetime
    tree: dict[str, str]  # RunTree runs: name -> id
    basic_id: str
    otel: dict[str, str]  # our exporter's runs: name -> id

    def project_id(self, name: str) -> str:
        return str(self.client.read_project(project_name=name).id)

    def names(self, **kwargs: Any) -> list[str]:
        return [run.name for run in self.client.list_runs(**kwargs)]


def _ids_by_name(svc: LocalService, project: str) -> dict[str, str]:
    return {r["name"]: r["id"] for r in svc.runs() if r.get("session_name") == project}


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with LocalService(api_key=KEY, strict=True) as svc, pytest.MonkeyPatch.context() as env:
        env.setenv("LANGSMITH_TRACING", "true")
        env.setenv("LANGSMITH_ENDPOINT", svc.url)
        env.setenv("LANGSMITH_API_KEY", KEY)
        get_env_var.cache_clear()
        client = langsmith.Client()  # from the environment, as a user's app would
        start = datetime.now(timezone.utc) - timedelta(minutes=5)
        try:
            agent = RunTree(
                name="agent", run_type="chain", inputs={"q": "weather in Paris?"}, client=client,
                project_name="sdk-runtree", start_time=start, tags=["beta"],
                extra={"metadata": {"thread_id": "thread-1", "user": "ada"}},
            )
            agent.post()
            model = agent.create_child(
                name="model", run_type="llm", inputs={"prompt": "hi"}, start_time=start + timedelta(milliseconds=10)
            )
            model.post()
            search = model.create_child(
                name="search", run_type="tool", inputs={"query": "x"}, start_time=start + timedelta(milliseconds=20)
            )
            search.post()
            search.end(error="ValueError: boom", end_time=start + timedelta(milliseconds=30))
            search.patch()
            model.end(outputs={"text": "sunny"}, end_time=start + timedelta(milliseconds=40))
            model.patch()
            agent.end(outputs={"answer": "sunny"}, end_time=start + timedelta(seconds=3))
            agent.patch()

            @traceable(name="retrieve", run_type="retriever")
            def retrieve(q: str) -> list[str]:
                return [q]

            @traceable(name="pipeline", run_type="chain", metadata={"thread_id": "thread-2"})
            def pipeline(q: str) -> list[str]:
                return retrieve(q)

            with langsmith.tracing_context(enabled=True, client=client, project_name="sdk-traceable"):
                pipeline("docs")
            client.flush()

            # Basic tracing (no batching): the SDK posts "attachments": {} with the run.
            basic_client = langsmith.Client(auto_batch_tracing=False)
            basic = RunTree(name="basic", run_type="chain", inputs={"x": 1}, client=basic_client, project_name="sdk-basic")
            basic.post()
            basic.end(outputs={"y": 2})
            basic.patch()

            providers = []
            for project in ("otel", "otel-bulk"):
                provider = TracerProvider()
                provider.add_span_processor(RunsSpanProcessor(endpoint=svc.url, api_key=KEY, project=project))
                providers.append(provider)
            tracer = providers[0].get_tracer("query-test")
            with tracer.start_as_current_span("handle"):
                with tracer.start_as_current_span(
                    "chat", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
                ):
                    pass
                with tracer.start_as_current_span("lookup") as span:
                    span.set_status(Status(StatusCode.ERROR, "KeyError: gone"))
            bulk = providers[1].get_tracer("query-test")
            for index in range(BULK):
                with bulk.start_as_current_span(f"bulk-{index}"):
                    pass
            for provider in providers:
                assert provider.force_flush(10_000)
                provider.shutdown()

            svc.wait_for_runs(3 + 2 + 1 + 3 + BULK)
            assert svc.violations() == []
            yield World(
                svc, client, start, _ids_by_name(svc, "sdk-runtree"), str(basic.id), _ids_by_name(svc, "otel")
            )
        finally:
            client.cleanup(timeout=5)
            get_env_var.cache_clear()


def _query(svc: LocalService, body: Any, key: str = KEY) -> requests.Response:
    return requests.post(svc.url + "/runs/query", data=orjson.dumps(body), headers={"x-api-key": key}, timeout=10)


# --- list_runs ---------------------------------------------------------------------------


def test_list_runs_by_project_name_or_id(world: World) -> None:
    assert sorted(world.names(project_name="sdk-runtree")) == ["agent", "model", "search"]
    assert sorted(world.names(project_name="sdk-traceable")) == ["pipeline", "retrieve"]
    assert sorted(world.names(project_name="otel")) == ["chat", "handle", "lookup"]
    ids = [world.project_id("sdk-traceable"), world.project_id("otel")]
    assert sorted(world.names(project_id=ids)) == ["chat", "handle", "lookup", "pipeline", "retrieve"]
    runs = list(world.client.list_runs(project_name="sdk-runtree"))
    # Newest first, and each run names its project by id whichever way it was written.
    assert [r.name for r in runs] == ["search", "model", "agent"]
    assert {str(r.session_id) for r in runs} == {world.project_id("sdk-runtree")}


def test_list_runs_by_trace_run_ids_and_parent(world: World) -> None:
    tree = world.tree
    assert sorted(world.names(trace_id=tree["agent"])) == ["agent", "model", "search"]
    assert sorted(world.names(trace_id=world.otel["handle"])) == ["chat", "handle", "lookup"]
    assert sorted(world.names(run_ids=[tree["model"], world.otel["chat"]])) == ["chat", "model"]
    assert world.names(parent_run_id=tree["agent"]) == ["model"]
    assert sorted(world.names(parent_run_id=world.otel["handle"])) == ["chat", "lookup"]


def test_what_the_sdk_documents_for_roots_and_errors_is_answered_not_422(world: World) -> None:
    """Found: 422s on POST /runs/query for requests the hosted service takes.

    Replayed from the request log: list_runs' own docstring shows ``is_root=1``, its
    beta evaluation helpers ``execution_order=1``; both went out as JSON numbers, and
    the service wanted JSON booleans (``body.is_root: is_root must be true or false, got 1``).
    """
    before = len(world.svc.requests())
    projects = [world.project_id(p) for p in ("sdk-runtree", "sdk-traceable", "otel")]
    roots = sorted(world.names(project_id=projects, is_root=True))
    assert sorted(world.names(project_id=projects, is_root=1)) == roots
    assert sorted(world.names(project_id=projects, execution_order=1)) == roots
    assert sorted(world.names(project_id=projects, error=0)) == sorted(world.names(project_id=projects, error=False))
    asked = [e for e in world.svc.requests()[before:] if e["path"].endswith("/runs/query")]
    assert asked and {e["status"] for e in asked} == {200}, [e["error"] for e in asked]
    # The same body as the client sent it: numbers where booleans go.
    raw = _query(world.svc, {"session": projects, "is_root": 1, "error": 0, "limit": 100})
    assert raw.status_code == 200 and {r["name"] for r in raw.json()["runs"]} == {"agent", "handle", "pipeline"}


def test_list_runs_by_root_type_and_error(world: World) -> None:
    projects = [world.project_id(p) for p in ("sdk-runtree", "sdk-traceable", "otel")]
    assert sorted(world.names(project_id=projects, is_root=True)) == ["agent", "handle", "pipeline"]
    assert sorted(world.names(project_id=projects, is_root=False)) == ["chat", "lookup", "model", "retrieve", "search"]
    assert sorted(world.names(project_id=projects, run_type="llm")) == ["chat", "model"]
    assert world.names(project_id=projects, run_type="retriever") == ["retrieve"]
    assert sorted(world.names(project_id=projects, error=True)) == ["lookup", "search"]
    assert len(world.names(project_id=projects, error=False)) == 6
    errored = {r.name: r for r in world.client.list_runs(project_id=projects, error=True)}
    assert errored["search"].error == "ValueError: boom" and errored["search"].status == "error"
    assert errored["lookup"].error is not None and "KeyError: gone" in errored["lookup"].error


def test_list_runs_by_start_time_range(world: World) -> None:
    t = world.start
    later = world.names(project_name="sdk-runtree", start_time=t + timedelta(milliseconds=10))
    assert sorted(later) == ["model", "search"]
    before = world.names(project_name="sdk-runtree", filter=f'lt(start_time, "{(t + timedelta(milliseconds=10)).isoformat()}")')
    assert before == ["agent"]
    window = world.names(
        project_name="sdk-runtree",
        start_time=t + timedelta(milliseconds=5),
        filter=f'lte(start_time, "{(t + timedelta(milliseconds=15)).isoformat()}")',
    )
    assert window == ["model"]


def test_list_runs_name_search_and_filter_expressions(world: World) -> None:
    p = world.project_id("sdk-runtree")
    assert world.names(project_id=p, filter='eq(name, "model")') == ["model"]
    assert world.names(project_id=p, query="Paris") == ["agent"]  # inputs of the root only
    assert world.names(project_id=p, filter='search("BOOM")') == ["search"]
    assert sorted(world.names(project_id=p, filter='or(eq(name, "agent"), eq(run_type, "tool"))')) == ["agent", "search"]
    assert sorted(world.names(project_id=p, filter='not(eq(name, "agent"))')) == ["model", "search"]
    assert world.names(project_id=p, filter='and(has(tags, "beta"), has(metadata, \'{"user": "ada"}\'))') == ["agent"]
    # RunTree children inherit their parent's metadata.
    assert sorted(world.names(project_id=p, filter='exists(metadata, "user")')) == ["agent", "model", "search"]
    assert world.names(project_id=p, filter='exists(metadata, "nobody")') == []
    assert world.names(project_id=p, filter="gt(latency, 2)") == ["agent"]
    assert world.names(project_id=p, filter='eq(status, "error")') == ["search"]
    assert world.names(project_id=p, filter="eq(error, null)", is_root=False) == ["model"]


def test_trace_and_tree_filters(world: World) -> None:
    projects = [world.project_id(p) for p in ("sdk-runtree", "sdk-traceable", "otel")]
    # Every run whose trace's root is named "pipeline".
    assert sorted(world.names(project_id=projects, trace_filter='eq(name, "pipeline")')) == ["pipeline", "retrieve"]
    # Every run in a trace where some run failed.
    in_failed = world.names(project_id=projects, tree_filter='eq(status, "error")')
    assert sorted(in_failed) == ["agent", "chat", "handle", "lookup", "model", "search"]
    assert world.names(project_id=projects, filter='eq(run_type, "llm")', trace_filter='eq(name, "handle")') == ["chat"]


def test_read_thread_uses_the_filter_the_sdk_builds(world: World) -> None:
    runs = list(world.client.read_thread(thread_id="thread-1", project_name="sdk-runtree"))
    assert [r.name for r in runs] == ["agent"]
    assert list(world.client.read_thread(thread_id="thread-2", project_name="sdk-runtree")) == []


def test_select_answers_only_what_was_asked(world: World) -> None:
    runs = {r.name: r for r in world.client.list_runs(project_name="sdk-runtree", select=["inputs"])}
    assert runs["model"].inputs == {"prompt": "hi"}
    assert runs["model"].outputs is None and runs["model"].end_time is None  # not selected
    full = {r.name: r for r in world.client.list_runs(project_name="sdk-runtree")}
    assert full["model"].outputs == {"text": "sunny"} and full["model"].end_time is not None
    assert full["search"].parent_run_ids == [uuid.UUID(world.tree["agent"]), uuid.UUID(world.tree["model"])]


def test_cursor_paging_by_the_sdk_and_by_hand(world: World) -> None:
    svc, client = world.svc, world.client
    before = len([e for e in svc.requests() if e["path"] == "/runs/query"])
    runs = list(client.list_runs(project_name="otel-bulk"))
    queries = len([e for e in svc.requests() if e["path"] == "/runs/query"]) - before
    assert len(runs) == BULK and len({r.id for r in runs}) == BULK
    assert queries == 2  # a full page of 100, then the cursor's 5
    assert len(list(client.list_runs(project_name="otel-bulk", limit=3))) == 3

    body: dict[str, Any] = {"session": [world.project_id(p) for p in ("sdk-runtree", "otel")], "limit": 2}
    pages = []
    while True:
        answer = _query(svc, body).json()
        pages.append([r["name"] for r in answer["runs"]])
        if not answer["cursors"]["next"]:
            break
        body["cursor"] = answer["cursors"]["next"]
    assert [len(p) for p in pages] == [2, 2, 2]
    assert sorted(n for p in pages for n in p) == ["agent", "chat", "handle", "lookup", "model", "search"]
    assert pages[-1][-1] == "agent"  # oldest last


def test_paging_neither_repeats_nor_skips_when_runs_arrive_between_pages(service: LocalService) -> None:
    for offset in (0, 1):
        assert post_multipart(service, good_trace_body(Trace(T0 + timedelta(seconds=offset)))).status_code == 202
    first = _query(service, {"limit": 3, "order": "asc"}, key="").json()
    newer = Trace(T0 + timedelta(seconds=5))
    older = Trace(T0 - timedelta(seconds=5))
    for trace in (newer, older):
        assert post_multipart(service, good_trace_body(trace)).status_code == 202
    rest = _query(service, {"limit": 3, "order": "asc", "cursor": first["cursors"]["next"]}, key="").json()
    seen = [r["id"] for r in first["runs"] + rest["runs"]]
    assert len(seen) == len(set(seen)) == 6  # the four old runs and the newer trace; the older one sorts before page 1
    assert newer.root_id in seen and older.root_id not in seen
    assert rest["cursors"]["next"] is None


# --- read_run ---------------------------------------------------------------------------


def test_read_run_reads_every_run_including_basic_tracing(world: World) -> None:
    svc, client = world.svc, world.client
    stored = svc.get_run(world.basic_id)
    assert stored is not None and stored.get("attachments") == {}  # what made the SDK raise TypeError
    run = client.read_run(world.basic_id)
    assert run.name == "basic" and run.outputs == {"y": 2} and run.attachments == {}
    assert str(run.session_id) == world.project_id("sdk-basic")
    for stored in svc.runs():
        run = client.read_run(stored["id"])
        assert str(run.id) == stored["id"] and run.name == stored["name"]
        assert str(run.trace_id) == stored["trace_id"]
        assert (str(run.parent_run_id) if run.parent_run_id else None) == stored.get("parent_run_id")
    agent = client.read_run(world.tree["agent"], load_child_runs=True)
    assert [c.name for c in agent.child_runs] == ["model"]
    assert [c.name for c in agent.child_runs[0].child_runs] == ["search"]
    with pytest.raises(LangSmithNotFoundError):
        client.read_run(uuid.uuid4())


# --- projects -----------------------------------------------------------------------------


def test_projects_are_derived_from_runs_with_stable_ids(world: World) -> None:
    client = world.client
    names = {p.name for p in client.list_projects()}
    assert {"sdk-runtree", "sdk-traceable", "sdk-basic", "otel", "otel-bulk"} <= names
    project = client.read_project(project_name="otel-bulk", include_stats=True)
    assert str(project.id) == project_id_for_name("otel-bulk")  # the same name has the same id anywhere
    assert project.run_count == BULK and project.last_run_start_time is not None
    assert client.read_project(project_id=project.id).name == "otel-bulk"
    assert {p.name for p in client.list_projects(name_contains="SDK-")} == {"sdk-runtree", "sdk-traceable", "sdk-basic"}
    assert [p.name for p in client.list_projects(name="otel")] == ["otel"]
    assert [p.name for p in client.list_projects(project_ids=[project.id])] == ["otel-bulk"]
    assert client.has_project("otel") and not client.has_project("nobody")
    with pytest.raises(LangSmithNotFoundError):
        client.read_project(project_id=uuid.uuid4())


def test_create_project_then_trace_into_it(world: World) -> None:
    client, svc = world.client, world.svc
    created = client.create_project("made-here", description="by hand", metadata={"team": "a"})
    assert created.name == "made-here" and created.metadata == {"team": "a"}
    assert client.read_project(project_name="made-here").id == created.id
    with pytest.raises(LangSmithConflictError):
        client.create_project("made-here")
    with pytest.raises(LangSmithConflictError):
        client.create_project("otel")  # derived from runs, so it exists
    updated = client.create_project("made-here", description="again", upsert=True)
    assert updated.id == created.id and updated.description == "again"
    run_id = uuid.uuid4()
    now = datetime.now(timezone.utc)
    requests.post(
        svc.url + "/runs",
        json={"id": str(run_id), "name": "into-made", "run_type": "chain", "start_time": now.isoformat(),
              "session_id": str(created.id)},
        headers={"x-api-key": KEY},
        timeout=5,
    ).raise_for_status()
    assert world.names(project_name="made-here") == ["into-made"]


# --- /info --------------------------------------------------------------------------------


def test_info_keeps_the_client_on_endpoints_that_exist(world: World, caplog: pytest.LogCaptureFixture) -> None:
    svc = world.svc
    mark = len(svc.requests())  # before the client exists: it may read /info on a thread of its own
    client = langsmith.Client(api_url=svc.url, api_key=KEY)
    try:
        with caplog.at_level(logging.WARNING, logger="langsmith"), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            project = client.read_project(project_name="sdk-runtree")
            list(client.list_runs(project_id=project.id, is_root=True))
            client.read_run(world.tree["agent"], load_child_runs=True)
            # Version 0.8.10 or later: feedback with a trace_id rides multipart ingest instead of POST /feedback.
            client.create_feedback(
                world.tree["model"], "score", score=1, trace_id=world.tree["agent"], session_id=project.id,
                stop_after_attempt=1,  # should it POST /feedback after all: fail at once, not after retries
            )
            client.flush()
        assert not [r for r in caplog.records if "older than" in r.getMessage()]
        answered = [(e["method"], e["path"], e["status"]) for e in svc.requests()[mark:]]
        assert all(status < 400 for _, _, status in answered), answered
        assert ("GET", "/info", 200) in answered and not [a for a in answered if "feedback" in a[1]]
        assert [f["key"] for f in svc.feedback()] == ["score"]
    finally:
        client.cleanup(timeout=5)
    info = requests.get(svc.url + "/info", timeout=5).json()  # public: the client reads it before anything else
    # Both read APIs are served: the client may read with either (read_run stays on v1 unless v1 is off).
    assert info["instance_flags"]["ch_query_enabled"] is True and info["instance_flags"]["sdb_query_enabled"] is True
    assert info["version"] == "0.16.0"


# --- what is refused --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"filter": 'eq(app_path, "x")'}, "filter", "supported fields"),
        ({"filter": 'like(name, "x")'}, "filter", "supported: and, or, not"),
        ({"filter": 'eq(name, "x"'}, "filter", "ends too early"),
        ({"filter": "gt(name, 3)"}, "filter", "compares times and numbers"),
        ({"filter": 'eq(trace_id, "nope")'}, "filter", "UUID"),
        ({"filter": "not(" * 40 + ")" * 40}, "filter", "nested"),
        ({"trace_filter": "eq(name)"}, "trace_filter", "a field and a value"),
        ({"tree_filter": "@"}, "tree_filter", "unexpected"),
        ({"is_root": 2}, "is_root", "true or false"),
        ({"error": "perhaps"}, "error", "true or false"),
        ({"execution_order": 2}, "execution_order", "only 1"),
        ({"session": ["not-a-uuid"]}, "session", "not a UUID"),
        ({"session": "0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d"}, "session", "list"),
        ({"limit": 0}, "limit", "1 or more"),
        ({"start_time": "yesterday"}, "start_time", "ISO 8601"),
        ({"select": ["inputs", "vibes"]}, "select", "supported"),
        ({"order": "sideways"}, "order", "asc"),
        ({"cursor": "bm9wZQ"}, "cursor", "cursors.next"),
        ({"end_time": "2025-01-01T00:00:00Z"}, "end_time", "lt(start_time"),
        ({"data_source_type": "x"}, "data_source_type", "supported keys"),
    ],
)
def test_bad_run_queries_are_422_naming_the_field(
    service: LocalService, body: dict[str, Any], field: str, says: str
) -> None:
    response = _query(service, body, key="")
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"][:2] == ["body", field] and says in detail["msg"], detail
    # The request log says why, for finding what a client sent without its body.
    logged = service.requests()[-1]["error"]
    assert logged.startswith(f"body.{field}") and detail["msg"][:100] in logged, logged


@pytest.mark.parametrize(
    "text",
    ["", "   ", "(", ")", ",", "eq(", "eq(,)", "eq(name,)", 'and(eq(name, "a"),)', '"x"', "eq(name, \"\\q\")",
     'eq(name, "a") or', "search()", "search(name)", 'has(tags)', 'has(name, "x")', 'has(metadata, "[1]")',
     'exists(tags, "x")', "eq(is_root, null)", "eq(latency, \"1\")", 'eq(status, "done")', "'unterminated", "é(x)",
     "x" * 20_000],
)
def test_no_filter_string_makes_a_500(service: LocalService, text: str) -> None:
    response = _query(service, {"filter": text}, key="")
    assert response.status_code == 422, (text, response.status_code, response.text)
    assert response.json()["detail"][0]["loc"] == ["body", "filter"]


@pytest.mark.parametrize(
    ("method", "path", "payload", "field"),
    [
        ("GET", "/sessions?limit=500", None, "limit"),
        ("GET", "/sessions?sort_by=name", None, "sort_by"),
        ("GET", "/sessions?id=nope", None, "id"),
        ("GET", "/sessions?include_stats=maybe", None, "include_stats"),
        ("GET", "/sessions/not-a-uuid", None, "project_id"),
        ("POST", "/sessions", {"description": "no name"}, "name"),
        ("POST", "/sessions", {"name": "x", "id": "nope"}, "id"),
        ("POST", "/sessions", {"name": "x", "colour": "red"}, "colour"),
        ("POST", "/sessions?upsert=perhaps", {"name": "x"}, "upsert"),
    ],
)
def test_bad_project_requests_are_422_naming_the_field(
    service: LocalService, method: str, path: str, payload: Any, field: str
) -> None:
    response = requests.request(method, service.url + path, json=payload, timeout=5)
    assert response.status_code == 422, response.text
    assert field in response.json()["detail"][0]["loc"]


def test_read_routes_keep_auth() -> None:
    with LocalService(api_key=KEY) as svc:
        for method, path in [("POST", "/runs/query"), ("GET", "/sessions"), ("POST", "/sessions"),
                             ("GET", f"/sessions/{uuid.uuid4()}"), ("GET", f"/api/v1/runs/{uuid.uuid4()}")]:
            assert requests.request(method, svc.url + path, json={}, timeout=5).status_code == 401, path
        assert requests.get(svc.url + "/info", timeout=5).status_code == 200
        assert requests.get(svc.url + "/runs/query", headers={"x-api-key": KEY}, timeout=5).status_code == 405


# --- the store: a version 1 database is upgraded, not refused ------------------------------------

_V1_SCHEMA = """
CREATE TABLE runs (id TEXT PRIMARY KEY, trace_id TEXT, parent_run_id TEXT, dotted_order TEXT,
    posted INTEGER NOT NULL DEFAULT 0, patched INTEGER NOT NULL DEFAULT 0, extra_posts INTEGER NOT NULL DEFAULT 0,
    post_data TEXT, patch_data TEXT, first_seen REAL NOT NULL, seq INTEGER NOT NULL);
CREATE INDEX runs_by_trace ON runs (trace_id, dotted_order);
CREATE TABLE violations (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, rule TEXT NOT NULL, msg TEXT NOT NULL,
    loc TEXT NOT NULL, path TEXT, accepted INTEGER NOT NULL, at REAL NOT NULL);
CREATE TABLE feedback (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, data TEXT NOT NULL);
PRAGMA user_version=1;
"""


def test_a_version_1_database_is_upgraded_and_queryable(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    trace = Trace()
    post = {**trace.root_post(), "session_name": "old"}
    patch = {"end_time": (T0 + timedelta(seconds=1)).isoformat(), "error": "late"}
    with sqlite3.connect(path) as conn:
        conn.executescript(_V1_SCHEMA)
        conn.execute(
            "INSERT INTO runs (id, trace_id, dotted_order, posted, patched, post_data, patch_data, first_seen, seq)"
            " VALUES (?, ?, ?, 1, 1, ?, ?, 0, 1)",
            (trace.root_id, trace.root_id, trace.root_dotted, orjson.dumps(post).decode(), orjson.dumps(patch).decode()),
        )
        # Feedback from a multipart part of then: its run id as the client wrote it (32-hex), no columns of its own.
        item = {"id": str(uuid.uuid4()), "run_id": trace.root_id.replace("-", ""), "key": "thumbs", "score": 1}
        conn.execute("INSERT INTO feedback (run_id, data) VALUES (?, ?)", (item["run_id"], orjson.dumps(item).decode()))
    conn.close()
    store = RunStore(path)
    try:
        found = store.load_runs(store.query_keys("r.error IS NOT NULL", (), order="desc", after=None, limit=10))
        assert [q.run["id"] for q in found] == [trace.root_id]
        assert found[0].project_id == project_id_for_name("old")
        assert [p["name"] for p in store.projects()] == ["old"]
        assert [f["key"] for f in store.list_feedback(runs=[trace.root_id])] == ["thumbs"]  # found by its run
        assert store.feedback_item(item["id"]) == item
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
