"""The ``otel-runs`` command: ``serve`` the local service and look at its ``runs``.

Each sub-command is a ``register_*`` function that adds its parser and a
``handler(args) -> int``; :func:`main` dispatches. Adding a command (``demo``,
``exports``, ...) is one more register function in :data:`COMMANDS`.

    otel-runs serve --port 1984
    otel-runs runs list
    otel-runs runs tree <trace-id>
    otel-runs runs check
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["main", "default_db_path", "build_parser", "COMMANDS", "ENV_SERVER_DB", "ENV_SERVER_API_KEY"]

logger = logging.getLogger(__name__)

ENV_SERVER_DB = "OTEL_RUNS_SERVER_DB"
"""Path of the local service's SQLite database, for ``serve`` and ``runs``; default under the user data dir."""
ENV_SERVER_API_KEY = "OTEL_RUNS_SERVER_API_KEY"
"""API key ``serve`` requires when ``--api-key`` is not given; an environment variable keeps it out of ``ps``."""

Handler = Callable[[argparse.Namespace], int]


def default_db_path(env: dict[str, str] | None = None) -> str:
    """``$OTEL_RUNS_SERVER_DB``, else ``$XDG_DATA_HOME/otel-runs/runs.db``, else ``~/.local/share/otel-runs/runs.db``."""
    env = dict(os.environ) if env is None else env
    if env.get(ENV_SERVER_DB):
        return env[ENV_SERVER_DB]
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "otel-runs" / "runs.db")


def _add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help=f"SQLite database (default: ${ENV_SERVER_DB} or the user data dir)")


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("a probability between 0 and 1")
    return value


# --- serve ---------------------------------------------------------------------


def register_serve(sub: Any) -> None:
    """``otel-runs serve``: run the local service until Ctrl-C or SIGTERM."""
    p = sub.add_parser("serve", help="run the local tracing service", description="Run the local tracing service.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=1984, help="port (default 1984; 0 picks a free one)")
    p.add_argument("--api-key", default=None, help=f"require this x-api-key (or set ${ENV_SERVER_API_KEY})")
    p.add_argument("--workspace-id", default=None, help="require this x-tenant-id")
    _add_db(p)
    p.add_argument("--lenient", action="store_true", help="record rule violations but store the runs")
    p.add_argument("--rate-limits", action="store_true", help="enforce the service's rate limits (429 + Retry-After)")
    p.add_argument("--no-multipart", action="store_true", help="hide /runs/multipart so clients use basic tracing")
    p.add_argument("--max-body-bytes", type=int, default=None, help="answer larger request bodies with 413")
    faults = p.add_argument_group("fault injection (tracing requests only)")
    faults.add_argument("--fault-rate-500", type=_rate, default=0.0, metavar="F", help="share answered 500")
    faults.add_argument("--fault-rate-429", type=_rate, default=0.0, metavar="F", help="share answered 429")
    faults.add_argument("--fault-rate-drop", type=_rate, default=0.0, metavar="F", help="share stored, then dropped unanswered")
    faults.add_argument("--fault-slow-rate", type=_rate, default=0.0, metavar="F", help="share answered late")
    faults.add_argument("--fault-slow-seconds", type=float, default=1.0, metavar="S", help="delay of a slow answer")
    faults.add_argument("--fault-seed", type=int, default=None, metavar="N", help="seed, for repeatable faults")
    p.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the service, print its address, and block until interrupted."""
    from .server import FaultConfig, LocalService

    faults = FaultConfig(
        rate_500=args.fault_rate_500,
        rate_429=args.fault_rate_429,
        rate_drop=args.fault_rate_drop,
        rate_slow=args.fault_slow_rate,
        slow_seconds=args.fault_slow_seconds,
        seed=args.fault_seed,
    )
    db = args.db or default_db_path()
    service = LocalService(
        host=args.host,
        port=args.port,
        api_key=args.api_key or os.environ.get(ENV_SERVER_API_KEY) or None,
        workspace_id=args.workspace_id,
        db=db,
        lenient=args.lenient,
        rate_limits=args.rate_limits,
        multipart=not args.no_multipart,
        max_body_bytes=args.max_body_bytes,
        faults=faults,
    )
    try:
        service.start()
    except OSError as exc:
        print(f"otel-runs serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    notes = []
    if service.requires_api_key:
        notes.append("api key required")
    if args.lenient:
        notes.append("lenient")
    if args.rate_limits:
        notes.append("rate limits on")
    if faults.active:
        notes.append("faults on")
    print(f"Listening on {service.url}  (db {db}{'; ' + ', '.join(notes) if notes else ''})", flush=True)
    print("Press Ctrl-C to stop.", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        service.stop()
    print("Stopped.", flush=True)
    return 0


# --- runs ----------------------------------------------------------------------


def register_runs(sub: Any) -> None:
    """``otel-runs runs list|tree|check``: read the local service's database."""
    p = sub.add_parser("runs", help="show runs stored by the local service", description="Show stored runs.")
    runs_sub = p.add_subparsers(dest="runs_command", metavar="{list,tree,check}")
    runs_sub.required = True
    p_list = runs_sub.add_parser("list", help="every trace as an indented tree")
    p_list.add_argument("--limit", type=int, default=20, help="show the latest N traces (default 20, 0 for all)")
    _add_db(p_list)
    p_list.set_defaults(handler=cmd_runs_list)
    p_tree = runs_sub.add_parser("tree", help="one trace as an indented tree")
    p_tree.add_argument("trace_id")
    _add_db(p_tree)
    p_tree.set_defaults(handler=cmd_runs_tree)
    p_check = runs_sub.add_parser("check", help="report incomplete traces; exit 1 if any")
    _add_db(p_check)
    p_check.set_defaults(handler=cmd_runs_check)


def _open_store(args: argparse.Namespace) -> Any:
    from .server import RunStore

    path = args.db or default_db_path()
    try:
        return RunStore(path, create=False)
    except FileNotFoundError:
        print(f"otel-runs: no runs database at {path} (start `otel-runs serve` or pass --db)", file=sys.stderr)
        return None


def cmd_runs_list(args: argparse.Namespace) -> int:
    """Print the latest traces."""
    from .server._render import render_traces

    store = _open_store(args)
    if store is None:
        return 1
    try:
        trace_ids = store.trace_ids()
        if args.limit:
            trace_ids = trace_ids[-args.limit :]
        runs = [run for tid in trace_ids for run in store.runs(trace_id=tid)]
    finally:
        store.close()
    print(render_traces(runs) if runs else "no runs stored")
    return 0


def cmd_runs_tree(args: argparse.Namespace) -> int:
    """Print one trace."""
    from .server._render import render_tree
    from .server._validate import canonical_id

    trace_id = canonical_id(args.trace_id)
    if trace_id is None:
        print(f"otel-runs: {args.trace_id!r} is not a trace id (a UUID)", file=sys.stderr)
        return 2
    store = _open_store(args)
    if store is None:
        return 1
    try:
        runs = store.runs(trace_id=trace_id)
    finally:
        store.close()
    if not runs:
        print(f"otel-runs: no runs in trace {trace_id}", file=sys.stderr)
        return 1
    print(f"trace {trace_id}  ({len(runs)} runs)")
    print(render_tree(runs))
    return 0


def cmd_runs_check(args: argparse.Namespace) -> int:
    """Print the consistency report; 1 when it found problems."""
    from .server._render import render_check

    store = _open_store(args)
    if store is None:
        return 1
    try:
        report = store.check()
    finally:
        store.close()
    print(render_check(report))
    return 1 if any(report.values()) else 0


def register_demo(sub: Any) -> None:
    """``otel-runs demo``: trace a small workload into an embedded local service and show it."""
    p = sub.add_parser(
        "demo",
        help="trace a small workload into an embedded local service and print the tree",
        description="Start the local service on a free port, trace a nested workload through the "
        "exporter, and print what arrived. Nothing leaves this machine.",
    )
    p.add_argument("--db", default=":memory:", help="keep the demo's runs in this SQLite file (default: in memory)")
    p.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(db=args.db)


COMMANDS: list[Callable[[Any], None]] = [register_serve, register_runs, register_demo]
"""Sub-command registrars, in help order; append to add a command."""


def build_parser() -> argparse.ArgumentParser:
    """The ``otel-runs`` argument parser with every registered sub-command."""
    parser = argparse.ArgumentParser(prog="otel-runs", description="OpenTelemetry traces as runs: local tools.")
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
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
