"""A real client nobody here wrote: the ``langsmith`` SDK (pinned in the test extra) against the local service.

Its multipart (plain and zstd) and basic-tracing requests must be accepted with
zero violations and arrive as correct trees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from datetime import datetime, timedelta, timezone

import pytest

from otel_runs_exporter.server import LocalService
from server.server_helpers import sdk_trace

langsmith = pytest.importorskip("langsmith")
from langsmith.utils import get_env_var  # noqa: E402


@pytest.fixture
def ls_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The SDK caches environment lookups; clear the cache around each test."""
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    get_env_var.cache_clear()
    yield monkeypatch
    get_env_var.cache_clear()


def _client(svc: LocalService, **kwargs: object) -> langsmith.Client:
    get_env_var.cache_clear()
    return langsmith.Client(api_url=svc.url, api_key="test", **kwargs)


def _assert_tree(svc: LocalService, root_id: str, llm_id: str, tool_id: str) -> None:
    runs = {r["id"]: r for r in svc.wait_for_runs(3, timeout=10)}
    assert svc.violations() == []
    assert runs[root_id]["trace_id"] == runs[llm_id]["trace_id"] == runs[tool_id]["trace_id"] == root_id
    assert runs[llm_id]["parent_run_id"] == root_id
    assert runs[tool_id]["parent_run_id"] == llm_id
    assert runs[tool_id]["dotted_order"].startswith(runs[llm_id]["dotted_order"] + ".")
    assert runs[tool_id]["error"] == "ValueError: boom"
    assert runs[llm_id]["outputs"]["usage_metadata"]["total_tokens"] == 7
    assert svc.check()["patched_not_posted"] == [] and svc.check()["missing_parents"] == []


@pytest.mark.parametrize("compression", [True, False], ids=["zstd", "plain"])
def test_multipart(compression: bool) -> None:
    # The SDK decides compression once per process from state other tests can leave behind
    # (its caches, its background threads), so its side runs in a fresh interpreter.
    if compression:
        pytest.importorskip("zstandard")
    code = textwrap.dedent(
        """
        import json, sys, langsmith
        sys.path.insert(0, sys.argv[2])
        from server.server_helpers import sdk_trace
        # A generous timeout: the SDK decides compression from /info, and a /info that times
        # out on a loaded machine silently means "no zstd".
        client = langsmith.Client(api_url=sys.argv[1], api_key="test", timeout_ms=(20_000, 20_000))
        assert client.info.instance_flags.get("zstd_compression_enabled"), client.info
        ids = sdk_trace(client)
        client.flush()
        client.cleanup(timeout=5)
        print(json.dumps(ids))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}
    env["LANGSMITH_TRACING"] = "true"
    if not compression:
        env["LANGSMITH_DISABLE_RUN_COMPRESSION"] = "true"
    with LocalService() as svc:
        proc = subprocess.run(
            [sys.executable, "-c", code, svc.url, str(Path(__file__).resolve().parents[1])],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        _assert_tree(svc, *json.loads(proc.stdout.strip().splitlines()[-1]))
        ingest = [e for e in svc.requests() if e["path"].endswith("/runs/multipart")]
        assert ingest and all(e["status"] == 202 for e in ingest)
        assert {e["content_encoding"] for e in ingest} == ({"zstd"} if compression else {None}), proc.stderr[-2000:]


def test_basic_tracing_without_multipart(ls_env: pytest.MonkeyPatch) -> None:
    with LocalService(multipart=False) as svc:
        client = _client(svc, auto_batch_tracing=False)
        try:
            root_id, child_id = uuid.uuid4(), uuid.uuid4()
            start = datetime.now(timezone.utc)
            client.create_run("agent", {"q": 1}, "chain", id=root_id, start_time=start, project_name="compat")
            client.create_run(
                "model", {"p": 1}, "llm", id=child_id, parent_run_id=root_id,
                start_time=start + timedelta(milliseconds=1), project_name="compat",
            )
            client.update_run(child_id, outputs={"o": 1}, end_time=start + timedelta(milliseconds=5))
            client.update_run(root_id, outputs={"a": 1}, end_time=start + timedelta(milliseconds=6))
        finally:
            client.cleanup(timeout=5)
        runs = {r["id"]: r for r in svc.wait_for_runs(2, timeout=10)}
        assert svc.violations() == []
        paths = {(e["method"], e["path"].split("/")[1]) for e in svc.requests() if e["method"] != "GET"}
        assert paths == {("POST", "runs"), ("PATCH", "runs")}
        child = runs[str(child_id)]
        assert child["trace_id"] == str(root_id)
        assert child["dotted_order"].startswith(runs[str(root_id)]["dotted_order"] + ".")
        assert child["outputs"] == {"o": 1}


def test_batch_endpoint_when_multipart_is_off(ls_env: pytest.MonkeyPatch) -> None:
    with LocalService(multipart=False) as svc:
        client = _client(svc)
        try:
            ids = sdk_trace(client)
            client.flush()
            _assert_tree(svc, *ids)
        finally:
            client.cleanup(timeout=5)
        assert {e["path"] for e in svc.requests() if e["method"] == "POST"} == {"/runs/batch"}
