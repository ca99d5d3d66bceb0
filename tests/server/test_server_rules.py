"""One test per validation rule: a handcrafted good body is accepted and a bad one answers 422 naming the rule.

Bodies are sent over real HTTP with requests, as a client would.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
import requests
from server.server_helpers import (
    Trace,
    entry,
    good_trace_body,
    iso,
    multipart,
    part,
    post_multipart,
    rules_of,
    run_parts,
)

from otel_runs_exporter.server import LocalService
from otel_runs_exporter.server._modes import HOSTED_ACCEPTS


def test_good_trace_is_accepted_and_stored(service: LocalService) -> None:
    trace = Trace()
    response = post_multipart(service, good_trace_body(trace))
    assert response.status_code == 202, response.text
    assert sorted(response.json()["post"]) == sorted([trace.root_id, trace.child_id])
    assert service.violations() == []
    runs = {r["id"]: r for r in service.wait_for_runs(2, timeout=2)}
    assert runs[trace.child_id]["parent_run_id"] == trace.root_id
    assert runs[trace.child_id]["inputs"] == {"prompt": "hi"}
    assert runs[trace.child_id]["outputs"] == {"text": "yo"}


def _single_post(trace: Trace, run: dict | None = None, **fields: object) -> bytes:
    return multipart(run_parts("post", run if run is not None else trace.root_post(), **fields))


# Each case: (rule, body builder for a trace). The builder breaks exactly one rule.
Builder = Callable[[Trace], bytes]


def _bad_part_name(t: Trace) -> bytes:
    return multipart(run_parts("post", t.root_post()) + [part(f"post.{t.root_id}.bogus", {})])


def _bad_part_name_shape(t: Trace) -> bytes:
    return multipart([part(f"pots.{t.root_id}", t.root_post())])


def _part_without_run(t: Trace) -> bytes:
    return multipart(run_parts("post", t.root_post()) + [part(f"post.{t.child_id}.inputs", {})])


def _content_type(t: Trace) -> bytes:
    return multipart([part(f"post.{t.root_id}", t.root_post(), content_type="text/plain")])


def _length_mismatch(t: Trace) -> bytes:
    return multipart([part(f"post.{t.root_id}", t.root_post(), length=3)])


def _length_missing(t: Trace) -> bytes:
    return multipart([part(f"post.{t.root_id}", t.root_post(), length=None)])


def _bad_json(t: Trace) -> bytes:
    return multipart(run_parts("post", t.root_post()) + [part(f"post.{t.root_id}.inputs", b"{nope", raw=True)])


def _inputs_not_object(t: Trace) -> bytes:
    return _single_post(t, inputs=[1, 2])


def _inputs_in_main(t: Trace) -> bytes:
    return _single_post(t, {**t.root_post(), "inputs": {"q": 1}})


def _missing_trace_id(t: Trace) -> bytes:
    run = t.root_post()
    del run["trace_id"]
    return _single_post(t, run)


def _missing_dotted_order(t: Trace) -> bytes:
    run = t.root_post()
    del run["dotted_order"]
    return _single_post(t, run)


def _not_uuid(t: Trace) -> bytes:
    return _single_post(t, {**t.root_post(), "parent_run_id": "not-a-uuid"})


def _id_mismatch(t: Trace) -> bytes:
    return multipart([part(f"post.{t.root_id}", {**t.root_post(), "id": str(uuid.uuid4())})])


def _bad_timestamp(t: Trace) -> bytes:
    return _single_post(t, {**t.root_post(), "start_time": "yesterday"})


def _dotted_no_z(t: Trace) -> bytes:
    return _single_post(t, {**t.root_post(), "dotted_order": t.root_dotted.replace("Z", "")})


def _dotted_millis(t: Trace) -> bytes:
    ts = t.root_start.strftime("%Y%m%dT%H%M%S") + f"{t.root_start.microsecond // 1000:03d}"
    return _single_post(t, {**t.root_post(), "dotted_order": f"{ts}Z{t.root_id}"})


def _dotted_hex_uuid(t: Trace) -> bytes:
    return _single_post(t, {**t.root_post(), "dotted_order": t.root_dotted.replace("-", "")})


def _trace_id_not_first(t: Trace) -> bytes:
    return multipart(run_parts("post", t.root_post()) + run_parts("post", {**t.child_post(), "trace_id": t.child_id}))


def _parent_not_before_last(t: Trace) -> bytes:
    other = str(uuid.uuid4())
    return multipart(run_parts("post", t.root_post()) + run_parts("post", {**t.child_post(), "parent_run_id": other}))


def _root_with_parent(t: Trace) -> bytes:
    return _single_post(t, {**t.root_post(), "parent_run_id": str(uuid.uuid4())})


def _run_id_not_last(t: Trace) -> bytes:
    # The child's dotted_order ends with the root's entry instead of its own.
    bad = t.root_dotted + "." + entry(t.child_start, t.root_id)
    return multipart(run_parts("post", t.root_post()) + run_parts("post", {**t.child_post(), "dotted_order": bad}))


def _time_goes_back(t: Trace) -> bytes:
    earlier = t.root_start - timedelta(seconds=1)
    dotted = t.root_dotted + "." + entry(earlier, t.child_id)
    child = {**t.child_post(), "dotted_order": dotted, "start_time": iso(earlier)}
    return multipart(run_parts("post", t.root_post()) + run_parts("post", child))


def _start_time_off(t: Trace) -> bytes:
    return _single_post(t, {**t.root_post(), "start_time": iso(t.root_start + timedelta(microseconds=1))})


def _both_sessions(t: Trace) -> bytes:
    return _single_post(t, {**t.root_post(), "session_id": str(uuid.uuid4())})


def _no_session(t: Trace) -> bytes:
    run = t.root_post()
    del run["session_name"]
    return _single_post(t, run)


CASES: list[tuple[str, Builder]] = [
    ("part_name", _bad_part_name),
    ("part_name", _bad_part_name_shape),
    ("part_without_run", _part_without_run),
    ("part_content_type", _content_type),
    ("part_length", _length_mismatch),
    ("part_length", _length_missing),
    ("part_json", _bad_json),
    ("field_types", _inputs_not_object),
    ("split_fields", _inputs_in_main),
    ("required_fields", _missing_trace_id),
    ("required_fields", _missing_dotted_order),
    ("uuid", _not_uuid),
    ("id_match", _id_mismatch),
    ("timestamp_format", _bad_timestamp),
    ("dotted_order_format", _dotted_no_z),
    ("dotted_order_format", _dotted_millis),
    ("dotted_order_format", _dotted_hex_uuid),
    ("trace_id_first", _trace_id_not_first),
    ("parent_before_last", _parent_not_before_last),
    ("parent_before_last", _root_with_parent),
    ("run_id_last", _run_id_not_last),
    ("time_order", _time_goes_back),
    ("start_time_entry", _start_time_off),
    ("session", _both_sessions),
    ("session", _no_session),
]


@pytest.mark.parametrize(("rule", "build"), CASES, ids=[f"{r}-{b.__name__.strip('_')}" for r, b in CASES])
def test_rule_violation_answers_422_naming_rule_and_run(service: LocalService, rule: str, build: Builder) -> None:
    trace = Trace()
    response = post_multipart(service, build(trace))
    assert response.status_code == 422, response.text
    assert rule in rules_of(response), response.json()
    for item in response.json()["detail"]:
        assert set(item) == {"loc", "msg", "type"}
        assert isinstance(item["loc"], list) and item["loc"][0] == "body"
    assert service.runs() == []  # the whole request is refused, as the real service does
    assert {v["rule"] for v in service.violations()} >= {rule}


@pytest.mark.parametrize(("rule", "build"), CASES[:4], ids=[r for r, _ in CASES[:4]])
def test_lenient_records_and_accepts(rule: str, build: Builder) -> None:
    with LocalService(lenient=True) as svc:
        response = post_multipart(svc, build(Trace()))
        assert response.status_code == 202, response.text
        assert rule in {v["rule"] for v in svc.violations()}
        assert all(v["accepted"] for v in svc.violations())
        assert svc.check()["accepted_violations"]


@pytest.fixture(scope="module")
def as_hosted() -> Iterator[LocalService]:
    """A service in the default mode: it refuses what the hosted service refuses."""
    with LocalService() as svc:
        yield svc


@pytest.mark.parametrize(("rule", "build"), CASES, ids=[f"{r}-{b.__name__.strip('_')}" for r, b in CASES])
def test_by_default_only_what_the_hosted_service_refuses_is_refused(
    as_hosted: LocalService, rule: str, build: Builder
) -> None:
    as_hosted.reset()
    response = post_multipart(as_hosted, build(Trace()))
    recorded = as_hosted.violations()
    assert rule in {v["rule"] for v in recorded}
    if rule in HOSTED_ACCEPTS:
        assert response.status_code == 202, response.text
        assert as_hosted.runs() and all(v["accepted"] for v in recorded)
        assert {v["rule"] for v in as_hosted.check()["accepted_violations"]} == {rule}
    else:
        assert response.status_code == 422, response.text
        assert as_hosted.runs() == [] and not any(v["accepted"] for v in recorded)


def test_start_time_off_its_entry_is_stored_by_default_and_refused_when_strict(service: LocalService) -> None:
    # The one rule the issue names: the SDK builds such runs and the hosted service takes them.
    with LocalService() as default:
        trace = Trace()
        assert post_multipart(default, _start_time_off(trace)).status_code == 202
        stored = default.get_run(trace.root_id)
        assert stored is not None and stored["start_time"] != trace.root_post()["start_time"]
        assert [(v["rule"], v["run_id"], v["accepted"]) for v in default.violations()] == [
            ("start_time_entry", trace.root_id, True)
        ]
    assert service.strict
    assert post_multipart(service, _start_time_off(Trace())).status_code == 422


def test_strict_and_lenient_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="strict and lenient exclude each other"):
        LocalService(strict=True, lenient=True)
    assert LocalService().validation == "hosted"
    assert LocalService(lenient=True).lenient and not LocalService(lenient=True).strict


def test_detail_names_the_run(service: LocalService) -> None:
    trace = Trace()
    response = post_multipart(service, _start_time_off(trace))
    assert trace.root_id in response.json()["detail"][0]["msg"]
    assert response.json()["detail"][0]["loc"] == ["body", f"post.{trace.root_id}", "start_time"]


# --- what real clients legitimately send -----------------------------------------------


def test_extra_parts_attachments_and_feedback_are_accepted(service: LocalService) -> None:
    t = Trace()
    png = b"\x89PNG\r\n\x1a\n fake"
    body = multipart(
        run_parts("post", t.root_post(), inputs={"q": 1}, extra={"metadata": {"k": "v"}}, serialized={"name": "x"})
        + [part(f"post.{t.root_id}.error", "ValueError: boom")]
        + [part(f"attachment.{t.root_id}.image", png, content_type=f"image/png; length={len(png)}", length=None, raw=True)]
        + [part(f"feedback.{uuid.uuid4()}", {"run_id": t.root_id, "key": "score", "score": 1})]
    )
    response = post_multipart(service, body)
    assert response.status_code == 202, response.text
    run = service.get_run(t.root_id)
    assert run is not None
    assert run["error"] == "ValueError: boom"
    assert run["extra"] == {"metadata": {"k": "v"}}
    assert run["attachments"]["image"]["size"] == len(png)
    assert service.feedback()[0]["key"] == "score"


def test_content_type_parameters_are_accepted(service: LocalService) -> None:
    t = Trace()
    run = t.root_post()
    data = part(f"post.{t.root_id}", run, content_type="application/json; charset=utf-8")
    inputs = b'{"q": 1}'
    data_in = part(f"post.{t.root_id}.inputs", inputs, content_type=f"application/json; length={len(inputs)}", raw=True)
    response = post_multipart(service, multipart([data, data_in]))
    assert response.status_code == 202, response.text


def test_32_hex_ids_are_accepted_in_part_names_and_fields(service: LocalService) -> None:
    t = Trace()
    run = {**t.child_post(), "id": t.child_id.replace("-", ""), "trace_id": t.root_id.replace("-", ""),
           "parent_run_id": t.root_id.replace("-", "")}
    body = multipart(run_parts("post", t.root_post()) + [part(f"post.{t.child_id.replace('-', '')}", run)])
    response = post_multipart(service, body)
    assert response.status_code == 202, response.text
    stored = service.get_run(t.child_id)
    assert stored is not None and stored["parent_run_id"] == t.root_id


def test_start_time_with_z_and_nanoseconds_matches_its_entry(service: LocalService) -> None:
    t = Trace()
    start = t.root_start.strftime("%Y-%m-%dT%H:%M:%S.%f") + "789Z"
    response = post_multipart(service, _single_post(t, {**t.root_post(), "start_time": start}))
    assert response.status_code == 202, response.text


def test_patch_without_session_is_fine(service: LocalService) -> None:
    t = Trace()
    body = multipart(run_parts("patch", t.patch(t.root_id, t.root_dotted, t.root_start), outputs={}))
    assert post_multipart(service, body).status_code == 202


# --- structure --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("multipart/form-data", b"--x\r\n"),
        ("application/json", b"{}"),
        (f"multipart/form-data; boundary=other", None),
    ],
    ids=["no-boundary", "not-multipart", "wrong-boundary"],
)
def test_malformed_multipart_answers_422(service: LocalService, content_type: str, body: bytes | None) -> None:
    data = body if body is not None else good_trace_body(Trace())
    response = requests.post(service.url + "/runs/multipart", data=data, headers={"Content-Type": content_type}, timeout=5)
    assert response.status_code == 422
    assert rules_of(response) == {"multipart"}


def test_truncated_body_is_refused(service: LocalService) -> None:
    body = good_trace_body(Trace())
    response = post_multipart(service, body[: len(body) // 2])
    assert response.status_code == 422
    assert rules_of(response) == {"multipart"}
    without_close = body[: body.rindex(b"\r\n--")]
    response = post_multipart(service, without_close)
    assert "no closing boundary" in response.json()["detail"][0]["msg"]


# --- basic tracing (2.3 rule 4) ------------------------------------------------------


def _basic(t: Trace, run: dict) -> dict:
    return {k: v for k, v in run.items() if k not in ("trace_id", "dotted_order")}


def test_basic_tracing_computes_trace_id_and_dotted_order(service: LocalService, http: requests.Session) -> None:
    t = Trace()
    root = _basic(t, t.root_post()) | {"id": t.root_id.replace("-", ""), "inputs": {"q": 1}}
    child = _basic(t, t.child_post()) | {"id": t.child_id.replace("-", ""), "parent_run_id": t.root_id.replace("-", "")}
    r1 = http.post(service.url + "/runs", json=root, timeout=5)
    r2 = http.post(service.url + "/runs", json=child, timeout=5)
    assert (r1.status_code, r2.status_code) == (202, 202), (r1.text, r2.text)
    assert r2.json() == {"id": t.child_id, "trace_id": t.root_id, "dotted_order": t.child_dotted}
    end = iso(t.child_start + timedelta(seconds=1))
    r3 = http.patch(service.url + f"/runs/{t.child_id.replace('-', '')}", json={"outputs": {"a": 1}, "end_time": end}, timeout=5)
    assert r3.status_code == 202, r3.text
    stored = service.get_run(t.child_id)
    assert stored is not None and stored["dotted_order"] == t.child_dotted and stored["end_time"] == end
    assert service.violations() == []


def test_basic_tracing_validates_ids_when_sent(service: LocalService) -> None:
    t = Trace()
    response = requests.post(service.url + "/runs", json={**t.root_post(), "trace_id": t.child_id}, timeout=5)
    assert response.status_code == 422
    assert "trace_id_first" in rules_of(response)


def test_basic_tracing_with_unknown_parent(service: LocalService) -> None:
    t = Trace()
    response = requests.post(service.url + "/runs", json=_basic(t, t.child_post()), timeout=5)
    assert response.status_code == 422
    assert rules_of(response) == {"parent_known"}


def test_basic_tracing_needs_start_time(service: LocalService) -> None:
    t = Trace()
    run = _basic(t, t.root_post())
    del run["start_time"]
    response = requests.post(service.url + "/runs", json=run, timeout=5)
    assert response.status_code == 422
    assert rules_of(response) == {"required_fields"}


def test_patch_path_id_must_match_body(service: LocalService) -> None:
    t = Trace()
    response = requests.patch(service.url + f"/runs/{t.root_id}", json={"id": t.child_id, "outputs": {}}, timeout=5)
    assert response.status_code == 422
    assert rules_of(response) == {"id_match"}


def test_batch_endpoint_accepts_post_and_patch(service: LocalService) -> None:
    t = Trace()
    end = iso(t.child_start + timedelta(seconds=1))
    body = {
        "post": [t.root_post() | {"inputs": {"q": 1}}, t.child_post()],
        "patch": [t.patch(t.child_id, t.child_dotted, t.child_start + timedelta(seconds=1)) | {"outputs": {"o": 1}}],
    }
    response = requests.post(service.url + "/runs/batch", json=body, timeout=5)
    assert response.status_code == 202, response.text
    assert service.get_run(t.child_id)["end_time"] == end  # type: ignore[index]
    bad = {"post": [{**t.root_post(), "id": str(uuid.uuid4())}]}
    response = requests.post(service.url + "/runs/batch", json=bad, timeout=5)
    assert response.status_code == 422
    assert "run_id_last" in rules_of(response)


# --- a run cannot be its own ancestor ---------------------------------------------------


def _own_parent(t: Trace) -> dict:
    """The child naming itself as its parent, with a dotted_order that agrees (its entry twice)."""
    own = entry(t.child_start, t.child_id)
    return {**t.child_post(), "parent_run_id": t.child_id, "dotted_order": f"{t.root_dotted}.{own}.{own}"}


@pytest.mark.parametrize("route", ["multipart", "batch", "runs", "patch"])
def test_a_run_naming_itself_as_its_parent_is_a_422(service: LocalService, route: str) -> None:
    """Found: accepted, after which ``runs tree`` said "(2 runs)" and showed none, and ``runs check`` was silent."""
    t = Trace()
    run = _own_parent(t)
    if route == "multipart":
        response = post_multipart(service, multipart(run_parts("post", t.root_post()) + run_parts("post", run)))
    elif route == "batch":
        response = requests.post(service.url + "/runs/batch", json={"post": [t.root_post(), run]}, timeout=5)
    elif route == "runs":
        response = requests.post(service.url + "/runs", json=run, timeout=5)
    else:
        assert requests.post(service.url + "/runs/batch", json={"post": [t.root_post(), t.child_post()]}, timeout=5).ok
        response = requests.patch(service.url + f"/runs/{t.child_id}", json={"parent_run_id": t.child_id}, timeout=5)
    assert response.status_code == 422, response.text
    assert "own_parent" in rules_of(response), response.json()
    assert all(r.get("parent_run_id") != r["id"] for r in service.runs())


def test_a_dotted_order_naming_a_run_twice_is_a_422(service: LocalService) -> None:
    """A run is its own ancestor when its id comes back further down the chain (a cycle through another run)."""
    t = Trace()
    middle = str(uuid.uuid4())
    dotted = ".".join([t.root_dotted, entry(t.child_start, t.child_id), entry(t.child_start, middle), entry(t.child_start, t.child_id)])
    run = {**t.child_post(), "parent_run_id": middle, "dotted_order": dotted}
    response = requests.post(service.url + "/runs/batch", json={"post": [run]}, timeout=5)
    assert response.status_code == 422, response.text
    assert "repeated_entry" in rules_of(response), response.json()
