"""The local service over the wire: auth, limits, faults, encodings, storage semantics, concurrency."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from datetime import timedelta

import pytest
import requests
from server.server_helpers import BOUNDARY, Trace, good_trace_body, multipart, post_multipart, run_parts

from otel_runs_exporter.server import FaultConfig, LocalService, RateRule


def _root_only(trace: Trace) -> bytes:
    end = trace.root_start + timedelta(seconds=1)
    return multipart(
        run_parts("post", trace.root_post() | {"end_time": end.isoformat()}, inputs={}, outputs={"ok": True})
    )


# --- basics -----------------------------------------------------------------------


def test_ok_info_and_api_v1_prefix(service: LocalService, http: requests.Session) -> None:
    assert http.get(service.url + "/ok", timeout=5).json() == {"ok": True}
    info = http.get(service.url + "/api/v1/info", timeout=5).json()
    assert info["batch_ingest_config"]["use_multipart_endpoint"] is True
    trace = Trace()
    response = http.post(
        service.url + "/api/v1/runs/multipart",
        data=_root_only(trace),
        headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
        timeout=5,
    )
    assert response.status_code == 202
    got = http.get(service.url + f"/api/v1/runs/{trace.root_id}", timeout=5)
    assert got.status_code == 200 and got.json()["name"] == "agent"
    assert http.get(service.url + f"/runs/{Trace().root_id}", timeout=5).status_code == 404
    assert http.get(service.url + "/nowhere", timeout=5).status_code == 404


def test_keep_alive_reuses_one_connection(service: LocalService, http: requests.Session) -> None:
    for _ in range(5):
        assert post_multipart(service, _root_only(Trace()), session=http).status_code == 202
    assert len({entry["client_port"] for entry in service.requests()}) == 1


def test_multipart_disabled_forces_basic_tracing() -> None:
    with LocalService(multipart=False) as svc:
        assert svc.info()["batch_ingest_config"]["use_multipart_endpoint"] is False
        assert post_multipart(svc, _root_only(Trace())).status_code == 404
        assert requests.post(svc.url + "/api/v1/runs/multipart", data=b"", timeout=5).status_code == 404


def test_max_body_bytes_answers_413() -> None:
    with LocalService(max_body_bytes=200) as svc:
        response = post_multipart(svc, good_trace_body(Trace()))
        assert response.status_code == 413
        assert response.json()["max_size"] == 200
        small = gzip.compress(b"x" * 10_000)  # small on the wire, large once decoded
        response = requests.post(
            svc.url + "/runs/batch", data=small, headers={"Content-Encoding": "gzip"}, timeout=5
        )
        assert response.status_code == 413


# --- auth (spec 5) ---------------------------------------------------------------------


def test_api_key_and_workspace() -> None:
    with LocalService(api_key="s3cret-key", workspace_id="ws-1") as svc:
        body = _root_only(Trace())
        assert post_multipart(svc, body).status_code == 401
        assert post_multipart(svc, body, **{"X-API-Key": "wrong"}).status_code == 401
        assert post_multipart(svc, body, **{"x-api-key": "s3cret-key"}).status_code == 403
        assert post_multipart(svc, body, **{"X-Api-Key": "s3cret-key", "x-tenant-id": "other"}).status_code == 403
        assert post_multipart(svc, body, **{"X-Api-Key": "s3cret-key", "X-Tenant-Id": "ws-1"}).status_code == 202
        assert requests.get(svc.url + "/info", timeout=5).status_code == 200  # public, as the client reads it first
        assert "s3cret" not in repr(svc)


def test_auth_refusal_keeps_the_connection_usable(http: requests.Session) -> None:
    with LocalService(api_key="k") as svc:
        assert post_multipart(svc, _root_only(Trace()), session=http).status_code == 401
        assert post_multipart(svc, _root_only(Trace()), session=http, **{"x-api-key": "k"}).status_code == 202


# --- rate limits (spec 8.1) -----------------------------------------------------------


def test_spec_rate_limit_run_lookup_30_per_minute() -> None:
    with LocalService(rate_limits=True) as svc, requests.Session() as http:
        url = svc.url + f"/runs/{Trace().root_id}"
        statuses = [http.get(url, headers={"x-api-key": "a"}, timeout=5).status_code for _ in range(31)]
        assert statuses[:30] == [404] * 30
        assert statuses[30] == 429
        refused = http.get(url, headers={"x-api-key": "a"}, timeout=5)
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert "Run lookup" in refused.json()["detail"]
        # keyed by API key: another key has its own budget
        assert http.get(url, headers={"x-api-key": "b"}, timeout=5).status_code == 404


def test_custom_rate_rules_for_ingest() -> None:
    rules = [RateRule("Multipart ingest", "api_key", 2, 60, "POST", r"^/runs/multipart$")]
    with LocalService(rate_limits=rules) as svc:
        codes = [post_multipart(svc, _root_only(Trace()), **{"x-api-key": "k"}).status_code for _ in range(3)]
        assert codes == [202, 202, 429]


def test_scaled_rate_limits_and_the_request_log(tmp_path) -> None:
    # Counts / 2000 and windows / 10: multipart's 6000 / 10 s becomes 3 / 1 s, and the
    # default's 1000 / 10 s (1 / 1 s) does not also count against multipart.
    log = tmp_path / "requests.jsonl"
    with LocalService(rate_limits=True, rate_limit_scale=2000, rate_limit_window_scale=10, request_log=str(log)) as svc:
        answers = [post_multipart(svc, _root_only(Trace()), **{"x-api-key": "k"}) for _ in range(4)]
        assert [a.status_code for a in answers] == [202, 202, 202, 429]
        assert answers[3].headers["Retry-After"] == "1"
        assert "3 requests per 1s" in answers[3].json()["detail"]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["path"], e["status"], e["runs"]) for e in lines] == [("/runs/multipart", 202, 1)] * 3 + [
        ("/runs/multipart", 429, 0)
    ]
    assert all(isinstance(e["at"], float) and e["at"] > 1.7e9 for e in lines)


# --- faults --------------------------------------------------------------------------------


def test_status_sequence_then_success(service: LocalService) -> None:
    service.faults.status_sequence = [503, 500, 429]
    service.faults.retry_after = 2
    trace = Trace()
    answers = [post_multipart(service, _root_only(trace)) for _ in range(4)]
    assert [a.status_code for a in answers] == [503, 500, 429, 202]
    assert answers[2].headers["Retry-After"] == "2"
    assert "Retry-After" in answers[0].headers
    assert [e["fault"] for e in service.requests()] == ["status_sequence"] * 3 + [None]
    assert len(service.runs()) == 1


def test_outage_and_no_retry_after(service: LocalService) -> None:
    service.faults.update(outage=True, retry_after=None)
    response = post_multipart(service, _root_only(Trace()))
    assert response.status_code == 503 and "Retry-After" not in response.headers
    assert requests.get(service.url + "/ok", timeout=5).status_code == 200  # only tracing requests fail
    service.faults.outage = False
    assert post_multipart(service, _root_only(Trace())).status_code == 202


@pytest.mark.parametrize(("setting", "status"), [("rate_500", 500), ("rate_429", 429)])
def test_seeded_status_rates(setting: str, status: int) -> None:
    def run(seed: int) -> list[int]:
        with LocalService(faults=FaultConfig(seed=seed, **{setting: 0.5})) as svc:
            return [post_multipart(svc, _root_only(Trace())).status_code for _ in range(20)]

    first = run(7)
    assert set(first) == {202, status}
    assert run(7) == first  # the seed makes the faults repeatable


def test_drop_after_read_stores_but_does_not_answer(service: LocalService) -> None:
    service.faults.rate_drop = 1.0
    trace = Trace()
    with pytest.raises(requests.ConnectionError):
        post_multipart(service, _root_only(trace))
    assert service.get_run(trace.root_id) is not None  # the answer was lost, not the request
    service.faults.rate_drop = 0.0
    assert post_multipart(service, _root_only(trace)).status_code == 202  # the client's retry
    assert service.duplicate_posts() == {trace.root_id: 1}
    assert service.requests()[0]["status"] == 0


def test_drop_before_read_stores_nothing(service: LocalService) -> None:
    service.faults.rate_drop_before_read = 1.0
    with pytest.raises(requests.ConnectionError):
        post_multipart(service, _root_only(Trace()))
    assert service.runs() == []


def test_slow_answers(service: LocalService) -> None:
    service.faults.update(rate_slow=1.0, slow_seconds=0.3)
    started = time.monotonic()
    assert post_multipart(service, _root_only(Trace())).status_code == 202
    assert time.monotonic() - started >= 0.3
    with pytest.raises(requests.Timeout):
        post_multipart_timeout = requests.post(
            service.url + "/runs/multipart",
            data=_root_only(Trace()),
            headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
            timeout=0.1,
        )
        del post_multipart_timeout


def test_reject_run_ids_refuses_the_whole_request(service: LocalService) -> None:
    trace = Trace()
    service.faults.reject_run_ids = {trace.child_id}
    response = post_multipart(service, good_trace_body(trace))
    assert response.status_code == 422
    assert trace.child_id in response.json()["detail"][0]["msg"]
    assert service.runs() == []
    service.faults.reject_run_ids = set()
    assert post_multipart(service, good_trace_body(trace)).status_code == 202


def test_stop_interrupts_a_slow_answer() -> None:
    svc = LocalService(faults=FaultConfig(rate_slow=1.0, slow_seconds=30)).start()
    thread = threading.Thread(target=lambda: _quiet_post(svc), daemon=True)
    thread.start()
    time.sleep(0.2)
    started = time.monotonic()
    svc.stop()
    assert time.monotonic() - started < 5


def _quiet_post(svc: LocalService) -> None:
    try:
        post_multipart(svc, _root_only(Trace()))
    except requests.RequestException:
        pass


# --- encodings -------------------------------------------------------------------------


def test_gzip_body(service: LocalService) -> None:
    trace = Trace()
    response = post_multipart(service, gzip.compress(good_trace_body(trace)), **{"Content-Encoding": "gzip"})
    assert response.status_code == 202, response.text
    assert len(service.runs()) == 2
    assert service.requests()[-1]["content_encoding"] == "gzip"


def test_zstd_body_including_streamed_frames(service: LocalService) -> None:
    zstandard = pytest.importorskip("zstandard")
    trace = Trace()
    body = good_trace_body(trace)
    # A streaming writer leaves the content size out of the frame header, as the service's client does.
    import io

    buffer = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(buffer, closefd=False) as writer:
        writer.write(body)
    response = post_multipart(service, buffer.getvalue(), **{"Content-Encoding": "zstd"})
    assert response.status_code == 202, response.text
    assert len(service.runs()) == 2


def test_unknown_encoding_and_corrupt_gzip(service: LocalService) -> None:
    assert post_multipart(service, b"abc", **{"Content-Encoding": "br"}).status_code == 415
    assert post_multipart(service, b"not gzip", **{"Content-Encoding": "gzip"}).status_code == 400


def test_zstd_without_zstandard_answers_415(service: LocalService, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "zstandard", None)
    response = post_multipart(service, b"\x28\xb5\x2f\xfd", **{"Content-Encoding": "zstd"})
    assert response.status_code == 415
    assert "zstandard" in response.json()["detail"]


# --- storage semantics -------------------------------------------------------------


def test_patch_before_post_is_merged(service: LocalService) -> None:
    trace = Trace()
    end = trace.root_start + timedelta(seconds=2)
    patch = multipart(run_parts("patch", trace.patch(trace.root_id, trace.root_dotted, end), outputs={"a": 1}))
    assert post_multipart(service, patch).status_code == 202
    assert service.runs() == []
    assert service.check()["patched_not_posted"] == [trace.root_id]
    post = multipart(run_parts("post", trace.root_post(), inputs={"q": 1}))
    assert post_multipart(service, post).status_code == 202
    (run,) = service.wait_for_runs(1, timeout=2)
    assert run["inputs"] == {"q": 1} and run["outputs"] == {"a": 1} and run["end_time"] == end.isoformat()
    assert run["name"] == "agent"
    assert service.check()["patched_not_posted"] == []


def test_a_patch_replaces_what_it_carries_and_merges_its_extra_by_key(service: LocalService) -> None:
    # The patch holds the run as it ended: what it carries replaces (extra's metadata by key), and a field it
    # leaves out (sent as null) stays.
    trace = Trace()
    post = trace.root_post() | {"extra": {"metadata": {"posted": 1, "keep": 1}}, "tags": ["a"]}
    assert post_multipart(service, multipart(run_parts("post", post, inputs={"q": "raw"}))).status_code == 202
    end = trace.root_start + timedelta(seconds=1)
    patch = trace.patch(trace.root_id, trace.root_dotted, end) | {"extra": {"metadata": {"keep": 2}}, "tags": None}
    body = multipart(run_parts("patch", patch, inputs={"messages": []}, outputs={"a": 1}))
    assert post_multipart(service, body).status_code == 202
    (run,) = service.wait_for_runs(1, timeout=2)
    assert run["extra"] == {"metadata": {"posted": 1, "keep": 2}}
    assert run["inputs"] == {"messages": []} and run["outputs"] == {"a": 1} and run["tags"] == ["a"]


def test_duplicate_posts_are_counted_and_first_kept(service: LocalService) -> None:
    trace = Trace()
    for name in ("first", "second", "third"):
        body = multipart(run_parts("post", trace.root_post() | {"name": name}))
        assert post_multipart(service, body).status_code == 202
    assert service.duplicate_posts() == {trace.root_id: 2}
    assert service.get_run(trace.root_id)["name"] == "first"  # type: ignore[index]


def test_check_report(service: LocalService) -> None:
    trace = Trace()
    assert post_multipart(service, multipart(run_parts("post", trace.child_post()))).status_code == 202
    report = service.check()
    assert report["never_completed"] == [trace.child_id]
    assert report["missing_parents"] == [{"parent_run_id": trace.root_id, "children": [trace.child_id]}]


def test_wait_for_runs_timeout_explains(service: LocalService) -> None:
    assert post_multipart(service, multipart(run_parts("post", Trace().root_post()))).status_code == 202
    with pytest.raises(TimeoutError, match=r"stored 1 posted runs \(0 completed\)"):
        service.wait_for_runs(1, timeout=0.2)
    assert len(service.wait_for_runs(1, timeout=0.2, completed=False)) == 1


def test_reset(service: LocalService) -> None:
    post_multipart(service, _root_only(Trace()))
    service.reset()
    assert service.runs() == [] and service.requests() == [] and service.violations() == []


def test_file_database_survives_restart(tmp_path) -> None:
    db = tmp_path / "runs.db"
    trace = Trace()
    with LocalService(db=str(db)) as svc:
        assert post_multipart(svc, good_trace_body(trace)).status_code == 202
    with LocalService(db=str(db)) as svc:
        assert {r["id"] for r in svc.runs()} == {trace.root_id, trace.child_id}


# --- concurrency ----------------------------------------------------------------------------


def test_concurrent_posts_lose_nothing(service: LocalService) -> None:
    traces = [Trace() for _ in range(80)]
    errors: list[str] = []

    def worker(chunk: list[Trace]) -> None:
        with requests.Session() as http:
            for trace in chunk:
                response = post_multipart(service, good_trace_body(trace), session=http)
                if response.status_code != 202:
                    errors.append(response.text)

    threads = [threading.Thread(target=worker, args=(traces[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    runs = service.wait_for_runs(160, timeout=5)
    assert len(runs) == 160
    assert service.duplicate_posts() == {}


def test_stop_closes_idle_keep_alive_connections() -> None:
    svc = LocalService().start()
    sock = socket.create_connection(("127.0.0.1", svc.port), timeout=5)
    sock.sendall(b"GET /ok HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert b"200" in sock.recv(1024)
    time.sleep(0.05)  # let the handler go back to waiting for the next request
    started = time.monotonic()
    svc.stop()
    assert time.monotonic() - started < 3
    received = b""
    while chunk := sock.recv(1024):
        received += chunk
    assert chunk == b""  # the server closed its end
    sock.close()
