"""What ``otel-runs`` prints, where, and the status it exits with: every command's one owner of these rules.

* stdout carries the answer: text for people, or with ``--json`` the service's
  JSON as it came, for scripts (:func:`out`, :func:`say`, :func:`print_json`);
* stderr carries everything else: progress (:class:`Progress`), notes, and a
  failure as one line ``<prog>: <what happened>`` (:func:`fail`), a service
  error's summary and body after it (:func:`report_service_error`);
* the exit status says how a command ended: the ``EXIT_*`` codes below, told to
  users by :data:`EXIT_CODES_HELP`; :func:`exit_for_status` maps an HTTP
  answer, :data:`EXPORT_EXIT` and :data:`AUTH_EXIT` a final state; a reader
  that leaves early gives :data:`EXIT_BROKEN_PIPE` (:func:`broken_pipe`).

Streams are looked up at each call, so a caller (or a test) that replaces
``sys.stdout`` sees everything.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .. import environment_variables as ev

EXIT_OK = 0
"""Done: export COMPLETED, revision DEPLOYED, auth completed, or a read/command that worked."""
EXIT_ERROR = 1
"""An answer no other code covers (a redirect to another host, a status this version does not know); for
``runs``, a database that cannot be read, a trace without runs, or ``runs check`` finding problems."""
EXIT_USAGE = 2
"""Bad arguments (including a --json-body file that cannot be read or is not a JSON object) or a bad
setting (e.g. OTEL_EXPORTER_RUNS_ENDPOINT is not a URL); nothing was sent. For ``serve`` and ``demo``
also a --db that cannot be used or a port that cannot be listened on."""
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

EXIT_INTERRUPTED = 130
"""Any command: Ctrl-C (SIGINT), as a shell reports a program ended by it (128 + 2), in one line."""

EXIT_CODES_HELP = f"""exit codes:
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
 130  interrupted (Ctrl-C)  141  stdout closed early (piped into head)

Settings come from the exporter's environment variables: {ev.OTEL_EXPORTER_RUNS_ENDPOINT},
{ev.OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL}, {ev.OTEL_EXPORTER_RUNS_API_KEY},
{ev.OTEL_EXPORTER_RUNS_WORKSPACE_ID}, {ev.OTEL_EXPORTER_RUNS_BEARER_TOKEN}, {ev.OTEL_EXPORTER_RUNS_REGION},
{ev.OTEL_EXPORTER_RUNS_TIMEOUT} (and the LANGSMITH_* fallbacks)."""
"""The API commands' ``--help`` epilog: the codes above as a user reads them, and where settings come from."""

EXPORT_EXIT = {"COMPLETED": EXIT_OK, "FAILED": EXIT_FAILED, "TIMEDOUT": EXIT_TIMEDOUT, "CANCELLED": EXIT_CANCELLED}
"""An export's final status -> exit code (any other: :data:`EXIT_ERROR`)."""
AUTH_EXIT = {"completed": EXIT_OK, "pending": EXIT_WAIT_TIMEOUT, "timeout": EXIT_TIMEDOUT, "not_found": EXIT_NOT_FOUND}
"""An auth wait's status -> exit code (any other: :data:`EXIT_ERROR`)."""


def exit_for_status(status: int) -> int:
    """The exit code for an HTTP status the service answered with."""
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


# --- argument types: numbers refused while the arguments are parsed -----------
#
# A count, port or delay below its range is a usage error (exit 2) naming the option, what it
# expects and what was given, before anything runs: ``--limit -3`` is not "the last 3".


def _whole_number(text: str, lowest: int, highest: int | None, expected: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < lowest or (highest is not None and value > highest):
        raise argparse.ArgumentTypeError(f"{expected} (got {text!r})")
    return value


def count(text: str) -> int:
    """A count that may be 0 (``--limit``, where 0 means all; a number of seconds to wait)."""
    return _whole_number(text, 0, None, "a whole number, 0 or more")


def positive_count(text: str) -> int:
    """A count of at least 1 (connections, bytes of a size limit)."""
    return _whole_number(text, 1, None, "a whole number greater than 0")


def port(text: str) -> int:
    """A TCP port to listen on; 0 lets the system pick a free one."""
    return _whole_number(text, 0, 65535, "a port number from 0 to 65535 (0 picks a free one)")


def real_number(text: str, ok: Callable[[float], bool], expected: str) -> float:
    """``text`` as a number for which ``ok`` holds (text that is no number never does: it reads as NaN)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def seconds(text: str) -> float:
    """A number of seconds, 0 or more and finite."""
    return real_number(text, lambda v: 0 <= v < float("inf"), "a number of seconds, 0 or more")


# --- stdout: the answer ------------------------------------------------------


def say(text: str, *, flush: bool = False) -> None:
    """A line (or lines) of the answer, for people; ``flush`` for a line someone waits to see (``serve``)."""
    print(text, flush=flush)


def json_text(value: Any) -> str:
    """Indented JSON, as the service sent it (not a Python repr), for a terminal, a bug report or ``jq``."""
    import orjson

    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


def print_json(value: Any) -> None:
    sys.stdout.write(for_stdout(json_text(value)) + "\n")
    sys.stdout.flush()


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def for_stdout(json: str) -> str:
    """JSON text as stdout can carry it: where stdout is not UTF-8 (an ASCII terminal), each other
    character is written as JSON's own \\uXXXX escape, so the output stays JSON a script reads
    (the escapes readable_anywhere falls back to, \\xe9, are not)."""
    if _utf8(sys.stdout):
        return json

    def escape(found: re.Match[str]) -> str:
        code = ord(found.group())
        if code > 0xFFFF:
            code -= 0x10000
            return "\\u%04x\\u%04x" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))
        return "\\u%04x" % code

    return _NON_ASCII.sub(escape, json)


def out(args: argparse.Namespace, raw: Any, text: Callable[[], str]) -> None:
    """The answer as JSON with --json (for scripts), else as text for people."""
    if args.json:
        print_json(raw)
    else:
        say(text())


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell, no trailing spaces; None shows as empty; the ``right`` columns
    (by index: numbers) aligned right."""
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return "\n".join([line(headers)] + [line(row) for row in cells])


# --- stderr: everything else -------------------------------------------------


def note(text: str) -> None:
    """A line for the person waiting, kept off stdout so ``--json`` stays clean."""
    print(text, file=sys.stderr, flush=True)


def fail(prog: str, text: str, code: int) -> int:
    """Report a failure as one line on stderr and return its exit code: ``return fail(prog, "...", EXIT_USAGE)``."""
    print(f"{prog}: {text}", file=sys.stderr)
    return code


_MAX_DETAIL_CHARS = 4000


def report_service_error(prog: str, exc: Any, secrets: Sequence[str | None] = ()) -> None:
    """One line saying what answered what, a summary a person reads first, then the body as JSON.

    The body is printed as the service sent it (pretty JSON, not a Python repr),
    so it can be pasted into a bug report or piped to ``jq``.
    """
    from http import HTTPStatus

    from .. import _errors

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
        text = exc.detail if isinstance(exc.detail, str) else json_text(exc.detail)
        if len(text) > _MAX_DETAIL_CHARS:  # a 5 MB error page is not a message: its start says enough
            text = text[:_MAX_DETAIL_CHARS] + f"\n  ... ({len(text) - _MAX_DETAIL_CHARS} more characters not shown)"
        lines.append(text)
    text = "\n".join(lines)
    for secret in secrets:
        if secret:  # a service or proxy that echoes the request's headers back: the key is not printed
            text = text.replace(secret, "<hidden>")
    print(text, file=sys.stderr)


class Progress:
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


# --- a reader that left early ------------------------------------------------


def _utf8(stream: Any) -> bool:
    return (getattr(stream, "encoding", "") or "").lower().replace("-", "") == "utf8"


def readable_anywhere() -> None:
    """Let stdout and stderr write what their encoding cannot show as escapes (a run named in
    Japanese on an ASCII terminal, PYTHONIOENCODING=ascii) instead of failing with a traceback."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and not _utf8(stream):
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream that cannot change now: left as it is
                pass


def interrupted(command: str) -> int:
    """Ctrl-C: one line and 130, never a traceback."""
    return fail(f"otel-runs {command}", "interrupted", EXIT_INTERRUPTED)


def cannot_write(command: str, exc: OSError) -> int:
    """stdout could not take the output (a full disk, /dev/full): one line, and nothing more tried."""
    _discard_stdout()
    return fail(f"otel-runs {command}", f"cannot write the output: {exc.strerror or exc}", EXIT_ERROR)


def broken_pipe() -> int:
    """``otel-runs runs list | head``: the reader left early, which is no error of ours; exit quietly."""
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
