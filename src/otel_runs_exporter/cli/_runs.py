"""``otel-runs runs list|tree|check``: the runs a local service stored, from its database or through its API.

Every command reads either the SQLite file (``--db``, the default; the service need
not be running) or a running service (``--service URL``), always through the
service's read API, so both ways ask the same queries of the same code and print
the same lines (:mod:`._runs_source`); which traces and what of them,
:mod:`._runs_traces`; the one-line list, :mod:`._runs_text`.

``list`` prints one line a trace, newest first (``--tree``: each as an indented
tree); ``tree`` one trace, named by its id or a prefix of it that no other trace
shares (``list`` prints the shortest); ``check`` what is incomplete or broken.
``--json`` prints one JSON object a line, for scripts and CI: a trace (its top run's
fields, its counts, tokens and cost, and its runs) per line for ``list``, a run (the
service's JSON for it) per line for ``tree``, the report for ``check``; costs are
rounded to 10 decimal places of a dollar.

``--since``/``--until`` take an ISO 8601 time (``2025-05-01``,
``2025-05-01T12:00:00Z``; without an offset it is UTC, as the service stores
times) or a time ago: a number and ``s``, ``m``, ``h``, ``d`` or ``w``
(``15m``, ``2h``, ``1d``). A trace is in the window when its start is at or
after ``--since`` and before ``--until``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._logging import n_runs
from . import _output as output
from ._runs_source import PROG, Source, add_source, read_through, time_arg, where_read
from ._runs_text import rounded_costs, trace_lines
from ._runs_traces import match_trace, newest_trace_ids, short_ids, trace_runs, trace_tops, tree_order

__all__ = ["register_runs", "cmd_runs_list", "cmd_runs_tree", "cmd_runs_check"]


def register_runs(sub: Any) -> None:
    """``otel-runs runs list|tree|check``: read the local service's runs."""
    p = sub.add_parser("runs", help="show runs stored by the local service", description="Show stored runs.")
    runs_sub = p.add_subparsers(dest="runs_command", metavar="{list,tree,check}")
    runs_sub.required = True
    p_list = runs_sub.add_parser(
        "list", help="the newest traces, one line each",
        description="The newest traces, one line each: trace id prefix, start, name, status, latency, tokens, cost "
        "and what it was asked (--tree: each as an indented tree; --json: one trace per line).",
        epilog="--since/--until take an ISO 8601 time (2025-05-01T12:00:00Z; UTC without an offset) or a time "
        "ago: 30s, 15m, 2h, 1d, 1w. A trace's time is its root run's start.",
    )
    p_list.add_argument(
        "--limit", type=output.count, default=20, metavar="N", help="show the newest N traces (default 20, 0 for all)"
    )
    p_list.add_argument("--project", default=None, help="only this project's traces (its name, or its id)")
    p_list.add_argument("--since", type=time_arg, default=None, metavar="TIME", help="traces started at or after TIME")
    p_list.add_argument("--until", type=time_arg, default=None, metavar="TIME", help="traces started before TIME")
    p_list.add_argument(
        "--search", default=None, metavar="TEXT",
        help="traces with TEXT in any of their runs (names, inputs, outputs, errors, metadata; ASCII case ignored)",
    )
    p_list.add_argument(
        "--filter", default=None, metavar="EXPR",
        help="traces with a run that matches EXPR, in the service's filter language: "
        "'eq(run_type, \"llm\")', 'and(eq(model, \"gpt-4o\"), gte(latency, 2))', 'eq(feedback_key, \"thumbs\")'",
    )
    p_list.add_argument("--tree", action="store_true", help="each trace as an indented tree of its runs")
    add_source(p_list, "one JSON object per line, a trace with its runs, for scripts")
    p_list.set_defaults(handler=cmd_runs_list)
    p_tree = runs_sub.add_parser(
        "tree", help="one trace as an indented tree",
        description="One trace as an indented tree (with --json: one run per line, parents before children).",
    )
    p_tree.add_argument("trace_id", help="the trace's id, or a prefix of it no other trace shares (runs list shows one)")
    p_tree.add_argument(
        "--url", default=None, help="the running service's address (e.g. http://127.0.0.1:1984): print the viewer's link too"
    )
    add_source(p_tree, "one JSON object per line, a run, parents first, for scripts")
    p_tree.set_defaults(handler=cmd_runs_tree)
    p_check = runs_sub.add_parser(
        "check", help="report incomplete traces; exit 1 if any",
        description="Report runs patched but never posted, never completed, parents that never arrived, parent "
        "cycles and rule violations a lenient service stored; exit 1 if there are any.",
    )
    add_source(p_check, "the report as one JSON object, for scripts")
    p_check.set_defaults(handler=cmd_runs_check)


def _project_id(source: Source, key: str) -> str | None:
    """The id of the project named ``key`` (or whose id it is); None, said on stderr, when there is none."""
    from ..server import canonical_id

    as_id = canonical_id(key)
    matches = source.list_projects(project_id=as_id) if as_id else []
    matches = matches or source.list_projects(name=key)
    if matches:
        return str(matches[0]["id"])
    known = sorted(str(p.get("name")) for p in source.list_projects())
    shown = ", ".join(repr(n) for n in known[:10]) + (", ..." if len(known) > 10 else "")
    output.fail(PROG, f"no project named {key!r} (projects: {shown or 'none yet'})", output.EXIT_ERROR)
    return None


def _json_line(value: Any) -> None:
    import orjson

    sys.stdout.write(output.for_stdout(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()) + "\n")


def _tree_filter(args: argparse.Namespace) -> str | None:
    """``--filter`` and ``--search`` as one tree filter, the filter first: a run of the trace matches both."""
    import json

    terms = ([args.filter] if args.filter else []) + ([f"search({json.dumps(args.search)})"] if args.search else [])
    return None if not terms else terms[0] if len(terms) == 1 else f"and({', '.join(terms)})"


def cmd_runs_list(args: argparse.Namespace) -> int:
    """Print the newest traces."""
    from ..server import render_traces

    if args.since is not None and args.until is not None and args.since >= args.until:
        return output.fail(PROG, "--since must be before --until", output.EXIT_USAGE)
    if args.json and args.tree:
        return output.fail(PROG, "give --json or --tree, not both (--json lines carry every run)", output.EXIT_USAGE)

    def show(source: Source) -> int:
        project_id = None
        if args.project is not None:
            project_id = _project_id(source, args.project)
            if project_id is None:
                return output.EXIT_ERROR
        trace_ids = newest_trace_ids(
            source, args.limit, project_id=project_id, since=args.since, until=args.until, tree_filter=_tree_filter(args)
        )
        if not trace_ids:
            filtered = any(v is not None for v in (args.project, args.since, args.until, args.search, args.filter))
            found = f"no traces match in {where_read(args)}" if filtered else f"no runs stored in {where_read(args)}"
            output.note(found) if args.json else output.say(found)  # --json: stdout stays JSON lines, none here
        elif args.json:
            for trace in trace_runs(source, trace_ids):
                _json_line(rounded_costs(trace.summary()))
        elif args.tree:
            output.say(render_traces([run for trace in trace_runs(source, trace_ids) for run in trace.runs]))
        else:
            output.say(trace_lines(trace_tops(source, trace_ids), short_ids(source, trace_ids)))
        return output.EXIT_OK

    return read_through(args, show)


def cmd_runs_tree(args: argparse.Namespace) -> int:
    """Print one trace."""
    from ..server import canonical_prefix, render_tree, viewer_link

    if canonical_prefix(args.trace_id) is None:
        return output.fail(
            PROG, f"{args.trace_id!r} is not a trace id or the start of one (4 to 32 hex digits)", output.EXIT_USAGE
        )

    def show(source: Source) -> int:
        trace_id, found = match_trace(source, args.trace_id)
        if trace_id is None:
            if not found:
                return output.fail(PROG, f"no trace id starts with {args.trace_id} in {where_read(args)}", output.EXIT_ERROR)
            shown = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
            return output.fail(
                PROG, f"{args.trace_id} starts {len(found)}{'+' if len(found) >= 10 else ''} trace ids ({shown}): "
                "give more of it", output.EXIT_USAGE,
            )
        runs = list(source.query_runs({"trace": trace_id, "order": "asc", "limit": 100}))
        if not runs:
            return output.fail(PROG, f"no runs in trace {trace_id} in {where_read(args)}", output.EXIT_ERROR)
        if args.json:
            for run in tree_order(runs):
                _json_line(rounded_costs(run))
        else:
            output.say(f"trace {trace_id}  ({n_runs(len(runs))})")
            output.say(render_tree(runs))
        if args.url:
            # With --json the link goes to stderr, so stdout stays one JSON object a line.
            link = f"viewer: {viewer_link(args.url, trace_id)}"
            output.note(link) if args.json else output.say(link)
        return output.EXIT_OK

    return read_through(args, show)


def cmd_runs_check(args: argparse.Namespace) -> int:
    """Print the consistency report; 1 when it found problems."""
    from ..server import render_check

    def show(source: Source) -> int:
        report = source.check_runs()
        counts = report.get("counts")
        problems = sum(n for n in counts.values() if isinstance(n, int)) if isinstance(counts, dict) else 0
        if args.json:
            _json_line(report)
        elif problems:
            output.say(render_check(report))
        else:
            output.say(f"no problems found in {where_read(args)}")
        return output.EXIT_ERROR if problems else output.EXIT_OK

    return read_through(args, show)
