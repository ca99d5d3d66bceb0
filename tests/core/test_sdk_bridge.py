"""Mixed run trees with the real langsmith SDK: its runs and ours in one tree, both ways, offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from otel_runs_exporter.server import LocalService

pytest.importorskip("langsmith")

KEY = "bridge-test-key"

# Three levels each way: SDK -> OTel -> SDK -> OTel, and OTel -> SDK -> OTel -> SDK.
MIXED = """
    import json, sys
    from opentelemetry import trace
    from langsmith import traceable
    from langsmith.run_trees import get_cached_client
    from otel_runs_exporter import configure, get_processor

    configure()
    tracer = trace.get_tracer("mixed")

    @traceable(name="sdk-{way}-2")
    def sdk_inner():
        with tracer.start_as_current_span("otel-{way}-3"):
            return 1

    @traceable(name="sdk-{way}-1")
    def sdk_outer():
        with tracer.start_as_current_span("otel-{way}-2"):
            return sdk_inner()

    @traceable(name="sdk-{way}-4")
    def sdk_leaf():
        return 2

    {body}
    assert get_processor().force_flush(10_000)
    get_cached_client().flush()
    print(json.dumps(dict(get_processor().stats().dropped)))
"""

SDK_FIRST = "sdk_outer()"
OTEL_FIRST = """
    with tracer.start_as_current_span("otel-b-1"):
        @traceable(name="sdk-b-2")
        def middle():
            with tracer.start_as_current_span("otel-b-3"):
                return sdk_leaf()
        middle()
"""


def _run(svc: LocalService, body: str, way: str, **env: str) -> subprocess.CompletedProcess:
    code = textwrap.dedent(MIXED).replace("{way}", way).replace("{body}", textwrap.dedent(body).strip())
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}
    full.update(
        LANGSMITH_TRACING="true",
        LANGSMITH_ENDPOINT=svc.url,
        LANGSMITH_API_KEY=KEY,
        LANGSMITH_PROJECT="mixed",
        **env,
    )
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full, capture_output=True, text=True, timeout=90)


def _shape(runs: list[dict]) -> list[tuple[int, str, str]]:
    """(depth, name, project) in dotted_order: one tree, whatever sent each run."""
    return [(r["dotted_order"].count("."), r["name"], r.get("session_name")) for r in sorted(runs, key=lambda r: r["dotted_order"])]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "otel_runs_exporter.cli", *args], capture_output=True, text=True, timeout=60)


def test_three_levels_each_way_make_one_tree(tmp_path):
    db = str(tmp_path / "runs.db")
    with LocalService(api_key=KEY, db=db, strict=True) as svc:
        # The two senders are set to different projects: one tree lives in one project, its root's.
        for body, way in ((SDK_FIRST, "a"), (OTEL_FIRST, "b")):
            proc = _run(svc, body, way, OTEL_EXPORTER_RUNS_PROJECT="otel-side")
            assert proc.returncode == 0, proc.stderr
            assert json.loads(proc.stdout.strip().splitlines()[-1]) == {}
        assert svc.wait_for_runs(8)
        runs = svc.runs()
        traces = {r["trace_id"] for r in runs}
        assert len(traces) == 2, _shape(runs)
        by_trace = {t: _shape([r for r in runs if r["trace_id"] == t]) for t in traces}
        shapes = sorted(by_trace.values())
        assert shapes == sorted(
            [
                [(0, "sdk-a-1", "mixed"), (1, "otel-a-2", "mixed"), (2, "sdk-a-2", "mixed"), (3, "otel-a-3", "mixed")],
                [(0, "otel-b-1", "otel-side"), (1, "sdk-b-2", "otel-side"), (2, "otel-b-3", "otel-side"),
                 (3, "sdk-b-4", "otel-side")],
            ]
        )
        by_id = {r["id"]: r for r in runs}
        for run in runs:
            if run.get("parent_run_id"):
                assert run["dotted_order"].startswith(by_id[run["parent_run_id"]]["dotted_order"] + ".")
        assert svc.violations() == []
    # The user's tools see the same: no orphans, and the tree in dotted_order.
    check = _cli("runs", "check", "--db", db)
    assert check.returncode == 0, check.stdout + check.stderr
    root_b = next(r for r in runs if r["name"] == "otel-b-1")
    tree = _cli("runs", "tree", "--db", db, root_b["trace_id"])
    assert tree.returncode == 0, tree.stderr
    # "  chain  otel-b-1  0.017s  ok": (indent, name) per run, each one level under the one before.
    rows = [(len(line) - len(line.lstrip()), line.split()[1]) for line in tree.stdout.splitlines()[1:] if line.strip()]
    assert [name for _, name in rows] == ["otel-b-1", "sdk-b-2", "otel-b-3", "sdk-b-4"], tree.stdout
    assert [indent for indent, _ in rows] == sorted({indent for indent, _ in rows}), tree.stdout


@pytest.mark.parametrize("env", [{"OTEL_EXPORTER_RUNS_LANGSMITH_BRIDGE": "false"}, {"LANGSMITH_OTEL_ENABLED": "true"}])
def test_bridge_off_leaves_the_sdk_alone(env):
    with LocalService(api_key=KEY, strict=True) as svc:
        probe = """
            import langsmith.run_helpers as rh
            with tracer.start_as_current_span("otel-x-1"):
                sdk_leaf()
            print("HOOKED", getattr(rh._get_parent_run, "_otel_runs_bridge", False))
        """
        proc = _run(svc, probe, "x", **env)
        assert proc.returncode == 0, proc.stderr
        assert "HOOKED False" in proc.stdout
        if "LANGSMITH_OTEL_ENABLED" not in env:
            assert svc.wait_for_runs(2)
            assert all(r.get("parent_run_id") is None for r in svc.runs())  # two separate roots


def test_no_import_of_langsmith_when_the_app_does_not_use_it(service):
    code = f"""
        import sys
        from opentelemetry import trace
        from otel_runs_exporter import configure, get_processor
        configure(endpoint="{service.url}", api_key="k")
        with trace.get_tracer("t").start_as_current_span("s"):
            pass
        assert get_processor().force_flush(5000)
        print("LOADED", "langsmith" in sys.modules)
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "LOADED False" in proc.stdout


def test_a_failing_hook_warns_once_and_gives_the_sdk_its_own_parent(caplog):
    """Whatever goes wrong inside the hook, the user's traced call gets the SDK's answer, never our error."""
    from otel_runs_exporter._sdk_bridge import _make_hook

    class BrokenExtra(dict):
        def get(self, key, default=None):
            raise RuntimeError("a langsmith_extra we cannot read")

    sdk_parent = object()
    hook = _make_hook(lambda extra, config: sdk_parent, run_helpers=None)
    with caplog.at_level("WARNING", logger="otel_runs_exporter"):
        assert hook(BrokenExtra()) is sdk_parent
        assert hook(BrokenExtra()) is sdk_parent
    lines = [r for r in caplog.records if "could not nest" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is not None


def test_the_pinned_sdk_is_a_version_the_hook_was_tested_with():
    # A bump of the test extra's langsmith pin must come with a look at the internal hook.
    from otel_runs_exporter._sdk_bridge import TESTED_VERSIONS, _version

    assert _version() in TESTED_VERSIONS


def test_an_untested_sdk_version_gets_no_hook_and_one_warning(monkeypatch, caplog):
    """The internal function may have changed shape in another release: leave it alone, say so once."""
    import types

    from otel_runs_exporter import _sdk_bridge

    original = lambda langsmith_extra, config=None: None  # noqa: E731
    run_helpers = types.SimpleNamespace(_get_parent_run=original)
    monkeypatch.setattr(_sdk_bridge, "_version", lambda: (0, 99))
    monkeypatch.setattr(_sdk_bridge, "_once", _sdk_bridge.RateLimitedLog(_sdk_bridge.logger, interval_s=float("inf")))
    with caplog.at_level("WARNING", logger="otel_runs_exporter"):
        assert _sdk_bridge.install_parent_hook(run_helpers) is False
        assert _sdk_bridge.install_parent_hook(run_helpers) is False
    assert run_helpers._get_parent_run is original
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "langsmith 0.99 is not a version the run-tree bridge was tested with (0.15)" in lines[0]
