"""Feedback with the service's SDK (langsmith, pinned): created both ways, read, listed, changed, deleted, filtered.

``create_feedback`` without ``trace_id`` sends ``POST /feedback``; with it, a
``feedback.<id>`` part of multipart ingest. Before issue 28 the first was a 404,
which the SDK retries for about 500 s. Both land in one table and read back the
same way. Also: the rules a page's write passes (``POST /feedback`` is the viewer's
first write), and the filter fields on feedback.
"""

from __future__ import annotations

import doctest
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from server.server_helpers import Trace, multipart, part, post_multipart, run_parts

from otel_runs_exporter.server import LocalService, _feedback, _filter, _store_feedback

langsmith = pytest.importorskip("langsmith")
from langsmith.utils import LangSmithNotFoundError, get_env_var  # noqa: E402

# list_runs is deprecated in the SDK in favour of client.runs; its users still call it.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

KEY = "feedback-key"


@pytest.fixture(scope="module")
def svc() -> Iterator[LocalService]:
    with LocalService(api_key=KEY) as service:
        yield service


@pytest.fixture
def client(svc: LocalService) -> Any:
    svc.reset()
    get_env_var.cache_clear()
    return langsmith.Client(api_url=svc.url, api_key=KEY)


def _trace(svc: LocalService) -> tuple[Trace, str]:
    """A stored two-run trace; its project's id."""
    trace = Trace()
    body = multipart(run_parts("post", trace.root_post()) + run_parts("post", trace.child_post()))
    assert post_multipart(svc, body, **{"x-api-key": KEY}).status_code == 202
    return trace, svc.store.project_of_run(trace.root_id) or ""


def test_create_read_list_update_delete_through_the_sdk(svc: LocalService, client: Any) -> None:
    trace, project_id = _trace(svc)
    child_id = trace.child_id
    # Without trace_id: POST /feedback (one request, answered at once; it used to be 404s retried for minutes).
    made = client.create_feedback(
        child_id, key="correctness", score=0.5, comment="close", session_id=project_id, stop_after_attempt=1
    )
    assert [e["path"] for e in svc.requests() if "feedback" in e["path"]] == ["/feedback"]
    read = client.read_feedback(made.id)
    assert (read.id, str(read.run_id), read.key, read.score, read.comment) == (made.id, child_id, "correctness", 0.5, "close")
    assert read.feedback_source is not None and read.feedback_source.type == "api"
    # With trace_id: a multipart part, flushed with the client's batch; the same reads find it.
    thumbs = client.create_feedback(trace.root_id, key="thumbs", score=1, trace_id=trace.root_id, session_id=project_id)
    client.flush()
    assert svc.store.wait(lambda: len(svc.feedback()) == 2, 10)
    listed = list(client.list_feedback(run_ids=[child_id, trace.root_id]))
    assert [(f.key, str(f.run_id)) for f in listed] == [("correctness", child_id), ("thumbs", trace.root_id)]
    assert [f.id for f in client.list_feedback(run_ids=[trace.root_id], feedback_key=["thumbs"])] == [thumbs.id]
    assert list(client.list_feedback(run_ids=[trace.root_id], feedback_key=["nope"])) == []

    client.update_feedback(made.id, score=1, comment=None)
    changed = client.read_feedback(made.id)
    assert (changed.score, changed.comment) == (1, None) and changed.modified_at >= read.modified_at
    client.delete_feedback(made.id)
    with pytest.raises(LangSmithNotFoundError):
        client.read_feedback(made.id)
    assert [f.key for f in client.list_feedback(run_ids=[child_id])] == []


def test_runs_carry_their_feedback_stats_and_filter_by_feedback(svc: LocalService, client: Any) -> None:
    trace, project_id = _trace(svc)
    child_id = trace.child_id
    for score in (1, 0):
        client.create_feedback(trace.root_id, key="thumbs", score=score, session_id=project_id)
    client.create_feedback(child_id, key="tone", value="curt", session_id=project_id)
    root = client.read_run(trace.root_id)
    assert root.feedback_stats == {"thumbs": {"n": 2, "avg": 0.5, "values": {}}}
    runs = {str(r.id): r.feedback_stats for r in client.list_runs(project_id=project_id)}
    assert runs == {trace.root_id: root.feedback_stats, child_id: {"tone": {"n": 1, "avg": None, "values": {"curt": 1}}}}

    def names(**query: Any) -> list[str]:
        return sorted(r.name for r in client.list_runs(project_id=project_id, **query))

    root_name, child_name = names(is_root=True)[0], names(is_root=False)[0]
    assert names(filter='eq(feedback_key, "thumbs")') == [root_name]
    assert names(filter='and(eq(feedback_key, "thumbs"), eq(feedback_score, 1))') == [root_name]
    # One item must hold both: no thumbs item scored 0.7, although one has the key and another a score under 1.
    assert names(filter='and(eq(feedback_key, "thumbs"), gte(feedback_score, 0.7), lt(feedback_score, 0.9))') == []
    assert names(filter='eq(feedback_key, "tone")') == [child_name]
    assert names(tree_filter='eq(feedback_key, "tone")', is_root=True) == [root_name]  # a trace by its runs' feedback
    assert names(filter='not(eq(feedback_key, "thumbs"))') == [child_name]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"run_id": str(uuid.uuid4())}, "key must be"),
        ({"key": "k"}, "names no run"),
        ({"key": "k", "run_id": "nope"}, "is not a UUID"),
        ({"key": "k", "run_id": str(uuid.uuid4()), "score": "high"}, "score must be a number"),
        ({"key": "k", "run_id": str(uuid.uuid4()), "created_at": "yesterday"}, "ISO 8601"),
        ([], "JSON object"),
    ],
)
def test_a_create_the_service_cannot_keep_is_a_422_saying_why(svc: LocalService, body: Any, says: str) -> None:
    resp = requests.post(f"{svc.url}/feedback", json=body, headers={"x-api-key": KEY}, timeout=5)
    assert resp.status_code == 422 and says in resp.json()["detail"][0]["msg"], resp.text


def test_reads_and_writes_of_one_item_and_their_refusals(svc: LocalService, client: Any) -> None:
    headers = {"x-api-key": KEY}
    run_id = str(uuid.uuid4())  # feedback may come before its run: the SDK sends runs in the background
    body = {"id": str(uuid.uuid4()), "run_id": run_id.replace("-", ""), "key": "k", "score": True}
    first = requests.post(f"{svc.url}/feedback", json=body, headers=headers, timeout=5)
    assert first.status_code == 200 and first.json()["run_id"] == run_id and first.json()["trace_id"] is None
    again = requests.post(f"{svc.url}/feedback", json={**body, "score": False}, headers=headers, timeout=5)
    assert again.json() == first.json() and len(svc.feedback()) == 1  # a retry: the first one stays
    item = f"{svc.url}/feedback/{body['id']}"
    assert requests.patch(item, json={"key": "other"}, headers=headers, timeout=5).status_code == 422
    assert requests.get(f"{svc.url}/feedback/{uuid.uuid4()}", headers=headers, timeout=5).status_code == 404
    assert requests.delete(f"{svc.url}/feedback/{uuid.uuid4()}", headers=headers, timeout=5).status_code == 404
    assert requests.get(f"{svc.url}/feedback/nope", headers=headers, timeout=5).status_code == 422
    for query, says in [("limit=0", "limit"), ("offset=-1", "offset"), ("run=nope", "not a UUID"), ("user=x", "user")]:
        resp = requests.get(f"{svc.url}/feedback?{query}", headers=headers, timeout=5)
        assert resp.status_code == 422 and says in resp.json()["detail"][0]["msg"], (query, resp.text)
    assert requests.get(f"{svc.url}/feedback", timeout=5).status_code == 401  # the key, as for every read
    listed = requests.get(f"{svc.url}/feedback?trace={run_id}&key=k", headers=headers, timeout=5).json()
    assert [f["id"] for f in listed] == [body["id"]]


def test_a_malformed_feedback_part_is_a_violation_and_a_good_one_is_kept(svc: LocalService) -> None:
    trace = Trace()
    good = {"id": str(uuid.uuid4()), "run_id": trace.root_id, "key": "k", "score": 1}
    parts = run_parts("post", trace.root_post()) + [part(f"feedback.{good['id']}", good)]
    svc.reset()
    assert post_multipart(svc, multipart(parts), **{"x-api-key": KEY}).status_code == 202
    assert svc.feedback() == [{**good, "trace_id": None, "created_at": svc.feedback()[0]["created_at"],
                               "modified_at": svc.feedback()[0]["created_at"]}]
    bad = part(f"feedback.{uuid.uuid4()}", {"run_id": trace.root_id, "score": 1})  # no key
    resp = post_multipart(svc, multipart([bad]), **{"x-api-key": KEY})
    assert resp.status_code == 422 and "key must be" in resp.json()["detail"][0]["msg"]
    assert [v["rule"] for v in svc.violations()] == ["feedback"] and len(svc.feedback()) == 1


def test_a_page_writes_feedback_only_as_the_services_own_page_and_only_as_json(svc: LocalService) -> None:
    host = svc.url.removeprefix("http://")
    port = host.rsplit(":", 1)[1]
    body = {"run_id": str(uuid.uuid4()), "key": "thumbs", "score": 1}
    # The viewer's page, opened under any loopback name of the service: its Origin is the request's own Host.
    for name in (host, f"localhost:{port}"):
        page = {"x-api-key": KEY, "Origin": f"http://{name}", "Host": name, "Sec-Fetch-Site": "same-origin"}
        resp = requests.post(f"{svc.url}/feedback", json=body, headers=page, timeout=5)
        assert resp.status_code == 200, (name, resp.text)
    before = len(svc.feedback())
    foreign = {"x-api-key": KEY, "Origin": "http://localhost:8000", "Sec-Fetch-Site": "same-site"}
    resp = requests.post(f"{svc.url}/feedback", json=body, headers=foreign, timeout=5)
    assert resp.status_code == 403 and "may not call POST /feedback" in resp.json()["detail"]
    own = {"x-api-key": KEY, "Origin": f"http://{host}", "Content-Type": "text/plain"}
    resp = requests.post(f"{svc.url}/feedback", data=b'{"key": "thumbs"}', headers=own, timeout=5)
    assert resp.status_code == 415 and resp.json()["accepted_content_types"] == ["application/json"]
    # A change or a deletion is for scripts, not for the page.
    resp = requests.delete(f"{svc.url}/feedback/{uuid.uuid4()}", headers={**own, "Content-Type": ""}, timeout=5)
    assert resp.status_code == 403
    assert len(svc.feedback()) == before


def test_sdk_warnings_stay_quiet_with_a_session_id(svc: LocalService, client: Any) -> None:
    trace, project_id = _trace(svc)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        client.create_feedback(trace.root_id, key="k", score=1, session_id=project_id)


@pytest.mark.parametrize("module", [_feedback, _filter, _store_feedback], ids=lambda m: m.__name__)
def test_doctests(module: Any) -> None:
    assert doctest.testmod(module).failed == 0
