"""The ``otel-runs`` command: ``serve`` the local service, look at its ``runs``, drive the API.

Each sub-command is a ``register_*`` function that adds its parser and a
``handler(args) -> int``; :func:`main` dispatches. Adding a command (``demo``,
``exports``, ...) is one more register function in :data:`COMMANDS`.

    otel-runs serve --port 1984              # also serves the trace viewer at its address
    otel-runs runs list
    otel-runs runs tree <trace-id> [--url http://127.0.0.1:1984]
    otel-runs runs check
    otel-runs demo --db demo.db
    otel-runs demo --serve                   # keeps serving and prints the viewer's link
    otel-runs exports wait EXPORT_ID --timeout 7200 --json
    otel-runs deployments wait DEPLOYMENT_ID
    otel-runs auth wait AUTH_ID
    otel-runs --version

The API commands (exports, deployments, auth) read the exporter's settings and
exit with codes a CI job can branch on (see ``EXIT_CODES_HELP``); a failure is
one message on stderr (``-v`` adds the HTTP layer's own lines). Any command
piped into a reader that stops early exits :data:`EXIT_BROKEN_PIPE`, quietly.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from . import environment_variables as ev
from ._settings import resolve_service

__all__ = ["main", "package_version", "default_db_path", "build_parser", "COMMANDS", "ENV_SERVER_DB", "ENV_SERVER_API_KEY", "EXIT_CODES_HELP"]

logger = logging.getLogger(__name__)

ENV_SERVER_DB = ev.OTEL_RUNS_SERVER_DB
"""Path of the local service's SQLite database, for ``serve`` and ``runs``; default under the user data dir."""
ENV_SERVER_API_KEY = ev.OTEL_RUNS_SERVER_API_KEY
"""API key ``serve`` requires when ``--api-key`` is not given; an environment variable keeps it out of ``ps``."""

Handler = Callable[[argparse.Namespace], int]


def default_db_path(env: Mapping[str, str] | None = None) -> str:
    """``$OTEL_RUNS_SERVER_DB``, else ``$XDG_DATA_HOME/otel-runs/runs.db``, else ``~/.local/share/otel-runs/runs.db``."""
    return resolve_service(env).db_path


def package_version() -> str:
    """The installed distribution's version (what pip shows), else the package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("otel-runs-exporter")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from . import __version__

        return __version__


def _build() -> str:
    from ._build_info import describe

    return describe()


# What opening a runs database raises: a path that cannot be created, a file that is not SQLite,
# or a database written by a newer schema (RunStore says which in a RuntimeError).
_DB_ERRORS = (OSError, sqlite3.DatabaseError, RuntimeError)


def _add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help=f"SQLite database (default: ${ENV_SERVER_DB} or the user data dir)")


def _positive(text: str) -> float:
    value = float(text)
    if not 0.0 < value < float("inf"):
        raise argparse.ArgumentTypeError("a number greater than 0")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("a whole number greater than 0") from None
    if value < 1:
        raise argparse.ArgumentTypeError("a whole number greater than 0")
    return value


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
    p.add_argument(
        "--rate-limit-scale",
        type=_positive,
        default=None,
        metavar="K",
        help="divide every rate limit's count by K, at least 1 (for tests: 200 makes multipart's 6000 / 10 s "
        "30 / 10 s); implies --rate-limits",
    )
    p.add_argument(
        "--rate-limit-window-scale",
        type=_positive,
        default=None,
        metavar="W",
        help="divide every rate limit's window by W (for quick tests: 10 makes 10 s windows 1 s); implies --rate-limits",
    )
    p.add_argument(
        "--request-log", default=None, metavar="FILE", help="append one JSON line per answered request (time, path, status)"
    )
    p.add_argument("--no-multipart", action="store_true", help="hide /runs/multipart so clients use basic tracing")
    p.add_argument("--max-body-bytes", type=int, default=None, help="answer larger request bodies with 413")
    p.add_argument(
        "--max-connections",
        type=_positive_int,
        default=512,
        metavar="N",
        help="connections served at once, a thread each (default 512); past it a 503 with Retry-After",
    )
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
    settings = resolve_service()
    db = args.db or settings.db_path
    if not _db_usable("otel-runs serve", db):
        return 2
    rate_limited = args.rate_limits or args.rate_limit_scale is not None or args.rate_limit_window_scale is not None
    service = LocalService(
        host=args.host,
        port=args.port,
        api_key=args.api_key or settings.api_key,
        workspace_id=args.workspace_id,
        db=db,
        lenient=args.lenient,
        rate_limits=rate_limited,
        rate_limit_scale=args.rate_limit_scale or 1.0,
        rate_limit_window_scale=args.rate_limit_window_scale or 1.0,
        request_log=args.request_log,
        multipart=not args.no_multipart,
        max_body_bytes=args.max_body_bytes,
        max_connections=args.max_connections,
        faults=faults,
    )
    try:
        service.start()
    except OSError as exc:
        print(f"otel-runs serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    notes = []
    if service.requires_api_key:
        notes.append("api key required")
    if args.lenient:
        notes.append("lenient")
    if rate_limited:
        scale = [f"counts / {args.rate_limit_scale:g}"] if args.rate_limit_scale else []
        scale += [f"windows / {args.rate_limit_window_scale:g}"] if args.rate_limit_window_scale else []
        notes.append("rate limits on" + (f" ({', '.join(scale)})" if scale else ""))
    if faults.active:
        notes.append("faults on")
    print(f"Listening on {service.url}  (db {db}{'; ' + ', '.join(notes) if notes else ''})", flush=True)
    print(f"Viewer: {service.url}/", flush=True)
    print("Press Ctrl-C to stop.", flush=True)
    try:
        _wait_until_stopped()
    finally:
        service.stop()
    print("Stopped.", flush=True)
    return 0


def _wait_until_stopped() -> None:
    """Block until Ctrl-C or SIGTERM (how a service manager or ``kill`` stops a server)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


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
    p_tree.add_argument(
        "--url", default=None, help="the running service's address (e.g. http://127.0.0.1:1984): print the viewer's link too"
    )
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
    except _DB_ERRORS as exc:
        print(f"otel-runs: cannot read {path} as a runs database: {exc}", file=sys.stderr)
    return None


def _db_usable(prog: str, path: str) -> bool:
    """Open (creating if need be) and close the database once, so a bad --db is one line, not a traceback."""
    if path == ":memory:":
        return True
    from .server import RunStore

    try:
        RunStore(path).close()
    except _DB_ERRORS as exc:
        print(f"{prog}: cannot use {path} as a runs database: {exc}", file=sys.stderr)
        return False
    return True


_T = TypeVar("_T")


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
    from .server import render_traces

    def latest(store: Any) -> list[dict[str, Any]]:
        trace_ids = store.trace_ids()
        if args.limit:
            trace_ids = trace_ids[-args.limit :]
        return [run for tid in trace_ids for run in store.runs(trace_id=tid)]

    runs = _read_store(args, latest)
    if runs is None:
        return 1
    print(render_traces(runs) if runs else "no runs stored")
    return 0


def cmd_runs_tree(args: argparse.Namespace) -> int:
    """Print one trace."""
    from .server import canonical_id, render_tree, viewer_link

    trace_id = canonical_id(args.trace_id)
    if trace_id is None:
        print(f"otel-runs: {args.trace_id!r} is not a trace id (a UUID)", file=sys.stderr)
        return 2
    runs = _read_store(args, lambda store: store.runs(trace_id=trace_id))
    if runs is None:
        return 1
    if not runs:
        print(f"otel-runs: no runs in trace {trace_id}", file=sys.stderr)
        return 1
    print(f"trace {trace_id}  ({len(runs)} runs)")
    print(render_tree(runs))
    if args.url:
        print(f"viewer: {viewer_link(args.url, trace_id)}")
    return 0



def cmd_runs_check(args: argparse.Namespace) -> int:
    """Print the consistency report; 1 when it found problems."""
    from .server import render_check

    report = _read_store(args, lambda store: store.check())
    if report is None:
        return 1
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
    p.add_argument("--port", type=int, default=0, help="port of the demo's service (default: a free one)")
    p.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    if not _db_usable("otel-runs demo", args.db):
        return 2
    try:
        return run_demo(db=args.db, port=args.port, until_stopped=_wait_until_stopped if args.serve else None)
    except OSError as exc:
        print(f"otel-runs demo: cannot listen on port {args.port}: {exc}", file=sys.stderr)
        return 2


# --- exports, deployments, auth: the API client from a shell or a CI job --------

EXIT_OK = 0
"""Done: export COMPLETED, revision DEPLOYED, auth completed, or a read/command that worked."""
EXIT_ERROR = 1
"""An answer no other code covers (a redirect to another host, a status this version does not know)."""
EXIT_USAGE = 2
"""Bad arguments (including a --json-body file that cannot be read or is not a JSON object) or a bad
setting (e.g. OTEL_EXPORTER_RUNS_ENDPOINT is not a URL); nothing was sent."""
EXIT_UNAUTHORIZED = 3
"""401/403: the API key, workspace or bearer token was refused."""
EXIT_NOT_FOUND = 4
"""404, or an auth wait that answered not_found."""
EXIT_INVALID = 5
"""422 (or another 4xx): the service rejected the request; the detail list is printed."""
EXIT_RATE_LIMITED = 6
"""429: rate limited (Retry-After is printed when given)."""
EXIT_SERVER = 7
"""5xx, or no answer at all (connection refused, timed out)."""
EXIT_CONFLICT = 8
"""409, e.g. cancelling an export that is already final."""
EXIT_FAILED = 10
"""Export FAILED, or the revision reached a failed status."""
EXIT_TIMEDOUT = 11
"""Export TIMEDOUT, or the auth wait answered timeout."""
EXIT_CANCELLED = 12
"""Export CANCELLED."""
EXIT_WAIT_TIMEOUT = 13
"""Our own --timeout ran out while waiting (the export or revision may still finish); auth still pending."""

EXIT_BROKEN_PIPE = 141
"""Any command: stdout was closed before the output was written (piped into ``head``); as a shell reports
a program ended by SIGPIPE (128 + 13), and without a traceback. SIGPIPE itself stays ignored, as Python
sets it, since a reset HTTP connection must not kill the process."""

EXIT_CODES_HELP = """exit codes:
   0  completed / deployed / auth completed (or the command worked)
   1  other error            2  usage: bad arguments, bad --json-body, bad setting
   3  unauthorized (401/403) 4  not found (404, auth not_found)
   5  rejected (422, 4xx)    6  rate limited (429)
   7  server error or no answer (5xx, connection)
   8  conflict (409: e.g. cancelling a final export)
  10  export FAILED / revision failed
  11  export TIMEDOUT / auth timeout
  12  export CANCELLED
  13  --timeout ran out while waiting / auth still pending

Settings come from the exporter's environment variables: OTEL_EXPORTER_RUNS_ENDPOINT,
OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL, OTEL_EXPORTER_RUNS_API_KEY,
OTEL_EXPORTER_RUNS_WORKSPACE_ID, OTEL_EXPORTER_RUNS_BEARER_TOKEN, OTEL_EXPORTER_RUNS_REGION,
OTEL_EXPORTER_RUNS_TIMEOUT (and the LANGSMITH_* fallbacks)."""

_FINAL_EXIT = {"COMPLETED": EXIT_OK, "FAILED": EXIT_FAILED, "TIMEDOUT": EXIT_TIMEDOUT, "CANCELLED": EXIT_CANCELLED}


def _api_parser(sub: Any, name: str, help_text: str) -> Any:
    """A parser of the API commands: the help as its description, the exit codes as its epilog."""
    return sub.add_parser(
        name,
        help=help_text,
        description=help_text[0].upper() + help_text[1:] + ".",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _api_group(sub: Any, name: str, help_text: str, metavar: str) -> Any:
    """An API command's sub-commands (``exports list``, ...); one of them must be given."""
    group = _api_parser(sub, name, help_text).add_subparsers(dest=f"{name}_command", metavar=metavar)
    group.required = True
    return group


_ApiRun = Callable[[Any, argparse.Namespace], int]


def _leaf(
    sub: Any, name: str, help_text: str, run: _ApiRun, wait: tuple[float, float] | None = None
) -> argparse.ArgumentParser:
    """One API command; ``wait`` is (timeout, poll interval) in seconds for a command that polls."""
    p = _api_parser(sub, name, help_text)
    p.add_argument("--json", action="store_true", help="print JSON on stdout (for scripts) instead of a table")
    if wait is not None:
        timeout_s, poll_s = wait
        p.add_argument("--timeout", type=_seconds, default=timeout_s, metavar="S",
                       help=f"give up waiting after S seconds (exit 13; default {timeout_s:g})")
        p.add_argument("--poll-interval", type=_positive_seconds, default=poll_s, metavar="S",
                       help=f"seconds between polls (default {poll_s:g})")
        p.add_argument("--quiet", action="store_true", help="no progress display on stderr")
    p.set_defaults(handler=_api_handler(run))
    return p


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds, 0 or more, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a number of seconds above 0 (0 would poll without pause)")
    return value


def register_exports(sub: Any) -> None:
    """``otel-runs exports list|get|runs|cancel|wait``: bulk exports (spec 4.3)."""
    ex = _api_group(sub, "exports", "read, cancel and wait for bulk exports", "{list,get,runs,cancel,wait}")
    _leaf(ex, "list", "every export of the workspace", _cmd_exports_list)
    _leaf(ex, "get", "one export and its status", _cmd_exports_get).add_argument("export_id")
    _leaf(ex, "runs", "the export's runs (one per day) with their retry errors", _cmd_exports_runs).add_argument("export_id")
    _leaf(ex, "cancel", "cancel an export (PATCH status Cancelled)", _cmd_exports_cancel).add_argument("export_id")
    _leaf(ex, "wait", "wait until the export is final; the exit code says how it ended", _cmd_exports_wait, wait=(3600.0, 10.0)).add_argument("export_id")


def register_deployments(sub: Any) -> None:
    """``otel-runs deployments create|get|wait|update``: the deployment control plane (spec 4.2)."""
    dep = _api_group(sub, "deployments", "create, read, update and wait for deployments", "{create,get,wait,update}")
    create = _leaf(dep, "create", "create a deployment (POST /v2/deployments)", _cmd_deployments_create)
    create.add_argument("--json-body", metavar="FILE", type=_json_object, default={}, help=_JSON_BODY_HELP % "request body")
    _leaf(dep, "get", "one deployment", _cmd_deployments_get).add_argument("deployment_id")
    wait = _leaf(dep, "wait", "wait until a revision (default: the latest) is DEPLOYED", _cmd_deployments_wait, wait=(900.0, 5.0))
    wait.add_argument("deployment_id")
    wait.add_argument("--revision", default=None, metavar="REV", help="revision id (default: latest_revision_id)")
    update = _leaf(dep, "update", "update a deployment (PATCH)", _cmd_deployments_update)
    update.add_argument("deployment_id")
    update.add_argument("--json-body", metavar="FILE", type=_json_object, required=True, help=_JSON_BODY_HELP % "patch")


def register_auth(sub: Any) -> None:
    """``otel-runs auth wait AUTH_ID``: wait for an OAuth authentication (spec 4.1)."""
    auth = _api_group(sub, "auth", "wait for an OAuth authentication to complete", "{wait}")
    wait = _leaf(auth, "wait", "wait for an authentication (the service waits up to --timeout seconds)", _cmd_auth_wait)
    wait.add_argument("auth_id")
    wait.add_argument("--timeout", type=int, default=30, metavar="S", help="seconds the service waits (default 30)")
    wait.add_argument("--show-token", action="store_true", help="print the token (it is a credential: hidden by default)")
    wait.add_argument("--quiet", action="store_true", help="no progress line on stderr")


def _api_handler(run: _ApiRun) -> Handler:
    """Build the client from the environment, run, and turn errors into exit codes and one stderr line."""

    def handler(args: argparse.Namespace) -> int:
        from . import _errors
        from .api import DeploymentFailedError, NoAnswerError, ServiceClient, WaitTimeoutError

        prog = "otel-runs " + args.command
        try:
            client = ServiceClient()
        except _errors.ConfigError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        try:
            with _library_warnings_shown(args.verbose > 0):
                return run(client, args)
        except DeploymentFailedError as exc:
            if args.json:
                _print_json(exc.revision.raw)
            print(f"{prog}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        except WaitTimeoutError as exc:
            if args.json and exc.last is not None:
                _print_json(exc.last.raw)
            print(f"{prog}: {exc}", file=sys.stderr)
            return EXIT_WAIT_TIMEOUT
        except _errors.ServiceError as exc:
            _report_service_error(prog, exc)
            return _exit_for_status(exc.status)
        except NoAnswerError as exc:
            setting = ev.OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL if exc.path.startswith("/v2/") else ev.OTEL_EXPORTER_RUNS_ENDPOINT
            print(f"{prog}: {exc}; is the service running there? (the address comes from {setting})", file=sys.stderr)
            return EXIT_SERVER
        finally:
            client.close()

    return handler


@contextmanager
def _library_warnings_shown(shown: bool) -> Iterator[None]:
    """Without ``-v`` the command's own message is the one report of a failure.

    The HTTP layer logs each failed connection and each retried answer; on a
    terminal those lines would say the same thing a second time, before the
    command's message. ``-v`` shows them (and every retry).
    """
    if shown:
        yield
        return
    package = logging.getLogger("otel_runs_exporter")
    previous = package.level
    package.setLevel(logging.ERROR)
    try:
        yield
    finally:
        package.setLevel(previous)


def _report_service_error(prog: str, exc: Any) -> None:
    """One line saying what answered what, a summary a person reads first, then the body as JSON.

    The body is printed as the service sent it (pretty JSON, not a Python repr),
    so it can be pasted into a bug report or piped to ``jq``.
    """
    from http import HTTPStatus

    from . import _errors

    try:
        phrase = " " + HTTPStatus(exc.status).phrase
    except ValueError:
        phrase = ""
    lines = [f"{prog}: {exc.method} {exc.path} answered {exc.status}{phrase}"]
    if isinstance(exc, _errors.ValidationError):
        for err in exc.errors:
            if isinstance(err, dict):
                lines.append(f"  {'.'.join(str(x) for x in err.get('loc', []))}: {err.get('msg')} [{err.get('type')}]")
    if isinstance(exc, _errors.RateLimitedError) and exc.retry_after is not None:
        lines.append(f"  retry after {exc.retry_after:g}s")
    if 300 <= exc.status < 400:
        lines.append("  (a redirect to another host is not followed, so the API key is not sent there: use the final address)")
    if exc.detail is not None and exc.detail != "":
        lines.append(exc.detail if isinstance(exc.detail, str) else _json_text(exc.detail))
    print("\n".join(lines), file=sys.stderr)


def _exit_for_status(status: int) -> int:
    if status in (401, 403):
        return EXIT_UNAUTHORIZED
    if status == 404:
        return EXIT_NOT_FOUND
    if status == 409:
        return EXIT_CONFLICT
    if status == 429:
        return EXIT_RATE_LIMITED
    if status >= 500:
        return EXIT_SERVER
    if 400 <= status < 500:
        return EXIT_INVALID
    return EXIT_ERROR


def _json_text(value: Any) -> str:
    import orjson

    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


def _print_json(value: Any) -> None:
    sys.stdout.write(_json_text(value) + "\n")
    sys.stdout.flush()


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


_JSON_BODY_HELP = "%s as a file holding a JSON object ('-' for stdin); a file that cannot be read or parsed is a usage error (exit 2)"


def _json_object(path: str) -> dict[str, Any]:
    """``--json-body``: read and parse while the arguments are checked, so a bad file is a usage error and nothing is sent."""
    import orjson

    where = "stdin" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"cannot read {where}: it is not UTF-8 text; expected a JSON object") from None
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"{where} is not valid JSON ({exc}); expected a JSON object") from None
    if not isinstance(body, dict):
        kind = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}.get(type(body), "a number")
        raise argparse.ArgumentTypeError(f"{where} holds {kind}; expected a JSON object {{...}}")
    return body


class _Progress:
    """Waiting shown on stderr, so stdout stays clean for --json.

    On a terminal one line is rewritten in place with the elapsed time; otherwise
    (CI logs) a line is printed each time the state changes.
    """

    def __init__(self, quiet: bool) -> None:
        import time

        self._quiet = quiet
        self._tty = sys.stderr.isatty()
        self._last = ""
        self._clock = time.monotonic
        self._started = time.monotonic()

    def show(self, text: str) -> None:
        if self._quiet:
            return
        elapsed = self._clock() - self._started
        if self._tty:
            sys.stderr.write(f"\r{text}  ({elapsed:.0f}s)\033[K")
        elif text != self._last:
            sys.stderr.write(f"[{elapsed:6.1f}s] {text}\n")
        sys.stderr.flush()
        self._last = text

    def done(self) -> None:
        if self._tty and not self._quiet and self._last:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _out(args: argparse.Namespace, raw: Any, text: Callable[[], str]) -> None:
    """The answer as JSON with --json (for scripts), else as text for people."""
    if args.json:
        _print_json(raw)
    else:
        print(text())


def _wait(args: argparse.Namespace, wait: Callable[..., _T], show: Callable[[_T], str]) -> _T:
    """Run a ``wait_*`` call with --timeout and --poll-interval, each state it reads shown on stderr."""
    progress = _Progress(args.quiet)
    try:
        return wait(timeout=args.timeout, poll_interval=args.poll_interval, progress=lambda item: progress.show(show(item)))
    finally:
        progress.done()


_EXPORT_COLUMNS = ["ID", "STATUS", "CREATED", "RUNS"]


def _export_row(export: Any) -> list[Any]:
    raw = export.raw
    runs = f"{raw['runs_completed']}/{raw['runs_total']}" if "runs_total" in raw and "runs_completed" in raw else ""
    return [export.id, export.status, export.created_at, runs]


def _export_line(export: Any) -> str:
    return f"export {export.id}: {export.status}"


def _export_progress(export: Any) -> str:
    runs = _export_row(export)[3]
    return _export_line(export) + (f"  runs completed {runs}" if runs else "")


def _cmd_exports_list(client: Any, args: argparse.Namespace) -> int:
    exports = client.list_exports()
    _out(args, [e.raw for e in exports], lambda: _table(_EXPORT_COLUMNS, [_export_row(e) for e in exports]) if exports else "no exports")
    return EXIT_OK


def _cmd_exports_get(client: Any, args: argparse.Namespace) -> int:
    export = client.get_export(args.export_id)
    _out(args, export.raw, lambda: _table(_EXPORT_COLUMNS, [_export_row(export)]))
    return EXIT_OK


def _cmd_exports_runs(client: Any, args: argparse.Namespace) -> int:
    runs = client.list_export_runs(args.export_id)
    if args.json:
        _print_json([{**r.raw, "errors": dict(r.errors)} for r in runs])
        return EXIT_OK
    rows = [[r.id, r.raw.get("partition", ""), r.status, r.rows_exported, r.retries, (r.last_error or "")[:60]] for r in runs]
    print(_table(["ID", "PARTITION", "STATUS", "ROWS", "RETRIES", "LAST ERROR"], rows) if runs else "no runs")
    return EXIT_OK


def _cmd_exports_cancel(client: Any, args: argparse.Namespace) -> int:
    export = client.cancel_export(args.export_id)
    _out(args, export.raw, lambda: _export_line(export))
    return EXIT_OK


def _cmd_exports_wait(client: Any, args: argparse.Namespace) -> int:
    export = _wait(args, partial(client.wait_for_export, args.export_id), _export_progress)
    _out(args, export.raw, lambda: _export_line(export))
    return _FINAL_EXIT.get(str(export.status), EXIT_ERROR)


def _deployment_out(deployment: Any, args: argparse.Namespace) -> None:
    row = [deployment.id, deployment.name, deployment.latest_revision_id]
    _out(args, deployment.raw, lambda: _table(["ID", "NAME", "LATEST REVISION"], [row]))


def _cmd_deployments_create(client: Any, args: argparse.Namespace) -> int:
    _deployment_out(client.create_deployment(args.json_body), args)
    return EXIT_OK


def _cmd_deployments_get(client: Any, args: argparse.Namespace) -> int:
    _deployment_out(client.get_deployment(args.deployment_id), args)
    return EXIT_OK


def _cmd_deployments_update(client: Any, args: argparse.Namespace) -> int:
    _deployment_out(client.update_deployment(args.deployment_id, args.json_body), args)
    return EXIT_OK


def _revision_line(revision: Any) -> str:
    return f"revision {revision.id}: {revision.status}"


def _cmd_deployments_wait(client: Any, args: argparse.Namespace) -> int:
    revision = _wait(args, partial(client.wait_until_deployed, args.deployment_id, args.revision), _revision_line)
    _out(args, revision.raw, lambda: _revision_line(revision))
    return EXIT_OK


def _cmd_auth_wait(client: Any, args: argparse.Namespace) -> int:
    if not args.quiet:
        print(f"waiting up to {args.timeout}s for authentication {args.auth_id} ...", file=sys.stderr, flush=True)
    result = client.wait_for_auth(args.auth_id, timeout=args.timeout)
    status = str(result.status)
    if args.json:
        out: dict[str, Any] = {**result.raw, "status": status, "token_present": result.token is not None}
        if args.show_token:
            out["token"] = result.token
        _print_json(out)
    else:
        print(f"status: {status}")
        if result.token is not None:
            print(f"token:  {result.token if args.show_token else '<hidden; --show-token prints it>'}")
    return {"completed": EXIT_OK, "pending": EXIT_WAIT_TIMEOUT, "timeout": EXIT_TIMEDOUT, "not_found": EXIT_NOT_FOUND}.get(
        status, EXIT_ERROR
    )


COMMANDS: list[Callable[[Any], None]] = [
    register_serve,
    register_runs,
    register_demo,
    register_exports,
    register_deployments,
    register_auth,
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
    try:
        return handler(args)
    except BrokenPipeError:
        # The reader left early (`otel-runs runs list | head`), which is no error of ours.
        _discard_stdout()
        return EXIT_BROKEN_PIPE


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not hit the closed pipe and print a traceback."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a caller (tests, an embedding app): nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
