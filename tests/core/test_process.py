"""Whole processes: exit, fork, configure() on the global provider."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from otel_runs_exporter._spool import deserialize
from otel_runs_exporter.server import LocalService
from otel_runs_exporter.server._faults import FaultConfig


def run_script(code: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_configure_delivers_and_exit_flushes(service):
    proc = run_script(
        """
        from opentelemetry import trace
        from otel_runs_exporter import configure
        provider = configure(project="my-app")
        assert configure() is provider  # idempotent
        tracer = trace.get_tracer(__name__)
        with tracer.start_as_current_span("answer"):
            with tracer.start_as_current_span("step"):
                pass
        # no flush, no shutdown: the SDK's exit hook must deliver
        """,
        env={"OTEL_EXPORTER_RUNS_ENDPOINT": service.url, "OTEL_EXPORTER_RUNS_API_KEY": "k"},
    )
    assert proc.returncode == 0, proc.stderr
    runs = service.wait_for_runs(2, timeout=5)
    assert {r["session_name"] for r in runs} == {"my-app"}
    assert service.violations() == []


def test_exit_with_unreachable_service_is_bounded_and_reported():
    began = time.monotonic()
    proc = run_script(
        """
        import logging
        logging.basicConfig()
        from opentelemetry import trace
        from otel_runs_exporter import configure
        configure(endpoint="http://127.0.0.1:9", api_key="sk-never-printed")
        tracer = trace.get_tracer(__name__)
        for i in range(50):
            with tracer.start_as_current_span("s"):
                pass
        """,
        env={"OTEL_BSP_EXPORT_TIMEOUT": "1500"},
    )
    elapsed = time.monotonic() - began
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 10, elapsed
    gave_up = re.search(r"gave up 50 runs that could not be delivered in ([0-9.]+) s", proc.stderr)
    assert gave_up, proc.stderr
    # The line states the real wait: within the export timeout (it stops early once no
    # retry fits before the deadline), and never more than the process took.
    assert 0 < float(gave_up.group(1)) <= min(elapsed, 1.5 + 0.5)
    assert "sk-never-printed" not in proc.stderr + proc.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_child_sends_its_own_runs_and_nothing_twice(service):
    proc = run_script(
        """
        import os
        from opentelemetry import trace
        from otel_runs_exporter import configure
        provider = configure(schedule_delay_s=5.0)  # nothing leaves before the fork
        tracer = trace.get_tracer(__name__)
        for i in range(5):
            with tracer.start_as_current_span(f"parent-before-fork-{i}"):
                pass
        pid = os.fork()
        if pid == 0:
            for i in range(3):
                with tracer.start_as_current_span(f"child-{i}"):
                    pass
            provider.force_flush(10000)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        with tracer.start_as_current_span("parent-after-fork"):
            pass
        provider.shutdown()
        raise SystemExit(os.waitstatus_to_exitcode(status))
        """,
        env={"OTEL_EXPORTER_RUNS_ENDPOINT": service.url, "OTEL_EXPORTER_RUNS_API_KEY": "k"},
    )
    assert proc.returncode == 0, proc.stderr
    runs = service.wait_for_runs(9, timeout=10)
    names = sorted(r["name"] for r in runs)
    assert names == sorted([f"parent-before-fork-{i}" for i in range(5)] + [f"child-{i}" for i in range(3)] + ["parent-after-fork"])
    assert service.duplicate_posts() == {}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_multiprocessing_fork_workers(service):
    proc = run_script(
        """
        import multiprocessing as mp
        from opentelemetry import trace
        from otel_runs_exporter import configure
        provider = configure()
        tracer = trace.get_tracer(__name__)

        def work(i):
            with tracer.start_as_current_span(f"worker-{i}"):
                pass
            trace.get_tracer_provider().force_flush(10000)
            return i

        if __name__ == "__main__":
            with tracer.start_as_current_span("parent"):
                pass
            with mp.get_context("fork").Pool(2) as pool:
                assert sorted(pool.map(work, range(4))) == [0, 1, 2, 3]
            provider.shutdown()
        """,
        env={"OTEL_EXPORTER_RUNS_ENDPOINT": service.url, "OTEL_EXPORTER_RUNS_API_KEY": "k"},
    )
    assert proc.returncode == 0, proc.stderr
    runs = service.wait_for_runs(5, timeout=10)
    assert sorted(r["name"] for r in runs) == ["parent"] + [f"worker-{i}" for i in range(4)]
    assert service.duplicate_posts() == {}


def test_get_processor_and_a_second_configure_with_other_arguments(service):
    proc = run_script(
        f"""
        import logging
        logging.basicConfig()
        from opentelemetry import trace
        from otel_runs_exporter import configure, get_processor
        assert get_processor() is None
        provider = configure(endpoint="{service.url}", api_key="k", project="first")
        processor = get_processor()
        assert configure(endpoint="{service.url}", api_key="k", project="first") is provider  # same: silent
        assert configure(project="second") is provider and get_processor() is processor
        with trace.get_tracer(__name__).start_as_current_span("s"):
            pass
        assert processor.force_flush(5000)
        print("STATS", processor.stats().delivered, processor.settings.project)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "STATS 1 first" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "configure() was already called" in line]
    assert len(warnings) == 1 and "project" in warnings[0], proc.stderr
    assert service.runs()[0]["session_name"] == "first"


def _interrupted_in_the_final_flush(code: str, args: list[str], env: dict[str, str], after_s: float) -> tuple[str, str]:
    """Run ``code`` until it prints "exiting", then Ctrl-C it ``after_s`` later, inside its (minute-long) final
    flush; its output, once it has stopped at once and without a traceback."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    full.update(OTEL_BSP_EXPORT_TIMEOUT="60000", **env)  # a long final flush, cut short by Ctrl-C
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "exiting"
        time.sleep(after_s)
        interrupted = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert time.monotonic() - interrupted < 3, err
    assert "Traceback" not in err, err
    return out, err


def test_ctrl_c_during_the_final_flush_exits_at_once_with_one_line():
    code = textwrap.dedent(
        """
        import logging, sys
        logging.basicConfig()
        from opentelemetry import trace
        from otel_runs_exporter import configure
        configure(endpoint="http://127.0.0.1:9", api_key="sk-never-printed")
        with trace.get_tracer(__name__).start_as_current_span("s"):
            pass
        print("exiting", flush=True)
        """
    )
    # Long even though nothing listens at port 9: the flush is retrying when Ctrl-C comes.
    out, err = _interrupted_in_the_final_flush(code, [], {"OTEL_EXPORTER_RUNS_EXIT_BUDGET": "60000"}, after_s=0.5)
    lines = [line for line in err.splitlines() if "gave up" in line]
    assert len(lines) == 1 and "shutdown interrupted: gave up 1 run that" in lines[0], err
    assert "sk-never-printed" not in err + out


def test_ctrl_c_during_the_final_flush_still_writes_what_is_left_to_the_spool(tmp_path):
    """The service answers 503 and the app exits: the final flush backs off, Ctrl-C stops it at once,
    and the runs go to the spool for the next process (before: counted as given up)."""
    spool = tmp_path / "spool"
    code = textwrap.dedent(
        f"""
        import logging, sys
        logging.basicConfig()
        from opentelemetry import trace
        from otel_runs_exporter import configure
        configure(endpoint=sys.argv[1], api_key="sk-never-printed", spool_dir={str(spool)!r})
        tracer = trace.get_tracer(__name__)
        with tracer.start_as_current_span("root"):
            with tracer.start_as_current_span("child"):
                pass
        print("exiting", flush=True)
        """
    )
    with LocalService(faults=FaultConfig(outage=True)) as down:
        # Nothing sent before exit (the schedule is a minute long): the exit's flush is the one interrupted.
        out, err = _interrupted_in_the_final_flush(code, [down.url], {"OTEL_BSP_SCHEDULE_DELAY": "60000"}, after_s=1.0)
    (line,) = [line for line in err.splitlines() if "shutdown" in line]
    assert "shutdown interrupted: 2 runs could not be delivered in" in line, line
    assert line.endswith(f"; written to the spool at {spool} for the next process to send"), line
    runs = [run for path in spool.glob("*.spool") for run in deserialize(path.read_bytes())]
    assert sum(run.completes for run in runs) == 2
    assert "sk-never-printed" not in err + out


GENAI_ENV_LLM = '{"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "m"}'


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_spans_genai_a_pool_forked_inside_a_waiting_root_keeps_it_whole(service):
    """``spans=genai``: the root is not a GenAI span, so it waits for a kept descendant; the LLM calls
    happen only in the pool's forked workers. Before: each child posted the root itself, and the
    parent, having seen no kept descendant, left it out at its end: the root was posted twice and
    never ended (``never_completed``). Now the fork hands the root on, as the propagator does: the
    parent posts it before forking and ends it; the children only hang their runs under it."""
    proc = run_script(
        f"""
        import multiprocessing as mp
        from opentelemetry import trace
        from otel_runs_exporter import configure
        provider = configure(spans="genai")
        tracer = trace.get_tracer("app")

        def work(i):
            with tracer.start_as_current_span(f"chat-{{i}}", attributes={GENAI_ENV_LLM}):
                pass
            trace.get_tracer_provider().force_flush(10000)
            return i

        if __name__ == "__main__":
            with tracer.start_as_current_span("main"):
                with tracer.start_as_current_span("a left-out step"):
                    with mp.get_context("fork").Pool(2) as pool:  # forked inside a left-out span, under the root
                        assert sorted(pool.map(work, range(3))) == [0, 1, 2]
            provider.shutdown()
        """,
        env={"OTEL_EXPORTER_RUNS_ENDPOINT": service.url, "OTEL_EXPORTER_RUNS_API_KEY": "k"},
    )
    assert proc.returncode == 0, proc.stderr
    runs = {r["name"]: r for r in service.wait_for_runs(4, timeout=10)}
    assert sorted(runs) == ["chat-0", "chat-1", "chat-2", "main"]
    assert runs["main"].get("end_time") is not None and runs["main"].get("parent_run_id") is None
    assert {runs[f"chat-{i}"]["parent_run_id"] for i in range(3)} == {runs["main"]["id"]}
    assert service.duplicate_posts() == {}
    assert not any(service.check().values()), service.check()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_spans_genai_a_forked_child_leaves_out_the_roots_it_inherited_still_waiting(service):
    """The child reaches another thread's waiting root (through that span's context, not its own).
    Only the parent can post that root or leave it out, and it never learns what the child keeps.
    Before: the child posted it, the parent left it out, and it stayed open at the service for good.
    Now the child's run starts its own tree, and the child ending the inherited root sends nothing."""
    proc = run_script(
        f"""
        import os, threading
        from opentelemetry import trace
        from otel_runs_exporter import configure
        provider = configure(spans="genai")
        tracer = trace.get_tracer("app")
        started, done, held = threading.Event(), threading.Event(), {{}}

        def request():
            with tracer.start_as_current_span("GET /other") as root:
                held["root"] = root
                started.set()
                done.wait(10)

        thread = threading.Thread(target=request)
        thread.start()
        assert started.wait(10)
        pid = os.fork()
        if pid == 0:
            context = trace.set_span_in_context(held["root"])
            with tracer.start_as_current_span("chat in child", context=context, attributes={GENAI_ENV_LLM}):
                pass
            held["root"].end()  # the parent's span: its end is the parent's
            ok = provider.force_flush(10000)
            os._exit(0 if ok else 3)
        assert os.waitpid(pid, 0)[1] == 0
        done.set()
        thread.join()
        provider.shutdown()
        """,
        env={"OTEL_EXPORTER_RUNS_ENDPOINT": service.url, "OTEL_EXPORTER_RUNS_API_KEY": "k"},
    )
    assert proc.returncode == 0, proc.stderr
    runs = service.wait_for_runs(1, timeout=10)
    assert [(r["name"], r.get("parent_run_id"), r.get("end_time") is not None) for r in runs] == [("chat in child", None, True)]
    assert service.duplicate_posts() == {}
    assert not any(service.check().values()), service.check()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_while_background_threads_hold_our_locks(service):
    # fork copies only the calling thread: a lock another thread holds at that
    # moment is never released in the child. CI once forked while the worker was
    # resolving run ids; the child's worker then hung on its first span and its
    # force_flush timed out. Here other threads hold every lock a background
    # thread of ours takes, for the whole fork, on both paths.
    proc = run_script(
        """
        import os, threading
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from otel_runs_exporter import RunsSpanExporter, configure
        from otel_runs_exporter import _configure, _convert, _genai_events, _registry, _sdk_bridge, _worker
        provider = configure(schedule_delay_s=0.05)
        exporter = RunsSpanExporter()
        exporter_provider = TracerProvider()
        exporter_provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=50))
        locks = [_convert.RunNode._lock, _worker._rl._lock, _registry._lookups.lock, _sdk_bridge._lock,
                 _configure._lock, exporter._lock, exporter._send_lock, _genai_events._joins.lock,
                 _genai_events._install_lock]
        held, release = threading.Event(), threading.Event()
        def hold():
            for lock in locks:
                lock.acquire()
            held.set()
            release.wait()
            for lock in locks:
                lock.release()
        threading.Thread(target=hold, daemon=True).start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            with trace.get_tracer("child").start_as_current_span("child-processor"):
                pass
            with exporter_provider.get_tracer("child").start_as_current_span("child-exporter"):
                pass
            ok = provider.force_flush(10000) and exporter_provider.force_flush(10000)
            os._exit(0 if ok else 3)
        release.set()
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        with trace.get_tracer("parent").start_as_current_span("parent"):
            pass
        provider.shutdown()
        exporter_provider.shutdown()
        raise SystemExit(code)
        """,
        env={"OTEL_EXPORTER_RUNS_ENDPOINT": service.url, "OTEL_EXPORTER_RUNS_API_KEY": "k"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = service.wait_for_runs(3, timeout=10)
    assert sorted(r["name"] for r in runs) == ["child-exporter", "child-processor", "parent"]
    assert service.duplicate_posts() == {}
