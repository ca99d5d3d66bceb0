"""``otel-runs serve``: run the local service until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
from typing import Any, Callable, NamedTuple

from .._settings import resolve_service
from . import _output as output
from ._local import ENV_SERVER_API_KEY, Stopper, add_db, db_usable


def _positive(text: str) -> float:
    return output.real_number(text, lambda v: 0.0 < v < float("inf"), "a number greater than 0")


def _rate(text: str) -> float:
    return output.real_number(text, lambda v: 0.0 <= v <= 1.0, "a probability from 0 to 1")


class _Flag(NamedTuple):
    """A flag whose value goes unchanged to one keyword: of ``LocalService``, or of ``FaultConfig``."""

    flag: str
    keyword: str
    parse: Callable[[str], Any]
    default: Any
    metavar: str
    help: str

    def add_to(self, parser: Any) -> None:
        parser.add_argument(self.flag, type=self.parse, default=self.default, metavar=self.metavar, help=self.help)

    def value(self, args: argparse.Namespace) -> Any:
        return getattr(args, self.flag.removeprefix("--").replace("-", "_"))  # argparse's name for it


def _keywords(flags: tuple[_Flag, ...], args: argparse.Namespace) -> dict[str, Any]:
    return {flag.keyword: flag.value(args) for flag in flags}


_LIMIT_FLAGS = (
    _Flag(
        "--max-connections", "max_connections", output.positive_count, 512, "N",
        "connections served at once, a thread each (default 512); with all taken, a new one replaces the "
        "oldest unfinished request head or idle connection, else gets a 503 with Retry-After",
    ),
    _Flag(
        "--head-timeout", "head_timeout_s", _positive, 5.0, "S",
        "seconds a request head may take in all from its first byte (default 5); then the connection closes",
    ),
    _Flag(
        "--min-body-rate", "min_body_rate", output.count, 1024, "B",
        "bytes/s a request body must average after the grace period (default 1024; 0: no minimum); else 408",
    ),
    _Flag(
        "--body-grace", "body_grace_s", _positive, 5.0, "S",
        "seconds before the minimum body rate applies, and the longest pause within a body (default 5)",
    ),
)

_OTLP_FLAGS = (
    _Flag(
        "--otlp-hold-seconds", "otlp_hold_s", _positive, 30.0, "S",
        "seconds an OTLP span waits for its parent (default 30, like the exporter's hold); then it is stored as "
        "the root of its own tree",
    ),
    _Flag("--otlp-hold-spans", "otlp_hold_spans", output.positive_count, 10_000, "N",
          "OTLP spans waiting for their parents at most (default 10000); past it the oldest is stored as a root"),
    _Flag("--otlp-hold-bytes", "otlp_hold_bytes", output.positive_count, 64 * 1024 * 1024, "B",
          "bytes of OTLP spans waiting for their parents at most (default 64 MiB); past it the oldest is stored as a root"),
)

_FAULT_FLAGS = (
    _Flag("--fault-rate-500", "rate_500", _rate, 0.0, "F", "share answered 500"),
    _Flag("--fault-rate-429", "rate_429", _rate, 0.0, "F", "share answered 429"),
    _Flag("--fault-rate-drop", "rate_drop", _rate, 0.0, "F", "share stored, then dropped unanswered"),
    _Flag("--fault-slow-rate", "rate_slow", _rate, 0.0, "F", "share answered late"),
    _Flag("--fault-slow-seconds", "slow_seconds", output.seconds, 1.0, "S", "delay of a slow answer"),
    _Flag("--fault-seed", "seed", int, None, "N", "seed, for repeatable faults"),
)


def register_serve(sub: Any) -> None:
    """``otel-runs serve``: run the local service until Ctrl-C or SIGTERM."""
    p = sub.add_parser("serve", help="run the local tracing service", description="Run the local tracing service.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=output.port, default=1984, help="port (default 1984; 0 picks a free one)")
    p.add_argument("--api-key", default=None, help=f"require this x-api-key (or set ${ENV_SERVER_API_KEY})")
    p.add_argument("--workspace-id", default=None, help="require this x-tenant-id")
    add_db(p)
    validation = p.add_mutually_exclusive_group()
    validation.add_argument(
        "--strict", action="store_true",
        help="refuse (422) a request that breaks any rule; by default only what the hosted service refuses is, "
        "and the rest is stored and recorded as a violation (otel-runs runs check)",
    )
    validation.add_argument(
        "--lenient", action="store_true", help="refuse nothing: record every rule violation but store the runs"
    )
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
    p.add_argument("--max-body-bytes", type=output.positive_count, default=None, help="answer larger request bodies with 413")
    p.add_argument(
        "--prices", default=None, metavar="FILE",
        help="a price file (JSON, the shape of the shipped prices.json: models with input and output prices in USD "
        "per million tokens) whose models replace or add to the shipped table's; every stored model run is priced "
        "with the result",
    )
    for flag in _LIMIT_FLAGS:
        flag.add_to(p)
    otlp = p.add_argument_group("OTLP (POST /otel/v1/traces)", "a span whose parent has not arrived waits in memory")
    for flag in _OTLP_FLAGS:
        flag.add_to(otlp)
    p.add_argument(
        "--live-window", type=_positive, default=600.0, metavar="S",
        help="the viewer marks a trace live while it has an open run and a run of it arrived within the last S "
        "seconds (default 600); older open traces are shown as open, not live",
    )
    pages = p.add_argument_group(
        "web pages", "the service answers requests whose Host is a loopback name or address, or an address it "
        "listens on, and pages of its own origin (the viewer) only"
    )
    pages.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME",
        help="also answer requests for this host name (any port), e.g. a name that reaches this machine "
        "through a proxy; repeatable; '*' turns the Host check off (DNS rebinding then reaches every run)",
    )
    pages.add_argument(
        "--cors-origin", action="append", default=[], metavar="ORIGIN",
        help="let pages of this origin (scheme://host[:port], e.g. http://localhost:5173) call the API, with "
        "CORS headers; repeatable; without it no answer carries a CORS header",
    )
    faults = p.add_argument_group("fault injection (tracing requests only)")
    for flag in _FAULT_FLAGS:
        flag.add_to(faults)
    p.set_defaults(handler=cmd_serve)


def _say_without_zstd() -> None:
    """Without ``zstandard`` this service offers no zstd in ``/info``, and the langsmith SDK then says it is out
    of date. Leaving the flag out does not help (the SDK reads a missing flag as false): the service's install
    (``[serve]``) brings zstandard, and a service started without it says so once, here."""
    from .._codec import zstd_available

    if not zstd_available():
        output.note(
            "zstandard is not installed, so this service takes no zstd: a langsmith SDK pointed here will say "
            "\"Run compression is not enabled. Please update to the latest version of LangSmith\" and send "
            "uncompressed, which works. pip install 'otel-runs-exporter[serve]' (in a clone: '.[serve]') adds it"
        )


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the service, print its address, and block until interrupted."""
    from .._cost import PriceTable
    from ..server import FaultConfig, LocalService

    faults = FaultConfig(**_keywords(_FAULT_FLAGS, args))
    settings = resolve_service()
    db = args.db or settings.db_path
    if not db_usable("otel-runs serve", db):
        return output.EXIT_USAGE
    rate_limited = args.rate_limits or args.rate_limit_scale is not None or args.rate_limit_window_scale is not None
    try:
        # Always a table, the shipped one at least: the stored runs' costs follow the service's prices.
        prices = PriceTable.load(args.prices)
        service = LocalService(
            host=args.host,
            port=args.port,
            api_key=args.api_key or settings.api_key,
            workspace_id=args.workspace_id,
            db=db,
            lenient=args.lenient,
            strict=args.strict,
            rate_limits=rate_limited,
            rate_limit_scale=args.rate_limit_scale or 1.0,
            rate_limit_window_scale=args.rate_limit_window_scale or 1.0,
            request_log=args.request_log,
            multipart=not args.no_multipart,
            max_body_bytes=args.max_body_bytes,
            **_keywords(_LIMIT_FLAGS, args),
            **_keywords(_OTLP_FLAGS, args),
            faults=faults,
            allow_hosts=args.allow_host,
            cors_origins=args.cors_origin,
            prices=prices,
            live_window_s=args.live_window,
        )
    except ValueError as exc:  # a malformed --allow-host, --cors-origin or --prices, named in the message
        return output.fail("otel-runs serve", str(exc), output.EXIT_USAGE)
    try:
        service.start()
    except OSError as exc:
        # The request log is opened at start too: name what failed, not always the port.
        what = f"cannot open --request-log {args.request_log}" if exc.filename == args.request_log and args.request_log \
            else f"cannot listen on {args.host}:{args.port}"
        return output.fail("otel-runs serve", f"{what}: {exc}", output.EXIT_USAGE)
    stopper = Stopper()  # before the "Listening" line: a SIGTERM right after it stops us cleanly
    notes = []
    if service.requires_api_key:
        notes.append("api key required")
    if args.lenient or args.strict:
        notes.append("lenient" if args.lenient else "strict")
    if rate_limited:
        scale = [f"counts / {args.rate_limit_scale:g}"] if args.rate_limit_scale else []
        scale += [f"windows / {args.rate_limit_window_scale:g}"] if args.rate_limit_window_scale else []
        notes.append("rate limits on" + (f" ({', '.join(scale)})" if scale else ""))
    if faults.active:
        notes.append("faults on")
    if service.pages.any_host:
        notes.append("Host check OFF")
    elif args.allow_host:
        notes.append("also answers Host " + ", ".join(args.allow_host))
    if args.cors_origin:
        notes.append("CORS for " + ", ".join(sorted(service.pages.cors_origins)))
    if args.live_window != 600.0:
        notes.append(f"live window {args.live_window:g} s")
    if args.prices:
        notes.append(f"prices from {args.prices} over the shipped table")
    output.say(f"Listening on {service.url}  (db {db}{'; ' + ', '.join(notes) if notes else ''})", flush=True)
    output.say(f"Viewer: {service.url}/", flush=True)
    output.say("Press Ctrl-C to stop.", flush=True)
    _say_without_zstd()
    try:
        stopper.wait()
    finally:
        stopper.restore()
        service.stop()
    output.say("Stopped.", flush=True)
    return output.EXIT_OK
