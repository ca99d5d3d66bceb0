"""Shared fixtures: a clean environment for every test and one real local service."""

from __future__ import annotations

import os
import signal
import sys
from typing import Iterator

import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

from otel_runs_exporter._logging import reset_all as reset_rate_limited_logs
from otel_runs_exporter.server import LocalService

# A job started in the background by a non-interactive shell (a CI step run with `&`, under nohup)
# begins with SIGINT ignored, and an ignored signal stays ignored across exec: the tests' child
# processes would never see the Ctrl-C they are sent, and Python installs no KeyboardInterrupt
# where SIGINT is ignored at its start. Python's own handler here gives every child the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_PREFIXES = ("OTEL_", "LANGSMITH_", "LANGCHAIN_")

# A failing draw prints the blob that replays it (@reproduce_failure), and the examples
# hypothesis keeps to retry first live in the user's cache, not in the checkout.
settings.register_profile(
    "suite",
    print_blob=True,
    database=DirectoryBasedExampleDatabase(
        os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "otel-runs-exporter-hypothesis")
    ),
)
settings.load_profile("suite")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Every run draws from a seed it prints, so a failing draw is rerun as it was.

    Chosen here, before hypothesis's own plugin reads the option, and handed to the
    xdist workers with the other options; ``--hypothesis-seed=N`` still chooses it.
    """
    if getattr(config.option, "hypothesis_seed", "absent") is None:
        config.option.hypothesis_seed = int.from_bytes(os.urandom(4), "big")
    if not hasattr(config, "workerinput"):
        _compile_the_package()


def _compile_the_package() -> None:
    """Byte-compile the package's sources once, before any test starts a process.

    Hundreds of tests start a Python process that imports the package (apps of the producer matrix,
    the CLI, exit and fork tests). With ``PYTHONDONTWRITEBYTECODE`` set, as on these machines, none
    of them writes the bytecode it compiles, so each compiled the whole package again: ~0.2 s of CPU
    a process, on a suite bound by its two cores. Python uses a cached file only while its source is
    unchanged, so an edit made later is never run stale.
    """
    import compileall

    import otel_runs_exporter

    compileall.compile_dir(os.path.dirname(otel_runs_exporter.__file__), quiet=1, workers=1)


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = getattr(config.option, "hypothesis_seed", None)
    return f"hypothesis seed {seed}: rerun a failing draw with --hypothesis-seed={seed}" if seed is not None else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The heaviest modules first, so the workers finish together.

    The suite runs with ``--dist loadfile`` (a module's tests on one worker, so a
    module-scoped fixture starts once): a worker takes the next module when it
    is free. A 35 s module taken last would run on alone; taken first, the other
    workers spend that time on the many short ones. A module says what it costs
    with ``pytestmark = pytest.mark.heavy(seconds=N)``; unmarked ones keep their
    order after the marked ones.
    """
    cost: dict[str, float] = {}
    for item in items:
        mark = item.get_closest_marker("heavy")
        if mark is not None:
            cost[item.nodeid.split("::")[0]] = float(mark.kwargs["seconds"])
    items.sort(key=lambda item: -cost.get(item.nodeid.split("::")[0], 0.0))  # stable: order within a module kept


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Settings come from the environment; no test may see another's (or the machine's)."""
    for name in list(os.environ):
        if name.startswith(_PREFIXES):
            monkeypatch.delenv(name, raising=False)
    _clear_langsmith_env_cache()
    yield
    _clear_langsmith_env_cache()


def _clear_langsmith_env_cache() -> None:
    # The langsmith SDK caches its LANGSMITH_* reads for the process; without this a test
    # that built a Client would leave its settings to every later one.
    utils = sys.modules.get("langsmith.utils")
    get_env_var = getattr(utils, "get_env_var", None)
    if get_env_var is not None and hasattr(get_env_var, "cache_clear"):
        get_env_var.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_rate_limited_logs() -> None:
    """A line another test already logged must not be held back in this one."""
    reset_rate_limited_logs()


@pytest.fixture(scope="session")
def _session_service():
    # Strict: the project's own output is held to every rule, not only to what the hosted service enforces.
    with LocalService(strict=True) as svc:
        yield svc


@pytest.fixture
def service(_session_service: LocalService) -> LocalService:
    """The local service, empty and without faults, for one test."""
    _session_service.faults.clear()
    _session_service.reset()
    yield _session_service
    _session_service.faults.clear()
