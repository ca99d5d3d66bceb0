"""Where ``otel-runs runs`` reads: the database file or a running service, always through the service's API.

With ``--service URL``, the running service there, with the exporter's settings
(key, workspace, headers, TLS). Otherwise the database file (``--db``, default
``$OTEL_RUNS_SERVER_DB`` or the user data dir), served for the command alone by a
local service on a loopback port with a key of its own, so the file is read by the
same queries, answered by the same code, as a running service would be (and only
through the service's public surface). Either way a failure is one line on stderr
and an exit code: a filter the service cannot read is a usage error naming the
option, not an HTTP status; a read that finds nothing names what it read.

Also the argument types ``list`` and ``tree`` share: ``--since``/``--until`` and ``--service``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol
from urllib.parse import urlsplit

from . import _output as output
from ._local import DB_ERRORS, add_db, default_db_path

__all__ = ["PROG", "Source", "add_source", "instant", "read_through", "time_arg", "where_read"]

PROG = "otel-runs"

_AGO = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_TIME_EXPECTED = "an ISO 8601 time (2025-05-01T12:00:00Z; UTC without an offset) or a time ago such as 15m, 2h, 1d"
# The query keys a --filter or --search is sent in (runs list): the service's 422 about them is the option's fault.
_FILTER_KEYS = ("tree_filter", "filter")
_POSITION = re.compile(r"(tree_filter|filter) \(at position (\d+)\): ")
_AND_OPENING = len("and(")


class Source(Protocol):
    """The reads of the service's API the ``runs`` commands need (``ServiceClient`` has them)."""

    def query_runs(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]: ...

    def list_projects(self, *, name: str | None = None, project_id: str | None = None) -> list[dict[str, Any]]: ...

    def match_trace_ids(self, prefixes: Sequence[str], *, limit: int = 10) -> dict[str, list[str]]: ...

    def check_runs(self) -> dict[str, Any]: ...


def instant(text: str | None) -> datetime | None:
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


def time_arg(text: str) -> datetime:
    """``--since``/``--until``: an ISO 8601 time, or that long before now (``15m``, ``2h``, ``1d``)."""
    ago = _AGO.fullmatch(text.strip().lower())
    if ago:
        try:
            return datetime.now(timezone.utc) - timedelta(seconds=float(ago.group(1)) * _UNIT_S[ago.group(2)])
        except OverflowError:  # 99999999d: before year 1
            raise argparse.ArgumentTypeError(f"{text!r} reaches back before year 1; give a shorter time") from None
    value = instant(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected {_TIME_EXPECTED}, got {text!r}")
    return value


def _service_url(text: str) -> str:
    """``--service``: the running service's base address, as ``OTEL_EXPORTER_RUNS_ENDPOINT`` takes it."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"expected the service's http:// or https:// address, got {text!r}")
    return text.strip().rstrip("/")


def add_source(parser: argparse.ArgumentParser, json_help: str) -> None:
    """``--db``, ``--service``, ``--api-key`` and ``--json``, as every ``runs`` command takes them."""
    add_db(parser)
    parser.add_argument(
        "--service", type=_service_url, default=None, metavar="URL",
        help="read a running service through its API (e.g. http://127.0.0.1:1984) instead of the database file",
    )
    parser.add_argument(
        "--api-key", default=None,
        help="with --service: its API key (default: $OTEL_EXPORTER_RUNS_API_KEY or $LANGSMITH_API_KEY)",
    )
    parser.add_argument("--json", action="store_true", help=json_help)


def where_read(args: argparse.Namespace) -> str:
    """What a command read, for a line that says it found nothing there: the file, or the service's address."""
    return f"the service at {args.service}" if args.service is not None else str(args.db or default_db_path())


def read_through(args: argparse.Namespace, read: Callable[[Source], int]) -> int:
    """Reach the runs through the service's API, ``read`` them, and close; a failure is one line and its exit code."""
    from .. import _errors
    from ..api import ServiceClient

    if args.service is not None:
        if args.db is not None:
            return output.fail(PROG, "give --db or --service, not both", output.EXIT_USAGE)
        overrides: dict[str, Any] = {"endpoint": args.service}
        if args.api_key:
            overrides["api_key"] = args.api_key
        try:
            client = ServiceClient(**overrides)
        except _errors.ConfigError as exc:
            return output.fail(PROG, str(exc), output.EXIT_USAGE)
        return _reading(args, client, read, f"is the service running at {args.service}?")
    if args.api_key is not None:
        return output.fail(PROG, "--api-key is for --service; the database file needs none", output.EXIT_USAGE)
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


def _reading(args: argparse.Namespace, client: Any, read: Callable[[Source], int], hint: str) -> int:
    from .. import _errors
    from ..api import NoAnswerError
    from ._api import _library_warnings_shown

    try:
        with _library_warnings_shown(args.verbose > 0):
            return read(client)
    except _errors.ValidationError as exc:
        refused = _bad_filter(args, exc)
        if refused is not None:
            return output.fail(PROG, refused, output.EXIT_USAGE)
        return _service_error(client, exc)
    except _errors.ServiceError as exc:
        return _service_error(client, exc)
    except NoAnswerError as exc:
        return output.fail(PROG, f"{exc}; {hint}", output.EXIT_SERVER)
    finally:
        client.close()


def _service_error(client: Any, exc: Any) -> int:
    settings = getattr(client, "settings", None)
    output.report_service_error(PROG, exc, (getattr(settings, "api_key", None), getattr(settings, "bearer_token", None)))
    return output.exit_for_status(exc.status)


def _bad_filter(args: argparse.Namespace, exc: Any) -> str | None:
    """A 422 about the filter the command sent, as the option's usage error; None for any other 422.

    ``--filter`` goes first in the expression sent (``and(FILTER, search(...))``, see ``runs list``), so a
    position the service names is moved back to where it is in what the user typed.
    """
    given = [name for name in ("filter", "search") if getattr(args, name, None)]
    if not given:
        return None
    for err in exc.errors:
        loc = err.get("loc") if isinstance(err, dict) else None
        if not (isinstance(loc, list) and len(loc) > 1 and loc[1] in _FILTER_KEYS):
            continue
        msg = str(err.get("msg", ""))
        found = _POSITION.match(msg)
        if found:
            inside = int(found.group(2)) - (_AND_OPENING if len(given) == 2 else 0)
            msg = (f"at position {inside}: " if inside >= 0 else "") + msg[found.end():]
        elif msg.startswith(f"{loc[1]}: "):
            msg = msg[len(loc[1]) + 2 :]
        return f"{' and '.join(f'--{name}' for name in given)} cannot be read: {msg}"
    return None


def _readable_db(path: str) -> bool:
    """Whether ``path`` is a runs database this version reads; else False, the reason said on stderr."""
    from ..server import RunStore

    try:
        RunStore(path, create=False).close()
    except FileNotFoundError:
        output.fail(PROG, f"no runs database at {path} (start `otel-runs serve` or pass --db)", output.EXIT_ERROR)
        return False
    except DB_ERRORS as exc:
        output.fail(PROG, f"cannot read {path} as a runs database: {exc}", output.EXIT_ERROR)
        return False
    return True
