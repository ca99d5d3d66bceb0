"""The viewer's side of the service without a browser: its files, their headers and auth,
``POST /runs/stats`` (read back by the SDK's own ``get_run_stats``), ``otel-runs demo --serve``
and ``runs tree --url``. The page itself is tested in a real browser in tests/viewer/.
"""

from __future__ import annotations

import re
import signal
import time
import uuid
from importlib import resources
from pathlib import Path

import pytest
import requests
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from otel_runs_exporter import RunsSpanProcessor, cli
from otel_runs_exporter.server import LocalService, RateRule, viewer_link
from server.server_helpers import demo_serving
from otel_runs_exporter.server._viewer import _FILES

KEY = "viewer-test-key"
VIEWER_FILES = sorted(path for path in _FILES if path != "/index.html")


def deliver(url: str, api_key: str | None = None) -> None:
    """A trace of four runs through the real exporter: a root, a model call with tokens, a failed tool, a step."""
    provider = TracerProvider()
    processor = RunsSpanProcessor(endpoint=url, project="viewer", **({"api_key": api_key} if api_key else {}))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("viewer-tests")
    with tracer.start_as_current_span("root", attributes={"langsmith.span.kind": "chain"}):
        with tracer.start_as_current_span(
            "chat", attributes={"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 5}
        ):
            time.sleep(0.002)
        with tracer.start_as_current_span("tool", attributes={"langsmith.span.kind": "tool"}) as span:
            span.set_status(Status(StatusCode.ERROR, "tool failed"))
        with tracer.start_as_current_span("step", attributes={"langsmith.span.kind": "chain"}):
            pass
    assert processor.force_flush(10_000)
    provider.shutdown()


@pytest.fixture
def keyed() -> LocalService:
    with LocalService(api_key=KEY) as svc:
        deliver(svc.url, KEY)
        svc.wait_for_runs(4)
        yield svc


@pytest.mark.parametrize("path", VIEWER_FILES)
def test_viewer_files_are_public_with_security_headers(keyed: LocalService, path: str) -> None:
    response = requests.get(keyed.url + path, timeout=5)
    assert response.status_code == 200
    assert response.content == resources.files("otel_runs_exporter.server").joinpath("viewer", _FILES[path][0]).read_bytes()
    assert response.headers["Content-Type"] == _FILES[path][1]
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "img-src 'self' data:;" in csp  # a run's own images, drawn from the bytes it carries; nothing fetched
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    head = requests.head(keyed.url + path, timeout=5)
    assert head.status_code == 200 and head.content == b""


def test_everything_else_keeps_its_auth(keyed: LocalService) -> None:
    body = {"session": None, "limit": 1}
    for method, path, kwargs in (
        ("GET", "/sessions", {}),
        ("POST", "/runs/query", {"json": body}),
        ("POST", "/runs/stats", {"json": {}}),
        ("GET", f"/runs/{keyed.runs()[0]['id']}", {}),
        ("GET", "/api/v1/", {}),  # the viewer is at / only, not under the API prefix
    ):
        refused = requests.request(method, keyed.url + path, timeout=5, **kwargs)
        assert refused.status_code == 401, (path, refused.text)
        assert "text/html" not in refused.headers["Content-Type"]
    assert requests.get(keyed.url + "/sessions", headers={"x-api-key": KEY}, timeout=5).status_code == 200


@pytest.mark.parametrize("path", ["/viewer/", "/viewer/../_app.py", "/viewer/%2e%2e/_app.py", "/viewer/app.js/x", "/app.js"])
def test_only_the_viewers_own_files_are_served(keyed: LocalService, path: str) -> None:
    response = requests.get(keyed.url + path, headers={"x-api-key": KEY}, timeout=5)
    assert response.status_code == 404
    assert response.headers["Content-Type"] == "application/json"


def test_the_page_loads_nothing_from_elsewhere_and_has_no_inline_script() -> None:
    folder = resources.files("otel_runs_exporter.server").joinpath("viewer")
    html = folder.joinpath("index.html").read_text()
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S)
    assert scripts == [""]  # one script element, with a src and nothing inline
    assert re.findall(r"<script\b[^>]*\bsrc=\"([^\"]+)\"", html) == ["/viewer/app.js"]
    assert " on" not in re.sub(r"<script.*?</script>", "", html)  # no inline handlers either
    for name in {f for f, _ in _FILES.values()}:
        text = folder.joinpath(name).read_text()
        if name.startswith("vendor/"):
            # A vendored library's comments cite its sources' addresses: what must not name another site is its code.
            text = re.sub(r"(^|\s)//[^\n]*", r"\1", re.sub(r"/\*.*?\*/", "", text, flags=re.S))
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I) or name == "icon.svg", name
        assert "innerHTML" not in text and "outerHTML" not in text and "insertAdjacentHTML" not in text, name
        assert "eval(" not in text and "document.write" not in text, name


def test_viewer_files_are_outside_the_rate_limits() -> None:
    rule = RateRule("everything", "ip", 1, 60, None, r"")
    with LocalService(rate_limits=[rule]) as svc:
        assert requests.get(svc.url + "/ok", timeout=5).status_code == 200
        assert requests.get(svc.url + "/ok", timeout=5).status_code == 429
        for _ in range(3):
            assert requests.get(svc.url + "/", timeout=5).status_code == 200
            assert requests.get(svc.url + "/viewer/app.js", timeout=5).status_code == 200


def test_run_stats_over_a_trace_and_a_project(keyed: LocalService) -> None:
    langsmith = pytest.importorskip("langsmith")
    runs = keyed.runs()
    trace_id = runs[0]["trace_id"]
    headers = {"x-api-key": KEY}
    stats = requests.post(keyed.url + "/runs/stats", json={"trace": trace_id}, headers=headers, timeout=5).json()
    assert stats["run_count"] == 4
    assert stats["error_rate"] == 0.25
    assert (stats["prompt_tokens"], stats["completion_tokens"], stats["total_tokens"]) == (7, 5, 12)
    assert 0 < stats["latency_p50"] <= stats["latency_p99"]
    assert stats["last_run_start_time"] == max(
        r["start_time"] for r in requests.post(keyed.url + "/runs/query", json={"trace": trace_id}, headers=headers, timeout=5).json()["runs"]
    ).replace("+00:00", "Z")
    assert stats["total_cost"] is None and stats["feedback_stats"] is None

    client = langsmith.Client(api_url=keyed.url, api_key=KEY)
    project_id = str(client.read_project(project_name="viewer").id)
    assert client.get_run_stats(project_ids=[project_id], error=True)["run_count"] == 1
    assert client.get_run_stats(project_ids=[project_id], is_root=True)["total_tokens"] == 0  # the root's own usage
    assert client.get_run_stats(project_ids=[project_id], run_type="llm")["total_tokens"] == 12

    empty = requests.post(keyed.url + "/runs/stats", json={"trace": str(uuid.uuid4())}, headers=headers, timeout=5).json()
    assert empty["run_count"] == 0 and empty["error_rate"] is None and empty["latency_p50"] is None


@pytest.mark.parametrize("key", ["limit", "cursor", "select", "order"])
def test_run_stats_refuses_the_keys_that_shape_a_page(keyed: LocalService, key: str) -> None:
    value = {"limit": 5, "cursor": "abc", "select": ["name"], "order": "asc"}[key]
    response = requests.post(keyed.url + "/runs/stats", json={key: value}, headers={"x-api-key": KEY}, timeout=5)
    assert response.status_code == 422
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["body", key] and "one summary" in detail["msg"]


def test_runs_tree_with_url_prints_the_viewers_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "runs.db"
    with LocalService(db=str(db)) as svc:
        deliver(svc.url)
        trace_id = svc.wait_for_runs(4)[0]["trace_id"]
    assert cli.main(["runs", "tree", trace_id.replace("-", ""), "--db", str(db), "--url", "http://127.0.0.1:1984/"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"trace {trace_id}  (4 runs)")
    assert out.splitlines()[-1] == f"viewer: http://127.0.0.1:1984/#/trace/{trace_id}"
    assert out.splitlines()[-1] == "viewer: " + viewer_link("http://127.0.0.1:1984", trace_id)
    assert cli.main(["runs", "tree", trace_id, "--db", str(db)]) == 0
    assert "viewer:" not in capsys.readouterr().out


def test_demo_serve_prints_the_viewer_link_and_keeps_serving_until_sigterm() -> None:
    demo = demo_serving()
    proc = demo.proc
    try:
        base, _, route = demo.link.partition("#")
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", base) and re.fullmatch(r"/trace/[0-9a-f-]{36}", route)
        trace_id = route.rsplit("/", 1)[1]
        time.sleep(0.5)  # still serving after the demo is done
        assert proc.poll() is None
        assert "text/html" in requests.get(base, timeout=5).headers["Content-Type"]
        tree = requests.post(base + "runs/query", json={"trace": trace_id}, timeout=5).json()["runs"]
        assert sorted(run["name"] for run in tree) == sorted(
            ["answer_question", "retrieve", "chat demo-model", "flaky_tool", "word_count"]
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    rest = demo.output()
    assert "Ctrl-C stops it, and the runs in memory go with it." in rest
    assert "went with the demo" not in rest  # the in-memory hint is for the demo that does not serve
