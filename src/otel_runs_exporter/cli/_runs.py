"""``otel-runs runs list|tree|check``: read the local service's database (the service need not be running)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from . import _output as output
from ._local import DB_ERRORS, add_db, default_db_path

_T = TypeVar("_T")


def register_runs(sub: Any) -> None:
    """``otel-runs runs list|tree|check``: read the local service's database."""
    p = sub.add_parser("runs", help="show runs stored by the local service", description="Show stored runs.")
    runs_sub = p.add_subparsers(dest="runs_command", metavar="{list,tree,check}")
    runs_sub.required = True
    p_list = runs_sub.add_parser("list", help="every trace as an indented tree")
    p_list.add_argument("--limit", type=int, default=20, help="show the latest N traces (default 20, 0 for all)")
    add_db(p_list)
    p_list.set_defaults(handler=cmd_runs_list)
    p_tree = runs_sub.add_parser("tree", help="one trace as an indented tree")
    p_tree.add_argument("trace_id")
    p_tree.add_argument(
        "--url", default=None, help="the running service's address (e.g. http://127.0.0.1:1984): print the viewer's link too"
    )
    add_db(p_tree)
    p_tree.set_defaults(handler=cmd_runs_tree)
    p_check = runs_sub.add_parser("check", help="report incomplete traces; exit 1 if any")
    add_db(p_check)
    p_check.set_defaults(handler=cmd_runs_check)


def _open_store(args: argparse.Namespace) -> Any:
    from ..server import RunStore

    path = args.db or default_db_path()
    try:
        return RunStore(path, create=False)
    except FileNotFoundError:
        output.fail("otel-runs", f"no runs database at {path} (start `otel-runs serve` or pass --db)", output.EXIT_ERROR)
    except DB_ERRORS as exc:
        output.fail("otel-runs", f"cannot read {path} as a runs database: {exc}", output.EXIT_ERROR)
    return None


def _read_store(args: argparse.Namespace, read: Callable[[Any], _T]) -> _T | None:
    """Open the runs database, read from it and close it; None (the reason printed) when it cannot be opened."""
    store = _open_store(args)
    if store is None:
        return None
    try:
        return read(store)
    finally:
        store.close()


def cmd_runs_list(args: argparse.Namespace) -> int:
    """Print the latest traces."""
    from ..server import render_traces

    def latest(store: Any) -> list[dict[str, Any]]:
        trace_ids = store.trace_ids()
        if args.limit:
            trace_ids = trace_ids[-args.limit :]
        return [run for tid in trace_ids for run in store.runs(trace_id=tid)]

    runs = _read_store(args, latest)
    if runs is None:
        return output.EXIT_ERROR
    output.say(render_traces(runs) if runs else "no runs stored")
    return output.EXIT_OK


def cmd_runs_tree(args: argparse.Namespace) -> int:
    """Print one trace."""
    from ..server import canonical_id, render_tree, viewer_link

    trace_id = canonical_id(args.trace_id)
    if trace_id is None:
        return output.fail("otel-runs", f"{args.trace_id!r} is not a trace id (a UUID)", output.EXIT_USAGE)
    runs = _read_store(args, lambda store: store.runs(trace_id=trace_id))
    if runs is None:
        return output.EXIT_ERROR
    if not runs:
        return output.fail("otel-runs", f"no runs in trace {trace_id}", output.EXIT_ERROR)
    output.say(f"trace {trace_id}  ({len(runs)} runs)")
    output.say(render_tree(runs))
    if args.url:
        output.say(f"viewer: {viewer_link(args.url, trace_id)}")
    return output.EXIT_OK


def cmd_runs_check(args: argparse.Namespace) -> int:
    """Print the consistency report; 1 when it found problems."""
    from ..server import render_check

    report = _read_store(args, lambda store: store.check())
    if report is None:
        return output.EXIT_ERROR
    output.say(render_check(report))
    return output.EXIT_ERROR if any(report.values()) else output.EXIT_OK
