"""The ``otel_runs_exporter.testing`` helper, used the way a user's test suite would."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import requests
from server_helpers import Trace, good_trace_body, post_multipart

from otel_runs_exporter.server import FaultConfig, LocalService
from otel_runs_exporter.testing import local_service, run_local_service  # noqa: F401 - the fixture is used by name


def test_fixture_gives_a_running_empty_service(local_service: LocalService) -> None:  # noqa: F811
    assert local_service.runs() == []
    assert post_multipart(local_service, good_trace_body(Trace())).status_code == 202
    assert len(local_service.wait_for_runs(2, timeout=2)) == 2


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
