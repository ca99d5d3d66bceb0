"""The benchmark's smoke run, so ``bench/`` never rots.

Runs ``python bench/run.py --smoke`` (a few seconds: every installed contender
once with tiny span counts, one low-load latency run, one outage burst; the
compiled build where it can be built, in the ``compiled`` step) and
checks only that it completes and that every contender delivered every span
to the sink. Timings are never asserted: they belong in BENCHMARKS.md, not in CI.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from bench_script import ROOT, run_bench

sys.path.insert(0, os.path.join(ROOT, "bench"))
try:
    from contenders import COMPILED, CONTENDERS
finally:
    sys.path.remove(os.path.join(ROOT, "bench"))

# Its own CI step with the soaks (python -m pytest -m 'long and not compiled'): every contender's smoke run is ~30 s.
pytestmark = [pytest.mark.heavy(seconds=14), pytest.mark.long]


def _smoke(tmp_path_factory: pytest.TempPathFactory, contenders: list[str]) -> dict:
    out = tmp_path_factory.mktemp("bench") / "results.json"
    run_bench("run.py", "--smoke", "--contenders", ",".join(contenders), "--json", str(out), timeout=180)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict:
    # The compiled contender has its own step (the "compiled" marker, below): building it is
    # the one slow part of the smoke run, and the default suite tests the pure modules.
    return _smoke(tmp_path_factory, [c for c in CONTENDERS if c != COMPILED])


def test_every_installed_contender_ran(smoke: dict) -> None:
    ran = {r["contender"] for r in smoke["throughput"]}
    assert ran == set(CONTENDERS) - {COMPILED} - set(smoke["missing"])
    assert {"floor", "ours-processor", "ours-exporter"} <= ran


@pytest.mark.compiled
def test_the_compiled_build_ran_where_it_can_be_built(tmp_path_factory: pytest.TempPathFactory) -> None:
    sys.path.insert(0, os.path.join(ROOT, "build_support"))
    try:
        import otel_runs_build
    finally:
        sys.path.remove(os.path.join(ROOT, "build_support"))
    smoke = _smoke(tmp_path_factory, ["floor", COMPILED])
    if otel_runs_build.missing_toolchain() is not None:
        assert COMPILED in smoke["missing"], "a compiled figure without a way to build it"
        pytest.skip(f"no compiled build here: {smoke['missing_why'][COMPILED]}")
    assert COMPILED not in smoke["missing"], smoke["missing_why"]
    assert smoke["code"]["compiled"], smoke["code"]
    assert all(r["delivered"] == r["spans"] > 0 for r in smoke["throughput"])


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


def test_oversize_spans_reach_the_sink(tmp_path: Path) -> None:
    # bench/oversize.py at a size that takes a second: a receiver limiting requests to 1 MiB
    # refuses OTLP's one 2.6 MB batch (413, not retried); ours splits by the limit /info gives.
    out = os.path.join(str(tmp_path), "oversize.json")
    run_bench("oversize.py", "--spans", "40", "--kb", "64", "--limit-mib", "1", "--json", out, timeout=120)
    with open(out) as f:
        rows = {r["contender"]: r for r in json.load(f)["rows"]}
    assert rows["ours-processor"]["delivered"] == 40 and rows["ours-processor"]["refused_413"] == 0
    assert rows["ours-exporter"]["delivered"] == 40 and rows["ours-exporter"]["refused_413"] == 0
    assert rows["otlp"]["delivered"] == 0 and rows["otlp"]["refused_413"] >= 1
