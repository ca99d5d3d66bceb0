"""The ``otel-runs`` command: ``serve`` the local service, look at its ``runs``, drive the API.

Each sub-command is a ``register_*`` function that adds its parser and a
``handler(args) -> int``; :func:`main` dispatches. Adding a command (``demo``,
``exports``, ...) is one more register function in :data:`COMMANDS`.

    otel-runs serve --port 1984              # also serves the trace viewer at its address
    otel-runs runs list [--tree | --json] [--project P] [--since 15m] [--service http://127.0.0.1:1984]
    otel-runs runs tree <trace-id or its start> [--json] [--url http://127.0.0.1:1984]
    otel-runs runs check [--json] [--service http://127.0.0.1:1984]
    otel-runs demo --db demo.db
    otel-runs demo --serve                   # keeps serving and prints the viewer's link
    otel-runs exports wait EXPORT_ID --timeout 7200 --json
    otel-runs deployments wait DEPLOYMENT_ID
    otel-runs auth wait AUTH_ID
    otel-runs doctor                         # where an app's runs would go: settings, endpoint, key, project
    otel-runs --version

The API commands (exports, deployments, auth) read the exporter's settings and
exit with codes a CI job can branch on (see ``EXIT_CODES_HELP``); a failure is
one message on stderr (``-v`` adds the HTTP layer's own lines). Any command
piped into a reader that stops early exits :data:`EXIT_BROKEN_PIPE`, quietly.

One module per command family, each with its ``register_*``: ``_serve``,
``_runs``, ``_demo`` (sharing ``_local``: the database path and running until
stopped), and ``_exports``, ``_deployments``, ``_auth`` (sharing ``_api``: the
parsers, the client and its errors). ``_output`` is the one owner of what is
printed where (text or ``--json`` on stdout, the rest on stderr) and of the
exit codes. What a command needs from the service or the API is imported when
it runs, so ``otel-runs --help`` stays quick.
"""

from __future__ import annotations

import argparse
import errno
import logging
from collections.abc import Callable, Sequence
from typing import Any

from . import _output as output
from ._api import Handler
from ._auth import register_auth
from ._demo import register_demo
from ._doctor import register_doctor
from ._deployments import register_deployments
from ._exports import register_exports
from ._local import ENV_SERVER_API_KEY, ENV_SERVER_DB, default_db_path
from ._output import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_CANCELLED,
    EXIT_CODES_HELP,
    EXIT_CONFLICT,
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_RATE_LIMITED,
    EXIT_SERVER,
    EXIT_TIMEDOUT,
    EXIT_UNAUTHORIZED,
    EXIT_USAGE,
    EXIT_WAIT_TIMEOUT,
)
from ._runs import register_runs
from ._serve import register_serve

__all__ = [
    "main",
    "package_version",
    "default_db_path",
    "build_parser",
    "COMMANDS",
    "ENV_SERVER_DB",
    "ENV_SERVER_API_KEY",
    "EXIT_CODES_HELP",
    # The exit codes; what each means is documented in ``_output``.
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_UNAUTHORIZED",
    "EXIT_NOT_FOUND",
    "EXIT_INVALID",
    "EXIT_RATE_LIMITED",
    "EXIT_SERVER",
    "EXIT_CONFLICT",
    "EXIT_FAILED",
    "EXIT_TIMEDOUT",
    "EXIT_CANCELLED",
    "EXIT_WAIT_TIMEOUT",
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERRUPTED",
]


def package_version() -> str:
    """The installed distribution's version (what pip shows), else the package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("otel-runs-exporter")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from .. import __version__

        return __version__


def _build() -> str:
    from .._build_info import describe

    return describe()


COMMANDS: list[Callable[[Any], None]] = [
    register_serve,
    register_runs,
    register_demo,
    register_exports,
    register_deployments,
    register_auth,
    register_doctor,
]
"""Sub-command registrars, in help order; append to add a command."""


def build_parser() -> argparse.ArgumentParser:
    """The ``otel-runs`` argument parser with every registered sub-command."""
    parser = argparse.ArgumentParser(prog="otel-runs", description="OpenTelemetry traces as runs: local tools.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()} ({_build()})")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for register in COMMANDS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``otel-runs`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(
            level=logging.DEBUG if args.verbose > 1 else logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    handler: Handler = args.handler
    output.readable_anywhere()
    try:
        return handler(args)
    except BrokenPipeError:
        # The reader left early (`otel-runs runs list | head`), which is no error of ours.
        return output.broken_pipe()
    except KeyboardInterrupt:
        return output.interrupted(args.command)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG):
            raise
        return output.cannot_write(args.command, exc)
