"""The read side at its edges, each case as an audit found it: a 500, a stall, or an answer the SDK trusts too much.

Each test sends what was sent then and asserts the clear 422 (or the safe answer) that replaced it.
"""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from otel_runs_exporter.server import LocalService

from server.server_helpers import Trace

langsmith = pytest.importorskip("langsmith")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK's read_run/list_runs, still what users call


def _seed(svc: LocalService) -> Trace:
    trace = Trace()
    answer = requests.post(svc.url + "/runs/batch", json={"post": [trace.root_post(), trace.child_post()]}, timeout=10)
    assert answer.status_code == 202, answer.text
    return trace


def _project_id(svc: LocalService) -> str:
    return requests.get(svc.url + "/sessions", params={"name": "tests"}, timeout=10).json()[0]["id"]


def _refused(answer: requests.Response, *words: str) -> None:
    assert answer.status_code == 422, (answer.status_code, answer.text[:300])
    text = answer.text
    assert all(word in text for word in words), text[:300]


# Valid text, but before year 1 once in UTC (or past 9999): fromisoformat takes it, astimezone overflowed.
EARLY = "0001-01-01T00:30:00+01:00"
LATE = "9999-12-31T23:00:00-05:00"


def test_a_timestamp_outside_the_calendar_in_utc_is_a_422_wherever_it_is_read(service: LocalService) -> None:
    _seed(service)
    project = _project_id(service)
    url = service.url
    cases = [
        ("/runs/query", {"start_time": EARLY}),
        ("/runs/query", {"filter": f'gt(start_time, "{EARLY}")'}),
        ("/runs/stats", {"filter": f'lt(end_time, "{LATE}")'}),
        ("/api/v2/runs/query", {"project_ids": [project], "min_start_time": EARLY}),
        ("/api/v2/threads/query", {"project_id": project, "max_start_time": LATE}),
        ("/runs/charts", {"session": [project], "start_time": EARLY, "end_time": "0001-01-02T00:00:00Z"}),
    ]
    for path, body in cases:
        _refused(requests.post(url + path, json=body, timeout=10))  # before: 500, OverflowError
    run = {"id": str(uuid.uuid4()), "name": "x", "run_type": "llm", "inputs": {}, "start_time": EARLY, "session_name": "p"}
    _refused(requests.post(url + "/runs", json=run, timeout=10), "start_time")


def test_charts_up_to_the_end_of_the_calendar_are_a_422_not_an_overflow(service: LocalService) -> None:
    _seed(service)
    project = _project_id(service)
    for bucket in ("day", "minute"):
        body = {"session": [project], "start_time": "9999-12-31T00:00:00Z", "end_time": "9999-12-31T23:59:59Z", "bucket": bucket}
        _refused(requests.post(service.url + "/runs/charts", json=body, timeout=10), "end_time")  # before: 500


def test_has_metadata_is_bounded_like_every_other_literal(service: LocalService) -> None:
    _seed(service)
    big = '{"a": 123456789012345678901234567890}'
    keys = json.dumps({f"k{i}": 1 for i in range(1000)}, separators=(",", ":"))
    for path in ("/runs/query", "/runs/stats"):
        # before, three different 500s: an int past SQLite's, json's RecursionError, SQLite's expression depth
        _refused(requests.post(service.url + path, json={"filter": f"has(metadata, '{big}')"}, timeout=10), "out of range")
        _refused(requests.post(service.url + path, json={"filter": "has(metadata, '" + "[" * 4000 + "')"}, timeout=10), "JSON object")
        _refused(requests.post(service.url + path, json={"filter": f"has(metadata,'{keys}')"}, timeout=10), "at most 64 keys")
    few = json.dumps({f"k{i}": 1 for i in range(64)})
    assert requests.post(service.url + "/runs/query", json={"filter": f"has(metadata, '{few}')"}, timeout=10).status_code == 200


def test_one_expression_asks_at_most_8_searches(service: LocalService) -> None:
    """760 short searches in 10,000 characters held the store for 15 s (every other request waited)."""
    _seed(service)
    eight = "or(" + ",".join(['search("zq")'] * 8) + ")"
    assert requests.post(service.url + "/runs/query", json={"filter": eight}, timeout=10).status_code == 200
    many = "or(" + ",".join(['search("zq")'] * 760) + ")"
    _refused(requests.post(service.url + "/runs/query", json={"filter": many}, timeout=10), "at most 8 search()")


def test_a_changes_cursor_past_sqlite_integers_is_a_422(service: LocalService) -> None:
    trace = _seed(service)
    store_id = requests.get(service.url + "/runs/changes", params={"trace": trace.root_id}, timeout=10).json()["cursor"].split(".")[0]
    for version in ("9999999999999999999", "9223372036854775808"):
        answer = requests.get(service.url + "/runs/changes", params={"trace": trace.root_id, "after": f"{store_id}.{version}", "wait": 0}, timeout=10)
        _refused(answer, "cursor this service handed out")  # before: 500


@pytest.fixture
def internal_host() -> Iterator[tuple[str, list[str]]]:
    """A listener standing for an address only the reader's machine can reach; records what it is asked."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "6")
            self.end_headers()
            self.wfile.write(b"secret")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_stored_s3_urls_is_never_answered_so_the_reader_fetches_nothing_it_names(
    service: LocalService, internal_host: tuple[str, list[str]]
) -> None:
    """Before: GET /runs/{id} answered the producer's s3_urls as stored, and the SDK's read_run
    downloaded that address and handed its body to the reader as an attachment."""
    address, asked = internal_host
    trace = Trace()
    root = trace.root_post()
    root["s3_urls"] = {"attachment.creds": {"presigned_url": address + "/latest/meta-data/", "mime_type": "text/plain"}}
    root["feedback_stats"] = {"thumbs": {"n": 99, "avg": 1}}
    assert requests.post(service.url + "/runs/batch", json={"post": [root]}, timeout=10).status_code == 202
    answer = requests.get(service.url + f"/runs/{trace.root_id}", timeout=10).json()
    assert "s3_urls" not in answer and answer.get("feedback_stats") is None
    run = langsmith.Client(api_url=service.url, api_key="k").read_run(trace.root_id)
    assert not run.attachments and asked == []


@pytest.mark.parametrize("strict", [True, False])
def test_fields_the_sdk_reads_back_typed_are_checked_on_the_way_in(strict: bool) -> None:
    """Before: 202 for each, then read_run raised a ValidationError, and list_runs for the whole project."""
    odd = {"name": 5, "tags": [1, 2], "error": {"m": 1}, "reference_example_id": "nope", "serialized": "x", "run_type": ["llm"]}
    with LocalService(strict=strict) as svc:
        for key, value in odd.items():
            run = Trace().root_post()
            run[key] = value
            _refused(requests.post(svc.url + "/runs/batch", json={"post": [run]}, timeout=10), key, "field_types")
        fine = Trace().root_post()
        fine.update(tags=["a"], error="it failed", serialized={"name": "x"}, reference_example_id=None)
        assert requests.post(svc.url + "/runs/batch", json={"post": [fine]}, timeout=10).status_code == 202
        assert [r.name for r in langsmith.Client(api_url=svc.url, api_key="k").list_runs(project_name="tests")] == ["agent"]


def test_a_run_id_that_is_not_a_uuid_is_a_422_cut_short(service: LocalService) -> None:
    answer = requests.get(service.url + "/runs/" + "a" * 5000, timeout=10)
    _refused(answer, "is not a UUID")
    assert len(answer.text) < 300  # before: a 404 echoing all 5,000 characters
