"""A fleet on one API key, in seconds: real processes against one rate-limited local service.

``bench/fleet.py --quick`` (the simulation reported in BENCHMARKS.md, scaled
down): 4 processes x 50 spans/s for 8 s, each a ``RunsSpanProcessor`` in its
own interpreter with the same key, against ``otel-runs serve`` whose multipart
limit is 6 requests per 2 s window; each process alone would send 10 requests
a second. Only counts are asserted, never times: nothing lost or sent twice,
every process slowed down, and the slowed-down fleet is seldom refused.
"""

from __future__ import annotations

import json

import pytest

from bench_script import run_bench

# The long step's (.ci/run): 8 s of real traffic from 4 interpreters, 13 s in all. Its small versions in the default
# suite are tests/core/test_pacing.py's, the same pacing under a fake clock.
pytestmark = [pytest.mark.heavy(seconds=12), pytest.mark.long]


def test_a_fleet_converges_to_a_shared_limit_without_losing_runs(tmp_path):
    out = tmp_path / "fleet.json"
    run_bench("fleet.py", "--quick", "--variants", "adaptive", "--json", str(out), timeout=240)
    (fleet,) = json.loads(out.read_text())["results"]
    assert fleet["delivered"] == fleet["created"] == 4 * 50 * 8
    assert fleet["duplicates"] == 0
    assert fleet["flushed"] == 4
    for stats in fleet["stats"]:
        assert stats["dropped"] == {} and stats["spooled"] == 0
        # Each process met the limit and lengthened its interval (from 0.2 s), and still has it longer.
        assert stats["throttled"] >= 1
        assert stats["interval_s"] > 0.5
    # Refusals come while the fleet learns; once it has (after the first 3 s), few.
    # Each process at 0.2 s would have sent ~200 requests; the limit allows 24 in 8 s.
    assert fleet["steady_requests"] > 0
    assert fleet["steady_429_share"] <= 0.25, fleet["per_second"]
    assert fleet["requests_total"] < 100
