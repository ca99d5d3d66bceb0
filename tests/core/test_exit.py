"""Whole processes at exit when the service cannot take the runs (``Delivery.begin_exit``).

Nothing listening at the endpoint (a closed port: the connection is refused) is
not worth the export timeout at exit, nor is a name that does not resolve (an
offline laptop, a CI job without egress): without a spool the process gives up
after the exit budget, saying how many runs, why, and how to keep them; with one
it writes them there and exits at once. A service that answers slowly still gets
its runs. The processes run side by side (started together by a module
fixture, each test waiting for its own), so the module costs about the longest
of them: the default 3 s budget of the first.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from otel_runs_exporter._spool import deserialize
from otel_runs_exporter.server import LocalService
from otel_runs_exporter.server._faults import FaultConfig

from core.helpers import closed_port

pytestmark = pytest.mark.heavy(seconds=4)

BIN = Path(sys.executable).parent
KEY = "sk-exit-never-printed"

# A script's spans are made, then it prints when its main part ended: what comes after is the exit.
SPANS = """
import logging, time
logging.basicConfig(level=logging.WARNING)
from opentelemetry import trace
{setup}
tracer = trace.get_tracer("exit")
with tracer.start_as_current_span("root"):
    for i in range({children}):
        with tracer.start_as_current_span(f"child-{{i}}"):
            pass
print("END", time.monotonic(), flush=True)
"""

CONFIGURE = "from otel_runs_exporter import configure\nconfigure()"
UNRESOLVABLE = "api.example.invalid"


@dataclass
class Exited:
    out: str
    err: str
    returncode: int
    exit_s: float  # from the end of the script's main part to the end of the process

    def gave_up(self) -> list[str]:
        return [line for line in self.err.splitlines() if "gave up" in line]


class Running:
    """A process, and a thread that notes when it ended (the tests wait for theirs one after another)."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._output: tuple[str, str] = ("", "")
        self._ended = 0.0
        self._waiter = threading.Thread(target=self._wait, daemon=True)
        self._waiter.start()

    def _wait(self) -> None:
        try:
            self._output = self.proc.communicate(timeout=90)
        finally:
            self._ended = time.monotonic()  # CLOCK_MONOTONIC is system-wide on Linux and macOS
            if self.proc.poll() is None:
                self.proc.kill()

    def wait(self) -> Exited:
        self._waiter.join()
        out, err = self._output
        main_ended = re.search(r"END (\S+)", out)
        assert main_ended, err
        return Exited(out, err, self.proc.returncode, self._ended - float(main_ended.group(1)))


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}
    env.update(OTEL_EXPORTER_RUNS_API_KEY=KEY, PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", **more)
    return env


def _script(setup: str, children: int) -> str:
    return textwrap.dedent(SPANS.format(setup=setup, children=children))


@pytest.fixture(scope="module")
def slow_service() -> Iterator[LocalService]:
    # Every request answered 0.5 s late: reachable, and slower than the exit budget the script is given.
    with LocalService(faults=FaultConfig(rate_slow=1.0, slow_seconds=0.5)) as svc:
        yield svc


@dataclass
class Exits:
    closed_url: str
    spool_dir: Path
    running: dict[str, Running]

    def __getitem__(self, name: str) -> Exited:
        return self.running[name].wait()


@pytest.fixture(scope="module")
def exits(tmp_path_factory: pytest.TempPathFactory, slow_service: LocalService) -> Iterator[Exits]:
    closed = f"http://127.0.0.1:{closed_port()}"
    spool = tmp_path_factory.mktemp("spool")
    instrument = shutil.which("opentelemetry-instrument", path=str(BIN))
    assert instrument, "opentelemetry-instrument is installed with opentelemetry-instrumentation"
    running = {
        # The defaults: a 30 s export timeout, the 3 s exit budget, no spool.
        "configure": Running([sys.executable, "-c", _script(CONFIGURE, 0)], _env(OTEL_EXPORTER_RUNS_ENDPOINT=closed)),
        "instrument": Running(
            [instrument, sys.executable, "-c", _script("", 3)],
            # Our distro picks the runs processor; the third-party instrumentors are not needed here.
            # A 1 s budget, set as a user would: the defaults are the first script's.
            _env(
                OTEL_EXPORTER_RUNS_ENDPOINT=closed,
                OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="*",
                OTEL_EXPORTER_RUNS_EXIT_BUDGET="1000",
            ),
        ),
        # A name that never resolves (RFC 2606), as every name does offline: it was the whole 30 s timeout.
        "resolve": Running(
            [sys.executable, "-c", _script(CONFIGURE, 2)], _env(OTEL_EXPORTER_RUNS_ENDPOINT=f"https://{UNRESOLVABLE}")
        ),
        "spool": Running(
            [sys.executable, "-c", _script(CONFIGURE, 2)],
            _env(OTEL_EXPORTER_RUNS_ENDPOINT=closed, OTEL_EXPORTER_RUNS_SPOOL_DIR=str(spool)),
        ),
        # No exit budget at all: were a slow answer taken for a refusal, the runs would be given up.
        # Nothing is sent before exit (no flush within a minute): the exit is what waits for the answer.
        "slow": Running(
            [sys.executable, "-c", _script(CONFIGURE, 1)],
            _env(
                OTEL_EXPORTER_RUNS_ENDPOINT=slow_service.url,
                OTEL_EXPORTER_RUNS_EXIT_BUDGET="0",
                OTEL_BSP_SCHEDULE_DELAY="60000",
            ),
        ),
    }
    yield Exits(closed, spool, running)
    for r in running.values():
        if r.proc.poll() is None:
            r.proc.kill()


def test_exit_when_nothing_listens_gives_up_after_the_exit_budget_in_one_line(exits):
    done = exits["configure"]
    assert done.returncode == 0, done.err
    # It was the whole 30 s export timeout (29 s after the result was printed).
    assert done.exit_s < 10, f"exit took {done.exit_s:.1f} s"
    (line,) = done.gave_up()
    assert "shutdown: gave up 1 run that could not be delivered in" in line, line
    assert f"nothing is listening at {exits.closed_url}: connection refused" in line
    assert "set OTEL_EXPORTER_RUNS_SPOOL_DIR to keep undelivered runs" in line
    assert KEY not in done.err + done.out


def test_exit_under_opentelemetry_instrument_counts_every_run_given_up(exits):
    done = exits["instrument"]
    assert done.returncode == 0, done.err
    assert done.exit_s < 5, f"exit took {done.exit_s:.1f} s"
    (line,) = done.gave_up()
    assert "gave up 4 runs that could not be delivered" in line and "connection refused" in line, line


def test_exit_when_the_name_does_not_resolve_gives_up_after_the_exit_budget_naming_the_cause(exits):
    done = exits["resolve"]
    assert done.returncode == 0, done.err
    assert done.exit_s < 10, f"exit took {done.exit_s:.1f} s"  # before: 29-30 s, and only "ConnectionError"
    (line,) = done.gave_up()
    assert "shutdown: gave up 3 runs that could not be delivered in" in line, line
    assert f"(could not resolve {UNRESOLVABLE}: no network or DNS?)" in line, line
    assert "set OTEL_EXPORTER_RUNS_SPOOL_DIR to keep undelivered runs" in line
    # While it ran, the retries said why too, not just the exception's name.
    assert f"could not reach https://{UNRESOLVABLE}: could not resolve {UNRESOLVABLE}" in done.err, done.err
    assert KEY not in done.err + done.out


def test_exit_with_a_spool_writes_the_runs_there_at_once(exits):
    done = exits["spool"]
    assert done.returncode == 0, done.err
    assert done.exit_s < 2, f"exit took {done.exit_s:.1f} s"
    assert done.gave_up() == [], done.err
    (line,) = [line for line in done.err.splitlines() if "shutdown" in line]
    assert "shutdown: 3 runs could not be delivered in" in line and "written to the spool at" in line, done.err
    assert f"(nothing is listening at {exits.closed_url}: connection refused)" in line
    files = list(exits.spool_dir.glob("*.spool"))
    runs = [run for path in files for run in deserialize(path.read_bytes())]
    assert sum(run.completes for run in runs) == 3
    assert all(KEY.encode() not in path.read_bytes() for path in files)


def test_a_slow_service_that_answers_still_gets_its_runs_at_exit(exits, slow_service):
    done = exits["slow"]
    assert done.returncode == 0, done.err
    assert done.gave_up() == [], done.err
    assert sorted(r["name"] for r in slow_service.wait_for_runs(2)) == ["child-0", "root"]
    assert done.exit_s >= 0.5  # it did wait for the late answer
