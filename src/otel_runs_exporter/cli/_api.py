"""What the API commands (``exports``, ``deployments``, ``auth``) share: their parsers, the client, the errors.

An API command is a *leaf*: a parser whose help is also its description and
whose epilog lists the exit codes, with ``--json`` (and ``--timeout``,
``--poll-interval``, ``--quiet`` for one that waits), and a
``run(client, args) -> exit code``. :func:`leaf` wraps ``run`` in
:func:`api_handler`, which builds the client from the exporter's settings and
turns each error into its exit code and one message on stderr (``-v`` adds the
HTTP layer's own lines).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from .. import environment_variables as ev
from . import _output as output

Handler = Callable[[argparse.Namespace], int]
ApiRun = Callable[[Any, argparse.Namespace], int]

_T = TypeVar("_T")


def api_parser(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    """A parser of the API commands: the help as its description, the exit codes as its epilog."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help_text,
        description=help_text[0].upper() + help_text[1:] + ".",
        epilog=output.EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def api_group(sub: Any, name: str, help_text: str, metavar: str) -> Any:
    """An API command's sub-commands (``exports list``, ...); one of them must be given."""
    group = api_parser(sub, name, help_text).add_subparsers(dest=f"{name}_command", metavar=metavar)
    group.required = True
    return group


def leaf(
    sub: Any, name: str, help_text: str, run: ApiRun, wait: tuple[float, float] | None = None
) -> argparse.ArgumentParser:
    """One API command; ``wait`` is (timeout, poll interval) in seconds for a command that polls."""
    p = api_parser(sub, name, help_text)
    p.add_argument("--json", action="store_true", help="print JSON on stdout (for scripts) instead of a table")
    if wait is not None:
        timeout_s, poll_s = wait
        p.add_argument("--timeout", type=_seconds, default=timeout_s, metavar="S",
                       help=f"give up waiting after S seconds (exit 13; default {timeout_s:g})")
        p.add_argument("--poll-interval", type=_positive_seconds, default=poll_s, metavar="S",
                       help=f"seconds between polls (default {poll_s:g})")
        p.add_argument("--quiet", action="store_true", help="no progress display on stderr")
    p.set_defaults(handler=api_handler(run))
    return p


_seconds = output.seconds


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a number of seconds above 0 (0 would poll without pause)")
    return value


JSON_BODY_HELP = "%s as a file holding a JSON object ('-' for stdin); a file that cannot be read or parsed is a usage error (exit 2)"


def json_object(path: str) -> dict[str, Any]:
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


def api_handler(run: ApiRun) -> Handler:
    """Build the client from the environment, run, and turn errors into exit codes and one stderr line."""

    def handler(args: argparse.Namespace) -> int:
        from .. import _errors
        from ..api import DeploymentFailedError, NoAnswerError, ServiceClient, WaitTimeoutError

        prog = "otel-runs " + args.command
        try:
            client = ServiceClient()
        except _errors.ConfigError as exc:
            return output.fail(prog, str(exc), output.EXIT_USAGE)
        try:
            with _library_warnings_shown(args.verbose > 0):
                return run(client, args)
        except DeploymentFailedError as exc:
            if args.json:
                output.print_json(exc.revision.raw)
            return output.fail(prog, str(exc), output.EXIT_FAILED)
        except WaitTimeoutError as exc:
            if args.json and exc.last is not None:
                output.print_json(exc.last.raw)
            return output.fail(prog, str(exc), output.EXIT_WAIT_TIMEOUT)
        except _errors.ServiceError as exc:
            output.report_service_error(prog, exc, (client.settings.api_key, client.settings.bearer_token))
            return output.exit_for_status(exc.status)
        except _errors.ConfigError as exc:  # an argument the client refuses (an empty id, say)
            return output.fail(prog, str(exc), output.EXIT_USAGE)
        except NoAnswerError as exc:
            return output.fail(prog, f"{exc}; is the service running there? ({_address_source(exc.path)})", output.EXIT_SERVER)
        finally:
            client.close()

    return handler


def _address_source(path: str) -> str:
    """Where the address that did not answer came from: the variable that set it, or the default."""
    from .._settings import variable_of

    control = path.startswith("/v2/")
    name = variable_of("control_plane_url" if control else "endpoint")
    if name is not None:
        return f"the address comes from {name}"
    return f"the address is the default; set {ev.OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL if control else ev.OTEL_EXPORTER_RUNS_ENDPOINT} to change it"


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


def wait_showing(args: argparse.Namespace, wait: Callable[..., _T], show: Callable[[_T], str]) -> _T:
    """Run a ``wait_*`` call with --timeout and --poll-interval, each state it reads shown on stderr."""
    progress = output.Progress(args.quiet)
    try:
        return wait(timeout=args.timeout, poll_interval=args.poll_interval, progress=lambda item: progress.show(show(item)))
    finally:
        progress.done()
