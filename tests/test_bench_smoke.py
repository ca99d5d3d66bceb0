"""The benchmark's smoke run, so ``bench/`` never rots.

Runs ``python bench/run.py --smoke`` (a few seconds: every installed contender
once with tiny span counts, the compiled build too where it can be built, one
low-load latency run, one outage burst) and
checks only that it completes and that every contender delivered every span
to the sink. Timings are never asserted: they belong in BENCHMARKS.md, not in CI.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from bench_script import ROOT, run_bench

# Weighed below its ~35 s so that it starts after test_compiled_build.py has compiled: both
# use the one cached build, and the second to ask would wait for the first's compile.
pytestmark = pytest.mark.heavy(seconds=24)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("bench") / "results.json"
    run_bench("run.py", "--smoke", "--json", str(out), timeout=180)
    return json.loads(out.read_text())


def test_every_installed_contender_ran(smoke: dict) -> None:
    ran = {r["contender"] for r in smoke["throughput"]}
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        from contenders import CONTENDERS
    finally:
        sys.path.remove(os.path.join(ROOT, "bench"))
    assert ran == set(CONTENDERS) - set(smoke["missing"])
    assert {"floor", "ours-processor", "ours-exporter"} <= ran


def test_the_compiled_build_ran_where_it_can_be_built(smoke: dict) -> None:
    sys.path.insert(0, os.path.join(ROOT, "build_support"))
    try:
        import otel_runs_build
    finally:
        sys.path.remove(os.path.join(ROOT, "build_support"))
    if otel_runs_build.missing_toolchain() is not None:
        assert "ours-processor-mypyc" in smoke["missing"], "a compiled figure without a way to build it"
        pytest.skip(f"no compiled build here: {smoke['missing_why']['ours-processor-mypyc']}")
    assert "ours-processor-mypyc" not in smoke["missing"], smoke["missing_why"]
    assert smoke["code"]["compiled"], smoke["code"]


def test_every_contender_delivered_everything(smoke: dict) -> None:
    for r in smoke["throughput"]:
        label = f"{r['contender']} on {r['workload']}"
        assert r["spans"] > 0, label
        assert r["delivered"] == r["spans"], label
        if r["contender"] != "floor":
            # Counted by the sink itself, not reported by the contender.
            assert r["sink"]["delivered"] == r["spans"], (label, r["sink"])
            assert r["sink"]["body_bytes"] > 0, label
            assert not r["sink"]["unknown"], (label, r["sink"]["unknown"])
            assert r["sink"]["refused"] == 0, label


def test_latency_run_delivered_and_measured(smoke: dict) -> None:
    assert smoke["latency"], "no latency run"
    for r in smoke["latency"]:
        assert r["delivered"] == r["spans"], r["contender"]
        assert r["lat_samples"] >= r["spans"], r["contender"]  # one arrival time per span


def test_outage_run_held_what_it_queued(smoke: dict) -> None:
    for r in smoke["memory"]:
        assert r["stats_after_burst"] is not None
        # A burst this small fits every cap: all of it arrives once the sink is back.
        assert r["held_delivered"] == r["spans"], r
