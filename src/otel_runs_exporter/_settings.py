"""Settings: the one place environment variables are read.

Each setting is declared once, with its environment variables, default, parser
and meaning, in one of three tables: the exporter's (``_DECLS``, read by
:func:`resolve`), the local service command's (``_SERVICE_DECLS``,
:func:`resolve_service`) and the instrumentation's (``_INSTRUMENTATION_DECLS``,
:func:`resolve_instrumentation`: our instrumentors and ``autoconfig``). The
variables' names are constants in ``environment_variables``, each with its doc.
:func:`resolve` applies the precedence: constructor argument, then
``OTEL_EXPORTER_RUNS_*`` (or the OTel SDK's own variable where one exists), then
the service's ``LANGSMITH_*`` fallback, then the default::

    >>> s = resolve({"project": "demo"}, env={"OTEL_BSP_SCHEDULE_DELAY": "100"})
    >>> (s.project, s.schedule_delay_s)
    ('demo', 0.1)

Each setting is one of two kinds, which decide what a malformed value from the
environment does; either way one ERROR line names the variable, the value (never a
secret's) and what is expected. *Tuning* settings have a safe default (timeouts,
batch and queue bounds, schedule delays, value sizes, compression, ...): tracing
goes on with the default, as OpenTelemetry's SDK does with its own variables.
*Essential* settings have none: where the runs go, who sends them, how the
service is trusted, and the switches that keep content (or everything) from
being sent. A default there could send data elsewhere, and an operator's typo
must not stop the app either: :func:`resolve` raises
:class:`~otel_runs_exporter.EnvironmentConfigError` listing every such variable,
and :func:`resolve_for_app` (what the processor, the exporter and ``configure()``
use) logs each and returns settings with tracing off, so the app runs untraced.
A bad *argument* is a ``ConfigError`` whatever its kind, with "did you mean" for a
misspelt name: a typo in code should fail where it is written::

    >>> resolve(env={"OTEL_EXPORTER_RUNS_TIMEOUT": "ten"}).timeout_s   # logs one error line
    10.0
    >>> resolve_for_app(env={"OTEL_EXPORTER_RUNS_REGION": "asia"}).disabled   # logs one error line
    True

A secret's value is never shown, in a message or a repr.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from difflib import get_close_matches
from pathlib import Path
from typing import Any, Callable, Final, Literal, Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

from . import environment_variables as ev
from ._clock import LONGEST_WAIT_S
from ._cost import PriceFileError, PriceTable
from ._errors import ConfigError, EnvironmentConfigError
from ._logging import RateLimitedLog
# The run-id schemes are named by their table (a leaf module: no import comes back here).
from ._ids import DEFAULT_SCHEME, SCHEMES

__all__ = [
    "Settings",
    "resolve",
    "resolve_for_app",
    "check_usable",
    "endpoint_variable",
    "ServiceSettings",
    "resolve_service",
    "InstrumentationSettings",
    "resolve_instrumentation",
    "US_ENDPOINT",
    "EU_ENDPOINT",
    "US_CONTROL_PLANE",
    "EU_CONTROL_PLANE",
    "TUNING",
    "ESSENTIAL",
    "spelled_default",
]

logger = logging.getLogger(__name__)
# One line per variable: a process that builds many exporters (or API clients) is told once.
_bad_env_log = RateLimitedLog(logger, interval_s=3600.0)

US_ENDPOINT = "https://api.smith.langchain.com"
EU_ENDPOINT = "https://eu.api.smith.langchain.com"
# The spec names {control_plane_url} without a value; these are the hosted service's.
US_CONTROL_PLANE = "https://api.host.langchain.com"
EU_CONTROL_PLANE = "https://eu.api.host.langchain.com"
MiB = 1024 * 1024


# --- parsers: each returns the value or raises ValueError with what it expects ---


def _str(raw: str) -> str:
    return raw.strip()


# What an HTTP header may carry (RFC 9110): a name is a token; a value is visible characters, spaces
# and tabs, Latin-1 at most. Anything else failed every request as a connection problem, retried to the
# export timeout, with the app's shutdown waiting on it (a key read from a file keeps its newline: stripped).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_HEADER_EXPECTED = "text an HTTP header can carry (no line breaks or control characters; Latin-1)"


def _header_text(raw: str) -> str:
    value = raw.strip()
    if not _HEADER_VALUE.fullmatch(value):
        raise ValueError(_HEADER_EXPECTED)
    return value


def _number(raw: str, kind: Callable[[str], Any], ok: Callable[[Any], bool], expected: str) -> Any:
    # Each parser owns its message: what it expects, said once.
    try:
        value = kind(str(raw).strip())
    except (ValueError, OverflowError):
        raise ValueError(expected) from None
    if not ok(value) or value != value:  # value != value: NaN
        raise ValueError(expected)
    return value


@dataclass(frozen=True)
class _Number:
    """A numeric setting's parser: its type, its range and the words for them, owned once.

    Called with the variable's text. :meth:`holds` checks a value given in code by
    the same range, in the setting's own unit (``typed_expected`` says it when the
    variable's differs: OTel's BSP variables spell seconds in milliseconds).
    """

    kind: type
    ok: Callable[[Any], bool]
    expected: str
    per_unit: float = 1.0  # the variable's units in one of the setting's
    typed_expected: str | None = None

    def __call__(self, raw: str) -> Any:
        value = _number(raw, self.kind, self.ok, self.expected)
        return value / self.per_unit if self.per_unit != 1.0 else value

    def holds(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int if self.kind is int else (int, float)):
            return False
        return value == value and bool(self.ok(value))  # value == value: not NaN


_positive_int = _Number(int, lambda v: v > 0, "a whole number greater than 0")
_non_negative_int = _Number(int, lambda v: v >= 0, "a whole number of 0 or more")
# Every wait has an upper end (_clock.LONGEST_WAIT_S, ~116 days): past ~292 years a wait raised
# OverflowError, which stopped the worker or reached the app.
_millis_to_seconds = _Number(
    float, lambda v: 0 <= v <= LONGEST_WAIT_S * 1000, "milliseconds, 0 or more, at most 10000000000", per_unit=1000.0,
    typed_expected="seconds, 0 or more, at most 10000000",
)
_seconds = _Number(float, lambda v: 0 < v <= LONGEST_WAIT_S, "seconds, greater than 0, at most 10000000")
_seconds_or_off = _Number(float, lambda v: 0 <= v <= LONGEST_WAIT_S, "seconds, 0 or more (0: off), at most 10000000")
_ratio = _Number(float, lambda v: 0 <= v <= 1, "a number from 0 to 1")


def _scopes(raw: str) -> tuple[str, ...]:
    # Instrumentation scope names, comma-separated; any text is a name, so none is malformed.
    return tuple(part.strip() for part in str(raw).split(",") if part.strip())


def _backoff(raw: str) -> tuple[float, float]:
    expected = "two numbers of seconds, first,cap, with 0 < first <= cap, at most 10000000"
    first, sep, cap = str(raw).partition(",")
    if not sep:
        raise ValueError(expected)
    values = (_number(first, float, lambda v: 0 < v <= LONGEST_WAIT_S, expected),
              _number(cap, float, lambda v: 0 < v <= LONGEST_WAIT_S, expected))
    if values[0] > values[1]:
        raise ValueError(expected)
    return values


def _readable_file(raw: str) -> str:
    path = str(raw).strip()
    if not os.path.isfile(path):
        raise ValueError(f"a readable PEM file, but {path!r} does not exist or is not a file")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise ValueError(f"a readable PEM file, but {path!r} cannot be read ({exc.strerror})") from None
    return path


def _price_file(raw: str) -> PriceTable:
    """The shipped price table with a user's file over it (read now, so a bad file is said at once)."""
    try:
        return PriceTable.load(str(raw).strip())
    except PriceFileError as exc:
        raise ValueError(f"a readable price file: {exc}") from None


def _private_dir(raw: str) -> str:
    """A directory only this user can change, created (0700) when missing.

    The spool replays whatever files it finds there, so a directory that another
    user owns, or that group or others may write to, would let them feed it files
    (the rule ssh applies to ``~/.ssh``). Its target is checked when it is a symlink.
    """
    path = str(raw).strip()
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"a directory this process can create, but {path!r} cannot be ({exc.strerror})") from None
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ValueError(f"a directory, but {path!r} cannot be examined ({exc.strerror})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise ValueError(f"a directory, but {path!r} is not one")
    uid = os.geteuid()
    if st.st_uid != uid:
        raise ValueError(
            f"a directory owned by this user (uid {uid}), but {path!r} is owned by uid {st.st_uid}, "
            "who could put files in it for this process to read"
        )
    if st.st_mode & 0o022:
        raise ValueError(
            f"a directory only its owner can write to, but {path!r} has mode {stat.S_IMODE(st.st_mode):04o} "
            f"(writable by {'group and others' if st.st_mode & 0o022 == 0o022 else 'group' if st.st_mode & 0o020 else 'others'}); "
            f"chmod go-w {path!r} to use it"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"a directory this process can write to, but {path!r} is not writable")
    return path


def _bool(raw: str) -> bool:
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("true or false")


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        text = str(raw).strip().lower()
        if text not in choices:
            raise ValueError("one of " + ", ".join(choices))
        return text

    return parse


def parse_headers(raw: str) -> dict[str, str]:
    """Parse ``k=v,k2=v2`` the way OTel parses ``OTEL_EXPORTER_OTLP_HEADERS``.

    Keys and values are URL-decoded; a pair without ``=`` is an error.

    >>> parse_headers("a=1, b=x%20y")
    {'a': '1', 'b': 'x y'}
    """
    headers: dict[str, str] = {}
    for pair in str(raw).split(","):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError("comma-separated key=value pairs")
        headers[unquote(key.strip()).lower()] = unquote(value.strip())
    return checked_headers(headers)


def checked_headers(headers: Mapping[Any, Any]) -> dict[str, str]:
    """Extra headers as the transport sends them; ValueError saying what a header name and value may be."""
    out: dict[str, str] = {}
    for key, value in headers.items():
        if not isinstance(key, str) or not _HEADER_NAME.fullmatch(key):
            raise ValueError("header names that are tokens (letters, digits, - and the like) and " + _HEADER_EXPECTED)
        if not isinstance(value, str) or not _HEADER_VALUE.fullmatch(value.strip()):
            raise ValueError("header values that are " + _HEADER_EXPECTED)
        out[key.lower()] = value.strip()
    return out


def _endpoint(raw: str) -> str:
    text = str(raw).strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("an http:// or https:// base address")
    return text


TUNING: Final = "tuning"
"""A setting with a safe default: a malformed value from the environment is logged and the default is used."""
ESSENTIAL: Final = "essential"
"""A setting without one: a malformed value from the environment is logged and tracing is off (the app runs untraced)."""


@dataclass(frozen=True)
class _Decl:
    env: tuple[str, ...]
    default: Any
    parse: Callable[[str], Any]
    doc: str
    _: KW_ONLY
    #: TUNING or ESSENTIAL, said by every declaration (no default: a new setting is classified
    #: where it is declared). From an argument a bad value is a ConfigError whatever the kind.
    kind: Literal["tuning", "essential"]
    #: Reads the environment itself, for a setting that is not "the first variable set wins".
    read: Callable[[Mapping[str, str]], Any] | None = None
    #: For a tuning setting whose default is no value (None): what its warning says happens instead.
    fallback: str | None = None
    #: Its value is never shown, even when it cannot be parsed.
    secret: bool = False
    #: The default as the settings table (docs/settings.md) shows it, when ``default`` does not say it.
    shown_default: str | None = None


def _sdk_var(env: Mapping[str, str], name: str) -> str | None:
    # The langsmith SDK's lookup (utils.get_env_var): LANGSMITH_ first, then LANGCHAIN_, blanks unset.
    for prefix in ("LANGSMITH_", "LANGCHAIN_"):
        raw = env.get(prefix + name)
        if raw is not None and raw.strip() != "":
            return raw
    return None


def _sdk_tracing(env: Mapping[str, str]) -> bool:
    """Whether the langsmith SDK would trace, by its own rule (``utils.tracing_is_enabled``, 0.15).

    TRACING_V2, else TRACING (each under LANGSMITH_ then LANGCHAIN_), on only when
    exactly ``"true"``: ``1`` or ``True`` leave the SDK off, so they leave this off too.

    >>> _sdk_tracing({"LANGSMITH_TRACING": "true"}), _sdk_tracing({"LANGCHAIN_TRACING_V2": "1"})
    (True, False)
    """
    value = _sdk_var(env, "TRACING_V2")
    if value is None:
        value = _sdk_var(env, "TRACING")
    return value == "true"


def _sdk_otel_mode(env: Mapping[str, str]) -> bool:
    """Whether the langsmith SDK sends through OTel ("hybrid" or "otel" mode), by its own rules.

    Read as the SDK's ``client._resolve_tracing_mode`` reads it (0.15): TRACING_MODE
    wins, else OTEL_ONLY or OTEL_ENABLED, truthy only as "true" or "1". Mirrored
    rather than asked, since asking would import the SDK into apps without it;
    and never a ConfigError: these are the SDK's variables, not ours to refuse.
    """
    mode = _sdk_var(env, "TRACING_MODE")
    if mode is not None:
        return mode.strip().lower() in ("hybrid", "otel")
    for name in ("OTEL_ONLY", "OTEL_ENABLED"):
        raw = _sdk_var(env, name)
        if raw is not None and (raw.lower() == "true" or raw == "1"):
            return True
    return False


# The declarations. The order of ``env`` is the order of precedence.
_DECLS: dict[str, _Decl] = {
    "endpoint": _Decl(
        (ev.OTEL_EXPORTER_RUNS_ENDPOINT, ev.LANGSMITH_ENDPOINT),
        None,
        _endpoint,
        "Base address; /runs/multipart etc. are appended (a self-hosted one may end in /api/v1). One ending "
        "in a route (/runs, /runs/multipart, /runs/batch, /otel/v1/traces, /info) gives one warning at "
        "startup, \"looks like a route, not the base URL; did you mean ...?\", and is used as given.",
        shown_default="`https://api.smith.langchain.com` (US), "
        "`https://eu.api.smith.langchain.com` with `region` eu",
        kind=ESSENTIAL,
    ),
    "control_plane_url": _Decl(
        (ev.OTEL_EXPORTER_RUNS_CONTROL_PLANE_URL,),
        None,
        _endpoint,
        "Deployment control plane (/v2/...), for the API client.",
        shown_default="`https://api.host.langchain.com` (US), "
        "`https://eu.api.host.langchain.com` with `region` eu",
        kind=ESSENTIAL,
    ),
    "region": _Decl(
        (ev.OTEL_EXPORTER_RUNS_REGION,),
        "us",
        _choice("us", "eu"),
        "us or eu: picks the default endpoint and control plane when none is given.",
        kind=ESSENTIAL,
    ),
    "api_key": _Decl(
        (ev.OTEL_EXPORTER_RUNS_API_KEY, ev.LANGSMITH_API_KEY),
        None,
        _header_text,
        "Sent as x-api-key; never logged. Missing for an endpoint that is not on loopback: one warning, and "
        "the service's 401 is said as \"no API key was set\".",
        kind=ESSENTIAL,
        secret=True,
    ),
    "bearer_token": _Decl(
        (ev.OTEL_EXPORTER_RUNS_BEARER_TOKEN,),
        None,
        _header_text,
        "Control plane Authorization: Bearer (the API client); never logged.",
        kind=ESSENTIAL,
        secret=True,
    ),
    "workspace_id": _Decl(
        (ev.OTEL_EXPORTER_RUNS_WORKSPACE_ID, ev.LANGSMITH_WORKSPACE_ID),
        None,
        _header_text,
        "Sent as x-tenant-id; needed when the key spans several workspaces.",
        kind=ESSENTIAL,
    ),
    "project": _Decl(
        (ev.OTEL_EXPORTER_RUNS_PROJECT, ev.LANGSMITH_PROJECT),
        "default",
        _str,
        "session_name: the project the runs go to (not OTEL_SERVICE_NAME: see below).",
        kind=ESSENTIAL,
    ),
    "project_id": _Decl(
        (ev.OTEL_EXPORTER_RUNS_PROJECT_ID,),
        None,
        _str,
        "session_id, sent instead of session_name.",
        kind=ESSENTIAL,
    ),
    "headers": _Decl(
        (ev.OTEL_EXPORTER_RUNS_HEADERS,),
        None,
        parse_headers,
        "Extra request headers, k=v,k2=v2 as OTel parses them; never logged.",
        kind=ESSENTIAL,
        secret=True,
    ),
    "timeout_s": _Decl(
        (ev.OTEL_EXPORTER_RUNS_TIMEOUT,),
        10.0,
        _seconds,
        "Seconds per HTTP request. The processor's worker waits for a sent request's answer for all of it, "
        "even past the export timeout (which bounds when a request may start): a slow service is never sent "
        "the same runs again while it is still storing them.",
        kind=TUNING,
    ),
    "mode": _Decl(
        (ev.OTEL_EXPORTER_RUNS_MODE,),
        "auto",
        _choice("auto", "multipart", "basic"),
        "auto: multipart, falling back to POST/PATCH /runs on 404/405; "
        "multipart: never fall back; basic: POST/PATCH /runs only.",
        kind=TUNING,
    ),
    "compression": _Decl(
        (ev.OTEL_EXPORTER_RUNS_COMPRESSION,),
        "auto",
        _choice("auto", "none", "gzip", "zstd"),
        "auto: zstd when zstandard is installed (the [zstd] extra) and the service's GET /info offers it "
        "(asked once before the first batch; while the service cannot be reached, bodies go uncompressed "
        "and it is asked again a minute later; a 415 turns it off), else none. gzip or zstd to choose; none "
        "to never compress.",
        kind=TUNING,
    ),
    "id_scheme": _Decl(
        (ev.OTEL_EXPORTER_RUNS_ID_SCHEME,),
        DEFAULT_SCHEME,
        # The names of the one table of schemes: a scheme added there is accepted here.
        _choice(*SCHEMES),
        "v7: deterministic UUID v7 from the span; otlp: the service's OTLP rule "
        "(span id right-aligned in a zero UUID), for users who mix both paths.",
        kind=TUNING,
    ),
    "schedule_delay_s": _Decl(
        (ev.OTEL_BSP_SCHEDULE_DELAY,),
        0.2,
        _millis_to_seconds,
        "Milliseconds between flushes (OTel's variable; our default is 200 ms so runs show quickly).",
        kind=TUNING,
    ),
    "max_schedule_delay_s": _Decl(
        (ev.OTEL_EXPORTER_RUNS_MAX_SCHEDULE_DELAY,),
        10.0,
        _millis_to_seconds,
        "Milliseconds, like OTEL_BSP_SCHEDULE_DELAY: the longest the time between flushes grows to "
        "while the service answers 429 (fewer, larger requests under a rate limit shared with other "
        "processes). At or below the schedule delay it never grows.",
        kind=TUNING,
    ),
    "max_queue_size": _Decl(
        (ev.OTEL_BSP_MAX_QUEUE_SIZE,),
        100_000,
        _positive_int,
        "Most span operations waiting for the worker; past it the newest are dropped and counted. "
        "Memory is bounded by max_queue_bytes as well.",
        kind=TUNING,
    ),
    "max_export_batch_size": _Decl(
        (ev.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,),
        512,
        _positive_int,
        "Most runs in one request.",
        kind=TUNING,
    ),
    "export_timeout_s": _Decl(
        (ev.OTEL_BSP_EXPORT_TIMEOUT,),
        30.0,
        _millis_to_seconds,
        "Milliseconds allowed for one send with its retries; also bounds shutdown.",
        kind=TUNING,
    ),
    "exit_budget_s": _Decl(
        (ev.OTEL_EXPORTER_RUNS_EXIT_BUDGET,),
        3.0,
        _millis_to_seconds,
        "Milliseconds, like OTEL_BSP_EXPORT_TIMEOUT: at shutdown, how long a service that cannot be reached "
        "(nothing listening, a name that does not resolve, a network that is unreachable, a TLS certificate "
        "refused) is retried before what is left is given up, in one line saying how many runs, why, and "
        "how to keep them; with a spool they are written there at once instead. A service that answers, "
        "however slowly, or a connection that times out, still gets the export timeout.",
        kind=TUNING,
    ),
    "retry_backoff": _Decl(
        (),
        None,
        _backoff,
        "Argument only: the retry loop's backoff as (first step, cap) in seconds, or \"first,cap\"; "
        "steps double up to the cap and each wait is drawn between half a step and a whole one, and "
        "Retry-After is still honoured. None: the HTTP client's own, 0.5 s doubling to 30 s "
        "(``_http_client.Backoff``). Shorter steps "
        "press a struggling service harder; tests use them so that they do not sleep.",
        shown_default="0.5 s doubling to 30 s",
        kind=TUNING,
    ),
    "max_batch_bytes": _Decl(
        (ev.OTEL_EXPORTER_RUNS_MAX_BATCH_BYTES,),
        20 * MiB,
        _positive_int,
        "Most bytes in one request body before compression.",
        kind=TUNING,
    ),
    "max_queue_bytes": _Decl(
        (ev.OTEL_EXPORTER_RUNS_MAX_QUEUE_BYTES,),
        128 * MiB,
        _positive_int,
        "Everything waiting, including during an outage: queued span operations at an estimated 1.6 KB "
        "each, runs still open after their early post (processor path) at ~500 B each plus their "
        "dotted_order, and encoded runs at their size; past it the newest are dropped (queue_bytes_full). "
        "While the service is down, waiting runs are sealed a batch at a time into their compressed request "
        "body: ~80 B a small run, ~1-2 KB a chat run, so the default holds about 1.5 million small runs or "
        "70,000 chat runs.",
        kind=TUNING,
    ),
    "max_value_chars": _Decl(
        (ev.OTEL_EXPORTER_RUNS_MAX_VALUE_CHARS,),
        1_000_000,
        _non_negative_int,
        "Strings longer than this are truncated with a marker (0: no limit).",
        kind=TUNING,
    ),
    "hold_max_spans": _Decl(
        (ev.OTEL_EXPORTER_RUNS_HOLD_MAX_SPANS,),
        10_000,
        _positive_int,
        "Exporter path: most spans held waiting for their ancestors.",
        kind=TUNING,
    ),
    "hold_max_s": _Decl(
        (ev.OTEL_EXPORTER_RUNS_HOLD_MAX_SECONDS,),
        30.0,
        _seconds,
        "Exporter path: longest a span is held waiting for its ancestors.",
        kind=TUNING,
    ),
    "spans": _Decl(
        (ev.OTEL_EXPORTER_RUNS_SPANS,),
        "all",
        _choice("all", "genai"),
        "all: every sampled span becomes a run. genai: only GenAI spans (a known GenAI producer's "
        "instrumentation scope, or gen_ai.*, llm.*, openinference.span.kind, traceloop.* or langsmith.* "
        "attributes) and the root of each trace that has some; a span left out is spliced out, its kept "
        "children nest under its nearest kept ancestor. Counted in stats().filtered.",
        kind=TUNING,
    ),
    "blocked_scopes": _Decl(
        (ev.OTEL_EXPORTER_RUNS_BLOCKED_SCOPES,),
        (),
        _scopes,
        "Instrumentation scope names, comma-separated, matched as prefixes: spans of these scopes are "
        "left out (spliced out like spans=genai's, counted in stats().filtered), whatever spans says.",
        kind=TUNING,
    ),
    "should_export": _Decl(
        (),
        None,
        _str,
        "Argument only: a callable span -> bool that decides which spans become runs, instead of spans=... "
        "(blocked_scopes still apply). On the processor path it is called at span start, on the exporter "
        "path at span end. An exception keeps the span, and is logged once.",
        kind=TUNING,
    ),
    "sample_rate": _Decl(
        (ev.OTEL_EXPORTER_RUNS_SAMPLE_RATE,),
        1.0,
        _ratio,
        "Share of ordinary traces sent, 0 to 1, decided from the OTel trace id as TraceIdRatioBased "
        "decides (the same in every process of a distributed trace). Below 1, a trace the rate would "
        "not send is held until its root ends, and sent whole if keep_errors or keep_slower_than_s keep it.",
        kind=TUNING,
    ),
    "keep_errors": _Decl(
        (ev.OTEL_EXPORTER_RUNS_KEEP_ERRORS,),
        True,
        _bool,
        "With sample_rate below 1: a trace with an errored run is sent whole, whatever the rate.",
        kind=TUNING,
    ),
    "keep_slower_than_s": _Decl(
        (ev.OTEL_EXPORTER_RUNS_KEEP_SLOWER_THAN,),
        0.0,
        _seconds_or_off,
        "With sample_rate below 1: a trace with a run that took longer than this many seconds is sent "
        "whole, whatever the rate. 0: off.",
        kind=TUNING,
    ),
    "sample_hold_max_spans": _Decl(
        (ev.OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_SPANS,),
        10_000,
        _positive_int,
        "With sample_rate below 1: most spans of one trace held for its decision; past it the trace is "
        "decided by the rate alone (counted in stats().sampled_at_bound).",
        kind=TUNING,
    ),
    "sample_hold_max_s": _Decl(
        (ev.OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_SECONDS,),
        600.0,
        _seconds,
        "With sample_rate below 1: longest a trace is held for its decision (long enough for an agent "
        "run); past it the trace is decided by the rate alone.",
        kind=TUNING,
    ),
    "sample_hold_max_bytes": _Decl(
        (ev.OTEL_EXPORTER_RUNS_SAMPLE_HOLD_MAX_BYTES,),
        16 * MiB,
        _positive_int,
        "With sample_rate below 1: most bytes (estimated) held by all traces waiting for their decision, "
        "counted in max_queue_bytes too; past it the oldest held trace is decided by the rate alone.",
        kind=TUNING,
    ),
    "certificate": _Decl(
        (ev.OTEL_EXPORTER_RUNS_CERTIFICATE,),
        None,
        _readable_file,
        "CA bundle (PEM file) to verify the service's TLS certificate with; verification is always on.",
        kind=ESSENTIAL,
    ),
    "client_certificate": _Decl(
        (ev.OTEL_EXPORTER_RUNS_CLIENT_CERTIFICATE,),
        None,
        _readable_file,
        "Client certificate (PEM) for mutual TLS.",
        kind=ESSENTIAL,
    ),
    "client_key": _Decl(
        (ev.OTEL_EXPORTER_RUNS_CLIENT_KEY,),
        None,
        _readable_file,
        "Private key (PEM) of the client certificate.",
        kind=ESSENTIAL,
    ),
    "spool_dir": _Decl(
        (ev.OTEL_EXPORTER_RUNS_SPOOL_DIR,),
        None,
        _private_dir,
        "Durable spool for what the service could not take (docs/delivery.md): written at the export "
        "timeout and at exit, replayed by later flushes and the next process, said in one line each way. "
        "Must be this user's and writable by no one else (created 0700 when missing); from the variable, "
        "one that is not gives one error line and no spool; passed as an argument, a ConfigError.",
        shown_default="off",
        kind=TUNING,
        fallback="the exporter runs without a spool",
    ),
    "spool_max_bytes": _Decl(
        (ev.OTEL_EXPORTER_RUNS_SPOOL_MAX_BYTES,),
        512 * MiB,
        _positive_int,
        "Most bytes the spool may hold; past it the oldest files are dropped and counted.",
        kind=TUNING,
    ),
    "spool_write_ahead": _Decl(
        (ev.OTEL_EXPORTER_RUNS_SPOOL_WRITE_AHEAD,),
        False,
        _bool,
        "With a spool: each batch is written to it before it is sent and removed once the service "
        "acknowledges it, so a kill -9, an OOM kill or os._exit with the service up loses only what ended "
        "in the last schedule delay and request (docs/delivery.md, \"Write-ahead\"). Every run's content "
        "then touches disk (redacted, as the spool keeps it). Without a spool it has no effect (one warning).",
        kind=TUNING,
    ),
    "hide_inputs": _Decl(
        (ev.OTEL_EXPORTER_RUNS_HIDE_INPUTS,),
        False,
        _bool,
        "true sends no inputs part at all (the service shows inputs as {}); as an argument, a callable "
        "inputs -> inputs.",
        kind=ESSENTIAL,
    ),
    "hide_outputs": _Decl(
        (ev.OTEL_EXPORTER_RUNS_HIDE_OUTPUTS,),
        False,
        _bool,
        "true sends no outputs part at all; as an argument, a callable outputs -> outputs.",
        kind=ESSENTIAL,
    ),
    "mask": _Decl(
        (),
        None,
        _str,
        "Argument only: a callable applied to inputs, outputs, metadata, events and error text "
        "before anything leaves the process or reaches the spool.",
        kind=ESSENTIAL,
    ),
    "scrub_secrets": _Decl(
        (ev.OTEL_EXPORTER_RUNS_SCRUB_SECRETS,),
        False,
        _bool,
        "Replace common secret shapes (API keys, bearer tokens, values of password/secret/token "
        "attributes) with [REDACTED]. Off by default.",
        kind=ESSENTIAL,
    ),
    "langsmith_bridge": _Decl(
        (ev.OTEL_EXPORTER_RUNS_LANGSMITH_BRIDGE,),
        True,
        _bool,
        "When the langsmith SDK is in the app: OTel spans nest under its current run and its "
        "@traceable runs under the current span, so mixed code gives one tree. false: off.",
        kind=TUNING,
    ),
    "capture_log_events": _Decl(
        (ev.OTEL_EXPORTER_RUNS_CAPTURE_LOG_EVENTS,),
        True,
        _bool,
        "GenAI events written as OTel log records (gen_ai.client.inference.operation.details, "
        "gen_ai.user.message, gen_ai.choice, ...; openai-v2 with event_only content) join their "
        "span's run by trace and span id, so the run gets the messages: configure() and the runs "
        "configurator add a log record processor to the global LoggerProvider (an SDK one is "
        "created when none is set), and each path holds the events until it converts the span. "
        "false: neither is done.",
        kind=ESSENTIAL,
    ),
    "prices": _Decl(
        (ev.OTEL_EXPORTER_RUNS_PRICES,),
        None,
        _price_file,
        "A price file (JSON: {\"updated\": \"2026-01-02\", \"models\": {\"my-model\": {\"input\": 1.0, \"output\": 2.0, "
        "\"cache_read\": 0.1}}}, USD per million tokens) over the shipped table: each completed model run's "
        "cost goes into its usage_metadata (input_cost, output_cost, total_cost) unless it carries one, so "
        "custom models get costs in the hosted service too. From the variable, a file that cannot be read "
        "gives one error line and no costs; as an argument (a path or a PriceTable), a ConfigError.",
        kind=TUNING,
        fallback="no costs are written",
    ),
    "langsmith_otel_enabled": _Decl(
        (
            ev.LANGSMITH_TRACING_MODE,
            ev.LANGCHAIN_TRACING_MODE,
            ev.LANGSMITH_OTEL_ONLY,
            ev.LANGCHAIN_OTEL_ONLY,
            ev.LANGSMITH_OTEL_ENABLED,
            ev.LANGCHAIN_OTEL_ENABLED,
        ),
        False,
        _bool,
        "Whether the SDK runs in its own OTel mode (its TRACING_MODE hybrid/otel, or OTEL_ONLY / "
        "OTEL_ENABLED, read as the SDK reads them); read so the bridge stays off then "
        "(the SDK's spans already come through this exporter).",
        kind=TUNING,
        read=_sdk_otel_mode,
    ),
    "handle_sigterm": _Decl(
        (ev.OTEL_EXPORTER_RUNS_HANDLE_SIGTERM,),
        False,
        _bool,
        "true: SIGTERM (how containers and process managers stop an app) ends the app through its normal "
        "exit, so the runs queued are flushed or spooled, and the process ends with status 143 (128 + 15). "
        "Installed from the main thread, only while SIGTERM has its default handler; a second SIGTERM ends "
        "the process at once. Without it a plain script loses what is queued when it gets SIGTERM.",
        kind=TUNING,
    ),
    "close_open_runs_at_exit": _Decl(
        (ev.OTEL_EXPORTER_RUNS_CLOSE_OPEN_RUNS_AT_EXIT,),
        True,
        _bool,
        "Processor path: at a normal exit, each run still open (its span never ended) is closed with the "
        "exit time and an error saying the process ended before its span did, counted in "
        "stats().closed_at_exit and said in the exit line. false: such runs stay running at the service, and "
        "the exit line says how many. (A kill -9 runs no exit: with a spool, the next process closes its open runs, "
        "whatever this says; docs/delivery.md, \"Open runs\".)",
        kind=TUNING,
    ),
    "open_runs_max": _Decl(
        (ev.OTEL_EXPORTER_RUNS_OPEN_RUNS_MAX,),
        1_000,
        _positive_int,
        "Processor path: most open runs (early post sent, span not ended) counted against max_queue_bytes; "
        "past it the oldest stop counting (stats().open_runs_released) and are still patched when they end, "
        "so spans that never end cannot starve later traffic.",
        kind=TUNING,
    ),
    "open_run_max_age_s": _Decl(
        (ev.OTEL_EXPORTER_RUNS_OPEN_RUN_MAX_AGE,),
        600.0,
        _seconds,
        "Processor path, in seconds: an open run older than this stops counting against max_queue_bytes "
        "(stats().open_runs_released); it is still patched when its span ends.",
        kind=TUNING,
    ),
    "disabled": _Decl(
        (ev.OTEL_SDK_DISABLED,),
        False,
        _bool,
        "OTel's switch: when true, nothing is recorded or sent.",
        kind=ESSENTIAL,
    ),
}



@dataclass(frozen=True)
class Settings:
    """Resolved settings; build with :func:`resolve`."""

    endpoint: str
    control_plane_url: str
    region: str
    api_key: str | None = field(repr=False)
    bearer_token: str | None = field(repr=False)
    workspace_id: str | None
    project: str
    project_id: str | None
    headers: Mapping[str, str] | None = field(repr=False)
    timeout_s: float
    mode: str
    compression: str
    id_scheme: str
    schedule_delay_s: float
    max_schedule_delay_s: float
    max_queue_size: int
    max_export_batch_size: int
    export_timeout_s: float
    exit_budget_s: float
    retry_backoff: tuple[float, float] | None
    max_batch_bytes: int
    max_queue_bytes: int
    max_value_chars: int
    hold_max_spans: int
    hold_max_s: float
    spans: str
    blocked_scopes: tuple[str, ...]
    should_export: Any
    sample_rate: float
    keep_errors: bool
    keep_slower_than_s: float
    sample_hold_max_spans: int
    sample_hold_max_s: float
    sample_hold_max_bytes: int
    certificate: str | None
    client_certificate: str | None
    client_key: str | None = field(repr=False)
    spool_dir: str | None
    spool_max_bytes: int
    spool_write_ahead: bool
    hide_inputs: Any
    hide_outputs: Any
    mask: Any
    scrub_secrets: bool
    langsmith_bridge: bool
    capture_log_events: bool
    prices: PriceTable | None
    langsmith_otel_enabled: bool
    handle_sigterm: bool
    close_open_runs_at_exit: bool
    open_runs_max: int
    open_run_max_age_s: float
    disabled: bool

    def __repr__(self) -> str:
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.repr}
        for name in ("endpoint", "control_plane_url"):  # a password in the address is a secret too
            if isinstance(values.get(name), str):
                values[name] = shown_url(values[name])
        shown = ", ".join(f"{name}={value!r}" for name, value in values.items())
        key = "set" if self.api_key else "unset"
        token = "set" if self.bearer_token else "unset"
        return f"Settings({shown}, api_key=<{key}>, bearer_token=<{token}>)"

    @property
    def session(self) -> dict[str, str]:
        """The run field that names the project: exactly one of session_id / session_name."""
        if self.project_id:
            return {"session_id": self.project_id}
        return {"session_name": self.project}

    def is_loopback(self) -> bool:
        host = (urlsplit(self.endpoint).hostname or "").lower()
        return host in ("localhost", "::1") or host.startswith("127.")


def resolve(overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Resolve every setting: argument, then environment, then default.

    ``overrides`` are constructor keyword arguments (already typed, or strings
    that are parsed like the environment). Unknown names are an error naming the
    likely one, so a typo in a keyword argument is not silently ignored. A
    malformed essential variable raises :class:`EnvironmentConfigError` naming
    every one (for a caller that asked for the result: the CLI, the API client);
    inside an app, :func:`resolve_for_app` turns tracing off instead.
    """
    overrides = dict(overrides or {})
    env = os.environ if env is None else env
    unknown = sorted(set(overrides) - set(_DECLS))
    if unknown:
        raise ConfigError(_unknown_message(unknown, _DECLS))
    values: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for name, decl in _DECLS.items():
        if overrides.get(name) is not None:
            raw = overrides[name]
            if isinstance(raw, os.PathLike):
                raw = os.fspath(raw)
            if isinstance(raw, str) and decl.parse is not _str:
                values[name] = _parse(decl, raw, f"argument {name}")
            else:
                values[name] = _typed(decl, name, raw)
            continue
        try:
            values[name] = _from_env(decl, env)
        except _Unusable as bad:
            problems.append((bad.variable, str(bad)))
    if problems:
        raise EnvironmentConfigError(problems)
    eu = values["region"] == "eu"
    for name, us_default, eu_default in (
        ("endpoint", US_ENDPOINT, EU_ENDPOINT),
        ("control_plane_url", US_CONTROL_PLANE, EU_CONTROL_PLANE),
    ):
        if values[name] is None:
            values[name] = eu_default if eu else us_default
        else:
            values[name] = _parse(_DECLS[name], str(values[name]), name)
    settings = Settings(**values)
    return settings


def resolve_for_app(overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """:func:`resolve`, for the exporter inside an app: an environment it cannot use turns tracing off, never the app.

    Each malformed essential variable is one ERROR line (once per variable)
    naming it, its value (a secret's never) and what it expects; the settings
    come back with ``disabled`` set, so nothing is recorded or sent: no default
    stands in for where runs go or who sends them. A bad argument still raises
    :class:`ConfigError`: it is a mistake in code, seen where it is written.

    >>> resolve_for_app(env={"OTEL_EXPORTER_RUNS_HEADERS": "x-token"}).disabled
    True
    """
    env = os.environ if env is None else env
    try:
        return resolve(overrides, env)
    except EnvironmentConfigError as exc:
        for variable, message in exc.problems:
            _bad_env_log.error(variable, "%s; tracing is off and the app runs untraced (no default is safe here)", message)
        # The rest resolved without the variables at fault, only to fill in a Settings that sends nothing.
        rest = {key: value for key, value in env.items() if key not in exc.variables}
        return replace(resolve(overrides, rest), disabled=True)


def _unknown_message(unknown: list[str], known: Mapping[str, Any]) -> str:
    """What an unknown keyword argument is told: the likely setting first, then every one.

    >>> _unknown_message(["projcet"], {"project": 1, "project_id": 2, "mode": 3})
    "unknown setting 'projcet': did you mean 'project'? The settings are: ['mode', 'project', 'project_id']"
    """
    said = []
    for name in unknown:
        close = get_close_matches(name, known, n=1)
        said.append(f"{name!r}: did you mean {close[0]!r}?" if close else repr(name))
    what = "setting" if len(unknown) == 1 else "settings"
    return f"unknown {what} {'; '.join(said)} The settings are: {sorted(known)}"


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _typed(decl: _Decl, name: str, value: Any) -> Any:
    """An argument given as a value, not text: held to the range its variable's text is.

    ``max_queue_size=0`` or ``timeout_s=-1`` passed in code skipped the parsers, and the
    exporter then dropped every run or lost it in a traceback from ``requests``.
    Seconds are seconds here, whatever unit the variable spells them in.

    >>> _typed(_DECLS["timeout_s"], "timeout_s", 2)
    2
    >>> _typed(_DECLS["max_queue_size"], "max_queue_size", 0)
    Traceback (most recent call last):
    ...
    otel_runs_exporter._errors.ConfigError: argument max_queue_size=0 is not valid: expected a whole number greater than 0
    """
    parse = decl.parse
    if isinstance(parse, _Number):
        good, expected = parse.holds(value), parse.typed_expected or parse.expected
    elif parse is _scopes:
        # An empty name is a prefix of every scope: it would leave every span out.
        good = isinstance(value, (tuple, list)) and all(isinstance(v, str) and v.strip() for v in value)
        expected = "scope names, none blank, as a list or comma-separated text"
    elif name == "should_export":
        good, expected = callable(value), "a function span -> bool"
    elif parse is _backoff:
        expected = "two numbers of seconds, (first, cap), with 0 < first <= cap, at most 10000000"
        good = (
            isinstance(value, (tuple, list)) and len(value) == 2 and all(_real(v) for v in value)
            and 0 < value[0] <= value[1] <= LONGEST_WAIT_S
        )
    elif parse is _header_text:
        good, expected = False, "text"  # text never comes here: it is parsed as the variable's would be
    elif parse is parse_headers:
        try:
            return checked_headers(value) if isinstance(value, Mapping) else parse_headers(value)
        except (ValueError, TypeError, AttributeError) as exc:
            expected = str(exc) if isinstance(exc, ValueError) else "a mapping of header names to values"
            raise ConfigError(f"argument {name} is not valid (its value is not shown: it may hold a secret): expected {expected}") from None
    elif parse is _bool:
        # hide_inputs / hide_outputs also take a function, as the service's SDK's do.
        callable_ok = name in ("hide_inputs", "hide_outputs")
        good = isinstance(value, bool) or (callable_ok and callable(value))
        expected = "true, false or a function" if callable_ok else "true or false"
    elif isinstance(decl.default, str):  # a choice or a name: text only
        good, expected = isinstance(value, str), "text"
    else:
        return value  # a callable (mask), a mapping (headers), a path: checked where they are used
    if not good:
        if decl.secret:
            raise ConfigError(f"argument {name} is not valid (its value is not shown: it may hold a secret): expected {expected}")
        raise ConfigError(f"argument {name}={value!r} is not valid: expected {expected}")
    if parse is _scopes:
        return tuple(v.strip() for v in value)
    return tuple(value) if parse is _backoff else value


def variable_of(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The environment variable a setting's value came from (the first of its variables that is
    set), or None when it has its default: for a message that says where to change it.

    >>> variable_of("endpoint", {"LANGSMITH_ENDPOINT": "http://h"}), variable_of("endpoint", {})
    ('LANGSMITH_ENDPOINT', None)
    """
    env = os.environ if env is None else env
    return next((var for var in _DECLS[name].env if env.get(var, "").strip()), None)


class _Unusable(ConfigError):
    """A malformed essential variable, for :func:`resolve` to gather with the others."""

    def __init__(self, message: str, variable: str) -> None:
        super().__init__(message)
        self.variable = variable


def _from_env(decl: _Decl, env: Mapping[str, str]) -> Any:
    """The first of the declaration's variables that is set (blank counts as unset), parsed; else its default.

    A malformed value is one ERROR line (once per variable). For a tuning setting
    the default is used, so tracing goes on; for an essential one :class:`_Unusable`
    is raised, for :func:`resolve` to gather.
    """
    if decl.read is not None:
        return decl.read(env)
    for var in decl.env:
        raw = env.get(var)
        if raw is not None and raw.strip() != "":
            try:
                return _parse(decl, raw, var)
            except ConfigError as exc:
                if decl.kind != TUNING:
                    raise _Unusable(str(exc), var) from None
                instead = decl.fallback or f"using the default, {spelled_default(decl)}"
                _bad_env_log.error(var, "%s; %s", exc, instead)
                return decl.default
    return decl.default


def _parse(decl: _Decl, raw: str, source: str) -> Any:
    try:
        return decl.parse(raw)
    except ValueError as exc:
        if decl.secret:
            # The value may hold a credential (a header's token): said to be wrong, never shown.
            raise ConfigError(f"{source} is not valid (its value is not shown: it may hold a secret): expected {exc}") from None
        raise ConfigError(f"{source}={raw!r} is not valid: expected {exc}") from None


def spelled_default(decl: _Decl) -> str:
    """A setting's default as its variable spells it, for the warning about a malformed value.

    In the variable's units: OTel's BSP variables take milliseconds where the setting holds seconds.

    >>> spelled_default(_DECLS["schedule_delay_s"]), spelled_default(_DECLS["max_queue_size"])
    ('200', '100000')
    """
    value = decl.default
    if isinstance(value, bool):
        return "true" if value else "false"
    if decl.parse is _millis_to_seconds:
        return f"{value * 1000:g}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def endpoint_variable(env: Mapping[str, str] | None = None) -> str | None:
    """The endpoint setting's own variable (``OTEL_EXPORTER_RUNS_ENDPOINT``) as set, unparsed; None when unset or blank.

    Whether this exporter was pointed somewhere, for the testing helpers that start a
    local service unless it was (``testing.local_service_unless_configured``). The
    setting's fallback, the service SDK's ``LANGSMITH_ENDPOINT``, does not count: a
    script that runs offline by default must not send its runs to the hosted service
    because the SDK was configured once. Unparsed: a bad value is the exporter's to refuse.

    >>> endpoint_variable({"OTEL_EXPORTER_RUNS_ENDPOINT": "http://127.0.0.1:1984", "LANGSMITH_ENDPOINT": "x"})
    'http://127.0.0.1:1984'
    >>> endpoint_variable({"LANGSMITH_ENDPOINT": "https://api.smith.langchain.com"}) is None
    True
    """
    env = os.environ if env is None else env
    raw = env.get(_DECLS["endpoint"].env[0])
    return raw if raw is not None and raw.strip() != "" else None


# The service's routes, longest first: an endpoint ending in one is a route, and the exporter
# would send to <route>/runs/multipart. /api/v1 is not one: a self-hosted service's base is there.
_ROUTE_SUFFIXES = ("/runs/multipart", "/runs/batch", "/runs", "/otel/v1/traces", "/info")


def shown_url(url: str) -> str:
    """``url`` as logs, messages and reprs show it: without user info, which may hold a password.

    >>> shown_url("http://user:pw-secret@127.0.0.1:1984/api/v1"), shown_url("https://x.example")
    ('http://127.0.0.1:1984/api/v1', 'https://x.example')
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, parts.fragment))


def base_of_route(endpoint: str) -> str | None:
    """The base address an endpoint ending in a route name was likely meant to be; None for a base address.

    Shown without user info (a password in the address stays out of the logs).

    >>> base_of_route("http://127.0.0.1:1984/runs"), base_of_route("https://x.example/api/v1/runs/multipart")
    ('http://127.0.0.1:1984', 'https://x.example/api/v1')
    >>> base_of_route("https://x.example/api/v1") is None, base_of_route("http://h/otel/v1/traces")
    (True, 'http://h')
    """
    parts = urlsplit(endpoint)
    path = parts.path.rstrip("/")
    for suffix in _ROUTE_SUFFIXES:
        if path.lower().endswith(suffix):
            host = parts.netloc.rpartition("@")[2]
            return urlunsplit((parts.scheme, host, path[: -len(suffix)], "", ""))
    return None


def sdk_disabled(env: Mapping[str, str] | None = None) -> bool:
    """OTel's ``OTEL_SDK_DISABLED``, alone: whether nothing may be recorded, for code that sets tracing up.

    A value it cannot read counts as true (logged once, as :func:`resolve_for_app` logs it):
    the switch that keeps everything from being sent has no safe default.

    >>> sdk_disabled({"OTEL_SDK_DISABLED": "true"}), sdk_disabled({})
    (True, False)
    """
    env = os.environ if env is None else env
    try:
        return bool(_from_env(_DECLS["disabled"], env))
    except _Unusable as bad:
        _bad_env_log.error(bad.variable, "%s; tracing is off and the app runs untraced (no default is safe here)", bad)
        return True


def where_runs_go(settings: Settings) -> str:
    """Where the runs go, in the words of the one line that says so: endpoint, project, whether a key is set.

    Never the key; an address's user info is left out too.

    >>> where_runs_go(resolve({"project": "app", "api_key": "sk-secret"}, env={}))
    "https://api.smith.langchain.com (project 'app', API key set)"
    """
    project = f"project id {settings.project_id}" if settings.project_id else f"project {settings.project!r}"
    key = "API key set" if settings.api_key else "no API key"
    return f"{shown_url(settings.endpoint)} ({project}, {key})"


def check_usable(settings: Settings) -> None:
    """One clear warning for setups that will not deliver, instead of failing later."""
    if settings.disabled:
        return
    base = base_of_route(settings.endpoint)
    if base is not None:
        given = urlsplit(settings.endpoint)
        logger.warning(
            "The endpoint %s: this looks like a route, not the base URL (the exporter adds /runs/multipart, "
            "/runs and /info to it); did you mean %s? Sending to it as given",
            urlunsplit((given.scheme, given.netloc.rpartition("@")[2], given.path, "", "")),
            base,
        )
    if not settings.api_key and not settings.is_loopback():
        logger.warning(
            "No API key: set OTEL_EXPORTER_RUNS_API_KEY (or LANGSMITH_API_KEY); "
            "the service at %s will refuse the runs",
            shown_url(settings.endpoint),
        )
    if settings.api_key and settings.endpoint.startswith("http://") and not settings.is_loopback():
        logger.warning(
            "The API key would be sent over plain HTTP to %s; use https://", shown_url(settings.endpoint)
        )


# --- the local service's command (``otel-runs serve`` and ``otel-runs runs``) ---
#
# Read by the command only, never by the exporter: they are not constructor
# arguments, and an app's Settings never carry the local service's key.
_SERVICE_DECLS: dict[str, _Decl] = {
    "db": _Decl(
        (ev.OTEL_RUNS_SERVER_DB,),
        None,
        _str,
        "Path of the local service's SQLite database, for `serve` and `runs` when --db is not given. "
        "Default: $XDG_DATA_HOME/otel-runs/runs.db, else ~/.local/share/otel-runs/runs.db (see db_path).",
        kind=ESSENTIAL,
    ),
    "data_home": _Decl(
        (ev.XDG_DATA_HOME,),
        None,
        _str,
        "The XDG base directory for user data, where the default database lives; ~/.local/share when unset.",
        kind=ESSENTIAL,
    ),
    "api_key": _Decl(
        (ev.OTEL_RUNS_SERVER_API_KEY,),
        None,
        _str,
        "The x-api-key `serve` requires when --api-key is not given (a variable keeps it out of `ps`). Never logged.",
        kind=ESSENTIAL,
        secret=True,
    ),
}


@dataclass(frozen=True)
class ServiceSettings:
    """The local service command's settings; build with :func:`resolve_service`."""

    db: str | None
    data_home: str | None
    api_key: str | None = field(repr=False)

    @property
    def db_path(self) -> str:
        """``db``, else under ``data_home``, else under ``~/.local/share``: the home directory is looked up
        only when needed, so ``--db`` works where it cannot be (a container user without one)."""
        if self.db:
            return self.db
        base = self.data_home or str(Path.home() / ".local" / "share")
        return str(Path(base) / "otel-runs" / "runs.db")


def resolve_service(env: Mapping[str, str] | None = None) -> ServiceSettings:
    """Resolve the local service command's settings from the environment (its options win over them).

    >>> s = resolve_service({"XDG_DATA_HOME": "/data", "OTEL_RUNS_SERVER_API_KEY": "k"})
    >>> s.db_path, s
    ('/data/otel-runs/runs.db', ServiceSettings(db=None, data_home='/data'))
    """
    env = os.environ if env is None else env
    return ServiceSettings(**{name: _from_env(decl, env) for name, decl in _SERVICE_DECLS.items()})


# --- the instrumentation's: read when an instrumentor's ``instrument()`` or ``opentelemetry-instrument`` runs ---
#
# Neither exporter settings nor constructor arguments: our instrumentors take
# ``instrument(capture_content=...)`` over the variable, and ``autoconfig`` reads
# which exporters OTel's configurator was asked for. OTel's own variables, read
# with OTel's meaning; never a ConfigError (an app must not fail to start over them).

# The values that switch content capture off: the GenAI convention's "false", the
# usual spellings of it, and the newer modes that keep content off the span.
_CAPTURE_OFF = frozenset({"false", "0", "no", "off", "no_content", "event_only"})


def _capture_content(raw: str) -> bool:
    return str(raw).strip().lower() not in _CAPTURE_OFF


def _names(raw: str) -> tuple[str, ...]:
    # OTel's comma-separated list of entry-point names, as its configurator splits it.
    return tuple(part.strip() for part in str(raw).split(",") if part.strip())


_INSTRUMENTATION_DECLS: dict[str, _Decl] = {
    "capture_content": _Decl(
        (ev.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT,),
        True,
        _capture_content,
        "Whether our OpenAI and Anthropic instrumentors record message content: on unless the variable is "
        "false, 0, no, off, no_content or event_only. The OTel convention is opt-in; ours is on, because "
        "the runs it feeds exist for people to read the prompts and completions. "
        "instrument(capture_content=...) wins over it.",
        kind=TUNING,
    ),
    "traces_exporter": _Decl(
        (ev.OTEL_TRACES_EXPORTER,),
        (),
        _names,
        "The span exporters OTel's configurator is asked for; `runs` among them makes the runs "
        "configurator install a RunsSpanProcessor (autoconfig), and the runs distro defaults it to runs.",
        kind=TUNING,
    ),
    "instrument": _Decl(
        (ev.OTEL_EXPORTER_RUNS_INSTRUMENT,),
        False,
        _bool,
        "true: configure() instruments the OpenAI and Anthropic clients that are installed (as "
        "configure(instrument=True), which wins), stepping aside where another instrumentation traces the "
        "call. Off by default, so an upgrade never starts sending prompts on its own.",
        kind=TUNING,
    ),
    "langsmith_tracing": _Decl(
        (ev.LANGSMITH_TRACING_V2, ev.LANGCHAIN_TRACING_V2, ev.LANGSMITH_TRACING, ev.LANGCHAIN_TRACING),
        False,
        _bool,
        "Tracing switched on the way the service's SDK switches it (LANGSMITH_TRACING=true): with no SDK "
        "tracer provider installed, the first traceable call sets up a private one from the environment.",
        kind=TUNING,
        read=_sdk_tracing,
    ),
}


@dataclass(frozen=True)
class InstrumentationSettings:
    """The instrumentation's settings; build with :func:`resolve_instrumentation`."""

    capture_content: bool
    traces_exporter: tuple[str, ...]
    instrument: bool
    langsmith_tracing: bool


def resolve_instrumentation(env: Mapping[str, str] | None = None) -> InstrumentationSettings:
    """Resolve the instrumentation's settings from the environment, when ``instrument()`` (or autoconfig) runs.

    >>> resolve_instrumentation({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT"})
    InstrumentationSettings(capture_content=False, traces_exporter=(), instrument=False, langsmith_tracing=False)
    >>> resolve_instrumentation({"OTEL_TRACES_EXPORTER": "otlp, runs"}).traces_exporter
    ('otlp', 'runs')
    """
    env = os.environ if env is None else env
    return InstrumentationSettings(**{name: _from_env(decl, env) for name, decl in _INSTRUMENTATION_DECLS.items()})
