"""The durable spool: atomic files, replay, bounds, crashes, concurrent replayers."""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from otel_runs_exporter._encode import encode_run
from otel_runs_exporter._spool import _MAX_BAD, Spool, SpoolCorrupt, deserialize, serialize
from otel_runs_exporter._spool_format import count_in_name as _count_in_name

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
    # A header of another shape is corrupt too, not a TypeError out of the worker.
    for header in (b'{"v":1,"runs":[1]}', b'{"v":1,"runs":[["post","r","",1,[["p",-1]]]]}', b'{"v":1,"runs":[[1,2,3,4,5]]}'):
        with pytest.raises(SpoolCorrupt):
            deserialize(header + b"\n")


def test_claims_are_exclusive_and_give_back_keeps_order(tmp_path):
    a = Spool(str(tmp_path), 10**9)
    assert a.write(_runs(2, "first")) == [] and a.write(_runs(3, "second")) == []  # nothing left over
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
        assert spool.write(_runs(4, f"b{i}-")) == []
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
        import logging; logging.basicConfig(level=logging.INFO)
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
    # The replay says so, once, with its count (it was silent).
    replayed = [line for line in proc.stderr.splitlines() if "from the spool" in line]
    assert replayed == [f"INFO:otel_runs_exporter._delivery:delivered 20 runs from the spool at {tmp_path}"], proc.stderr


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


# --- what the directory holds is not trusted ---------------------------------------


def _real_runs(n: int, tag: str, base: int = 0):
    """Runs the service stores (ids, trace and dotted_order as the converter makes them)."""
    from otel_runs_exporter._ids import iso_time, root_ids, run_id_v7

    runs = []
    for i in range(n):
        start = 1_700_000_000_000_000_000 + (base + i) * 1000
        ids = root_ids(run_id_v7(base + i + 1, 7, start), start)
        run = {
            "id": ids.run_id, "trace_id": ids.trace_id, "dotted_order": ids.dotted_order, "name": f"{tag}{i}",
            "run_type": "chain", "start_time": iso_time(start), "end_time": iso_time(start + 1000),
            "session_name": "default", "inputs": {}, "outputs": {},
        }
        runs.append(encode_run("post", run, completes=True))
    return runs


def _child(code: str, env: dict[str, str], *args: str, timeout: float = 30, max_mb: int = 1024) -> subprocess.CompletedProcess:
    """A real process under a deadline and an address-space limit: a regression fails, never hangs or eats the machine."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    full.update(env, MALLOC_ARENA_MAX="2")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (max_mb << 20, max_mb << 20))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=full, capture_output=True, text=True, timeout=timeout, preexec_fn=limit,
    )


_PLANTED = "00000000000000000001-1-0badf00d-n3-c3.spool"  # older than anything written: replayed first


def test_fifos_named_like_spool_files_do_not_block_the_worker(service, tmp_path):
    # Before: the worker opened the first one and waited for a writer, forever.
    fifos = [tmp_path / _PLANTED.replace("0badf00d", f"{i:08x}") for i in range(_MAX_BAD + 8)]
    for fifo in fifos:
        os.mkfifo(fifo)
    Spool(str(tmp_path), 10**9).write(_real_runs(2, "after-fifo-"))
    env = {
        "OTEL_EXPORTER_RUNS_ENDPOINT": service.url,
        "OTEL_EXPORTER_RUNS_API_KEY": KEY,
        "OTEL_EXPORTER_RUNS_SPOOL_DIR": str(tmp_path),
        "OTEL_BSP_EXPORT_TIMEOUT": "2000",
    }
    proc = _child(
        """
        import json, logging, resource, time
        logging.basicConfig()
        from otel_runs_exporter import RunsSpanProcessor
        p = RunsSpanProcessor()
        t0 = time.monotonic()
        ok = p.force_flush(5000)
        s = p.stats()
        print(json.dumps({"ok": ok, "s": time.monotonic() - t0, "replayed": s.replayed,
                          "spool_dropped": dict(s.spool_dropped),
                          "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
        p.shutdown()
        """,
        env,
        timeout=20,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    print("fifo figures:", out)
    assert out["ok"] and out["replayed"] == 2 and out["spool_dropped"] == {"spool_not_regular": 3 * len(fifos)}
    assert sorted(r["name"] for r in service.wait_for_runs(2)) == ["after-fifo-0", "after-fifo-1"]
    assert list(tmp_path.glob("*.spool")) + list(tmp_path.glob("*.claimed-*")) == []  # nothing left to trip on
    assert len(list(tmp_path.glob("*.bad"))) == _MAX_BAD  # set aside to be looked at, at most so many
    warned = [line for line in proc.stderr.splitlines() if "set aside" in line]
    assert len(warned) == 1 and "FIFO" in warned[0]  # one line per reason, not one per file


def test_symlinks_named_like_spool_files_are_not_followed_and_are_set_aside(tmp_path):
    # Before: the symlink to /dev/zero was read until MemoryError (here, the 1 GiB limit).
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    Spool(str(elsewhere), 10**9).write(_runs(2, "not-ours-"))
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir(mode=0o700)
    (spool_dir / _PLANTED).symlink_to("/dev/zero")
    (spool_dir / _PLANTED.replace("0badf00d-n3-c3", "0badf00e-n2-c2")).symlink_to(next(elsewhere.glob("*.spool")))
    Spool(str(spool_dir), 10**9).write(_runs(1, "ours-"))
    proc = _child(
        """
        import json, resource, sys, time
        from otel_runs_exporter._spool import Spool
        spool = Spool(sys.argv[1], 10**9)
        t0 = time.monotonic()
        path, runs = spool.claim()
        print(json.dumps({"runs": [r.run_id for r in runs], "losses": spool.take_losses(), "s": time.monotonic() - t0,
                          "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
        """,
        {},
        str(spool_dir),
        timeout=20,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    print("symlink figures:", out)
    assert out["runs"] == ["ours-0"] and out["losses"] == {"spool_symlink": 5}
    assert sorted(p.name for p in spool_dir.glob("*.bad")) == sorted(
        [_PLANTED + ".bad", _PLANTED.replace("0badf00d-n3-c3", "0badf00e-n2-c2") + ".bad"]
    )
    assert all(p.is_symlink() for p in spool_dir.glob("*.bad"))  # moved, the targets untouched
    assert len(list(elsewhere.glob("*.spool"))) == 1


def test_names_planted_in_the_spool_neither_stop_the_app_nor_inflate_its_losses(tmp_path):
    """Found by an audit: only the name says whose claim an entry is and how many runs it holds.
    Before: a claim named with a pid past any process's raised OverflowError out of ``Spool()``,
    so ``configure()`` failed in the app; a file named as completing a trillion runs counted a
    trillion lost; a claim named with pid 0 was taken for a live process's (``kill(0, 0)``)."""
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir(mode=0o700)
    (spool_dir / f"{_PLANTED}.claimed-99999999999999999999").write_bytes(b"not a spool file " * 12)
    (spool_dir / f"{_PLANTED.replace('0badf00d', '0badf00e')}.claimed-0").write_bytes(b"nor this")  # room for none
    boast = _PLANTED.replace("0badf00d-n3-c3", "0badf00f-n999999999999-c999999999999")
    (spool_dir / boast).write_bytes(b"x" * 100)  # could hold 2 runs at most
    spool = Spool(str(spool_dir), 10**9)  # before: OverflowError
    assert spool.write(_runs(1, "ours-")) == []
    assert spool.claim() is not None and spool.claim() is None  # ours; the three planted ones set aside
    assert spool.take_losses() == {"spool_corrupt": 3 + 0 + 2}  # each by its name, within what its size holds
    assert sorted(p.name.split("-")[2] for p in spool_dir.glob("*.bad")) == ["0badf00d", "0badf00e", "0badf00f"]
    # Dropped at the cap, the same bound: the oldest file goes first, counted as what it could hold.
    (spool_dir / boast).write_bytes(b"y" * 200)
    capped = Spool(str(spool_dir), 300)
    capped.write(_runs(1, "pushes-it-out-"))
    assert not (spool_dir / boast).exists() and capped.take_losses() == {"spool_full": 5}


def test_a_file_larger_than_the_writer_writes_is_set_aside_unread(tmp_path, caplog):
    spool = Spool(str(tmp_path), 4096)  # so no file of it is larger
    big = serialize(_runs(40, "big-"))
    assert len(big) > 4096
    (tmp_path / _PLANTED).write_bytes(big)  # well formed, only larger than this spool ever writes
    sparse = tmp_path / _PLANTED.replace("0badf00d", "5ba55ba5")
    with open(sparse, "wb") as fh:
        fh.truncate(1 << 40)  # a terabyte that takes no disk: refused on its size, never read
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        assert spool.claim() is None  # before: the 40 runs were read and replayed
    assert spool.take_losses() == {"spool_too_large": 6}
    assert len(list(tmp_path.glob("*.bad"))) == 2 and not list(tmp_path.glob("*.spool"))
    assert len([r for r in caplog.records if "set aside" in r.getMessage()]) == 1


def test_the_writer_never_writes_a_file_larger_than_it_reads(tmp_path):
    # Before: one write was one file whatever its size, past the spool's own bound.
    spool = Spool(str(tmp_path), 3000)
    runs = _runs(16, "small-")
    huge = encode_run("post", {"id": "huge", "inputs": {"x": "y" * 5000}}, completes=True)
    left = spool.write(runs[:5] + [huge] + runs[5:])
    assert left == [huge]  # too large for any file: the caller keeps it
    files = sorted(tmp_path.glob("*.spool"))
    assert len(files) > 1 and all(p.stat().st_size <= 3000 for p in files)
    replayed = []
    while (claimed := spool.claim()) is not None:
        replayed += [r.run_id for r in claimed[1]]
        spool.done(claimed[0])
    assert replayed == [r.run_id for r in runs] and spool.take_losses() == {}
    # With a batch size, a file holds a batch: a replayed file is one right-sized request.
    batched = Spool(str(tmp_path / "batched"), 10**9, batch_bytes=2000)
    assert batched.write(runs) == []
    assert all(sum(r.size for r in deserialize(p.read_bytes())) <= 2000 for p in (tmp_path / "batched").glob("*.spool"))


_DIES_HOLDING_ITS_CLAIM = """
    import json, os, sys
    from otel_runs_exporter._spool import Spool
    spool = Spool(sys.argv[1], 10**9)
    claimed = spool.claim()
    print(json.dumps({"claimed": claimed[0].name if claimed else None, "losses": spool.take_losses()}), flush=True)
    os._exit(9)  # as a process killed while it replays the file
    """


def test_a_file_that_kills_its_replayers_is_set_aside_after_two(tmp_path):
    # Before: each claim of a dead process went back under its name, and every later process died on it.
    Spool(str(tmp_path), 10**9).write(_runs(3, "poison-"))
    seen = []
    for _ in range(3):
        proc = _child(_DIES_HOLDING_ITS_CLAIM, {}, str(tmp_path), timeout=20)
        assert proc.returncode == 9, proc.stderr
        seen.append(json.loads(proc.stdout))
    assert seen[0]["claimed"] and seen[1]["claimed"] and "-orphan.spool" in seen[1]["claimed"]
    assert seen[2] == {"claimed": None, "losses": {"spool_crash_loop": 3}}
    assert [p.name.endswith("-n3-c3.spool.bad") for p in tmp_path.iterdir()] == [True]


def test_a_replay_that_returns_clears_the_orphan_mark(tmp_path):
    # One death is not proof: a process killed for another reason costs the file its first life only.
    spool = Spool(str(tmp_path), 10**9)
    spool.write(_runs(2, "unlucky-"))
    proc = _child(_DIES_HOLDING_ITS_CLAIM, {}, str(tmp_path), timeout=20)
    assert proc.returncode == 9 and json.loads(proc.stdout)["claimed"]
    again = Spool(str(tmp_path), 10**9)
    path, runs = again.claim()
    assert "-orphan.spool" in path.name and len(runs) == 2
    again.give_back(path, runs)  # the service was down: kept, and no longer marked
    # (Beside it: this process's owner lock, ``.owner-<token>``, held while it lives.)
    files = [p for p in tmp_path.iterdir() if not p.name.startswith(".owner-")]
    assert [p.name.endswith("-n2-c2.spool") and "orphan" not in p.name for p in files] == [True]
