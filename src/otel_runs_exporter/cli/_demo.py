"""``otel-runs demo``: trace a small workload into an embedded local service and show it."""

from __future__ import annotations

import argparse
import errno
from typing import Any

from . import _output as output
from ._local import db_usable, wait_until_stopped


def register_demo(sub: Any) -> None:
    """``otel-runs demo``: trace a small workload into an embedded local service and show it."""
    p = sub.add_parser(
        "demo",
        help="trace a small workload into an embedded local service and print the tree",
        description="Start the local service on a free port, trace a nested workload through the "
        "exporter, and print what arrived. Nothing leaves this machine.",
    )
    p.add_argument(
        "--db",
        default=":memory:",
        metavar="FILE",
        help="keep the runs in this SQLite file, to look at them afterwards with "
        "`otel-runs runs list --db FILE` (default: in memory, gone when the demo ends)",
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="keep the service running after the demo and print the viewer's address, until Ctrl-C",
    )
    p.add_argument("--port", type=output.port, default=0, help="port of the demo's service (default: a free one)")
    p.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """Run :func:`otel_runs_exporter.demo.run_demo`, which prints the tree and says how it went in its exit code."""
    from ..demo import run_demo

    if not db_usable("otel-runs demo", args.db):
        return output.EXIT_USAGE
    try:
        return run_demo(db=args.db, port=args.port, until_stopped=wait_until_stopped if args.serve else None)
    except BrokenPipeError:
        raise  # `otel-runs demo | head`: the reader left, not a port problem (main exits 141)
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise  # not the listen step (a full disk under the output, say): main reports it as such
        return output.fail("otel-runs demo", f"cannot listen on port {args.port}: {exc}", output.EXIT_USAGE)
