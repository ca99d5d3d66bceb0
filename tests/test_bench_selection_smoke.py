"""``bench/selection.py --smoke``, so the benchmark of issue 27's two ratios cannot rot.

Every mode once on three traces, in one process, against the benchmark's sink,
then a tiny hold past its byte bound and the report. About 1.5 s of CPU; the
rest of its wall time is spent waiting for flushes. Only that it runs and that
each mode sent what its settings say is checked: figures at this scale mean
nothing, and they belong in BENCHMARKS.md.
"""

from __future__ import annotations

import json

import pytest
from bench_script import run_bench

pytestmark = pytest.mark.heavy(seconds=3)


def test_every_mode_runs_and_sends_what_its_settings_say(tmp_path) -> None:
    out = tmp_path / "selection.json"
    proc = run_bench("selection.py", "--smoke", "--json", str(out), timeout=120)
    assert "| rate 0.1, small payload |" in proc.stdout
    results = json.loads(out.read_text())
    (modes,) = results["rounds"]
    for name, result in modes.items():
        spans = result["spans"]
        if name.endswith("floor"):
            assert result["sent"] == 0, name
        elif name.startswith("noisy-kept"):  # only the 3 runs spans=genai keeps, per 10-span request
            assert result["sent"] == spans * 3 // 10 and result["dropped"] == 0, name
        elif name.endswith(("unsampled", "spans=all")):
            assert result["sent"] == spans and result["dropped"] == 0, name
        elif "rate 0.1" in name:
            assert result["sent"] + result["sampled_out"] >= spans and result["dropped"] == 0, name
        else:  # spans=genai: each request's root and its two LLM calls
            assert result["sent"] == spans * 3 // 10 and result["filtered"] > 0, name
    (hold,) = results["hold"]
    assert hold["sampled_at_bound"].get("bytes", 0) > 0
