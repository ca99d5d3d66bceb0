"""The service's SDK (langsmith 0.15), as its users call it, finds everything it looks for here.

Its ``list_runs`` filter by metadata; v1's share API (``share_run`` and the reads that
follow it; v2's ``client.runs.share`` and ``client.public.runs`` are tested beside the
other v2 resources, in test_server_sdk_reads.py); its own test of a
run type the service does not know (one 422, one warning); and what a patch does to a
posted ``extra`` (a ``RunTree`` post + patch keeps it), checked as a property over every
way the SDK and the exporter send a run.
"""

from __future__ import annotations

import doctest
import datetime
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

from otel_runs_exporter import RunsSpanProcessor
from otel_runs_exporter.server import LocalService, _shares, _store_schema, _viewer
from otel_runs_exporter.server._shares import NO_SHARE

langsmith = pytest.importorskip("langsmith")
from langsmith import Client, traceable, tracing_context  # noqa: E402
from langsmith.run_trees import RunTree  # noqa: E402
from langsmith.utils import get_env_var  # noqa: E402

# share_run, list_runs and the rest are deprecated in the SDK for the v2 resources; its users call both.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

KEY = "sdk-share-key"


@pytest.fixture(scope="module")
def svc() -> Iterator[LocalService]:
    # The default (hosted) mode: what a user of the SDK runs.
    with LocalService(api_key=KEY) as service:
        yield service


@pytest.fixture
def client(svc: LocalService) -> Iterator[Client]:
    svc.reset()
    get_env_var.cache_clear()
    # web_url, as docs/local-service.md tells the SDK's users: its share links then name this service (langsmith
    # 0.15 reads no variable for it; without it a link names http://localhost, without the port).
    made = Client(api_url=svc.url, api_key=KEY, web_url=svc.url, auto_batch_tracing=False)
    yield made
    made.cleanup(timeout=5)
    get_env_var.cache_clear()


def _trace(client: Client, project: str, name: str, metadata: dict[str, Any] | None = None) -> tuple[RunTree, RunTree]:
    """A root with one child, posted and patched by basic tracing (sent before this returns)."""
    root = RunTree(name=name, run_type="chain", inputs={"q": name}, client=client, project_name=project,
                   extra={"metadata": metadata or {}})
    root.post()
    child = root.create_child(name=f"{name}-model", run_type="llm", inputs={"p": 1})
    child.post()
    child.end(outputs={"text": "hi"})
    child.patch()
    root.end(outputs={"a": name})
    root.patch()
    return root, child


# --- list_runs by metadata ------------------------------------------------------------------------------------


def test_list_runs_finds_runs_by_the_metadata_filter_the_sdks_users_write(client: Client) -> None:
    wanted = str(uuid.uuid4())

    @traceable(name="step", metadata={"test_id": wanted, "n": 5})
    def step() -> str:
        return "ok"

    with tracing_context(enabled=True, client=client, project_name="by-metadata"):
        step()
        step()
    other, other_child = _trace(client, "by-metadata", "other", {"test_id": "another"})
    client.flush()
    found = list(client.list_runs(
        project_name="by-metadata", filter=f'and(eq(metadata_key, "test_id"), eq(metadata_value, "{wanted}"))'
    ))
    assert len(found) == 2 and {r.name for r in found} == {"step"}
    # The key alone finds every run that has it (a RunTree's child inherits its metadata); a number matches its
    # text, as the service keeps values as text.
    assert len(list(client.list_runs(project_name="by-metadata", filter='eq(metadata_key, "test_id")'))) == 4
    assert len(list(client.list_runs(project_name="by-metadata",
                                     filter='and(eq(metadata_key, "n"), eq(metadata_value, "5"))'))) == 2
    assert {r.id for r in client.list_runs(
        project_name="by-metadata", filter='and(eq(metadata_key, "test_id"), eq(metadata_value, "another"))'
    )} == {other.id, other_child.id}


# --- sharing ----------------------------------------------------------------------------------------------------


def _status(url: str, **kwargs: Any) -> tuple[int, Any]:
    answer = requests.request(kwargs.pop("method", "GET"), url, timeout=10, **kwargs)
    return answer.status_code, answer.json() if answer.headers.get("Content-Type") == "application/json" else answer.text


def test_share_run_gives_a_link_that_opens_the_shared_trace_without_a_key_and_nothing_else(
    svc: LocalService, client: Client
) -> None:
    root, child = _trace(client, "sharing", "shared")
    other, _ = _trace(client, "sharing", "private")
    project_id = client.read_project(project_name="sharing").id
    client.create_feedback(child.id, key="thumbs", score=1, comment="private note", session_id=project_id)
    assert client.read_run_shared_link(child.id) is None and not client.run_is_shared(child.id)

    link = client.share_run(child.id)
    token = link.split("/")[-2]
    assert link == f"{svc.url}/public/{token}/r" and str(uuid.UUID(token)) == token
    # Every run of the trace reports the one share; sharing again returns it.
    assert client.read_run_shared_link(root.id) == link == client.share_run(root.id)

    # The link opens the viewer without a key; the reads it makes need none either.
    status, page = _status(link)
    assert status == 200 and "<title>otel-runs viewer</title>" in page
    anon = Client(api_url=svc.url, api_key="not-the-key", auto_batch_tracing=False)
    shared = anon.read_shared_run(token)
    assert (shared.id, shared.name, shared.outputs) == (child.id, "shared-model", {"text": "hi"})
    assert shared.feedback_stats is None  # feedback is not shared
    assert anon.read_shared_run(link, run_id=root.id).name == "shared"
    assert {r.id for r in anon.list_shared_runs(token)} == {root.id, child.id}
    assert [r.id for r in anon.list_shared_runs(token, run_ids=[str(root.id)])] == [root.id]
    # Nothing of another trace: not by id, not in a listing.
    assert _status(f"{svc.url}/public/{token}/run/{other.id}")[0] == 404
    assert list(anon.list_shared_runs(token, run_ids=[str(other.id)])) == []
    for asked in ({"filter": 'eq(feedback_key, "thumbs")'}, {"session": [str(uuid.uuid4())]}):
        status, body = _status(f"{svc.url}/public/{token}/runs/query", method="POST", json=asked)
        assert status == 422 and "is not taken on a shared trace" in body["detail"][0]["msg"]

    # A token that never existed and one revoked answer alike, on every public route.
    never = str(uuid.uuid4())
    assert _status(f"{svc.url}/public/{never}/run") == (404, {"detail": NO_SHARE})
    assert _status(f"{svc.url}/public/not-a-token/run") == (404, {"detail": NO_SHARE})
    client.unshare_run(root.id)
    assert client.read_run_shared_link(child.id) is None
    for path in ("run", f"run/{child.id}", "r"):
        assert _status(f"{svc.url}/public/{token}/{path}") == (404, {"detail": NO_SHARE}), path
    assert _status(f"{svc.url}/public/{token}/runs/query", method="POST", json={}) == (404, {"detail": NO_SHARE})
    # Shared again: a new random token; the old one stays closed.
    relink = client.share_run(child.id)
    assert relink != link and _status(link)[0] == 404 and _status(relink)[0] == 200


def test_a_client_chosen_share_id_is_taken_only_as_a_uuid_and_only_with_the_key(svc: LocalService, client: Client) -> None:
    root, _ = _trace(client, "sharing", "chosen")
    chosen = str(uuid.uuid4())
    assert client.share_run(root.id, share_id=chosen) == f"{svc.url}/public/{chosen}/r"
    status, body = _status(f"{svc.url}/runs/{root.id}/share", method="PUT", json={"share_token": "guessable"},
                           headers={"x-api-key": KEY})
    assert status == 422 and "share_token must be a UUID" in body["detail"][0]["msg"]
    assert _status(f"{svc.url}/runs/{root.id}/share", method="PUT", json={"share_token": str(uuid.uuid4())})[0] == 401


def test_the_public_routes_keep_the_host_and_origin_checks_and_a_rate_limit() -> None:
    with LocalService(rate_limits=True, rate_limit_scale=1000) as limited:
        client = Client(api_url=limited.url, api_key="k", auto_batch_tracing=False)
        root = RunTree(name="r", run_type="chain", inputs={}, client=client, project_name="p")
        root.post()
        token = requests.put(f"{limited.url}/runs/{root.id}/share", json={}, timeout=5).json()["share_token"]
        url = f"{limited.url}/public/{token}/run"
        assert requests.get(url, headers={"Host": "evil.example"}, timeout=5).status_code == 403
        assert requests.get(url, headers={"Origin": "http://evil.example"}, timeout=5).status_code == 403
        # "Public shared runs" is 1,000 a minute per address; scaled by 1,000 here: one.
        assert requests.get(url, timeout=5).status_code == 200
        refused = requests.get(url, timeout=5)
        assert refused.status_code == 429 and "Public shared runs" in refused.json()["detail"]
        client.cleanup(timeout=5)


# --- what the SDK's own tests expect -------------------------------------------------------------------------


def test_a_multipart_run_of_a_run_type_the_service_does_not_know_is_one_422_warning(
    svc: LocalService, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    # The SDK's test_multipart_ingest_create_wrong_type, against this service.
    run_id = uuid.uuid4()
    now = datetime.datetime.now(datetime.timezone.utc)
    run = {
        "id": str(run_id), "session_name": "wrong-type", "name": "trace a root", "run_type": "agent",
        "dotted_order": f"{now.strftime('%Y%m%dT%H%M%S%fZ')}{run_id}", "trace_id": str(run_id),
        "start_time": now.isoformat(), "inputs": {"input1": 1, "input2": 2},
    }
    with caplog.at_level(logging.WARNING, logger="langsmith.client"):
        client.multipart_ingest(create=[run], update=[])
    assert len(caplog.records) == 1 and "422" in caplog.records[0].getMessage()
    assert svc.get_run(str(run_id)) is None


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [("run_type", "agent", "run_type must be one of"), ("session_name", 5, "session_name must be a string"),
     ("session_id", "my-project", "session_id must be a UUID"), ("name", ["n"], "name must be a string")],
)
def test_a_known_field_of_the_wrong_type_is_422_in_the_default_mode(svc: LocalService, field: str, value: Any,
                                                                     says: str) -> None:
    run_id = str(uuid.uuid4())
    now = datetime.datetime.now(datetime.timezone.utc)
    run = {"id": run_id, "trace_id": run_id, "dotted_order": f"{now.strftime('%Y%m%dT%H%M%S%fZ')}{run_id}",
           "name": "n", "run_type": "chain", "start_time": now.isoformat(), "session_name": "p"}
    run.pop("session_name") if field == "session_id" else None
    answer = requests.post(f"{svc.url}/runs/batch", json={"post": [{**run, field: value}]}, headers={"x-api-key": KEY},
                           timeout=5)
    assert answer.status_code == 422 and says in answer.json()["detail"][0]["msg"], answer.text
    assert svc.get_run(run_id) is None


def test_a_runtree_post_and_patch_keeps_its_extra(svc: LocalService, client: Client) -> None:
    # The reproduction: no extra given, basic tracing; the patch carries an empty or partial extra.
    tree = RunTree(name="r", run_type="chain", inputs={}, client=client)
    tree.post()
    tree.end(outputs={})
    tree.patch()
    stored = svc.get_run(str(tree.id))
    assert stored is not None
    assert stored["extra"]["runtime"]["sdk"] == "langsmith-py" and "revision_id" in stored["extra"]["metadata"]


# --- a patch never loses what the post stored: a property over every way a run is sent ------------------------

_KEYS = st.sampled_from(["a", "b", "c", "d", "user_id"])
_VALUES = st.one_of(st.integers(-5, 5), st.text(max_size=6), st.booleans(), st.none())
_METADATA = st.dictionaries(_KEYS, _VALUES, max_size=4)
_WAYS = ["runtree", "runtree-no-extra", "basic", "batch", "multipart", "exporter"]


@pytest.mark.parametrize("way", _WAYS)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(posted=_METADATA, patched=_METADATA, tags=st.lists(st.sampled_from("xyz"), max_size=2, unique=True))
def test_everything_a_client_sent_reads_back_whichever_way_it_sent_the_run(
    svc: LocalService, client: Client, way: str, posted: dict[str, Any], patched: dict[str, Any], tags: list[str]
) -> None:
    run_id = uuid.uuid4()
    start = datetime.datetime.now(datetime.timezone.utc)
    ids = {"id": str(run_id), "trace_id": str(run_id), "dotted_order": f"{start.strftime('%Y%m%dT%H%M%S%fZ')}{run_id}"}
    post = {**ids, "name": way, "run_type": "chain", "start_time": start, "inputs": {"q": way}, "tags": tags,
            "extra": {"metadata": posted, "runtime": {"posted": True}}}
    patch = {**ids, "outputs": {"a": 1}, "end_time": start + datetime.timedelta(seconds=1), "extra": {"metadata": patched}}
    # Metadata merges by key, the patch's value winning (null included: a value the client sent). (The SDK adds its
    # runtime to patches too, which replaces the post's as given: not checked here.)
    expected = {**posted, **patched}
    inputs, outputs = {"q": way}, {"a": 1}
    if way.startswith("runtree"):
        given_extra = {"extra": {"metadata": dict(posted)}} if way == "runtree" else {}
        tree = RunTree(id=run_id, name=way, run_type="chain", inputs={"q": way}, client=client,
                       project_name="property", tags=tags, **given_extra)
        tree.post()
        tree.add_metadata(patched)  # learned while it ran: sent in the patch
        tree.end(outputs={"a": 1})
        tree.patch()
        expected = {**(posted if given_extra else {}), **patched}
    elif way == "basic":
        client.create_run(project_name="property", **post)
        client.update_run(run_id, **{k: v for k, v in patch.items() if k != "id"})
    elif way in ("batch", "multipart"):
        ingest = client.batch_ingest_runs if way == "batch" else client.multipart_ingest
        ingest(create=[{**post, "session_name": "property"}])
        ingest(update=[patch])
    else:
        # Attributes take no null: what the exporter is given is what must read back.
        posted = {k: v for k, v in posted.items() if v is not None}
        patched = {k: v for k, v in patched.items() if v is not None}
        _through_the_exporter(svc, run_id, posted, patched, tags)
        expected, inputs, outputs = {**posted, **patched}, {"input": "exporter"}, {"output": "done"}
    client.flush()
    stored = _completed(svc, str(run_id))
    metadata = stored["extra"]["metadata"]
    assert {k: metadata.get(k, "absent") for k in expected} == expected, way
    assert (stored["inputs"], stored["outputs"], sorted(stored.get("tags") or [])) == (inputs, outputs, sorted(tags))


def _completed(svc: LocalService, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 5
    while True:
        stored = svc.get_run(run_id)
        if stored is not None and stored.get("end_time") is not None:
            return stored
        assert time.monotonic() < deadline, (run_id, stored, svc.violations()[-3:])
        time.sleep(0.01)


def _through_the_exporter(svc: LocalService, run_id: uuid.UUID, posted: dict[str, Any], patched: dict[str, Any],
                          tags: list[str]) -> None:
    """A span posted early (flushed while open) and patched at its end, by the processor: attributes set at its
    start and after, as metadata; its run id given (``langsmith.span.id``) so the test can read it back."""
    processor = RunsSpanProcessor(endpoint=svc.url, api_key=KEY, project="property", schedule_delay_s=60)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    try:
        attributes: dict[str, Any] = {"input.value": "exporter", "langsmith.span.id": str(run_id)}
        if tags:
            attributes["langsmith.span.tags"] = ",".join(tags)
        attributes.update({f"langsmith.metadata.{k}": v for k, v in posted.items()})
        span = provider.get_tracer("property").start_span("exporter", attributes=attributes)
        assert processor.force_flush(5000)  # the early post
        for key, value in patched.items():
            span.set_attribute(f"langsmith.metadata.{key}", value)
        span.set_attribute("output.value", "done")
        span.end()
        assert processor.force_flush(5000)
    finally:
        provider.shutdown()


@pytest.mark.parametrize("module", [_shares, _store_schema, _viewer], ids=lambda m: m.__name__)
def test_doctests(module: Any) -> None:
    assert doctest.testmod(module).failed == 0
