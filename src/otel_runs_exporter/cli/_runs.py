"""``otel-runs runs list|tree|check``: the runs a local service stored, from its database or through its API.

``list`` and ``tree`` read either the SQLite file (``--db``, the default; the
service need not be running) or a running service (``--service URL``), always
through ``POST /runs/query`` and ``GET /sessions``, the read API the service's SDK
and the viewer use: the file is served for the command alone by a local service
on a loopback port, so both ways ask the same queries of the same code and print
the same lines.

Traces come newest first, as in the viewer: by the start of their root run, or
of their earliest run when the root never arrived (such a trace is listed too,
marked, since that is what ``check`` is for). ``--json`` prints one JSON object a
line, for scripts and CI: a trace (its top run's fields, its counts and its runs)
per line for ``list``, a run (the service's JSON for it) per line for ``tree``.

``--since``/``--until`` take an ISO 8601 time (``2025-05-01``,
``2025-05-01T12:00:00Z``; without an offset it is UTC, as the service stores
times) or a time ago: a number and ``s``, ``m``, ``h``, ``d`` or ``w``
(``15m``, ``2h``, ``1d``). A trace is in the window when its start is at or
after ``--since`` and before ``--until``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol
from urllib.parse import urlsplit

from .._logging import n_runs
from . import _output as output
from ._local import DB_ERRORS, add_db, default_db_path

_PROG = "otel-runs"
_PAGE = 100  # runs per query page: the service's largest
# What walking the runs needs of each (the service always sends id, name, run_type, start_time and trace_id).
_WALK_FIELDS = ["parent_run_id"]
_MAX_IDS = 1000  # ids in one query's id list: the service's bound
_TRACES_A_QUERY = 100  # traces named in one query's filter (about 5,500 of the 10,000 characters a filter may have)



_AGO = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_TIME_EXPECTED = "an ISO 8601 time (2025-05-01T12:00:00Z; UTC without an offset) or a time ago such as 15m, 2h, 1d"


def _instant(text: str | None) -> datetime | None:
    """An ISO 8601 timestamp as an aware UTC datetime (naive: UTC, as the service stores times); else None."""
    if not isinstance(text, str) or not text.strip():
        return None
    raw = text.strip()
    if raw[-1:] in ("Z", "z"):
        raw = raw[:-1] + "+00:00"
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _time(text: str) -> datetime:
    """``--since``/``--until``: an ISO 8601 time, or that long before now (``15m``, ``2h``, ``1d``)."""
    ago = _AGO.fullmatch(text.strip().lower())
    if ago:
        try:
            return datetime.now(timezone.utc) - timedelta(seconds=float(ago.group(1)) * _UNIT_S[ago.group(2)])
        except OverflowError:  # 99999999d: before year 1
            raise argparse.ArgumentTypeError(f"{text!r} reaches back before year 1; give a shorter time") from None
    value = _instant(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected {_TIME_EXPECTED}, got {text!r}")
    return value


def _service_url(text: str) -> str:
    """``--service``: the running service's base address, as ``OTEL_EXPORTER_RUNS_ENDPOINT`` takes it."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"expected the service's http:// or https:// address, got {text!r}")
    return text.strip().rstrip("/")


def _add_source(parser: argparse.ArgumentParser) -> None:
    add_db(parser)
    parser.add_argument(
        "--service", type=_service_url, default=None, metavar="URL",
        help="read a running service through its API (e.g. http://127.0.0.1:1984) instead of the database file",
    )
    parser.add_argument(
        "--api-key", default=None,
        help="with --service: its API key (default: $OTEL_EXPORTER_RUNS_API_KEY or $LANGSMITH_API_KEY)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line, for scripts")


def register_runs(sub: Any) -> None:
    """``otel-runs runs list|tree|check``: read the local service's runs."""
    p = sub.add_parser("runs", help="show runs stored by the local service", description="Show stored runs.")
    runs_sub = p.add_subparsers(dest="runs_command", metavar="{list,tree,check}")
    runs_sub.required = True
    p_list = runs_sub.add_parser(
        "list", help="the newest traces, each as an indented tree",
        description="The newest traces, each as an indented tree (with --json: one trace per line).",
        epilog="--since/--until take an ISO 8601 time (2025-05-01T12:00:00Z; UTC without an offset) or a time "
        "ago: 30s, 15m, 2h, 1d, 1w. A trace's time is its root run's start.",
    )
    p_list.add_argument(
        "--limit", type=output.count, default=20, metavar="N", help="show the newest N traces (default 20, 0 for all)"
    )
    p_list.add_argument("--project", default=None, help="only this project's traces (its name, or its id)")
    p_list.add_argument("--since", type=_time, default=None, metavar="TIME", help="traces started at or after TIME")
    p_list.add_argument("--until", type=_time, default=None, metavar="TIME", help="traces started before TIME")
    p_list.add_argument(
        "--search", default=None, metavar="TEXT",
        help="traces with TEXT in any of their runs (names, inputs, outputs, errors, metadata; ASCII case ignored)",
    )
    p_list.add_argument(
        "--filter", default=None, metavar="EXPR",
        help="traces with a run that matches EXPR, in the service's filter language: "
        "'eq(run_type, \"llm\")', 'and(eq(model, \"gpt-4o\"), gte(latency, 2))', 'eq(feedback_key, \"thumbs\")'",
    )
    _add_source(p_list)
    p_list.set_defaults(handler=cmd_runs_list)
    p_tree = runs_sub.add_parser(
        "tree", help="one trace as an indented tree",
        description="One trace as an indented tree (with --json: one run per line, parents before children).",
    )
    p_tree.add_argument("trace_id")
    p_tree.add_argument(
        "--url", default=None, help="the running service's address (e.g. http://127.0.0.1:1984): print the viewer's link too"
    )
    _add_source(p_tree)
    p_tree.set_defaults(handler=cmd_runs_tree)
    p_check = runs_sub.add_parser("check", help="report incomplete traces; exit 1 if any")
    add_db(p_check)
    p_check.set_defaults(handler=cmd_runs_check)


# --- where the runs come from -------------------------------------------------------


class _Source(Protocol):
    """The two reads of the service's API a listing needs (``ServiceClient`` has them)."""

    def query_runs(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]: ...

    def list_projects(self, *, name: str | None = None, project_id: str | None = None) -> list[dict[str, Any]]: ...


def _with_source(args: argparse.Namespace, read: Callable[[_Source], int]) -> int:
    """Reach the runs through the service's API, ``read`` them, and close; a failure is one line and its exit code.

    With ``--service``, the running service there, with the exporter's settings
    (key, workspace, headers, TLS). Otherwise the database file, served for this
    command alone by a local service on a loopback port with a key of its own,
    so the file is read by the same queries, answered by the same code, as a
    running service would be (and only through the service's public surface).
    """
    from .. import _errors
    from ..api import ServiceClient

    if args.service is not None:
        if args.db is not None:
            return output.fail(_PROG, "give --db or --service, not both", output.EXIT_USAGE)
        overrides: dict[str, Any] = {"endpoint": args.service}
        if args.api_key:
            overrides["api_key"] = args.api_key
        try:
            client = ServiceClient(**overrides)
        except _errors.ConfigError as exc:
            return output.fail(_PROG, str(exc), output.EXIT_USAGE)
        return _reading(args, client, read, f"is the service running at {args.service}?")
    if args.api_key is not None:
        return output.fail(_PROG, "--api-key is for --service; the database file needs none", output.EXIT_USAGE)
    path = args.db or default_db_path()
    if not _readable_db(path):
        return output.EXIT_ERROR
    import secrets

    from .._settings import resolve
    from ..server import LocalService

    key = secrets.token_urlsafe(24)
    with LocalService(db=path, api_key=key) as svc:
        # The exporter's variables are not read: they name another service, not this file.
        client = ServiceClient(resolve({"endpoint": svc.url, "api_key": key}, env={}))
        return _reading(args, client, read, f"the local service reading {path} did not answer")


def _reading(args: argparse.Namespace, client: Any, read: Callable[[_Source], int], hint: str) -> int:
    from .. import _errors
    from ..api import NoAnswerError
    from ._api import _library_warnings_shown

    try:
        with _library_warnings_shown(args.verbose > 0):
            return read(client)
    except _errors.ServiceError as exc:
        settings = getattr(client, "settings", None)
        output.report_service_error(_PROG, exc, (getattr(settings, "api_key", None), getattr(settings, "bearer_token", None)))
        return output.exit_for_status(exc.status)
    except NoAnswerError as exc:
        return output.fail(_PROG, f"{exc}; {hint}", output.EXIT_SERVER)
    finally:
        client.close()


def _readable_db(path: str) -> bool:
    """Whether ``path`` is a runs database this version reads; else False, the reason said on stderr."""
    store = _open_store(path)
    if store is None:
        return False
    store.close()
    return True


def _open_store(path: str) -> Any:
    from ..server import RunStore

    try:
        return RunStore(path, create=False)
    except FileNotFoundError:
        output.fail(_PROG, f"no runs database at {path} (start `otel-runs serve` or pass --db)", output.EXIT_ERROR)
    except DB_ERRORS as exc:
        output.fail(_PROG, f"cannot read {path} as a runs database: {exc}", output.EXIT_ERROR)
    return None


# --- traces, newest first -------------------------------------------------------------


@dataclass
class _Trace:
    """One trace and all its runs (never empty)."""

    trace_id: str
    runs: list[dict[str, Any]]

    @property
    def top(self) -> dict[str, Any]:
        """Its root; when the root never arrived, its earliest run."""
        roots = [r for r in self.runs if not r.get("parent_run_id")]
        return min(roots or self.runs, key=lambda r: (_instant(r.get("start_time")) or _NEVER, str(r.get("id"))))

    def summary(self) -> dict[str, Any]:
        """The ``--json`` line of ``list``: what a script asserts on first, then every run."""
        top = self.top
        return {
            "trace_id": self.trace_id,
            "session_id": top.get("session_id"),
            "root_run_id": top.get("id") if not top.get("parent_run_id") else None,
            "name": top.get("name"),
            "run_type": top.get("run_type"),
            "status": top.get("status"),
            "start_time": top.get("start_time"),
            "end_time": top.get("end_time"),
            "run_count": len(self.runs),
            "error_count": sum(1 for r in self.runs if r.get("error") is not None),
            "runs": _tree_order(self.runs),
        }


_NEVER = datetime.min.replace(tzinfo=timezone.utc)


def _tree_order(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parents before children, siblings by start: the order of dotted_order, as the tree is printed."""
    return sorted(runs, key=lambda r: (str(r.get("dotted_order") or ""), str(r.get("id"))))


def _utc(value: datetime) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def newest_traces(
    source: _Source,
    limit: int,
    *,
    project_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    tree_filter: str | None = None,
) -> list[_Trace]:
    """The newest ``limit`` traces (0: all) that start in [since, until), newest first, each with all its runs.

    ``tree_filter`` keeps the traces with a run that matches it (``--search``, ``--filter``).

    A trace starts when its root run does, so the roots, newest first, are the
    list (the viewer's own query). A trace whose root never arrived starts with
    its earliest run; no query names such runs, so the runs newer than the last
    root kept are walked (a few fields each) for traces whose root is not met
    there, and each of those is asked whether its root exists at all (in bulk: a
    root's id is its trace's id) and, when not, for its earliest run. What is read
    is the runs newer than the last trace listed, not the whole store.
    """
    window: dict[str, Any] = {}
    if project_id is not None:
        window["session"] = [project_id]
    if since is not None:
        window["start_time"] = _utc(since)
    if until is not None:
        window["filter"] = f'lt(start_time, "{_utc(until)}")'
    if tree_filter is not None:
        window["tree_filter"] = tree_filter
    light = {"order": "desc", "limit": _PAGE, "select": _WALK_FIELDS}
    starts: dict[str, datetime] = {}
    walk = {**window, **light}
    if limit:
        for root in source.query_runs({**window, **light, "is_root": True}):
            if isinstance(root.get("trace_id"), str):
                starts.setdefault(root["trace_id"], _instant(root.get("start_time")) or _NEVER)
            if len(starts) == limit:
                # A trace starting before the last root kept is not listed: the walk stops there.
                walk["start_time"] = _utc(min(starts.values()))
                break
    rootless: dict[str, None] = {}  # traces met without their root so far, in the order met
    for run in source.query_runs(walk):
        trace_id = run.get("trace_id")
        if not isinstance(trace_id, str):
            continue
        if not run.get("parent_run_id"):
            starts.setdefault(trace_id, _instant(run.get("start_time")) or _NEVER)
            rootless.pop(trace_id, None)
        elif trace_id not in starts:
            rootless.setdefault(trace_id)
    unmet = list(rootless)
    for at in range(0, len(unmet), _MAX_IDS):
        for root in source.query_runs({"id": unmet[at : at + _MAX_IDS], "limit": _PAGE, "select": _WALK_FIELDS}):
            rootless.pop(str(root.get("id")), None)  # its root exists, outside the window or before the last kept
    for trace_id in rootless:
        first = {"trace": trace_id, "order": "asc", "limit": 1, "select": _WALK_FIELDS}
        earliest = next(iter(source.query_runs(first)), None)
        start = _instant(earliest.get("start_time")) if earliest else None
        if start is not None and (since is None or start >= since) and (until is None or start < until):
            starts[trace_id] = start
    newest = sorted(starts, key=lambda trace_id: starts[trace_id], reverse=True)  # stable: ties keep the query's order
    chosen = _trace_runs(source, newest[:limit] if limit else newest)
    return [_Trace(trace_id, runs) for trace_id, runs in chosen.items() if runs]


def _trace_runs(source: _Source, trace_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Every run of each trace, in the order given: a hundred traces a query, by a filter naming each."""
    from ..server import canonical_id

    found: dict[str, list[dict[str, Any]]] = {}
    for trace_id in trace_ids:
        canon = canonical_id(trace_id)  # only an id goes into the filter's quotes
        if canon is not None:
            found.setdefault(canon, [])
    wanted = list(found)
    for at in range(0, len(wanted), _TRACES_A_QUERY):
        terms = [f'eq(trace_id, "{trace_id}")' for trace_id in wanted[at : at + _TRACES_A_QUERY]]
        named = terms[0] if len(terms) == 1 else f"or({', '.join(terms)})"
        for run in source.query_runs({"filter": named, "order": "asc", "limit": _PAGE}):
            runs = found.get(str(run.get("trace_id")))
            if runs is not None:
                runs.append(run)
    return found


def _project_id(source: _Source, key: str) -> str | None:
    """The id of the project named ``key`` (or whose id it is); None, said on stderr, when there is none."""
    from ..server import canonical_id

    as_id = canonical_id(key)
    matches = source.list_projects(project_id=as_id) if as_id else []
    matches = matches or source.list_projects(name=key)
    if matches:
        return str(matches[0]["id"])
    known = sorted(str(p.get("name")) for p in source.list_projects())
    shown = ", ".join(repr(n) for n in known[:10]) + (", ..." if len(known) > 10 else "")
    output.fail(_PROG, f"no project named {key!r} (projects: {shown or 'none yet'})", output.EXIT_ERROR)
    return None


def _json_line(value: Any) -> None:
    import orjson

    sys.stdout.write(output.for_stdout(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()) + "\n")


# --- the commands -----------------------------------------------------------------------


def _tree_filter(args: argparse.Namespace) -> str | None:
    """``--search`` and ``--filter`` as one tree filter: a run of the trace matches both."""
    import json

    terms = ([f"search({json.dumps(args.search)})"] if args.search else []) + ([args.filter] if args.filter else [])
    return None if not terms else terms[0] if len(terms) == 1 else f"and({', '.join(terms)})"


def cmd_runs_list(args: argparse.Namespace) -> int:
    """Print the newest traces."""
    from ..server import render_traces

    if args.since is not None and args.until is not None and args.since >= args.until:
        return output.fail(_PROG, "--since must be before --until", output.EXIT_USAGE)

    def show(source: _Source) -> int:
        project_id = None
        if args.project is not None:
            project_id = _project_id(source, args.project)
            if project_id is None:
                return output.EXIT_ERROR
        traces = newest_traces(
            source, args.limit, project_id=project_id, since=args.since, until=args.until, tree_filter=_tree_filter(args)
        )
        if args.json:
            for trace in traces:
                _json_line(trace.summary())
        elif traces:
            output.say(render_traces([run for trace in traces for run in trace.runs]))
        else:
            filtered = any(v is not None for v in (args.project, args.since, args.until, args.search, args.filter))
            output.say("no traces match" if filtered else "no runs stored")
        return output.EXIT_OK

    return _with_source(args, show)


def cmd_runs_tree(args: argparse.Namespace) -> int:
    """Print one trace."""
    from ..server import canonical_id, render_tree, viewer_link

    trace_id = canonical_id(args.trace_id)
    if trace_id is None:
        return output.fail(_PROG, f"{args.trace_id!r} is not a trace id (a UUID)", output.EXIT_USAGE)

    def show(source: _Source) -> int:
        runs = list(source.query_runs({"trace": trace_id, "order": "asc", "limit": _PAGE}))
        if not runs:
            return output.fail(_PROG, f"no runs in trace {trace_id}", output.EXIT_ERROR)
        if args.json:
            for run in _tree_order(runs):
                _json_line(run)
        else:
            output.say(f"trace {trace_id}  ({n_runs(len(runs))})")
            output.say(render_tree(runs))
        if args.url:
            # With --json the link goes to stderr, so stdout stays one JSON object a line.
            link = f"viewer: {viewer_link(args.url, trace_id)}"
            output.note(link) if args.json else output.say(link)
        return output.EXIT_OK

    return _with_source(args, show)


def cmd_runs_check(args: argparse.Namespace) -> int:
    """Print the consistency report; 1 when it found problems."""
    from ..server import render_check

    store = _open_store(args.db or default_db_path())
    if store is None:
        return output.EXIT_ERROR
    try:
        report = store.check()
    finally:
        store.close()
    output.say(render_check(report))
    return output.EXIT_ERROR if any(report.values()) else output.EXIT_OK
