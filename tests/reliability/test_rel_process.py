"""Whole processes: exiting while the service is down, fork under load (multiprocessing and pre-fork)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from reliability.rel_helpers import completed_names, report

EXPORT_TIMEOUT_MS = 2000


def _env(url: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}
    env.update(OTEL_EXPORTER_RUNS_ENDPOINT=url, OTEL_EXPORTER_RUNS_API_KEY="sk-rel-secret", **more)
    return env


def _run(code: str, env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_exit_while_the_service_is_down_is_bounded_and_reported(svc):
    # 100 runs delivered while the service is up; then it goes down (503 with
    # Retry-After) and 200 more are created. The process must exit within the
    # export timeout and name the 200 it gave up, in one line.
    script = textwrap.dedent(
        """
        import logging, sys, time
        logging.basicConfig(level=logging.WARNING)
        from opentelemetry import trace
        from otel_runs_exporter import configure
        provider = configure()
        tracer = trace.get_tracer("exit")
        for i in range(100):
            with tracer.start_as_current_span(f"up-{i}"):
                pass
        assert provider.force_flush(10000)
        print("FLUSHED", flush=True)
        sys.stdin.readline()  # the parent takes the service down
        for i in range(200):
            with tracer.start_as_current_span(f"down-{i}"):
                pass
        print("END", time.monotonic(), flush=True)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        env=_env(svc.url, OTEL_BSP_EXPORT_TIMEOUT=str(EXPORT_TIMEOUT_MS)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "FLUSHED"
        svc.faults.update(outage=True)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    exited = time.monotonic()
    assert proc.returncode == 0, err
    end_of_main = float(re.search(r"END (\S+)", out).group(1))
    shutdown_s = exited - end_of_main  # CLOCK_MONOTONIC is system-wide on Linux and macOS
    gave_up = [line for line in err.splitlines() if "gave up" in line]
    figures = {
        "case": "process exits while the service is down (export timeout 2 s)",
        "created": 300,
        "delivered": len(completed_names(svc)),
        "dropped": {"shutdown": int(re.search(r"gave up (\d+) runs", gave_up[0]).group(1)) if gave_up else None},
        "duplicates": sum(svc.duplicate_posts().values()),
        "elapsed_s": round(shutdown_s, 2),
        "extra": {"log_line": gave_up},
    }
    report(figures)
    assert len(gave_up) == 1, err
    assert "gave up 200 runs" in gave_up[0]
    assert completed_names(svc) == sorted(f"up-{i}" for i in range(100))
    assert shutdown_s < EXPORT_TIMEOUT_MS / 1000 + 1.5, f"exit took {shutdown_s:.2f} s after main ended"
    assert "sk-rel-secret" not in out + err


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_gunicorn_style_prefork_under_load(svc):
    # The parent builds the provider and has runs queued at the moment it forks
    # (as a pre-fork server whose master traced its own startup); each worker
    # produces its own while the parent keeps producing too.
    code = """
        import os, sys
        from opentelemetry import trace
        from otel_runs_exporter import configure
        provider = configure()
        tracer = trace.get_tracer("prefork")
        def burst(prefix, n):
            for i in range(n):
                with tracer.start_as_current_span(f"{prefix}-{i}"):
                    with tracer.start_as_current_span(f"{prefix}-{i}-child"):
                        pass
        burst("master-boot", 300)          # queued, not yet sent, when the workers fork
        pids = []
        for w in range(3):
            pid = os.fork()
            if pid == 0:
                burst(f"worker{w}", 300)
                ok = trace.get_tracer_provider().force_flush(20000)
                os._exit(0 if ok else 3)
            pids.append(pid)
            burst(f"master-{w}", 100)       # the master keeps working between forks
        codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]
        provider.shutdown()
        print("CODES", codes)
        raise SystemExit(max(codes))
    """
    began = time.monotonic()
    # A 2 s schedule delay, so the master's boot runs are still queued when it forks.
    proc = _run(code, _env(svc.url, OTEL_BSP_SCHEDULE_DELAY="2000"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = []
    for prefix, n in [("master-boot", 300)] + [(f"worker{w}", 300) for w in range(3)] + [(f"master-{w}", 100) for w in range(3)]:
        for i in range(n):
            expected += [f"{prefix}-{i}", f"{prefix}-{i}-child"]
    svc.store.wait(lambda: len(completed_names(svc)) >= len(expected), 10)
    names = completed_names(svc)
    report(
        {
            "case": "gunicorn-style pre-fork: master + 3 workers",
            "created": len(expected),
            "delivered": len(names),
            "dropped": {},
            "duplicates": sum(svc.duplicate_posts().values()),
            "elapsed_s": round(time.monotonic() - began, 2),
        }
    )
    assert names == sorted(expected)
    assert svc.duplicate_posts() == {}
    assert svc.check()["missing_parents"] == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_multiprocessing_fork_pool_under_load(svc):
    # A thread of the parent keeps producing while the pool forks its workers:
    # the fork may come while the parent's worker is mid-send or its queue is full.
    code = """
        import multiprocessing as mp, threading, time
        from opentelemetry import trace
        from otel_runs_exporter import configure
        provider = configure()
        tracer = trace.get_tracer("mp")

        def task(k):
            for i in range(100):
                with tracer.start_as_current_span(f"task{k}-{i}"):
                    pass
            return trace.get_tracer_provider().force_flush(20000)

        if __name__ == "__main__":
            stop = threading.Event()
            made = []
            def background():
                while not stop.is_set():
                    name = f"parent-{len(made)}"
                    with tracer.start_as_current_span(name):
                        pass
                    made.append(name)
                    time.sleep(0.0005)  # a busy app, not a flat-out loop: that one fills the queue (queue_full)
            t = threading.Thread(target=background)
            t.start()
            with mp.get_context("fork").Pool(3) as pool:
                results = pool.map(task, range(12))
            stop.set()
            t.join()
            provider.shutdown()
            print("PARENT", len(made))
            raise SystemExit(0 if all(results) else 3)
    """
    began = time.monotonic()
    proc = _run(code, _env(svc.url))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    parent_made = int(re.search(r"PARENT (\d+)", proc.stdout).group(1))
    expected = sorted([f"task{k}-{i}" for k in range(12) for i in range(100)] + [f"parent-{i}" for i in range(parent_made)])
    svc.store.wait(lambda: len(completed_names(svc)) >= len(expected), 10)
    names = completed_names(svc)
    report(
        {
            "case": "multiprocessing fork pool (3 procs, 12 tasks) while a parent thread produces",
            "created": len(expected),
            "delivered": len(names),
            "dropped": {},
            "duplicates": sum(svc.duplicate_posts().values()),
            "elapsed_s": round(time.monotonic() - began, 2),
            "extra": {"parent_spans_during_pool": parent_made},
        }
    )
    assert parent_made > 0
    missing = sorted(set(expected) - set(names))
    assert names == expected, f"{len(missing)} runs missing, e.g. {missing[:3]}; stderr: {proc.stderr[-1500:]}"
    assert svc.duplicate_posts() == {}
