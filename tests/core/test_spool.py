"""The durable spool: atomic files, replay, bounds, crashes, concurrent replayers."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from otel_runs_exporter._encode import encode_run
from otel_runs_exporter._spool import Spool, SpoolCorrupt, _count_in_name, deserialize, serialize

from core.helpers import processor_provider

KEY = "sk-spool-test-key-never-on-disk"


def _runs(n: int, tag: str = "r"):
    return [encode_run("post", {"id": f"{tag}{i}", "inputs": {"i": i}, "outputs": {"o": i}}, completes=True) for i in range(n)]


def test_file_format_round_trip_and_corruption_is_detected():
    runs = _runs(3)
    data = serialize(runs)
    back = deserialize(data)
    assert [(r.op, r.run_id, r.parts, r.completes) for r in back] == [(r.op, r.run_id, r.parts, r.completes) for r in runs]
    for broken in (data[:-1], data + b"x", b"", data[: data.index(b"\n")]):
        with pytest.raises(SpoolCorrupt):
            deserialize(broken)


def test_claims_are_exclusive_and_give_back_keeps_order(tmp_path):
    a = Spool(str(tmp_path), 10**9)
    assert a.write(_runs(2, "first")) and a.write(_runs(3, "second"))
    path, runs = a.claim()
    assert [r.run_id for r in runs] == ["first0", "first1"]
    b = Spool(str(tmp_path), 10**9)
    path2, runs2 = b.claim()  # the other file, not the claimed one
    assert [r.run_id for r in runs2] == ["second0", "second1", "second2"]
    assert b.claim() is None
    a.give_back(path, runs[1:])  # one went through; the other goes back first in line
    _, again = b.claim()
    assert [r.run_id for r in again] == ["first1"]
    assert a.take_losses() == {} and b.take_losses() == {}


def test_cap_drops_oldest_files_and_counts_them(tmp_path):
    spool = Spool(str(tmp_path), 1500)
    for i in range(6):
        assert spool.write(_runs(4, f"b{i}-"))
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    losses = spool.take_losses()
    assert total <= 1500 and set(losses) == {"spool_full"} and losses["spool_full"] % 4 == 0
    kept = sum(1 for _ in tmp_path.glob("*.spool"))
    assert kept + losses["spool_full"] // 4 == 6  # each evicted file held 4 runs, counted once
    assert spool.take_losses() == {}


def test_outage_spools_then_replays_everything(service, tmp_path, caplog):
    service.faults.update(outage=True, retry_after=None)
    provider, processor = processor_provider(service.url, export_timeout_s=0.2, spool_dir=str(tmp_path), api_key=KEY)
    tracer = provider.get_tracer("t")
    for i in range(30):
        with tracer.start_as_current_span(f"s{i}", attributes={"input.value": f"payload {i}"}):
            pass
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        deadline = time.monotonic() + 10
        while processor.stats().spooled < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
    stats = processor.stats()
    assert stats.spooled == 30 and stats.queued == 0  # nothing held in memory any more
    assert any("written to the spool" in r.getMessage() for r in caplog.records)
    assert all(KEY.encode() not in p.read_bytes() for p in tmp_path.iterdir())
    service.faults.update(outage=False)
    assert processor.force_flush(10_000)
    assert len(service.wait_for_runs(30)) == 30
    assert processor.stats().replayed == 30 and list(tmp_path.glob("*.spool")) == []
    assert service.duplicate_posts() == {}
    provider.shutdown()


def _script(code: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    full.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full, capture_output=True, text=True, timeout=timeout)


def test_exit_while_down_spools_and_the_next_process_sends(service, tmp_path):
    env = {
        "OTEL_EXPORTER_RUNS_ENDPOINT": service.url,
        "OTEL_EXPORTER_RUNS_API_KEY": KEY,
        "OTEL_EXPORTER_RUNS_SPOOL_DIR": str(tmp_path),
        "OTEL_BSP_EXPORT_TIMEOUT": "500",
    }
    service.faults.update(outage=True, retry_after=None)
    proc = _script(
        """
        import logging; logging.basicConfig()
        from opentelemetry import trace
        from otel_runs_exporter import configure
        configure()
        tracer = trace.get_tracer("first")
        for i in range(20):
            with tracer.start_as_current_span(f"first-{i}"):
                pass
        """,
        env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "written to the spool" in proc.stderr and KEY not in proc.stderr
    assert sum(_count_in_name(p.name) for p in tmp_path.glob("*.spool")) == 20
    service.faults.update(outage=False)
    proc = _script(
        """
        from opentelemetry import trace
        from otel_runs_exporter import configure
        provider = configure()
        assert provider.force_flush(10000)
        """,
        env,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["name"] for r in service.wait_for_runs(20)) == sorted(f"first-{i}" for i in range(20))
    assert list(tmp_path.glob("*.spool")) == []


def test_kill_9_mid_write_leaves_nothing_that_blocks_replay(service, tmp_path):
    """A writer killed at random moments: every spool file is whole or ignored."""
    env = {
        "OTEL_EXPORTER_RUNS_ENDPOINT": service.url,
        "OTEL_EXPORTER_RUNS_API_KEY": KEY,
        "OTEL_EXPORTER_RUNS_SPOOL_DIR": str(tmp_path),
        "OTEL_BSP_EXPORT_TIMEOUT": "20",
        "OTEL_BSP_SCHEDULE_DELAY": "5",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "20",
    }
    service.faults.update(outage=True, retry_after=None)
    writer = """
        import sys
        from opentelemetry import trace
        from otel_runs_exporter import configure
        configure()
        tracer = trace.get_tracer("w")
        big = "x" * 20000
        print("ready", flush=True)
        i = 0
        while True:
            with tracer.start_as_current_span(f"w{sys.argv[1]}-{i}", attributes={"input.value": big}):
                pass
            i += 1
        """
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    full.update(env)
    for round_ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(writer), str(round_)], env=full, stdout=subprocess.PIPE, text=True
        )
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.7 + 0.13 * round_)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    files = [p for p in tmp_path.glob("*.spool") if not p.name.startswith(".")]  # .tmp-* are unfinished writes
    assert files, "the writers spooled nothing: the test did not exercise the spool"
    expected = 0
    for path in files:  # every file in place is whole
        expected += len(deserialize(path.read_bytes()))
    service.faults.update(outage=False)
    proc = _script(
        """
        from otel_runs_exporter import RunsSpanProcessor
        p = RunsSpanProcessor()
        assert p.force_flush(30000), p.stats()
        s = p.stats()
        assert "spool_corrupt" not in s.spool_dropped, s
        print(s.replayed)
        p.shutdown()
        """,
        env | {"OTEL_BSP_EXPORT_TIMEOUT": "30000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "512"},
    )
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.strip()) == expected
    assert list(tmp_path.glob("*.spool")) == [] and list(tmp_path.glob(".tmp-*")) == []
    assert service.duplicate_posts() == {}


def test_two_processes_replaying_at_once_send_each_run_once(service, tmp_path):
    spool = Spool(str(tmp_path), 10**9)
    from otel_runs_exporter._ids import iso_time, root_ids, run_id_v7

    total = 0
    for f in range(24):
        runs = []
        for i in range(10):
            start = 1_700_000_000_000_000_000 + (f * 10 + i) * 1000
            ids = root_ids(run_id_v7(f + 1, i + 1, start), start)
            run = {
                "id": ids.run_id, "trace_id": ids.trace_id, "dotted_order": ids.dotted_order, "name": f"f{f}-{i}",
                "run_type": "chain", "start_time": iso_time(start), "end_time": iso_time(start + 1000),
                "session_name": "default", "inputs": {}, "outputs": {},
            }
            runs.append(encode_run("post", run, completes=True))
        spool.write(runs)
        total += len(runs)
    env = {
        "OTEL_EXPORTER_RUNS_ENDPOINT": service.url,
        "OTEL_EXPORTER_RUNS_API_KEY": KEY,
        "OTEL_EXPORTER_RUNS_SPOOL_DIR": str(tmp_path),
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "3",
    }
    code = """
        from otel_runs_exporter import RunsSpanProcessor
        p = RunsSpanProcessor()
        assert p.force_flush(30000)
        print(p.stats().replayed)
        p.shutdown()
        """
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    full.update(env)
    procs = [
        subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    replayed = [int(o.strip()) for o, _ in outs]
    assert sum(replayed) == total
    assert len(service.wait_for_runs(total)) == total and service.duplicate_posts() == {}
    assert list(Path(tmp_path).glob("*.spool*")) == []
