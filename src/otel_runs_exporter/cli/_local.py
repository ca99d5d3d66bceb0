"""What ``serve``, ``runs`` and ``demo`` share: the runs database's path and checks, and running until stopped."""

from __future__ import annotations

import argparse
import signal
import sqlite3
import threading
from collections.abc import Mapping
from types import FrameType

from .. import environment_variables as ev
from .._settings import resolve_service
from . import _output as output

ENV_SERVER_DB = ev.OTEL_RUNS_SERVER_DB
"""Path of the local service's SQLite database, for ``serve`` and ``runs``; default under the user data dir."""
ENV_SERVER_API_KEY = ev.OTEL_RUNS_SERVER_API_KEY
"""API key ``serve`` requires when ``--api-key`` is not given; an environment variable keeps it out of ``ps``."""

# What opening a runs database raises: a path that cannot be created, a file that is not SQLite,
# or a database written by a newer schema (RunStore says which in a RuntimeError).
DB_ERRORS = (OSError, sqlite3.DatabaseError, RuntimeError)


def default_db_path(env: Mapping[str, str] | None = None) -> str:
    """``$OTEL_RUNS_SERVER_DB``, else ``$XDG_DATA_HOME/otel-runs/runs.db``, else ``~/.local/share/otel-runs/runs.db``."""
    return resolve_service(env).db_path


def add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help=f"SQLite database (default: ${ENV_SERVER_DB} or the user data dir)")


def db_usable(prog: str, path: str) -> bool:
    """Open (creating if need be) and close the database once, so a bad --db is one line, not a traceback."""
    if path == ":memory:":
        return True
    from ..server import RunStore

    try:
        RunStore(path).close()
    except DB_ERRORS as exc:
        output.fail(prog, f"cannot use {path} as a runs database: {exc}", output.EXIT_USAGE)
        return False
    return True


class Stopper:
    """Ctrl-C or SIGTERM (how a service manager or ``kill`` stops a server) ends :meth:`wait`.

    Made before the process says it is listening: a SIGTERM sent the moment that
    line appears must find this handler, not the default one that kills the
    process without stopping the service cleanly.
    """

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._previous = signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stop.set()

    def wait(self) -> None:
        """Block until stopped; the previous SIGTERM handler is back afterwards."""
        try:
            while not self._stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            self.restore()

    def restore(self) -> None:
        signal.signal(signal.SIGTERM, self._previous)


def wait_until_stopped() -> None:
    """Block until Ctrl-C or SIGTERM."""
    Stopper().wait()
