"""``otel-runs doctor``: where an app's runs would go, checked before the app runs.

It reads the settings as the app would (the same environment, the same rules)
and checks, one line each:

========  ==============================================================
settings  every variable can be used (a bad essential one would leave the
          app untraced, a bad tuning one on its default)
endpoint  the address answers ``GET /info`` as the service does
api key   accepted, refused, or missing, by one read that needs the key
          and creates nothing (``GET /sessions?name=<project>&limit=1``)
project   which one, where the name came from, whether it exists yet
mode      how runs will be sent: multipart or basic, compressed or not
spool     off, or the directory and what waits in it
========  ==============================================================

Exit 0 when every check passed, 1 when one failed, 2 for bad arguments, as the
other commands. Nothing is sent but the two reads, and the whole run stays
within ``--timeout`` (an address that hangs, answers garbage or redirects
elsewhere is said so in its line). The key is never shown.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from . import _output as output

__all__ = ["register_doctor"]

_DEFAULT_TIMEOUT_S = 5.0


def register_doctor(sub: Any) -> None:
    """``otel-runs doctor [--timeout S]``."""
    help_text = "check where an app's runs would go: settings, endpoint, API key, project, mode, spool"
    p = sub.add_parser(
        "doctor",
        help=help_text,
        description=(
            help_text[0].upper() + help_text[1:] + ". Reads the same environment the app reads "
            "(OTEL_EXPORTER_RUNS_*, LANGSMITH_*); sends two reads and nothing else."
        ),
        epilog="exit codes: 0 every check passed, 1 a check failed, 2 bad arguments",
    )
    p.add_argument("--timeout", type=_timeout, default=_DEFAULT_TIMEOUT_S, metavar="S",
                   help=f"seconds for all the checks together (default {_DEFAULT_TIMEOUT_S:g})")
    p.set_defaults(handler=_doctor)


def _timeout(text: str) -> float:
    return output.real_number(text, lambda v: 0 < v <= 3600, "a number of seconds above 0, at most 3600")


@dataclass
class _Report:
    failed: bool = False
    lines: list[str] = field(default_factory=list)

    def add(self, check: str, ok: bool | None, text: str) -> None:
        """One line; ``ok`` None: said, neither passed nor failed (a warning)."""
        mark = "ok" if ok else "warn" if ok is None else "FAIL"
        self.failed |= ok is False
        output.say(f"{check:<9} {mark:<5} {text}", flush=True)


def _doctor(args: argparse.Namespace) -> int:
    from .. import _settings
    from .._errors import EnvironmentConfigError

    report = _Report()
    deadline = time.monotonic() + args.timeout
    said = _Said()
    settings: _settings.Settings | None = None
    problems: list[tuple[str, str]] = []
    with said.catching(logging.getLogger(_settings.__name__)):
        try:
            settings = _settings.resolve()
        except EnvironmentConfigError as exc:
            problems = exc.problems
        else:
            _settings.check_usable(settings)
    for message in said.errors:
        report.add("settings", False, message)
    for variable, message in problems:
        report.add("settings", False, f"{message}: the app would run untraced")
    if settings is None:
        return output.EXIT_ERROR
    if not said.errors:
        report.add("settings", True, "every variable the exporter reads can be used")
    for message in said.warnings:
        report.add("settings", None, message)
    if settings.disabled:
        report.add("tracing", False, f"off ({_var('disabled')} is true): the app records and sends nothing")
        return output.EXIT_ERROR
    _check_service(settings, deadline, report)
    _check_spool(settings, report)
    return output.EXIT_ERROR if report.failed else output.EXIT_OK


def _var(setting: str) -> str:
    """The variable a setting came from, or its first one."""
    from .. import _settings

    return _settings.variable_of(setting) or _settings._DECLS[setting].env[0]


class _Said:
    """What the settings module logs while they are read: each becomes a line of the report, not a log line."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    @contextmanager
    def catching(self, logger: logging.Logger) -> Iterator[None]:
        said = self

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                (said.errors if record.levelno >= logging.ERROR else said.warnings).append(record.getMessage())

        handler = Collect(logging.WARNING)
        logger.addHandler(handler)
        propagate, logger.propagate = logger.propagate, False
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.propagate = propagate


# --- the service ---------------------------------------------------------------


@dataclass
class _Answer:
    status: int
    body: Any  # parsed JSON, or None when the body is not JSON
    location: str | None
    took_s: float


def _check_service(settings: Any, deadline: float, report: _Report) -> None:
    from .._http_client import SessionNetwork, new_session
    from .._settings import shown_url

    base = shown_url(settings.endpoint)
    network = SessionNetwork(new_session(settings))
    try:
        info = _get(network, settings.endpoint, "/info", None, deadline, report, "endpoint", base)
        if info is not None and (info.status >= 400 or not isinstance(info.body, dict)):
            what = "with no service information" if info.status < 400 else "(the service is failing)" if info.status >= 500 else ""
            report.add("endpoint", False, f"GET /info answered {info.status} {what}: is {base} the API's base address "
                                          f"({_var('endpoint')})?".replace("  ", " "))
            info = None
        if info is None:
            report.add("api key", False, "not checked: the endpoint did not answer as the service")
            return
        report.add("endpoint", True, f"{base} answers as the service (GET /info: {info.status} in {info.took_s * 1000:.0f} ms)")
        _check_key(network, settings, deadline, report, base)
        _say_mode(settings, info.body, info.body.get("instance_flags"), report)
    finally:
        network.close()


def _get(
    network: Any, endpoint: str, path: str, params: dict[str, Any] | None, deadline: float, report: _Report,
    check: str, base: str,
) -> _Answer | None:
    """One GET, no retry, no redirect followed; None (its line said) when it did not give a JSON answer."""
    import orjson
    import requests

    from .._http_client import Request, read_bounded, unreachable_cause

    left = deadline - time.monotonic()
    if left <= 0:
        report.add(check, False, "not checked: the time (--timeout) ran out")
        return None
    url = endpoint.rstrip("/") + path
    began = time.monotonic()
    try:
        resp = network.handle(Request("GET", url, {"Accept": "application/json"}, None, params, (left, left), True))
        body, _ = read_bounded(resp)
    except requests.Timeout:
        report.add(check, False, f"{base} gave no answer to GET {path} within {left:.1f} s")
        return None
    except requests.RequestException as exc:
        cause = unreachable_cause(exc, url) or _inner(exc)
        report.add(check, False, f"{base}: {cause}")
        return None
    took = time.monotonic() - began
    location = resp.headers.get("Location")
    if 300 <= resp.status_code < 400:
        report.add(check, False, f"GET {path} redirects ({resp.status_code}) to {location or 'nowhere'}: the endpoint "
                                 f"is likely not the API's base address ({_var('endpoint')}); runs are not sent on")
        return None
    try:
        parsed = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        parsed = None
        kind = resp.headers.get("Content-Type", "no content type")
        if resp.status_code < 400 or check == "endpoint":
            report.add(check, False, f"GET {path} answered {resp.status_code} with {kind}, not the service's JSON: "
                                     f"is {base} the API's base address ({_var('endpoint')})?")
            return None
    return _Answer(resp.status_code, parsed, location, took)


def _inner(exc: BaseException) -> str:
    """The innermost reason of a failed connection, in a few words (a garbled answer, a reset)."""
    current: BaseException = exc
    for _ in range(8):
        nested = next((a for a in current.args if isinstance(a, BaseException)), None)
        nested = nested or getattr(current, "reason", None) or current.__cause__ or current.__context__
        if not isinstance(nested, BaseException):
            break
        current = nested
    text = str(current).strip() or type(current).__name__
    return f"the connection failed ({type(current).__name__}: {text[:120]})"


def _check_key(network: Any, settings: Any, deadline: float, report: _Report, base: str) -> None:
    project = settings.project
    answer = _get(network, settings.endpoint, "/sessions", {"name": project, "limit": 1}, deadline, report, "api key", base)
    if answer is None:
        _say_project(settings, None, report)
        return
    status, key_var = answer.status, _var("api_key")
    if status in (401, 403):
        if settings.api_key:
            report.add("api key", False, f"refused ({status}): check {key_var}"
                                         f"{' and ' + _var('workspace_id') if status == 403 else ''}")
        else:
            report.add("api key", False, f"none set, and the service requires one ({status}): set {key_var}")
        _say_project(settings, None, report)
        return
    if status >= 400:
        report.add("api key", False, f"not checked: GET /sessions answered {status}")
        _say_project(settings, None, report)
        return
    if settings.api_key:
        report.add("api key", True, f"accepted (GET /sessions: {status}; from {key_var})")
    else:
        report.add("api key", True, f"none set, and this service takes requests without one (GET /sessions: {status})")
    _say_project(settings, answer.body, report)


def _say_project(settings: Any, body: Any, report: _Report) -> None:
    from .._settings import variable_of

    if settings.project_id:
        report.add("project", True, f"id {settings.project_id} (from {_var('project_id')})")
        return
    source = variable_of("project")
    where = f"from {source}" if source else f"the default; set {_var('project')} to name it"
    items = body if isinstance(body, list) else body.get("items") if isinstance(body, dict) else None
    exists = isinstance(items, list) and any(isinstance(p, dict) and p.get("name") == settings.project for p in items)
    if items is None:
        state = "not looked up"
    else:
        state = "exists" if exists else "does not exist yet: the first run creates it"
    report.add("project", True, f"{settings.project!r} ({where}); {state}")


def _say_mode(settings: Any, info: dict[str, Any], flags: Any, report: _Report) -> None:
    from .._codec import zstd_available

    ingest = info.get("batch_ingest_config")
    multipart = not isinstance(ingest, dict) or ingest.get("use_multipart_endpoint", True) is not False
    if settings.mode == "basic":
        how = "basic: POST /runs and PATCH /runs/{id}"
    elif settings.mode == "multipart" or multipart:
        how = f"{settings.mode}: POST /runs/multipart"
    else:
        how = "auto: POST /runs and PATCH /runs/{id} (the service's /info offers no multipart)"
    offered = isinstance(flags, dict) and flags.get("zstd_compression_enabled") is True
    if settings.compression == "auto":
        wire = "zstd" if offered and zstd_available() else "uncompressed"
        why = "" if wire == "zstd" else " (the service offers no zstd)" if not offered else " (zstandard is not installed)"
        how += f", {wire}{why}"
    else:
        how += f", compression {settings.compression}"
    report.add("mode", True, how)


def _check_spool(settings: Any, report: _Report) -> None:
    from .._spool import waiting

    if not settings.spool_dir:
        report.add("spool", True, f"off: runs the service cannot take at exit are given up ({_var('spool_dir')} keeps them)")
        return
    files, runs = waiting(settings.spool_dir)
    report.add("spool", True, f"{settings.spool_dir}: {files} file{'' if files == 1 else 's'} ({runs} runs) waiting to be sent")
