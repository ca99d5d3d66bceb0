"""Auto-configuration as users run it: opentelemetry-instrument, entry points, propagation."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy(seconds=15)


APPS = Path(__file__).parent / "apps"
BIN = Path(sys.executable).parent
#: Instrumentors the producer matrix installs that import a whole agent framework when
#: opentelemetry-instrument loads them (openai-agents, smolagents: seconds of CPU per process).
#: These tests are about our wiring, so they leave those two out, as a user may by name.
AGENT_FRAMEWORKS = "openai_agents,smolagents"
# Every installed instrumentor: for the runs that test only the exporter's settings on an app that
# calls no library, so they do not spend ~7 s importing each instrumentor's (the first test keeps them).
EVERY_INSTRUMENTOR = ",".join(sorted({e.name for e in entry_points(group="opentelemetry_instrumentor")}))


def _env(service, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    env.update(
        {
            "OTEL_EXPORTER_RUNS_ENDPOINT": service.url,
            "OTEL_EXPORTER_RUNS_API_KEY": "k",
            "OTEL_SERVICE_NAME": "plain-app",
            "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": AGENT_FRAMEWORKS,
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    env.update(extra)
    return env


def _instrument(service, **extra: str) -> subprocess.CompletedProcess:
    exe = shutil.which("opentelemetry-instrument", path=str(BIN))
    assert exe, "opentelemetry-instrument is installed with opentelemetry-instrumentation"
    return subprocess.run(
        [exe, sys.executable, str(APPS / "plain_app.py")],
        env=_env(service, **extra),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _names(runs):
    by_id = {r["id"]: r for r in runs}
    return {r["name"]: by_id[r["parent_run_id"]]["name"] if r.get("parent_run_id") else None for r in runs}


def test_opentelemetry_instrument_with_env_vars_only(service):
    proc = _instrument(service, OTEL_TRACES_EXPORTER="runs")
    assert proc.returncode == 0 and "app done" in proc.stdout, proc.stderr
    runs = service.wait_for_runs(3)
    assert _names(runs) == {"handle-request": None, "query-db": "handle-request", "render": "handle-request"}
    assert service.violations() == []
    root = next(r for r in runs if r["name"] == "handle-request")
    assert root["extra"]["metadata"]["otel_resource"]["service.name"] == "plain-app"
    # The processor path (not an exporter under a BatchSpanProcessor): the long root was
    # posted while it ran and completed by a patch.
    parts = [p for req in service.requests() for p in (req.get("part_names") or [])]
    assert f"post.{root['id']}" in parts and f"patch.{root['id']}" in parts


def test_the_sdk_configurator_uses_the_exporter_path(service):
    """What opentelemetry-distro's configurator does with OTEL_TRACES_EXPORTER=runs."""
    code = (
        "from opentelemetry.sdk._configuration import _OTelSDKConfigurator\n"
        "_OTelSDKConfigurator().configure()\n"
        f"exec(open({str(APPS / 'plain_app.py')!r}).read())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(service, OTEL_TRACES_EXPORTER="runs", OTEL_BSP_SCHEDULE_DELAY="50"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    runs = service.wait_for_runs(3)
    assert _names(runs) == {"handle-request": None, "query-db": "handle-request", "render": "handle-request"}
    parts = [p for req in service.requests() for p in (req.get("part_names") or [])]
    assert not any(p.startswith("patch.") for p in parts)  # ended spans: one post each
    assert service.violations() == []


def test_runs_next_to_another_traces_exporter(service):
    proc = _instrument(service, OTEL_TRACES_EXPORTER="console,runs", OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=EVERY_INSTRUMENTOR)
    assert proc.returncode == 0, proc.stderr
    assert '"name": "query-db"' in proc.stdout  # the console exporter got the spans too
    assert len(service.wait_for_runs(3)) == 3


def test_a_malformed_tuning_variable_warns_and_tracing_goes_on(service):
    """OpenTelemetry's convention: a bad optional value is warned about, with the default used in its place."""
    proc = _instrument(
        service, OTEL_TRACES_EXPORTER="runs", OTEL_EXPORTER_RUNS_TIMEOUT="ten", OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=EVERY_INSTRUMENTOR
    )
    assert proc.returncode == 0 and "app done" in proc.stdout, proc.stderr
    assert (
        "OTEL_EXPORTER_RUNS_TIMEOUT='ten' is not valid: expected seconds, greater than 0, at most 10000000; using the default, 10"
        in proc.stderr
    ), proc.stderr
    assert "not installed" not in proc.stderr
    assert len(service.wait_for_runs(3)) == 3


def test_a_malformed_essential_variable_leaves_the_app_untraced_not_stopped(service, tmp_path):
    """No safe default for where runs go or how the service is trusted: the app runs untraced, told why in one line.

    The runs configurator called as opentelemetry-instrument calls it (without loading every instrumentor).
    """
    missing = tmp_path / "ca.pem"
    code = (
        "from otel_runs_exporter.autoconfig import RunsConfigurator\n"
        "RunsConfigurator().configure()\n"
        "from opentelemetry import trace\n"
        "with trace.get_tracer('app').start_as_current_span('handle-request'):\n"
        "    print('app done')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(service, OTEL_TRACES_EXPORTER="runs", OTEL_EXPORTER_RUNS_CERTIFICATE=str(missing)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "app done" in proc.stdout, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if "OTEL_EXPORTER_RUNS_CERTIFICATE" in line]
    assert line.startswith(f"OTEL_EXPORTER_RUNS_CERTIFICATE='{missing}' is not valid: expected a readable PEM file"), line
    assert line.endswith("tracing is off and the app runs untraced (no default is safe here)"), line
    assert "Traceback" not in proc.stderr
    assert service.runs() == []


def test_instrumentors_can_be_disabled_by_name(service):
    code = (
        "import wrapt\n"
        "from openai.resources.chat.completions import Completions\n"
        "print('wrapped' if isinstance(Completions.__dict__['create'], wrapt.FunctionWrapper) else 'plain')\n"
    )
    exe = shutil.which("opentelemetry-instrument", path=str(BIN))
    # Every other installed instrumentor disabled too (the upstream openai one among them), so that
    # neither run spends ~7 s importing their libraries; side by side.
    others = ",".join(sorted(set(EVERY_INSTRUMENTOR.split(",")) - {"runs_openai"}))
    procs = {
        expected: subprocess.Popen(
            [exe, sys.executable, "-c", code],
            env=_env(service, OTEL_TRACES_EXPORTER="runs", OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=disabled),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for disabled, expected in ((others, "wrapped"), (f"{others},runs_openai", "plain"))
    }
    for expected, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert out.strip().splitlines()[-1] == expected


def test_two_processes_linked_by_http_make_one_run_tree(service):
    env = _env(service, OTEL_PROPAGATORS="tracecontext,baggage,runs", OTEL_BSP_SCHEDULE_DELAY="50")
    server = subprocess.Popen(
        [sys.executable, str(APPS / "hop_server.py")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        port = server.stdout.readline().strip()
        assert port.isdigit(), server.stderr.read()
        client = subprocess.run(
            [sys.executable, str(APPS / "hop_client.py"), port], env=env, capture_output=True, text=True, timeout=60
        )
        assert client.returncode == 0, client.stderr
        assert server.wait(timeout=30) == 0, server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()
    runs = service.wait_for_runs(3)
    assert _names(runs) == {"client-call": None, "server-handle": "client-call", "server-work": "server-handle"}
    assert len({r["trace_id"] for r in runs}) == 1
    assert service.violations() == [] and service.check()["missing_parents"] == []


def test_propagator_ignores_malformed_headers():
    from opentelemetry import context as otel_context

    from otel_runs_exporter._registry import remote_run as _remote_parent
    from otel_runs_exporter.propagation import RunsPropagator

    prop = RunsPropagator()
    for bad in ("nonsense", "2023T1Zx", "x" * 100_000):
        ctx = prop.extract({"langsmith-trace": bad})
        assert _remote_parent(ctx) is None
    good = "20231114T221320000001Z018bcfe5-6800-7000-8000-000000000001.20231114T221320000002Z018bcfe5-6800-7000-8000-000000000002"
    ids = _remote_parent(prop.extract({"langsmith-trace": good}, otel_context.Context()))
    assert ids.run_id.endswith("0002") and ids.trace_id.endswith("0001") and ids.parent_run_id.endswith("0001")
