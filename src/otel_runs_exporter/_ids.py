"""Run ids and dotted_order: the one place these rules live.

The service identifies a run by a UUID and orders a trace by ``dotted_order``
(spec 2.3)::

    20260101T120000000001Z<root-uuid>.20260101T120000000500Z<child-uuid>

Each entry is the run's start time in ``%Y%m%dT%H%M%S%f`` layout, ``Z``, then the
run's hyphenated UUID. A child's value is its parent's, a dot, and its own entry.
The trace_id is the UUID of the first entry; the parent_run_id is the UUID of the
entry before the last.

Run ids are UUID v7 computed from the span itself (RFC 9562, method 3 for the
sub-millisecond bits) so that the same span always maps to the same run, ids sort
by start time, and two traces never collide; the ``otlp`` scheme uses the
service's own OTLP rule instead. The schemes are the rows of one table,
:data:`SCHEMES`, which the ``id_scheme`` setting and the hot path both read::

    >>> rid = run_id_v7(0xABC, 0x1, 1_700_000_000_123_456_789)
    >>> rid.version
    7
    >>> rid == run_id_v7(0xABC, 0x1, 1_700_000_000_123_456_789)
    True

A tree is at most :data:`MAX_DEPTH` runs deep: each run carries every
ancestor's entry, so a chain of d runs holds d²/2 entries in memory, on the
wire and in storage. The local service refuses a deeper dotted_order
(:func:`parse_dotted_order` says why), and the exporter never builds one: a run
whose parent is already that deep starts a new trace (:func:`continued_ids`)
that names its real parent.

A span may also be given its place outright, by the service's documented
``langsmith.*`` attributes (a run created elsewhere, say by the service's own
SDK in another process, as its parent), each alone or together.
:func:`given_run_ids` is the one rule for those, on both paths: it checks them
against each other and against what we know of the span's place, and builds
the :class:`RunIds`, or raises :class:`GivenIdsError` naming the attribute at fault.

Everything here is pure and cheap: it runs on the application thread in
``on_start`` or on the worker thread.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from typing import Any, Final, NamedTuple
from uuid import UUID

__all__ = [
    "DottedOrderError",
    "DottedOrderTooDeep",
    "MAX_DEPTH",
    "MAX_DOTTED_ORDER_CHARS",
    "ENTRY_CHARS",
    "GivenIds",
    "GivenIdsError",
    "given_run_ids",
    "canonical_uuid",
    "LANGSMITH_TRACE_ID",
    "LANGSMITH_SPAN_ID",
    "LANGSMITH_PARENT_ID",
    "LANGSMITH_DOTTED_ORDER",
    "LANGSMITH_SESSION_NAME",
    "LANGSMITH_SESSION_ID",
    "ID_ATTRIBUTES",
    "RunIds",
    "IdScheme",
    "SCHEMES",
    "DEFAULT_SCHEME",
    "run_id_v7",
    "run_id_otlp",
    "make_run_id",
    "run_id_str",
    "format_entry",
    "iso_time",
    "root_ids",
    "child_ids",
    "continued_ids",
    "parse_dotted_order",
    "DOTTED_ENTRY_RE",
]

_VERSION_7 = 0x7 << 76
_VARIANT_RFC = 0x2 << 62
_RAND_B_MASK = (1 << 62) - 1


# --- run-id schemes: the one table ------------------------------------------------


class IdScheme:
    """A run-id scheme: how a span's trace id, span id and start become its run's UUID.

    Each scheme is a subclass and one row of :data:`SCHEMES`. A class with a
    method rather than a plain function in the table: the compiled build calls
    a method of a compiled class directly, where a function held in a variable
    costs a generic call (measured: +70 ns on ~1.2 us per span; none this way).
    """

    def value(self, trace_id: int, span_id: int, start_time_ns: int) -> int:
        """The 128 bits of the run's UUID."""
        raise NotImplementedError


class _V7(IdScheme):
    """``v7``, the default: a deterministic UUID v7 (see :func:`run_id_v7`)."""

    def value(self, trace_id: int, span_id: int, start_time_ns: int) -> int:
        start_us = start_time_ns // 1000
        ms, us_rem = divmod(start_us, 1000)
        sub_ms = (us_rem * 4096) // 1000  # RFC 9562 6.2 method 3: fraction of a ms in 12 bits
        digest = hashlib.blake2b(
            trace_id.to_bytes(16, "big") + span_id.to_bytes(8, "big"), digest_size=8
        ).digest()
        rand_b = int.from_bytes(digest, "big") & _RAND_B_MASK
        return ((ms & 0xFFFF_FFFF_FFFF) << 80) | _VERSION_7 | (sub_ms << 64) | _VARIANT_RFC | rand_b


class _Otlp(IdScheme):
    """``otlp``: the service's own OTLP rule (see :func:`run_id_otlp`)."""

    def value(self, trace_id: int, span_id: int, start_time_ns: int) -> int:
        return span_id


SCHEMES: Final[dict[str, IdScheme]] = {"v7": _V7(), "otlp": _Otlp()}
"""Every run-id scheme, by the name the ``id_scheme`` setting takes: the one table.

The setting accepts exactly these names (``_settings``); ``ConvertOptions.from_settings``
looks the chosen one up once, and the hot path (``_convert.span_ids``, through
:func:`run_id_str`) calls it for every span, on the processor's path and the
exporter's. A new scheme is a class above and a row here (docs/settings.md, written
from the setting's declaration, follows); nothing else names the schemes.
"""

DEFAULT_SCHEME: Final = "v7"
"""The ``id_scheme`` setting's default (and what ``span_ids`` uses when given no scheme)."""


def run_id_v7(trace_id: int, span_id: int, start_time_ns: int) -> UUID:
    """A deterministic UUID v7 for an OTel span.

    The 48-bit millisecond field and 12-bit sub-millisecond field come from the
    start time at microsecond precision; the 62 random bits come from a hash of
    the trace id and span id.
    """
    return UUID(int=SCHEMES["v7"].value(trace_id, span_id, start_time_ns))


def run_id_otlp(trace_id: int, span_id: int, start_time_ns: int) -> UUID:
    """The service's own OTLP rule: the 8-byte span id right-aligned in a zero UUID.

    Use it when the same spans may also reach the service through its
    ``/otel/v1/traces`` endpoint, so that both paths agree on run ids.
    """
    return UUID(int=SCHEMES["otlp"].value(trace_id, span_id, start_time_ns))


def make_run_id(scheme: str, trace_id: int, span_id: int, start_time_ns: int) -> UUID:
    """Run id for a span under the scheme named ``scheme`` (a key of :data:`SCHEMES`), as a UUID."""
    return UUID(int=SCHEMES[scheme].value(trace_id, span_id, start_time_ns))


def run_id_str(scheme: IdScheme, trace_id: int, span_id: int, start_time_ns: int) -> str:
    """The run id of a span under ``scheme`` (a :data:`SCHEMES` value), hyphenated, without a UUID object.

    This runs for every span, so it skips ``uuid.UUID``, and it takes the scheme
    itself, looked up in :data:`SCHEMES` once when the settings are read
    (``ConvertOptions.from_settings``), not a name to look up per span.

    >>> run_id_str(SCHEMES["v7"], 1, 2, 3_000_000) == str(make_run_id("v7", 1, 2, 3_000_000))
    True
    """
    h = "%032x" % scheme.value(trace_id, span_id, start_time_ns)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _utc(time_ns: int) -> datetime:
    # Integer arithmetic first: a float of nanoseconds since 1970 loses microseconds.
    seconds, rem_ns = divmod(time_ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=timezone.utc).replace(microsecond=rem_ns // 1000)


# Spans arrive in bursts within the same second, so formatted seconds are
# cached: strftime is the costliest step of placing a span. More than one is
# kept, since a run's start and end (or a long root's start and its children's)
# fall in different seconds and would otherwise evict each other.
_seconds: dict[int, tuple[str, str]] = {}
_SECONDS_MAX = 64


def _second(seconds: int) -> tuple[str, str]:
    """``(compact, iso)`` renderings of a whole UTC second, cached."""
    cached = _seconds.get(seconds)
    if cached is not None:
        return cached
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    rendered = (_compact(moment), moment.isoformat(timespec="seconds")[:19])
    if len(_seconds) >= _SECONDS_MAX:
        _seconds.clear()  # a dict's clear and store are atomic: safe across threads
    _seconds[seconds] = rendered
    return rendered


def format_entry(start_time_ns: int, run_id: UUID | str) -> str:
    """One dotted_order entry: ``%Y%m%dT%H%M%S%fZ`` followed by the hyphenated UUID.

    >>> format_entry(1_700_000_000_123_456_789, "018bcfe5-68e3-7000-8000-000000000001")
    '20231114T221320123456Z018bcfe5-68e3-7000-8000-000000000001'
    """
    seconds, rem_ns = divmod(start_time_ns, 1_000_000_000)
    return f"{_second(seconds)[0]}{rem_ns // 1000:06d}Z{run_id}"


def iso_time(time_ns: int) -> str:
    """ISO 8601 UTC timestamp with microseconds, as the service's client sends it.

    >>> iso_time(1_700_000_000_123_456_789)
    '2023-11-14T22:13:20.123456+00:00'
    """
    seconds, rem_ns = divmod(time_ns, 1_000_000_000)
    return f"{_second(seconds)[1]}.{rem_ns // 1000:06d}+00:00"


class RunIds(NamedTuple):
    """Where a run sits in its tree.

    ``start_time_ns`` is the effective start: a child that claims to start before
    its parent (clock skew, remote parents) is raised to the parent's start so
    the chain never goes back in time and start_time always matches its entry.
    A NamedTuple because one is built for every span on the application thread.
    """

    run_id: str
    trace_id: str
    parent_run_id: str | None
    dotted_order: str
    start_time_ns: int
    # The project the tree lives in, by name or by id, when it is not the
    # exporter's own: decided where the tree's place is decided (a parent run made
    # by the service's SDK, or the session attributes of the span that starts the
    # tree here); both None: the exporter's own. Children inherit it, so one tree
    # stays in one project.
    project: str | None = None
    project_id: str | None = None
    # Entries in dotted_order (a root is 1): kept so that placing a child never
    # counts the parent's dots.
    depth: int = 1
    # (run id, trace id) of the run's real parent, when that parent was MAX_DEPTH
    # deep and this run starts a new trace instead (continued_ids).
    depth_limit_parent: tuple[str, str] | None = None


def root_ids(run_id: UUID | str, start_time_ns: int) -> RunIds:
    """Ids of a run that starts a tree."""
    rid = str(run_id)
    return RunIds(rid, rid, None, format_entry(start_time_ns, rid), start_time_ns)


def child_ids(parent: RunIds, run_id: UUID | str, start_time_ns: int) -> RunIds:
    """Ids of a run under ``parent``; the start is clamped to the parent's.

    Whether the child may be that deep (:data:`MAX_DEPTH`) is the caller's rule:
    the exporter then uses :func:`continued_ids`, the local service refuses.
    """
    rid = str(run_id)
    start = start_time_ns if start_time_ns >= parent.start_time_ns else parent.start_time_ns
    return RunIds(
        rid,
        parent.trace_id,
        parent.run_id,
        parent.dotted_order + "." + format_entry(start, rid),
        start,
        parent.project,
        parent.project_id,
        parent.depth + 1,
    )


def continued_ids(parent: RunIds, run_id: UUID | str, start_time_ns: int) -> RunIds:
    """Ids of a run under a ``parent`` that is :data:`MAX_DEPTH` deep: the root of a new trace.

    The run keeps its parent's project and names the parent in
    ``depth_limit_parent``, which the converter writes to its metadata. Its own
    start is kept: as a root it has no parent's start to be clamped to.

    >>> parent = root_ids("018bcfe5-68e3-7000-8000-000000000001", 1_700_000_000_000_000_000)._replace(depth=MAX_DEPTH)
    >>> ids = continued_ids(parent, "018bcfe5-68e3-7000-8000-000000000002", 1_700_000_000_000_001_000)
    >>> (ids.trace_id == ids.run_id, ids.parent_run_id, ids.depth, ids.depth_limit_parent == (parent.run_id, parent.trace_id))
    (True, None, 1, True)
    """
    rid = str(run_id)
    return RunIds(
        rid,
        rid,
        None,
        format_entry(start_time_ns, rid),
        start_time_ns,
        parent.project,
        parent.project_id,
        1,
        (parent.run_id, parent.trace_id),
    )


# --- parsing, for the local service's validation and for tests -----------------

DOTTED_ENTRY_RE = re.compile(
    r"(?P<ts>\d{8}T\d{6}\d{6})Z"
    r"(?P<id>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
)


ENTRY_CHARS: Final = 58
"""Characters in one dotted_order entry: 21 of time, ``Z``, a 36-character UUID."""

MAX_DEPTH: Final = 256
"""The most entries a dotted_order may have, that is how deep a run may sit in its trace (a root is 1).

The one owner of the number. Each run carries every ancestor's entry, so a chain
of d runs costs ~59·d²/2 bytes wherever it is held: nesting 5,000 spans took the
processor to 1.26 GB, and three chains 2,000/2,000/1,000 deep made the local
service's database 780 MB. At 256 a run's dotted_order is at most 15,103
characters. The local service refuses a deeper one (422, rule
``dotted_order_depth``, even when lenient); the exporter never sends one: a run
whose parent is this deep starts a new trace naming its real parent
(:func:`continued_ids`). The service's own SDK has no such limit, and the hosted
service documents none (only 25,000 runs a trace); docs/delivery.md, "Where the
spec says 'not shown'", gives the reasons for this number.
"""

MAX_DOTTED_ORDER_CHARS: Final = MAX_DEPTH * (ENTRY_CHARS + 1) - 1
"""The longest dotted_order accepted: :data:`MAX_DEPTH` entries and the dots between them."""


class DottedOrderError(ValueError):
    """A dotted_order that does not follow spec 2.3; the message says which rule."""


class DottedOrderTooDeep(DottedOrderError):
    """A dotted_order past :data:`MAX_DEPTH` entries (or :data:`MAX_DOTTED_ORDER_CHARS` characters)."""


def parse_dotted_order(value: str) -> list[tuple[datetime, UUID]]:
    """Split a dotted_order into ``(start_time, run_id)`` entries, checking the format.

    >>> [str(u) for _, u in parse_dotted_order(
    ...     "20231114T221320123456Z018bcfe5-68e3-7000-8000-000000000001")]
    ['018bcfe5-68e3-7000-8000-000000000001']
    """
    if not isinstance(value, str) or not value:
        raise DottedOrderError("dotted_order must be a non-empty string")
    if len(value) > MAX_DOTTED_ORDER_CHARS:
        # Before reading any entry: an 18.9 MB value (320k entries) must cost a count, not a parse.
        raise DottedOrderTooDeep(
            f"dotted_order has {value.count('.') + 1} entries ({len(value)} characters); the limit is "
            f"{MAX_DEPTH} entries ({MAX_DOTTED_ORDER_CHARS} characters): a run may be at most {MAX_DEPTH} deep in its trace"
        )
    entries: list[tuple[datetime, UUID]] = []
    for index, part in enumerate(value.split(".")):
        match = DOTTED_ENTRY_RE.fullmatch(part)
        if match is None:
            raise DottedOrderError(
                f"entry {index} {part[:80]!r} is not <%Y%m%dT%H%M%S%f>Z<uuid> "
                "(8-digit date, T, 6-digit time, 6-digit microseconds, Z, hyphenated UUID)"
            )
        try:
            ts = datetime.strptime(match["ts"], "%Y%m%dT%H%M%S%f").replace(tzinfo=timezone.utc)
        except ValueError as exc:
            raise DottedOrderError(f"entry {index} has an impossible time {match['ts']!r}") from exc
        entries.append((ts, UUID(match["id"])))
    return entries


def chain_error(entries: list[tuple[datetime, UUID]]) -> str | None:
    """What makes parsed entries no chain of runs the service takes, or None: a time that goes back,
    or an id that comes twice (a run its own ancestor).

    >>> a, b = UUID(int=1), UUID(int=2)
    >>> t = datetime(2025, 1, 1, tzinfo=timezone.utc)
    >>> chain_error([(t, a), (t, b)]) is None, chain_error([(t, a), (t, a)])
    (True, 'entry 1 repeats the id of an entry before it')
    """
    seen: set[UUID] = set()
    for index, (moment, run_id) in enumerate(entries):
        if index and moment < entries[index - 1][0]:
            return f"entry {index} is earlier than the entry before it"
        if run_id in seen:
            return f"entry {index} repeats the id of an entry before it"
        seen.add(run_id)
    return None


def _compact(moment: datetime) -> str:
    """``%Y%m%dT%H%M%S`` with a 4-digit year whatever the platform's strftime does with year 999."""
    return f"{moment.year:04d}{moment.month:02d}{moment.day:02d}T{moment.hour:02d}{moment.minute:02d}{moment.second:02d}"


def _entry_time_ns(moment: datetime) -> int:
    """Nanoseconds since the epoch of a parsed entry time, in integers (floats lose microseconds)."""
    whole = int(moment.replace(microsecond=0).timestamp())
    return whole * 1_000_000_000 + moment.microsecond * 1000


# --- ids given by the span itself ---------------------------------------------------

#: The service's documented attributes that place a span in an existing run tree
#: ("Core LangSmith attributes" of its OTel guide).
LANGSMITH_TRACE_ID = "langsmith.trace.id"
LANGSMITH_SPAN_ID = "langsmith.span.id"
LANGSMITH_PARENT_ID = "langsmith.span.parent_id"
LANGSMITH_DOTTED_ORDER = "langsmith.span.dotted_order"
#: The four attributes that place a run in its tree, in GivenIds' order (read by
#: ``_convert.given_ids``; consumed by the mapping so they are not repeated in metadata).
ID_ATTRIBUTES = (LANGSMITH_TRACE_ID, LANGSMITH_SPAN_ID, LANGSMITH_PARENT_ID, LANGSMITH_DOTTED_ORDER)
#: The project the span's run goes to (read where the span starts its tree, see ``_convert.span_ids``).
LANGSMITH_SESSION_NAME = "langsmith.trace.session_name"
LANGSMITH_SESSION_ID = "langsmith.trace.session_id"


class GivenIds(NamedTuple):
    """The raw values of the four ``langsmith.*`` id attributes (None when absent).

    Typed ``Any``, not ``object``: the compiled build (mypyc) looks the field
    types up by name in this module when it builds the class, and ``object``
    is not there.
    """

    trace_id: Any = None
    span_id: Any = None
    parent_id: Any = None
    dotted_order: Any = None


class GivenIdsError(ValueError):
    """Ids given by attributes that cannot be used; ``attribute`` names the one at fault."""

    def __init__(self, attribute: str, reason: str) -> None:
        super().__init__(f"{attribute}: {reason}")
        self.attribute = attribute
        self.reason = reason


def canonical_uuid(value: object) -> str | None:
    """The hyphenated lower-case form of a UUID string (hyphenated or 32 hex digits), else None.

    >>> canonical_uuid("0190A3B4C5D67E8F9A0B1C2D3E4F5061")
    '0190a3b4-c5d6-7e8f-9a0b-1c2d3e4f5061'
    >>> canonical_uuid("run-1") is None
    True
    """
    if isinstance(value, UUID):
        return str(value)
    if not isinstance(value, str):
        return None
    try:
        return str(UUID(value))
    except ValueError:
        return None


def _present(value: object) -> bool:
    # An empty string means "none": the service's own examples send parent_id "" for a root.
    return value is not None and value != ""


def _given_uuid(attribute: str, value: object) -> str:
    rid = canonical_uuid(value)
    if rid is None:
        raise GivenIdsError(attribute, f"{str(value)[:80]!r} is not a UUID")
    return rid


def _entry_id(entry: str) -> str:
    """The run id of one dotted_order entry, lower-cased (entries were checked when they were made or parsed)."""
    return entry.partition("Z")[2].lower()


def _placed_in_known_tree(trace_id: object, span_id: object, parent_id: object, computed: RunIds) -> RunIds:
    """:func:`given_run_ids` without a dotted_order: the run stays in the tree we know it in."""
    run_id = _given_uuid(LANGSMITH_SPAN_ID, span_id) if span_id is not None else computed.run_id
    entries = computed.dotted_order.split(".")
    above = entries[:-1]
    above_ids = [_entry_id(e) for e in above]
    if run_id in above_ids:
        raise GivenIdsError(LANGSMITH_SPAN_ID, f"{run_id} is the id of a run above this one")
    if parent_id is not None:
        parent = _given_uuid(LANGSMITH_PARENT_ID, parent_id)
        if parent == run_id:
            raise GivenIdsError(LANGSMITH_PARENT_ID, f"{parent} is the run's own id")
        if parent not in above_ids:
            raise GivenIdsError(
                LANGSMITH_PARENT_ID,
                f"{parent} is not a run this span is known to be under; nesting under another run "
                f"needs {LANGSMITH_DOTTED_ORDER} (the parent's dotted_order and the run's own entry)",
            )
        # Under an ancestor further up: the chain is cut there (the start stays clamped, to a later run's start).
        cut = above_ids.index(parent) + 1
        above, above_ids = above[:cut], above_ids[:cut]
    trace = above_ids[0] if above else run_id
    if trace_id is not None and _given_uuid(LANGSMITH_TRACE_ID, trace_id) != trace:
        raise GivenIdsError(
            LANGSMITH_TRACE_ID,
            f"{trace_id} is not the trace the run is in ({trace}); moving a run to another trace "
            f"needs {LANGSMITH_DOTTED_ORDER}",
        )
    if run_id == computed.run_id and len(above) == len(entries) - 1:
        return computed  # the given ids say what we computed
    own = format_entry(computed.start_time_ns, run_id)
    return computed._replace(
        run_id=run_id,
        trace_id=trace,
        parent_run_id=above_ids[-1] if above else None,
        dotted_order=".".join([*above, own]),
        depth=len(above) + 1,
    )


def given_run_ids(given: GivenIds, computed: RunIds) -> RunIds:
    """The ids to use when a span carries ``langsmith.*`` ids; ``computed`` are the ones we derived.

    * With ``langsmith.span.dotted_order`` the span's place is fully given: the
      run id is its last entry, the trace id its first, the parent the entry
      before the last, and the start time the last entry's (so start_time and
      the entry agree, as the service requires). ``langsmith.span.id``,
      ``langsmith.trace.id`` and ``langsmith.span.parent_id``, when also given,
      must say the same.
    * Without it, each of the other three is honoured alone (or with the
      others) where it agrees with what we know of the span's place, that is
      ``computed`` and the chain of runs above it in ``computed.dotted_order``
      (its OTel ancestors, and the remote or SDK run they hang under):

      - ``langsmith.span.id`` becomes the run id, in the place we computed; the
        span's children then extend it (a root's trace id is its own id).
      - ``langsmith.span.parent_id`` nests the run under that run when it is
        one of the runs above it: the dotted_order is that run's (known, since
        it is a prefix of ours) followed by the run's own entry. Any other run
        is refused: its dotted_order, which a child's must repeat exactly, is
        known only to whoever sent it, so the span must give
        ``langsmith.span.dotted_order`` itself.
      - ``langsmith.trace.id`` must be the trace the run ends up in. It cannot
        move a run to another trace on its own: the run would need a parent
        there, and that parent's dotted_order.

    Raises :class:`GivenIdsError` naming the attribute at fault; the caller then
    keeps ``computed`` (every given id, not only the one at fault).

    >>> computed = root_ids("00000000-0000-7000-8000-000000000009", 1_700_000_000_000_000_000)
    >>> parent = "018bcfe5-68e3-7000-8000-000000000001"
    >>> child = "018bcfe5-68e3-7000-8000-000000000002"
    >>> dotted = f"20231114T221320000000Z{parent}.20231114T221320000500Z{child}"
    >>> ids = given_run_ids(GivenIds(span_id=child, dotted_order=dotted), computed)
    >>> (ids.run_id == child, ids.trace_id == ids.parent_run_id == parent, ids.dotted_order == dotted)
    (True, True, True)
    """
    trace_id, span_id, parent_id, dotted = (v if _present(v) else None for v in given)
    if dotted is None:
        if trace_id is None and span_id is None and parent_id is None:
            return computed
        return _placed_in_known_tree(trace_id, span_id, parent_id, computed)

    if not isinstance(dotted, str):
        raise GivenIdsError(LANGSMITH_DOTTED_ORDER, f"{str(dotted)[:80]!r} is not a string")
    try:
        entries = parse_dotted_order(dotted)
    except DottedOrderError as exc:
        raise GivenIdsError(LANGSMITH_DOTTED_ORDER, str(exc)) from None
    broken = chain_error(entries)
    if broken is not None:
        raise GivenIdsError(LANGSMITH_DOTTED_ORDER, broken)
    ids = [str(u) for _, u in entries]
    if span_id is not None and _given_uuid(LANGSMITH_SPAN_ID, span_id) != ids[-1]:
        raise GivenIdsError(LANGSMITH_DOTTED_ORDER, f"its last entry {ids[-1]} is not {LANGSMITH_SPAN_ID} {span_id}")
    if trace_id is not None and _given_uuid(LANGSMITH_TRACE_ID, trace_id) != ids[0]:
        raise GivenIdsError(LANGSMITH_TRACE_ID, f"{trace_id} is not the dotted_order's first id {ids[0]}")
    parent = ids[-2] if len(ids) > 1 else None
    if parent_id is not None and _given_uuid(LANGSMITH_PARENT_ID, parent_id) != parent:
        where = f"the dotted_order's entry before the last ({parent})" if parent else "in a one-entry (root) dotted_order"
        raise GivenIdsError(LANGSMITH_PARENT_ID, f"{parent_id} is not {where}")
    # Rebuilt from the parsed entries: lower-case ids, as every other dotted_order we send.
    canonical = ".".join(f"{_compact(moment)}{moment.microsecond:06d}Z{rid}" for (moment, _), rid in zip(entries, ids))
    return RunIds(ids[-1], ids[0], parent, canonical, _entry_time_ns(entries[-1][0]), depth=len(ids))


def ids_from_dotted_order(value: str, project: str | None = None) -> RunIds:
    """The ids of the run a dotted_order ends with (a remote or SDK parent); raises DottedOrderError.

    >>> ids = ids_from_dotted_order("20231114T221320000001Z018bcfe5-6800-7000-8000-000000000001")
    >>> ids.run_id == ids.trace_id and ids.parent_run_id is None
    True
    """
    entries = parse_dotted_order(value)
    broken = chain_error(entries)
    if broken is not None:
        # Every run under it would repeat the fault, and the service refuses each of them.
        raise DottedOrderError(broken)
    last_time, last_id = entries[-1]
    start_ns = _entry_time_ns(last_time)
    return RunIds(
        run_id=str(last_id),
        trace_id=str(entries[0][1]),
        parent_run_id=str(entries[-2][1]) if len(entries) > 1 else None,
        dotted_order=value,
        start_time_ns=start_ns,
        project=project,
        depth=len(entries),
    )
