"""The service's SDK (langsmith, pinned in the test extra) reading back what it wrote, as its users do.

Every read the SDK offers for runs, traces, threads and projects, v1 (``list_runs``,
``read_run``, ``list_threads``, projects) and v2 (``client.runs``, ``.traces``,
``.threads``, which call ``/api/v2``), returns what was written: ids, the tree,
fields, pages across more than one page. Also: project deletion, attachments
both ways, no backend-version warning, and the validation modes with runs the SDK
itself builds. Small data and small pages, so this stays a few seconds.
"""

from __future__ import annotations

import asyncio
import doctest
import logging
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
import requests
from server.server_helpers import Trace, multipart, part, post_multipart, run_parts

from otel_runs_exporter.server import LocalService, _attachments, _http_server, _modes, _threads, _v2, viewer_link
from otel_runs_exporter.server._shares import NO_SHARE

langsmith = pytest.importorskip("langsmith")
from langsmith.run_trees import RunTree  # noqa: E402
from langsmith.utils import get_env_var  # noqa: E402

# list_runs, read_run, read_thread and list_threads are deprecated in the SDK in favour of the v2 resources;
# both are what its users call, and both are served.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

KEY = "sdk-reads-key"
NOTE = b"hello, attachment"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


@dataclass
class World:
    svc: LocalService
    client: Any
    project_id: str
    doomed_id: str
    ids: dict[str, str]  # run name -> id
    start: datetime

    def fresh_client(self) -> Any:
        """A client of its own: the v2 resources are async, and their connections belong to one event loop."""
        get_env_var.cache_clear()
        return langsmith.Client(api_url=self.svc.url, api_key=KEY)


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"usage_metadata": {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}}


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with LocalService(api_key=KEY) as svc, pytest.MonkeyPatch.context() as env:
        env.setenv("LANGSMITH_TRACING", "true")
        get_env_var.cache_clear()
        client = langsmith.Client(api_url=svc.url, api_key=KEY)
        start = datetime.now(timezone.utc) - timedelta(minutes=5)
        ids: dict[str, str] = {}

        def trace(name: str, at: float, thread: dict[str, str] | None, project: str = "reads", **root: Any) -> RunTree:
            began = start + timedelta(seconds=at)
            tree = RunTree(
                name=name, run_type="chain", inputs={"question": f"{name}?"}, client=client, project_name=project,
                start_time=began, extra={"metadata": thread or {}}, **root,
            )
            tree.post()
            ids[name] = str(tree.id)
            return tree

        try:
            # Thread t-1: two turns; the first has a model call and a failing tool under it.
            one = trace("turn-1", 0, {"thread_id": "t-1"}, tags=["first"])
            model = one.create_child(name="model-1", run_type="llm", inputs={"p": 1}, start_time=one.start_time + timedelta(milliseconds=10))
            model.post()
            tool = model.create_child(name="tool-1", run_type="tool", inputs={"q": 1}, start_time=model.start_time + timedelta(milliseconds=5))
            tool.post()
            tool.end(error="ValueError: boom", end_time=tool.start_time + timedelta(milliseconds=5))
            tool.patch()
            model.end(outputs={"text": "hi", **_usage(3, 4)}, end_time=model.start_time + timedelta(milliseconds=20))
            model.patch()
            one.end(outputs={"answer": "one"}, end_time=one.start_time + timedelta(milliseconds=100))
            one.patch()
            ids.update({"model-1": str(model.id), "tool-1": str(tool.id)})
            two = trace("turn-2", 1, {"thread_id": "t-1"})
            model2 = two.create_child(name="model-2", run_type="llm", inputs={"p": 2}, start_time=two.start_time + timedelta(milliseconds=10))
            model2.post()
            model2.end(outputs={"text": "ho", **_usage(10, 5)}, end_time=model2.start_time + timedelta(milliseconds=30))
            model2.patch()
            two.end(outputs={"answer": "two"}, end_time=two.start_time + timedelta(milliseconds=300))
            two.patch()
            ids["model-2"] = str(model2.id)
            # Thread t-2, named the way another framework names it; with attachments.
            other = trace(
                "other", 2, {"conversation_id": "t-2"},
                attachments={"note": ("text/plain", NOTE), "image": ("image/png", PNG)},
            )
            other.end(outputs={"answer": "other"}, error="RuntimeError: late", end_time=other.start_time + timedelta(seconds=1))
            other.patch()
            lone = trace("lone", 3, None)
            lone.end(outputs={}, end_time=lone.start_time + timedelta(milliseconds=1))
            lone.patch()
            # A project to delete: a run with a child, an attachment, and feedback.
            doomed = trace("doomed", 4, None, project="doomed", attachments={"log": ("text/plain", b"bye")})
            doomed_child = doomed.create_child(name="doomed-child", run_type="tool", inputs={})
            doomed_child.post()
            doomed_child.end(outputs={})
            doomed_child.patch()
            doomed.end(outputs={})
            doomed.patch()
            client.flush()
            svc.wait_for_runs(9)
            for name, project in (("turn-1", "reads"), ("doomed", "doomed")):
                client.create_feedback(
                    ids[name], "score", score=1, trace_id=ids[name], stop_after_attempt=1,
                    session_id=client.read_project(project_name=project).id,
                )
            client.flush()
            assert svc.store.wait(lambda: len(svc.feedback()) == 2, 10)
            assert svc.violations() == []
            yield World(
                svc, client, str(client.read_project(project_name="reads").id),
                str(client.read_project(project_name="doomed").id), ids, start,
            )
        finally:
            client.cleanup(timeout=5)
            get_env_var.cache_clear()


def _using_v2(world: World, use: Any) -> Any:
    """Run ``use(client)`` (a coroutine function over a fresh client) to completion."""
    client = world.fresh_client()
    try:
        return asyncio.run(use(client))
    finally:
        client.cleanup(timeout=5)


async def _all(pager: Any) -> list[Any]:
    return [item async for item in pager]


def _asked(world: World, path: str, since: int) -> list[dict[str, Any]]:
    return [e for e in world.svc.requests()[since:] if e["path"].startswith(path)]


# --- /info: no warning ------------------------------------------------------------------


def test_the_client_takes_the_version_without_warning(world: World, caplog: pytest.LogCaptureFixture) -> None:
    client = world.fresh_client()
    try:
        with caplog.at_level(logging.WARNING, logger="langsmith"):
            client.runs, client.traces, client.threads  # each checks the backend version
            list(client.list_runs(project_id=world.project_id, limit=1))
    finally:
        client.cleanup(timeout=5)
    assert not [r.getMessage() for r in caplog.records if "version" in r.getMessage().lower()]
    info = requests.get(world.svc.url + "/info", timeout=5).json()
    assert info["version"] == "0.16.0" and info["instance_flags"]["sdb_query_enabled"] is True


# --- runs ----------------------------------------------------------------------------


def test_runs_query_v2_pages_through_every_run_with_its_fields(world: World) -> None:
    mark = len(world.svc.requests())
    selects = ["ID", "NAME", "RUN_TYPE", "STATUS", "PARENT_RUN_IDS", "TRACE_ID", "PROJECT_ID", "TOTAL_TOKENS",
               "START_TIME", "END_TIME", "ERROR", "THREAD_ID", "IS_ROOT", "INPUTS", "OUTPUTS", "TAGS", "DOTTED_ORDER"]
    runs = _using_v2(world, lambda c: _all(c.runs.query(project_ids=[world.project_id], selects=selects, page_size=3)))
    by_name = {r.name: r for r in runs}
    assert set(by_name) == {"turn-1", "model-1", "tool-1", "turn-2", "model-2", "other", "lone"}
    assert len(_asked(world, "/api/v2/runs/query", mark)) == 3  # 7 runs, 3 a page
    assert [r.start_time for r in runs] == sorted((r.start_time for r in runs), reverse=True)
    ids = world.ids
    tool = by_name["tool-1"]
    assert (tool.id, tool.trace_id, tool.parent_run_ids) == (ids["tool-1"], ids["turn-1"], [ids["turn-1"], ids["model-1"]])
    assert (tool.status, tool.error, tool.run_type, tool.is_root) == ("ERROR", "ValueError: boom", "TOOL", False)
    assert by_name["model-1"].total_tokens == 7 and by_name["model-1"].outputs["text"] == "hi"
    assert by_name["turn-1"].tags == ["first"] and by_name["turn-1"].thread_id == "t-1"
    assert by_name["other"].thread_id == "t-2" and by_name["lone"].thread_id is None
    assert {r.project_id for r in runs} == {world.project_id}
    stored = world.svc.get_run(ids["model-2"])
    assert stored is not None and by_name["model-2"].dotted_order == stored["dotted_order"]
    # The SDK's own mapping to its v1 model, as evaluate() uses it.
    from langsmith._internal._v2_migration_utils import _v2_run_to_schema

    assert _v2_run_to_schema(tool).parent_run_id == uuid.UUID(ids["model-1"])


def test_runs_query_v2_filters(world: World) -> None:
    pid = [world.project_id]

    async def use(c: Any) -> dict[str, list[str]]:
        async def names(**kwargs: Any) -> list[str]:
            return sorted(r.name for r in await _all(c.runs.query(project_ids=pid, selects=["NAME"], **kwargs)))

        return {
            "roots": await names(is_root=True),
            "errors": await names(has_error=True),
            "llm": await names(run_type="LLM"),
            "trace": await names(trace_id=world.ids["turn-1"]),
            "filter": await names(filter='and(eq(run_type, "llm"), gt(latency, 0.025))'),
            "tree": await names(is_root=True, tree_filter='eq(name, "tool-1")'),
            "root of": await names(trace_filter='has(tags, "first")', is_root=False),
            "ids": await names(ids=[world.ids["lone"], world.ids["other"]]),
            "window": await names(min_start_time=world.start + timedelta(seconds=1.5)),
        }

    found = _using_v2(world, use)
    assert found == {
        "roots": ["lone", "other", "turn-1", "turn-2"],
        "errors": ["other", "tool-1"],
        "llm": ["model-1", "model-2"],
        "trace": ["model-1", "tool-1", "turn-1"],
        "filter": ["model-2"],
        "tree": ["turn-1"],
        "root of": ["model-1", "tool-1"],
        "ids": ["lone", "other"],
        "window": ["lone", "other"],
    }


def test_runs_retrieve_v2_and_read_run(world: World) -> None:
    ids = world.ids

    async def use(c: Any) -> Any:
        return await c.runs.retrieve(ids["model-1"], project_id=world.project_id, selects=["ID", "NAME", "OUTPUTS", "PARENT_RUN_IDS"])

    run = _using_v2(world, use)
    assert (run.id, run.name, run.outputs["text"], run.parent_run_ids) == (ids["model-1"], "model-1", "hi", [ids["turn-1"]])
    # v1: with its subtree.
    tree = world.client.read_run(ids["turn-1"], load_child_runs=True)
    assert [c.name for c in tree.child_runs] == ["model-1"] and [c.name for c in tree.child_runs[0].child_runs] == ["tool-1"]
    # A run's address is its page in the viewer, for client.runs.get_url and RunTree.get_url alike.
    page = viewer_link(world.svc.url, ids["turn-1"], ids["tool-1"])

    async def url(c: Any) -> Any:
        return await c.runs.get_url(ids["tool-1"], project_id=world.project_id, trace_id=ids["turn-1"])

    assert _using_v2(world, url).url == page
    unsent = RunTree(name="unsent", run_type="chain", inputs={}, client=world.fresh_client(), project_name="reads")
    assert unsent.get_url() == viewer_link(world.svc.url, str(unsent.trace_id), str(unsent.id))
    # Not in that project: 404, as the hosted API answers.
    wrong = requests.get(
        f"{world.svc.url}/api/v2/runs/{ids['model-1']}", params={"project_id": world.doomed_id, "selects": "ID"},
        headers={"x-api-key": KEY}, timeout=5,
    )
    assert wrong.status_code == 404


def test_the_v2_share_api_and_the_public_runs_resource(world: World) -> None:
    """client.runs.share.create and .delete, client.public.runs.retrieve and .query (shared traces: _shares)."""
    ids, svc = world.ids, world.svc
    root, child = ids["turn-1"], ids["model-1"]

    async def share_read_unshare(c: Any) -> str:
        token = (await c.runs.share.create(child, session_id=world.project_id, trace_id=root)).share_token
        assert token is not None and world.client.read_run_shared_link(root).endswith(f"/public/{token}/r")
        run = await c.public.runs.retrieve(
            child, share_token=token, selects=["ID", "NAME", "PARENT_RUN_IDS", "FEEDBACK_STATS"], start_time=world.start,
        )
        assert (run.name, [str(p) for p in run.parent_run_ids or []], run.feedback_stats) == ("model-1", [root], None)
        items = (await c.public.runs.query(token, selects=["ID", "NAME"])).items or []
        assert [i.name for i in items] == ["turn-1", "model-1", "tool-1"]  # the trace, in start order
        shared = await c.runs.retrieve(root, project_id=world.project_id, selects=["ID", "SHARE_URL"])
        assert shared.share_url == f"{svc.url}/public/{token}/r"
        await c.runs.share.delete(root, session_id=world.project_id)
        await c.runs.share.delete(root, session_id=world.project_id)  # idempotent: 204 again
        return token

    token = _using_v2(world, share_read_unshare)
    assert world.client.read_run_shared_link(root) is None
    gone = requests.post(f"{svc.url}/api/v2/public/{token}/runs/query", json={}, timeout=5)
    assert gone.status_code == 404 and gone.json() == {"detail": NO_SHARE}


# --- traces ---------------------------------------------------------------------------


def test_traces_query_and_a_traces_runs(world: World) -> None:
    mark = len(world.svc.requests())
    ids = world.ids

    async def use(c: Any) -> tuple[list[Any], Any]:
        traces = await _all(c.traces.query(project_id=world.project_id, selects=["ID", "NAME", "TOTAL_TOKENS"], page_size=2))
        runs = await c.traces.list_runs(ids["turn-1"], project_id=world.project_id, selects=["ID", "NAME", "PARENT_RUN_IDS"])
        return traces, runs

    traces, runs = _using_v2(world, use)
    assert [t.root_run.name for t in traces] == ["lone", "other", "turn-2", "turn-1"]  # newest first
    assert len(_asked(world, "/api/v2/traces/query", mark)) == 2
    tokens = {t.root_run.name: t.trace_aggregates.total_tokens for t in traces}
    assert tokens == {"lone": 0, "other": 0, "turn-2": 15, "turn-1": 7}  # the whole trace's, from its model run
    assert [(r.name, r.parent_run_ids) for r in runs.items] == [
        ("turn-1", []), ("model-1", [ids["turn-1"]]), ("tool-1", [ids["turn-1"], ids["model-1"]])
    ]


# --- threads --------------------------------------------------------------------------


def test_threads_query_list_traces_and_stats(world: World) -> None:
    mark = len(world.svc.requests())
    pid = world.project_id

    async def use(c: Any) -> dict[str, Any]:
        return {
            "threads": await _all(c.threads.query(project_id=pid, page_size=1)),
            "turns": await _all(
                c.threads.list_traces("t-1", project_id=pid, page_size=1,
                                      selects=["TRACE_ID", "TURN_NUMBER", "NAME", "TOTAL_TOKENS", "OUTPUTS_PREVIEW"])
            ),
            "stats": await c.threads.stats("t-1", session_id=pid, selects=["TURNS", "TOTAL_TOKENS", "LAST_START_TIME"]),
            "all": await c.threads.aggregate_stats(
                project_id=pid, select=["THREAD_COUNT", "TRACE_COUNT", "TOTAL_TOKENS", "ERROR_RATE", "MEDIAN_TOKENS"]
            ),
            "erring": await _all(c.threads.query(project_id=pid, tree_filter='eq(status, "error")')),
        }

    got = _using_v2(world, use)
    ids = world.ids
    threads = {t.thread_id: t for t in got["threads"]}
    assert [t.thread_id for t in got["threads"]] == ["t-2", "t-1"]  # latest activity first, one a page
    assert len(_asked(world, "/api/v2/threads/query", mark)) == 2 + 1
    t1 = threads["t-1"]
    assert (t1.count, t1.first_trace_id, t1.last_trace_id, t1.total_tokens) == (2, ids["turn-1"], ids["turn-2"], 22)
    assert (t1.first_inputs, t1.last_outputs, t1.num_errored_turns) == ("turn-1?", "two", 0)
    assert threads["t-2"].last_error == "RuntimeError: late" and threads["t-2"].num_errored_turns == 1
    assert [(t.trace_id, t.turn_number, t.name, t.total_tokens, t.outputs_preview) for t in got["turns"]] == [
        (ids["turn-1"], 1, "turn-1", 7, "one"), (ids["turn-2"], 2, "turn-2", 15, "two")
    ]
    assert (got["stats"].turns, got["stats"].total_tokens) == (2, 22)
    assert got["stats"].last_start_time is not None
    agg = got["all"]
    assert (agg.thread_count, agg.trace_count, agg.total_tokens, agg.error_rate) == (2, 3, 22, pytest.approx(1 / 3))
    assert agg.median_tokens == 7
    # A thread is kept when one of its traces has a failing run anywhere: t-1 (its tool), t-2 (its root).
    assert sorted(t.thread_id for t in got["erring"]) == ["t-1", "t-2"]
    # The deprecated v1 readers: list_threads groups the root runs; read_thread lists one thread's.
    listed = {t["thread_id"]: t["count"] for t in world.client.list_threads(project_id=pid)}
    assert listed == {"t-1": 2, "t-2": 1}
    assert [r.name for r in world.client.read_thread(thread_id="t-1", project_id=pid)] == ["turn-1", "turn-2"]


# --- what is refused ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field", "says"),
    [
        ("/api/v2/runs/query", {"filter": 'eq(app_path, "x")'}, "filter", "unsupported field 'app_path'"),
        ("/api/v2/runs/query", {"vibes": 1}, "vibes", "supported:"),
        ("/api/v2/runs/query", {"ai_search": "slow runs"}, "ai_search", "needs a model"),
        ("/api/v2/runs/query", {"selects": ["ID", "MOOD"]}, "selects", "unknown field 'MOOD'"),
        ("/api/v2/runs/query", {"cursor": "bm9wZQ"}, "cursor", "next_cursor"),
        ("/api/v2/runs/query", {"page_size": 1001}, "page_size", "from 1 to 1000"),
        ("/api/v2/traces/query", {"tree_filter": "like(name)"}, "tree_filter", "unsupported function"),
        ("/api/v2/threads/query", {"thread_filter": 'gt(count, 1)'}, "thread_filter", "not supported"),
        ("/api/v2/threads/stats", {"select": []}, "select", "required"),
    ],
)
def test_what_v2_cannot_answer_is_a_422_naming_it(world: World, path: str, body: dict[str, Any], field: str, says: str) -> None:
    project = "project_ids" if path.startswith("/api/v2/runs") else "project_id"
    full = {project: [world.project_id] if project == "project_ids" else world.project_id, **body}
    response = requests.post(world.svc.url + path, data=orjson.dumps(full), headers={"x-api-key": KEY}, timeout=5)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"][:2] == ["body", field] and says in detail["msg"], detail


def test_what_the_sdk_raises_on_a_filter_it_cannot_answer(world: World) -> None:
    async def use(c: Any) -> Any:
        return await _all(c.runs.query(project_ids=[world.project_id], filter='eq(share_url, 1)'))

    with pytest.raises(langsmith.UnprocessableEntityError) as raised:
        _using_v2(world, use)
    assert "unsupported field 'share_url'" in str(raised.value)


# --- attachments ----------------------------------------------------------------------


def test_attachments_round_trip_through_v1_and_v2(world: World) -> None:
    other = world.ids["other"]
    run = world.client.read_run(other)
    assert {name: a["reader"].read() for name, a in run.attachments.items()} == {"note": NOTE, "image": PNG}
    assert run.attachments["image"]["mime_type"] == "image/png"
    listed = {r.name: r for r in world.client.list_runs(project_id=world.project_id, is_root=True)}
    assert listed["other"].attachments["note"]["reader"].read() == NOTE and listed["lone"].attachments == {}

    async def use(c: Any) -> Any:
        return await c.runs.retrieve(other, project_id=world.project_id, selects=["ID", "ATTACHMENTS"])

    addresses = _using_v2(world, use).attachments
    assert set(addresses) == {"note", "image"}
    got = requests.get(addresses["image"], timeout=5)  # no key: the address is the credential
    assert got.content == PNG and got.headers["Content-Type"] == "image/png"
    assert got.headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    forged = addresses["note"].replace("/note?", "/image?")
    assert requests.get(forged, timeout=5).status_code == 403
    assert requests.get(addresses["note"].split("?")[0], timeout=5).status_code == 403


def test_an_attachment_counts_against_the_body_limit() -> None:
    with LocalService(max_body_bytes=4096) as svc:
        trace = Trace()
        big = b"x" * 5000
        body = multipart(
            run_parts("post", trace.root_post())
            + [part(f"attachment.{trace.root_id}.blob", big, content_type="application/octet-stream", raw=True)]
        )
        assert post_multipart(svc, body).status_code == 413
        assert svc.runs() == [] and svc.store.attachments_of([trace.root_id]) == {}


# --- projects -------------------------------------------------------------------------


def test_projects_read_list_and_delete_with_runs_feedback_and_attachments(world: World) -> None:
    client, svc = world.client, world.svc
    assert client.has_project("doomed") and client.read_project(project_id=world.doomed_id).name == "doomed"
    assert {p.name for p in client.list_projects()} >= {"reads", "doomed"}
    stats = client.read_project(project_name="reads", include_stats=True)
    assert stats.run_count == 7
    doomed_runs = {r["id"] for r in svc.runs() if r.get("session_name") == "doomed"}
    assert len(doomed_runs) == 2 and svc.store.attachments_of(list(doomed_runs))
    client.delete_project(project_name="doomed")
    assert not client.has_project("doomed")
    assert not doomed_runs & {r["id"] for r in svc.runs()}
    assert [f["run_id"] for f in svc.feedback()] == [world.ids["turn-1"]]  # the doomed run's feedback went too
    assert svc.store.attachments_of(list(doomed_runs)) == {}
    assert len(svc.runs()) == 7  # the other project untouched
    again = requests.delete(f"{svc.url}/sessions/{world.doomed_id}", headers={"x-api-key": KEY}, timeout=5)
    assert again.status_code == 404


# --- validation modes, with runs the SDK builds -----------------------------------------


def _sdk_run_with_its_start_time_off_its_entry(svc: LocalService) -> str:
    """The SDK writes a dotted_order entry from the start time's wall clock: in another zone than UTC, the
    entry and start_time disagree. The hosted service takes that run."""
    get_env_var.cache_clear()
    client = langsmith.Client(api_url=svc.url, api_key="k")
    try:
        paris = datetime.now(timezone(timedelta(hours=2)))
        run = RunTree(name="zoned", run_type="chain", inputs={}, client=client, project_name="zones", start_time=paris)
        run.post()
        run.end(outputs={})
        run.patch()
        client.flush()
    finally:
        client.cleanup(timeout=5)
    return str(run.id)


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_the_default_stores_what_the_hosted_service_takes_and_strict_refuses_it(
    strict: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    with LocalService(strict=strict) as svc:
        run_id = _sdk_run_with_its_start_time_off_its_entry(svc)
        statuses = {e["status"] for e in svc.requests() if e["path"] == "/runs/multipart"}
        recorded = [(v["rule"], v["run_id"], v["accepted"]) for v in svc.violations()]
        assert recorded and {r[:2] for r in recorded} == {("start_time_entry", run_id)}
        if strict:
            assert statuses == {422} and svc.runs() == [] and not any(r[2] for r in recorded)
        else:
            assert statuses == {202} and [r["id"] for r in svc.runs()] == [run_id] and all(r[2] for r in recorded)
            seen = requests.get(f"{svc.url}/runs/{run_id}/violations", timeout=5).json()
            assert [v["rule"] for v in seen] == ["start_time_entry"] * len(recorded)


@pytest.mark.parametrize("module", [_v2, _threads, _attachments, _modes, _http_server], ids=lambda m: m.__name__)
def test_doctests(module: Any) -> None:
    assert doctest.testmod(module).failed == 0
