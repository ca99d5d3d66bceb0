"""Every way a process ends (``_process_end``): the runs made before it arrive, counted against those made.

``multiprocessing`` children started with fork or forkserver leave through
``os._exit`` after ``multiprocessing``'s own finalizers, so no ``atexit`` hook runs
there; a pool leaving ``with`` terminates its workers with SIGTERM. Before, short
tasks in such a pool stored none of their runs, silently. SIGTERM ends a plain
script without any exit hook unless ``OTEL_EXPORTER_RUNS_HANDLE_SIGTERM`` asks for
the normal exit.

The processes run side by side (started together by a module fixture, each test
waiting for its own), each under its own project at one local service of the
module, so the module costs about its slowest process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from otel_runs_exporter.server import LocalService

from core.helpers import closed_port

pytestmark = pytest.mark.heavy(seconds=4)

TASKS = 100  # per pool; each task makes one span and returns, with no flush of its own
PROCESS_SPANS = 10  # made by one plain multiprocessing.Process child
SIGTERM_SPANS = 20

# One script per path and start method: a pool left by ``with`` (terminate()), a pool closed and joined,
# and a plain Process child, one after the other. A file, not -c: spawn and forkserver import the main module.
POOL_APP = '''
import json, multiprocessing as mp, sys, time
from opentelemetry import trace

PATH, METHOD, TASKS, PROCESS_SPANS, WORKERS = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
BUSY = sys.argv[6:] == ["busy"]
if PATH == "processor":
    from otel_runs_exporter import configure
    configure()
else:  # the exporter under the SDK's own batch processor, on the global provider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from otel_runs_exporter import RunsSpanExporter
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(RunsSpanExporter()))
    trace.set_tracer_provider(provider)
tracer = trace.get_tracer("app")


def work(name):
    with tracer.start_as_current_span(name):
        pass


def several(prefix, n):
    for i in range(n):
        work(f"{prefix}/{i}")


def keep(event):
    global started
    started = event


def busy():
    started.set()
    time.sleep(60)


if __name__ == "__main__":
    ctx = mp.get_context(METHOD)
    ended = {}
    with ctx.Pool(WORKERS) as pool:
        pool.map(work, [f"with/{i}" for i in range(TASKS)])
        began = time.monotonic()
    ended["with"] = time.monotonic() - began  # terminate(): each worker's last runs sent on its way out
    pool = ctx.Pool(WORKERS)
    pool.map(work, [f"close/{i}" for i in range(TASKS)])
    began = time.monotonic()
    pool.close()
    pool.join()
    ended["close"] = time.monotonic() - began
    child = ctx.Process(target=several, args=("process", PROCESS_SPANS))
    child.start()
    child.join()
    assert child.exitcode == 0, child.exitcode
    if BUSY:  # a worker in the middle of a task is still ended at once by terminate(), as it promises
        event = ctx.Event()
        with ctx.Pool(1, initializer=keep, initargs=(event,)) as pool:
            pool.apply_async(busy)
            assert event.wait(30)
            began = time.monotonic()
        ended["busy"] = time.monotonic() - began
    print(json.dumps(ended), flush=True)
'''

# Spans made and queued (nothing leaves within the minute-long schedule), then the script waits to be stopped.
SIGTERM_APP = '''
import atexit, logging, os, signal, sys, threading, time
import multiprocessing  # imported before ours, as many apps do: this process is still no child of it
logging.basicConfig()
from opentelemetry import trace
from otel_runs_exporter import RunsSpanExporter, configure

CASE, SPANS = sys.argv[1], int(sys.argv[2])
if CASE == "app_handler":
    def on_sigterm(signum, frame):
        print("the app's handler", flush=True)
        sys.exit(3)
    signal.signal(signal.SIGTERM, on_sigterm)
if CASE == "thread":
    # Made outside the main thread, twice: Python lets only the main thread install a handler.
    made = threading.Thread(target=lambda: (configure(), RunsSpanExporter()))
    made.start()
    made.join()
else:
    configure()
print("handler", "default" if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL else "replaced",
      "wakeup", signal.set_wakeup_fd(-1), flush=True)
atexit.register(lambda: print("exiting", flush=True))  # after configure(): runs before the SDK's flush
tracer = trace.get_tracer("app")
for i in range(SPANS):
    with tracer.start_as_current_span(f"{CASE}/{i}"):
        pass
print("ready", flush=True)
time.sleep(60)
'''


@dataclass
class Ended:
    out: str
    err: str
    returncode: int
    after_signal_s: float  # from the last SIGTERM sent to the end of the process (0 when none was sent)


class Running:
    """A process, and a thread that sends it SIGTERM after each line it waits for, then notes when it ended."""

    def __init__(self, args: list[str], env: dict[str, str], signal_after: tuple[tuple[str, float], ...] = ()) -> None:
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._signal_after = signal_after
        self._output = ("", "")
        self._signalled = self._ended = 0.0
        self._waiter = threading.Thread(target=self._drive, daemon=True)
        self._waiter.start()

    def _drive(self) -> None:
        seen: list[str] = []
        try:
            for line, delay in self._signal_after:
                while True:
                    read = self.proc.stdout.readline()
                    if not read:
                        break  # ended before: the test says what it printed
                    seen.append(read)
                    if read.strip() == line:
                        break
                time.sleep(delay)
                self._signalled = time.monotonic()
                self.proc.send_signal(signal.SIGTERM)
            out, err = self.proc.communicate(timeout=90)
            self._output = ("".join(seen) + out, err)
        finally:
            self._ended = time.monotonic()
            if self.proc.poll() is None:
                self.proc.kill()

    def wait(self) -> Ended:
        self._waiter.join()
        out, err = self._output
        return Ended(out, err, self.proc.returncode, self._ended - self._signalled if self._signalled else 0.0)


@dataclass
class Processes:
    service: LocalService
    running: dict[str, Running]

    def __getitem__(self, name: str) -> Ended:
        return self.running[name].wait()

    def stored(self, project: str) -> dict[str, int]:
        """The runs stored under ``project``, complete ones only, counted by the name's first part."""
        counts: dict[str, int] = {}
        for run in self.service.runs():
            if run["session_name"] == project and run.get("end_time") is not None:
                part = run["name"].split("/")[0]
                counts[part] = counts.get(part, 0) + 1
        return counts


def _env(service: LocalService, project: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}
    env.update(OTEL_EXPORTER_RUNS_ENDPOINT=service.url, OTEL_EXPORTER_RUNS_API_KEY="k", OTEL_EXPORTER_RUNS_PROJECT=project)
    env.update(more)
    return env


def _pool(
    script: Path, service: LocalService, path: str, method: str, tasks: int = TASKS, workers: int = 2, busy: bool = False
) -> Running:
    args = [sys.executable, str(script), path, method, str(tasks), str(PROCESS_SPANS), str(workers)] + ["busy"] * busy
    return Running(args, _env(service, f"{path}-{method}"))


def _run_app(where: Path, source: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``source`` run as a script file (spawn and forkserver import the main module by its path), ended with 0."""
    app = where / "app.py"
    app.write_text(source)
    done = subprocess.run([sys.executable, str(app)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _sigterm(script: Path, service: LocalService, case: str, signal_after: tuple[tuple[str, float], ...], **env: str) -> Running:
    queued = dict(OTEL_BSP_SCHEDULE_DELAY="60000")  # nothing leaves before the signal: the exit must send it
    return Running(
        [sys.executable, str(script), case, str(SIGTERM_SPANS)], _env(service, case, **queued, **env), signal_after
    )


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    where = tmp_path_factory.mktemp("process_end")
    pool_app, sigterm_app = where / "pool_app.py", where / "sigterm_app.py"
    pool_app.write_text(textwrap.dedent(POOL_APP))
    sigterm_app.write_text(textwrap.dedent(SIGTERM_APP))
    closed = f"http://127.0.0.1:{closed_port()}"
    with LocalService(strict=True) as svc:
        running: dict[str, Running] = {}
        if hasattr(os, "fork"):
            running["processor-fork"] = _pool(pool_app, svc, "processor", "fork", busy=True)
            running["exporter-fork"] = _pool(pool_app, svc, "exporter", "fork")
            running["processor-forkserver"] = _pool(pool_app, svc, "processor", "forkserver")
        running["processor-spawn"] = _pool(pool_app, svc, "processor", "spawn", workers=1)  # each an interpreter
        if hasattr(signal, "SIGTERM") and os.name == "posix":
            once = (("ready", 0.0),)
            running["asked"] = _sigterm(sigterm_app, svc, "asked", once, OTEL_EXPORTER_RUNS_HANDLE_SIGTERM="true")
            running["not_asked"] = _sigterm(sigterm_app, svc, "not_asked", once)
            running["app_handler"] = _sigterm(
                sigterm_app, svc, "app_handler", once, OTEL_EXPORTER_RUNS_HANDLE_SIGTERM="true"
            )
            running["thread"] = _sigterm(sigterm_app, svc, "thread", once, OTEL_EXPORTER_RUNS_HANDLE_SIGTERM="true")
            # The exit's flush retries a closed port for a minute; the second SIGTERM comes while it does.
            running["twice"] = Running(
                [sys.executable, str(sigterm_app), "twice", str(SIGTERM_SPANS)],
                {
                    **_env(svc, "twice", OTEL_EXPORTER_RUNS_HANDLE_SIGTERM="true", OTEL_EXPORTER_RUNS_EXIT_BUDGET="60000"),
                    "OTEL_EXPORTER_RUNS_ENDPOINT": closed,
                },
                (("ready", 0.0), ("exiting", 0.5)),
            )
        try:
            yield Processes(svc, running)
        finally:
            for r in running.values():
                if r.proc.poll() is None:
                    r.proc.kill()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork and forkserver")
@pytest.mark.parametrize("case", ["processor-fork", "exporter-fork", "processor-forkserver", "processor-spawn"])
def test_every_run_a_multiprocessing_child_made_arrives_however_it_ends(processes, case):
    """A pool left by ``with`` (terminate()), a pool closed and joined, a plain Process: each task makes one
    span and returns, nothing flushes. Before: 0 of the fork pool's runs arrived, with no line and no count."""
    ended = processes[case]
    assert ended.returncode == 0, ended.err
    stored = processes.stored(case)
    print(case, "stored", stored, "seconds each pool took to end", ended.out.strip())  # figures, with -s
    assert stored == {"with": TASKS, "close": TASKS, "process": PROCESS_SPANS}
    assert "Traceback" not in ended.err, ended.err
    ended_in = json.loads(ended.out)  # the script ran to its end
    assert ended_in.get("busy", 0) < 30  # a busy worker was not waited for (its task sleeps a minute)


def test_no_run_is_sent_twice_nor_breaks_a_rule(processes):
    for name in processes.running:
        processes[name]  # every process has ended
    assert processes.service.duplicate_posts() == {}
    assert processes.service.violations() == []


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM")
def test_sigterm_when_asked_ends_through_the_normal_exit_its_runs_sent_and_its_status_143(processes):
    ended = processes["asked"]
    print("asked: ended", round(ended.after_signal_s, 2), "s after SIGTERM")
    # 143 = 128 + 15, what a shell, Docker or Kubernetes reports for SIGTERM; the process leaves through
    # SystemExit so that every exit hook runs (see the README for why not by the signal itself).
    assert ended.returncode == 143, ended.err
    assert processes.stored("asked") == {"asked": SIGTERM_SPANS}
    assert "exiting" in ended.out and "Traceback" not in ended.err, ended.err


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM")
def test_sigterm_not_asked_is_left_as_it_was_and_the_runs_are_lost(processes):
    """The default (a malformed value is one ERROR line and the default: tests/core/test_settings.py's
    test_a_malformed_tuning_variable_is_one_error_line_naming_it_and_the_default_and_the_default_is_used)."""
    ended = processes["not_asked"]
    # Before, ours armed in every process that had imported multiprocessing (``__mp_main__`` is in all).
    assert "handler default wakeup -1" in ended.out, ended.out
    assert ended.returncode == -signal.SIGTERM, ended.err
    assert "exiting" not in ended.out  # killed by the signal: no exit hook ran
    assert processes.stored("not_asked") == {}


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM")
def test_sigterm_an_apps_own_handler_is_left_alone(processes):
    ended = processes["app_handler"]
    assert ended.returncode == 3, ended.err  # the app's handler ran, and chose how to leave
    assert "the app's handler" in ended.out
    assert processes.stored("app_handler") == {"app_handler": SIGTERM_SPANS}  # its sys.exit runs the exit hooks


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM")
def test_sigterm_asked_outside_the_main_thread_installs_nothing_and_says_so_once(processes):
    ended = processes["thread"]
    assert "handler default" in ended.out
    assert ended.returncode == -signal.SIGTERM, ended.err
    warned = [line for line in ended.err.splitlines() if "OTEL_EXPORTER_RUNS_HANDLE_SIGTERM" in line]
    assert len(warned) == 1 and "outside the main thread" in warned[0], ended.err


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM")
def test_a_second_sigterm_during_the_exit_flush_ends_the_process_at_once(processes):
    ended = processes["twice"]
    print("twice: ended", round(ended.after_signal_s, 2), "s after the second SIGTERM")
    assert "exiting" in ended.out  # the first SIGTERM began the normal exit, whose flush waits a minute
    assert ended.returncode == -signal.SIGTERM, ended.err
    assert ended.after_signal_s < 3, ended.after_signal_s


@pytest.mark.long
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork and forkserver")
def test_pools_of_many_short_tasks_on_both_paths_and_every_start_method_store_every_run(service, tmp_path):
    """The module's pools at the issue's size (1,200 tasks, 4 workers), on both paths, for each start method."""
    tasks, workers = 1200, 4
    pool_app = tmp_path / "pool_app.py"
    pool_app.write_text(textwrap.dedent(POOL_APP))
    ended_in: dict[str, dict[str, float]] = {}
    for path in ("processor", "exporter"):  # three at a time: a spawn pool of 4 is 5 interpreters
        running = {f"{path}-{m}": _pool(pool_app, service, path, m, tasks, workers, busy=True) for m in ("fork", "forkserver", "spawn")}
        for case, r in running.items():
            ended = r.wait()
            assert ended.returncode == 0, ended.err
            ended_in[case] = json.loads(ended.out)
            assert ended_in[case]["busy"] < 30
    found = Processes(service, {})
    expected = {"with": tasks, "close": tasks, "process": PROCESS_SPANS}
    assert {case: found.stored(case) for case in ended_in} == {case: expected for case in ended_in}
    assert service.duplicate_posts() == {}
    print("seconds each pool took to end:", json.dumps(ended_in))


STUCK_CHILD_APP = """
import multiprocessing as mp, threading, time
from opentelemetry import trace
from otel_runs_exporter import configure, _registry

configure()
held = threading.Lock()

class StuckAtItsEnd:
    # Stands for a lock another thread of the parent held at the fork: in the child it is held for ever.
    def shutdown(self):
        with held:
            pass

stuck = StuckAtItsEnd()
_registry.add_sender(stuck)

def task(i):
    with trace.get_tracer("app").start_as_current_span(f"t{i}"):
        pass
    return i

if __name__ == "__main__":
    held.acquire()  # held across the fork, so every child inherits it held
    began = time.monotonic()
    with mp.get_context("fork").Pool(2) as pool:
        assert pool.map(task, range(4)) == [0, 1, 2, 3]
    print("POOL_ENDED_S", round(time.monotonic() - began, 2), flush=True)
"""


def test_a_child_whose_end_is_stuck_does_not_hold_its_pool_for_ever(tmp_path: Path) -> None:
    # Before the child's end was bounded, the pool's terminate() joined a worker stuck in its finalizer
    # for ever (seen once in CI under load as a 90 s hang of test_rel_process's fork pool).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    env.update(OTEL_EXPORTER_RUNS_ENDPOINT=f"http://127.0.0.1:{closed_port()}", OTEL_BSP_EXPORT_TIMEOUT="500",
               OTEL_EXPORTER_RUNS_EXIT_BUDGET="200")
    done = _run_app(tmp_path, STUCK_CHILD_APP, env)
    ended_s = float(done.stdout.split("POOL_ENDED_S")[1].split()[0])
    assert ended_s < 20, done.stdout  # each child waits the export timeout (0.5 s) and a second, at once
    assert done.stderr.count("had not ended 1.5 s after the process began to exit") >= 1, done.stderr[-2000:]


MISSED_SIGTERM_APP = """
import multiprocessing as mp, os, signal, sys, threading, time
from opentelemetry import trace
from otel_runs_exporter import configure

configure()
tracer = trace.get_tracer("app")

def miss_sigterm():
    # The main thread stops taking SIGTERM: the signal goes to another thread, and its Python handler,
    # which only the main thread runs, waits for a main thread blocked in C, as when the signal comes
    # just before a worker blocks on the pool's queue lock.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

def task(i):
    with tracer.start_as_current_span(f"missed/{i}"):
        pass
    return os.getpid()

def stuck_in_app(ready):
    miss_sigterm()
    with tracer.start_as_current_span("child"):
        pass
    ready.set()
    threading.Event().wait()

if __name__ == "__main__":
    pool = mp.get_context("fork").Pool(1, initializer=miss_sigterm)
    (pid,) = set(pool.map(task, range(50)))
    time.sleep(0.2)  # the worker waits for its next task
    os.kill(pid, signal.SIGTERM)
    began = time.monotonic()
    while time.monotonic() - began < 15:
        try:
            os.kill(pid, 0)  # until the pool has reaped it
        except ProcessLookupError:
            break
        time.sleep(0.05)
    print("WORKER_ENDED_S", round(time.monotonic() - began, 2), flush=True)
    # A plain child running the app's code, stuck the same way: SIGTERM still ends it (by the signal, before).
    ready = mp.get_context("fork").Event()
    child = mp.get_context("fork").Process(target=stuck_in_app, args=(ready,))
    child.start()
    assert ready.wait(30)
    began = time.monotonic()
    child.terminate()
    child.join(15)
    print("CHILD_ENDED_S", round(time.monotonic() - began, 2), child.exitcode, flush=True)
    # The worker held the pool's queue lock when it ended, as a worker ended by the signal would: the pool
    # can be used no more (terminate() would wait for that lock), so the script leaves without it.
    for replacement in mp.active_children():
        replacement.kill()
    os._exit(0)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork, and pthread_sigmask")
def test_a_sigterm_the_main_thread_cannot_act_on_still_ends_the_worker_and_its_runs_arrive(service, tmp_path: Path) -> None:
    # Before, such a worker never ended, and a pool's terminate() waited for it for ever (a 90 s hang in
    # CI, about one run in thirty of the long pool test on a loaded machine).
    done = _run_app(tmp_path, MISSED_SIGTERM_APP, _env(service, "missed"))
    ended_s = float(done.stdout.split("WORKER_ENDED_S")[1].split()[0])
    assert ended_s < 10, done.stdout  # the worker's watcher waits a second, then flushes
    child_s, child_status = done.stdout.split("CHILD_ENDED_S")[1].split()
    assert float(child_s) < 10 and child_status == "143", done.stdout  # not asked: ended, flushed or not
    names = [r["name"] for r in service.runs() if r["session_name"] == "missed" and r["name"] != "child"]
    assert sorted(names) == sorted(f"missed/{i}" for i in range(50))  # the pool worker's, every one
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


def _frames_in(*chain: tuple[str, str]) -> object:
    """The innermost frame of calls through functions named as ``chain`` says (outermost first), each
    compiled as if it were in the given file: multiprocessing's own, or the app's."""
    import multiprocessing

    package = os.path.dirname(multiprocessing.__file__)
    namespace: dict[str, object] = {"sys": sys}
    callee = "sys._getframe"
    for depth, (filename, name) in enumerate(reversed(chain)):
        path = os.path.join(package, filename) if filename != "app" else "/srv/app.py"
        exec(compile(f"def {name}():\n    return {callee}()\n", path, "exec"), namespace)
        namespace[f"call{depth}"] = namespace[name]
        callee = f"call{depth}"
    return namespace[callee]()


@pytest.mark.parametrize(
    ("chain", "where"),
    [
        # A pool worker between tasks, waiting on the queue's lock: nothing of the app's runs.
        ((("process.py", "_bootstrap"), ("process.py", "run"), ("pool.py", "worker"), ("queues.py", "get")), "waiting"),
        # A child's target returned (or not begun): the signal found _bootstrap or run itself. Before, this
        # was "running", and the child was ended by the signal with its last runs (one pool worker's share).
        ((("process.py", "_bootstrap"),), "waiting"),
        ((("process.py", "_bootstrap"), ("process.py", "run")), "waiting"),
        # The app's code, in a task or a plain child's target.
        ((("process.py", "_bootstrap"), ("process.py", "run"), ("pool.py", "worker"), ("app", "task")), "running"),
        ((("process.py", "_bootstrap"), ("process.py", "run"), ("app", "target")), "running"),
        # A target of multiprocessing's own (a manager's server) below run.
        ((("process.py", "_bootstrap"), ("process.py", "run"), ("managers.py", "serve_forever")), "running"),
        # The child's exit, where the finalizers (ours among them) run.
        ((("process.py", "_bootstrap"), ("util.py", "_exit_function"), ("util.py", "_run_finalizers")), "leaving"),
    ],
)
def test_where_a_signal_finds_a_multiprocessing_child_is_read_from_its_frames(chain, where) -> None:
    from otel_runs_exporter import _process_end

    assert _process_end._multiprocessing_state(_frames_in(*chain)) == where


WAKEUP_AFTER_FORK_APP = """
import multiprocessing as mp, os, signal, socket, sys

def child(queue):
    from otel_runs_exporter import _process_end
    ours = _process_end._state.wakeup  # armed in this child: the watcher's pipe is the wakeup fd
    app_r, app_w = socket.socketpair()
    app_w.setblocking(False)
    signal.set_wakeup_fd(app_w.fileno())  # then the app takes it (an event loop's signal handlers)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if signal.set_wakeup_fd(-1) == app_w.fileno() else 1)
    _, status = os.waitpid(pid, 0)
    queue.put((ours is not None, os.waitstatus_to_exitcode(status)))

if __name__ == "__main__":
    from otel_runs_exporter import configure
    configure()
    queue = mp.get_context("fork").Queue()
    p = mp.get_context("fork").Process(target=child, args=(queue,))
    p.start()
    print("RESULT", *queue.get(timeout=30), flush=True)
    p.join()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_fork_leaves_the_apps_own_wakeup_fd_as_it_was(service, tmp_path: Path) -> None:
    # Before, a child forked after the app had taken the wakeup fd got ours back in its place.
    done = _run_app(tmp_path, WAKEUP_AFTER_FORK_APP, _env(service, "wakeup"))
    assert "RESULT True 0" in done.stdout, (done.stdout, done.stderr[-2000:])
