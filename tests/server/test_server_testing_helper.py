"""The ``otel_runs_exporter.testing`` helper, used the way a user's test suite would."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import requests
from server.server_helpers import Trace, good_trace_body, post_multipart

from otel_runs_exporter.server import FaultConfig, LocalService
from otel_runs_exporter.testing import (  # noqa: F401 - the fixture is used by name
    ENDPOINT_VAR,
    local_service,
    local_service_unless_configured,
    run_local_service,
    show_runs,
)

pytestmark = pytest.mark.heavy(seconds=8)


def test_fixture_gives_a_running_empty_service(local_service: LocalService) -> None:  # noqa: F811
    assert local_service.runs() == []
    assert post_multipart(local_service, good_trace_body(Trace())).status_code == 202
    assert len(local_service.wait_for_runs(2, timeout=2)) == 2


def test_the_helpers_start_strict_unless_told_otherwise(local_service: LocalService) -> None:  # noqa: F811
    # A test holds what the exporter sends to every rule, not only to what the hosted service enforces.
    assert local_service.validation == "strict"
    with run_local_service(lenient=True) as lenient, run_local_service(strict=False) as hosted:
        assert (lenient.validation, hosted.validation) == ("lenient", "hosted")


def test_context_manager_passes_options_and_stops() -> None:
    with run_local_service(faults=FaultConfig(outage=True)) as svc:
        assert svc.db == ":memory:"
        assert post_multipart(svc, good_trace_body(Trace())).status_code == 503
        url = svc.url
    try:
        requests.get(url + "/ok", timeout=1)
    except requests.ConnectionError:
        pass
    else:
        raise AssertionError("the service is still answering after the context exited")


def test_pytest_plugins_line_in_a_users_conftest(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["otel_runs_exporter.testing"]\n')
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent(
            """
            import requests

            def test_it(local_service):
                assert requests.get(local_service.url + "/ok", timeout=5).json() == {"ok": True}
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_importing_the_package_loads_neither_the_helpers_nor_the_fake_api() -> None:
    # The helpers pull in the local service and an HTTP server; an app that only exports must not pay for them.
    code = (
        "import sys, otel_runs_exporter\n"
        "loaded = [m for m in ('otel_runs_exporter.testing', 'otel_runs_exporter.testing.fake_llm',"
        " 'otel_runs_exporter.server', 'http.server') if m in sys.modules]\n"
        "print(loaded)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_fake_llm_api_ships_in_the_installed_package() -> None:
    from otel_runs_exporter.testing import FakeLLMAPI
    from otel_runs_exporter.testing.fake_llm import FakeLLMAPI as direct

    assert FakeLLMAPI is direct
    with FakeLLMAPI() as api:
        reply = requests.post(api.openai_base_url + "/chat/completions", json={"model": "m", "messages": []}, timeout=5)
        assert reply.json()["choices"][0]["message"]["content"] == api.reply_text
        assert [r.path for r in api.requests] == ["/v1/chat/completions"]


def test_unless_configured_starts_a_service_and_points_the_endpoint_at_it(monkeypatch, capsys) -> None:
    monkeypatch.delenv(ENDPOINT_VAR, raising=False)
    with local_service_unless_configured() as svc:
        assert svc is not None and os.environ[ENDPOINT_VAR] == svc.url
        assert post_multipart(svc, good_trace_body(Trace())).status_code == 202
        runs = show_runs(svc, expected=2, timeout=5)
    assert ENDPOINT_VAR not in os.environ
    assert len(runs) == 2
    out = capsys.readouterr().out
    assert "received 2 runs" in out and runs[0]["trace_id"] in out


def test_unless_configured_leaves_a_configured_endpoint_alone(monkeypatch, capsys) -> None:
    monkeypatch.setenv(ENDPOINT_VAR, "https://user:hunter2@collector.example:8443/api/v1")
    with local_service_unless_configured() as svc:
        assert svc is None
        assert show_runs(svc) == []
    assert os.environ[ENDPOINT_VAR] == "https://user:hunter2@collector.example:8443/api/v1"
    out = capsys.readouterr().out
    assert "https://collector.example:8443/api/v1" in out and "hunter2" not in out
