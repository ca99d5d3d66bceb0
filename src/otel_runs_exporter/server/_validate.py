"""What the local service accepts: the rules of spec 2.3 and 4.4, one function each.

Every ``check_*`` function is pure and returns a list of :class:`Violation` (empty
when the rule holds). :mod:`._ingest` combines them for each kind of request and
turns its body into :class:`RunOp` values for the store. The dotted_order format
itself lives in :mod:`otel_runs_exporter._ids`, which the exporter uses to build
the values this module checks.

Rules, in spec order (the ``rule`` name a violation carries is in brackets):

Multipart ingestion (4.4)
  * a part name is ``post.<id>``, ``patch.<id>``, ``post.<id>.<field>``, ``patch.<id>.<field>``
    with field inputs, outputs, events (spec) or extra, error, serialized (sent by
    real clients), ``attachment.<id>.<name>`` or ``feedback.<id>`` [part_name]
  * a field part belongs to a main part in the same request [part_without_run]
  * JSON parts have content type application/json, parameters allowed [part_content_type]
  * each part declares its length (Content-Length, or a ``length`` content-type
    parameter) and the declaration matches its bytes [part_length]
  * every JSON part holds JSON [part_json]; the main part is an object, inputs and
    outputs are objects, events a list [field_types]
  * the main part carries no inputs, outputs or events [split_fields]
  * the main part includes trace_id and dotted_order [required_fields]
  * a ``feedback.<id>`` part is a feedback object with a key and a run or project
    (:func:`._feedback.check_feedback`, the rule ``POST /feedback`` answers 422 for) [feedback]

Runs (2.3), for every way a run arrives
  * name, run_type, error and session_name are strings, serialized an object, tags a
    list of strings, reference_example_id and session_id UUIDs, when given; run_type one
    of the service's run types (``_convert.RUN_TYPES``: llm, chain, tool, ...) [field_types]
  * ids are UUIDs, 32-hex or hyphenated, and a body's id matches its part name or
    path [uuid, id_match]
  * start_time and end_time are ISO 8601 [timestamp_format]
  * dotted_order entries are ``%Y%m%dT%H%M%S%fZ<uuid>`` [dotted_order_format]
  * dotted_order has at most ``_ids.MAX_DEPTH`` entries (``MAX_DOTTED_ORDER_CHARS``
    characters): a run at most that deep in its trace [dotted_order_depth]. A limit,
    not a rule of the spec: a lenient service refuses it too (:data:`LIMIT_RULES`)
  * trace_id is the first entry's UUID [trace_id_first]
  * parent_run_id is the UUID of the entry before the last; a root has none [parent_before_last]
  * parent_run_id is not the run itself [own_parent], and no UUID comes twice in
    dotted_order [repeated_entry]: a run is never its own ancestor
  * the last entry's UUID is the run's id [run_id_last]
  * entry times never go back along the chain [time_order]
  * start_time equals the time of the run's own entry [start_time_entry]
  * a post names exactly one of session_name and session_id [session]

Basic tracing (2.3 rule 4)
  * POST /runs carries id and start_time; the service computes trace_id and
    dotted_order from the parent's stored dotted_order [required_fields, parent_known],
    under a parent less than ``MAX_DEPTH`` deep [dotted_order_depth]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Literal
from uuid import UUID

from .._convert import RUN_TYPES
from .._ids import (
    DottedOrderError,
    DottedOrderTooDeep,
    canonical_uuid,
    parse_dotted_order,
)
from ._jsonio import parse
from ._multipart import Part
from ._numbers import plain_int

__all__ = [
    "MAIN_FIELD_PARTS",
    "LIMIT_RULES",
    "EXTRA_FIELD_PARTS",
    "PartName",
    "RunOp",
    "Violation",
    "check_part_name",
    "check_part_content_type",
    "check_part_length",
    "check_part_json",
    "check_field_types",
    "check_split_fields",
    "check_required_ids",
    "check_id_matches",
    "check_timestamps",
    "check_dotted_order_format",
    "check_trace_id_first",
    "check_parent_before_last",
    "check_not_own_parent",
    "check_no_repeated_entry",
    "parent_cycles",
    "check_run_id_last",
    "check_time_order",
    "check_start_time_entry",
    "check_session",
    "check_run",
    "canonical_id",
    "parse_timestamp",
    "moment_ns",
    "is_present",
    
]

Loc = tuple[str | int, ...]
OpKind = Literal["post", "patch"]

LIMIT_RULES = frozenset({"dotted_order_depth"})
"""Rules that bound what the service holds rather than check the spec: refused even by a lenient service."""

MAIN_FIELD_PARTS = frozenset({"inputs", "outputs", "events"})
"""Field parts the spec names (4.4)."""
EXTRA_FIELD_PARTS = frozenset({"extra", "error", "serialized"})
"""Field parts real clients legitimately add."""
_SPLIT_FIELDS = ("inputs", "outputs", "events")


@dataclass(frozen=True)
class Violation:
    """One broken rule: which run, which rule, where in the request, and why."""

    run_id: str | None
    rule: str
    msg: str
    loc: Loc = ("body",)

    def as_error(self) -> dict[str, Any]:
        """The spec 2.2 ValidationError item for this violation."""
        who = f"run {self.run_id}: " if self.run_id else ""
        return {"loc": list(self.loc), "msg": f"{who}{self.msg} [{self.rule}]", "type": f"runs.{self.rule}"}

    def as_dict(self) -> dict[str, Any]:
        """A plain dict for logs and the store."""
        return {"run_id": self.run_id, "rule": self.rule, "msg": self.msg, "loc": list(self.loc)}


@dataclass
class RunOp:
    """A post or patch of one run, assembled from a request and ready to store."""

    kind: OpKind
    run_id: str
    data: dict[str, Any]
    loc: Loc = ("body",)


@dataclass(frozen=True)
class PartName:
    """A parsed multipart part name."""

    kind: Literal["post", "patch", "attachment", "feedback"]
    run_id: str
    field: str | None = None


# --- small helpers ---------------------------------------------------------------


# The one rule for reading a run id, shared with the exporter (which reads ids given by attributes).
canonical_id = canonical_uuid


_ISO_RE = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<frac>\d{1,9}))?"
    r"(?P<tz>Z|z|[+-]\d{2}:?\d{2})?"
)


def parse_timestamp(value: Any) -> datetime | None:
    """An ISO 8601 timestamp as an aware UTC datetime (truncated to microseconds), else None.

    Written out rather than ``datetime.fromisoformat`` because Python 3.10's version
    rejects ``Z`` and fractions that are not 3 or 6 digits, both of which clients send.
    """
    if not isinstance(value, str):
        return None
    match = _ISO_RE.fullmatch(value.strip())
    if match is None:
        return None
    frac = (match["frac"] or "").ljust(6, "0")[:6]
    tz = match["tz"]
    if tz is None or tz in ("Z", "z"):
        tz = "+00:00"
    elif ":" not in tz:
        tz = tz[:3] + ":" + tz[3:]
    try:
        parsed = datetime.fromisoformat(f"{match['date']}T{match['time']}.{frac}{tz}")
    except ValueError:
        return None
    try:
        return parsed.astimezone(timezone.utc)
    except OverflowError:  # 0001-01-01T00:30+01:00 is a valid text, but before year 1 in UTC
        return None


def moment_ns(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000


def is_present(run: Mapping[str, Any], key: str) -> bool:
    return run.get(key) is not None


# --- multipart part rules (4.4) -------------------------------------------------------


def check_part_name(name: str, loc: Loc) -> tuple[PartName | None, list[Violation]]:
    """Part names follow 4.4's table, plus the shapes real clients add."""
    pieces = name.split(".")
    head = pieces[0]
    rid = canonical_id(pieces[1]) if len(pieces) > 1 else None
    bad = Violation(None, "part_name", f"part name {name[:120]!r} is not one of the allowed shapes", loc)
    if head in ("post", "patch") and len(pieces) in (2, 3):
        if rid is None:
            return None, [Violation(None, "part_name", f"part name {name[:120]!r}: {pieces[1]!r} is not a UUID", loc)]
        if len(pieces) == 2:
            return PartName(head, rid), []  # type: ignore[arg-type]
        if pieces[2] in MAIN_FIELD_PARTS or pieces[2] in EXTRA_FIELD_PARTS:
            return PartName(head, rid, pieces[2]), []  # type: ignore[arg-type]
        return None, [
            Violation(rid, "part_name", f"part name {name[:120]!r}: unknown field part {pieces[2]!r}", loc)
        ]
    if head == "attachment" and len(pieces) == 3 and rid is not None and pieces[2]:
        return PartName("attachment", rid, pieces[2]), []
    if head == "feedback" and len(pieces) == 2 and rid is not None:
        return PartName("feedback", rid), []
    return None, [bad]


def check_part_content_type(part: Part, parsed: PartName, loc: Loc) -> list[Violation]:
    """Every part except an attachment is application/json; parameters are allowed."""
    if parsed.kind == "attachment":
        if part.media_type:
            return []
        return [Violation(parsed.run_id, "part_content_type", "attachment part has no Content-Type", loc)]
    if part.media_type == "application/json":
        return []
    return [
        Violation(
            parsed.run_id,
            "part_content_type",
            f"content type is {part.content_type!r}, expected application/json",
            loc,
        )
    ]


def check_part_length(part: Part, run_id: str | None, loc: Loc) -> list[Violation]:
    """Each part declares its length, and the declaration matches the bytes that came.

    Real clients declare it either as a Content-Length header or, for file-backed
    attachments, as a ``length`` parameter of the content type.
    """
    declared: list[tuple[str, int]] = []
    out = []
    if part.declared_length is not None:
        declared.append(("Content-Length", part.declared_length))
    if "length" in part.params:
        raw = part.params["length"]
        length = plain_int(raw)
        if length is not None:
            declared.append(("length parameter", length))
        else:
            out.append(Violation(run_id, "part_length", f"length parameter {raw[:40]!r} is not a number", loc))
    if not declared and not out:
        return [Violation(run_id, "part_length", "part has no Content-Length", loc)]
    for what, value in declared:
        if value != len(part.content):
            out.append(
                Violation(
                    run_id,
                    "part_length",
                    f"{what} says {value} bytes but the part has {len(part.content)}",
                    loc,
                )
            )
    return out


# orjson reads 1,024 levels of nesting but writes only 255, so a deeper value would be
# accepted here and then fail in the store; the exporter itself cuts values at 100.
MAX_JSON_DEPTH = 200


def json_depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``value`` nests containers more than ``limit`` deep (iterative: no recursion limit).

    >>> json_depth_exceeds([[[]]], 2), json_depth_exceeds({"a": [1]}, 2)
    (True, False)
    """
    stack = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict):
            children = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def too_deep(run_id: str | None, loc: Loc) -> Violation:
    return Violation(run_id, "json_depth", f"JSON nested more than {MAX_JSON_DEPTH} levels deep", loc)


def check_part_json(part: Part, run_id: str | None, loc: Loc) -> tuple[Any, list[Violation]]:
    """A JSON part holds exactly one JSON value, nested at most MAX_JSON_DEPTH deep."""
    try:
        value = parse(part.content)
    except RecursionError:
        return None, [too_deep(run_id, loc)]
    except ValueError as exc:
        return None, [Violation(run_id, "part_json", f"part is not valid JSON ({exc})", loc)]
    if json_depth_exceeds(value):
        return None, [too_deep(run_id, loc)]
    return value, []


def check_field_types(run_id: str | None, name: str, value: Any, loc: Loc) -> list[Violation]:
    """Main parts and inputs/outputs are JSON objects; events is a list (2.3)."""
    expected: tuple[type, str] | None = {
        "main": (dict, "an object"),
        "inputs": (dict, "an object"),
        "outputs": (dict, "an object"),
        "events": (list, "a list"),
        "extra": (dict, "an object"),
    }.get(name)
    if expected is None or value is None or isinstance(value, expected[0]):
        return []
    what = "the run" if name == "main" else name
    return [Violation(run_id, "field_types", f"{what} must be {expected[1]}, got {type(value).__name__}", loc)]


# Main fields the service's client reads back into typed fields: a run stored with another type
# could not be read by it (the SDK's read_run, and list_runs for its whole project).
_SCALAR_TYPES: dict[str, tuple[type, str]] = {
    "name": (str, "a string"),
    "run_type": (str, "a string"),
    "error": (str, "a string"),
    "session_name": (str, "a string"),
    "serialized": (dict, "an object"),
    "tags": (list, "a list of strings"),
}


def check_scalar_fields(run_id: str, run: Mapping[str, Any], loc: Loc) -> list[Violation]:
    """name, run_type, error and session_name are strings, serialized an object, tags a list of strings,
    reference_example_id and session_id UUIDs, each when given (not null); run_type one the service knows."""
    out = []
    for key, (kind, expected) in _SCALAR_TYPES.items():
        value = run.get(key)
        if value is None:
            continue
        if not isinstance(value, kind) or (isinstance(value, list) and not all(isinstance(tag, str) for tag in value)):
            out.append(Violation(run_id, "field_types", f"{key} must be {expected}, got {_shown(value)}", (*loc, key)))
    run_type = run.get("run_type")
    if isinstance(run_type, str) and run_type not in RUN_TYPES:
        # The service's run type is an enum: its SDK's test of a run typed "agent" expects this 422.
        out.append(Violation(run_id, "field_types", f"run_type must be one of {', '.join(sorted(RUN_TYPES))}, "
                             f"got {_shown(run_type)}", (*loc, "run_type")))
    for key in ("reference_example_id", "session_id"):
        value = run.get(key)
        if value is not None and canonical_id(value) is None:
            out.append(Violation(run_id, "field_types", f"{key} must be a UUID, got {_shown(value)}", (*loc, key)))
    return out


def _shown(value: Any) -> str:
    return repr(value[:60]) if isinstance(value, str) else type(value).__name__


def check_split_fields(run_id: str, run: Mapping[str, Any], loc: Loc) -> list[Violation]:
    """In multipart, inputs, outputs and events travel in their own parts, not in the main part."""
    inside = [key for key in _SPLIT_FIELDS if key in run]
    if not inside:
        return []
    return [
        Violation(
            run_id,
            "split_fields",
            f"main part contains {', '.join(inside)}; send them as separate .{inside[0]} parts",
            loc,
        )
    ]


def check_required_ids(run_id: str, run: Mapping[str, Any], loc: Loc) -> list[Violation]:
    """Multipart and batch runs include trace_id and dotted_order (2.3 rule 4, 4.4)."""
    missing = [key for key in ("trace_id", "dotted_order") if not is_present(run, key)]
    if not missing:
        return []
    return [Violation(run_id, "required_fields", f"missing {' and '.join(missing)}", loc)]


def check_id_matches(run_id: str, run: Mapping[str, Any], loc: Loc, where: str = "part name") -> list[Violation]:
    """Ids are UUIDs, and an id in the body names the same run as the part name or path."""
    out = []
    for key in ("id", "trace_id", "parent_run_id"):
        if is_present(run, key) and canonical_id(run[key]) is None:
            out.append(Violation(run_id, "uuid", f"{key} {str(run[key])[:80]!r} is not a UUID", (*loc, key)))
    if is_present(run, "id") and canonical_id(run["id"]) not in (None, run_id):
        out.append(Violation(run_id, "id_match", f"body id {run['id']!r} differs from the {where}", (*loc, "id")))
    return out


def check_timestamps(run_id: str, run: Mapping[str, Any], loc: Loc) -> list[Violation]:
    """start_time and end_time, when present, are ISO 8601 timestamps."""
    return [
        Violation(run_id, "timestamp_format", f"{key} {str(run[key])[:60]!r} is not an ISO 8601 timestamp", (*loc, key))
        for key in ("start_time", "end_time")
        if is_present(run, key) and parse_timestamp(run[key]) is None
    ]


Entries = list[tuple[datetime, UUID]]


def check_dotted_order_format(run_id: str, run: Mapping[str, Any], loc: Loc) -> tuple[Entries | None, list[Violation]]:
    """dotted_order is dot-separated ``%Y%m%dT%H%M%S%fZ<uuid>`` entries (2.3 rule 1)."""
    if not is_present(run, "dotted_order"):
        return None, []
    try:
        return parse_dotted_order(run["dotted_order"]), []
    except DottedOrderTooDeep as exc:
        return None, [Violation(run_id, "dotted_order_depth", str(exc), (*loc, "dotted_order"))]
    except DottedOrderError as exc:
        return None, [Violation(run_id, "dotted_order_format", f"dotted_order: {exc}", (*loc, "dotted_order"))]


def check_trace_id_first(run_id: str, run: Mapping[str, Any], entries: Entries, loc: Loc) -> list[Violation]:
    """trace_id equals the UUID of the first entry (2.3 rule 3)."""
    trace = canonical_id(run.get("trace_id"))
    if trace is None or trace == str(entries[0][1]):
        return []
    return [
        Violation(
            run_id,
            "trace_id_first",
            f"trace_id {trace} is not the first dotted_order entry's UUID {entries[0][1]}",
            (*loc, "trace_id"),
        )
    ]


def check_parent_before_last(run_id: str, run: Mapping[str, Any], entries: Entries, loc: Loc) -> list[Violation]:
    """parent_run_id equals the UUID of the entry before the last; a root run has none (2.3 rule 3)."""
    parent = canonical_id(run.get("parent_run_id"))
    if len(entries) == 1:
        if parent is None:
            return []
        return [
            Violation(
                run_id,
                "parent_before_last",
                f"parent_run_id {parent} is set but dotted_order has a single entry (a root run)",
                (*loc, "parent_run_id"),
            )
        ]
    expected = str(entries[-2][1])
    if parent == expected:
        return []
    return [
        Violation(
            run_id,
            "parent_before_last",
            f"parent_run_id {parent} is not the UUID before the last dotted_order entry ({expected})",
            (*loc, "parent_run_id"),
        )
    ]


def check_not_own_parent(run_id: str, run: Mapping[str, Any], loc: Loc) -> list[Violation]:
    """parent_run_id never names the run itself: a tree whose run is its own parent has no root to show it from."""
    if canonical_id(run.get("parent_run_id")) != run_id:
        return []
    return [
        Violation(
            run_id, "own_parent", "parent_run_id is the run's own id; a run cannot be its own parent", (*loc, "parent_run_id")
        )
    ]


def check_no_repeated_entry(run_id: str, entries: Entries, loc: Loc) -> list[Violation]:
    """No UUID comes twice in dotted_order: a run is never its own ancestor."""
    seen: dict[UUID, int] = {}
    for index, (_, uid) in enumerate(entries):
        first = seen.setdefault(uid, index)
        if first != index:
            return [
                Violation(
                    run_id,
                    "repeated_entry",
                    f"dotted_order names run {uid} at entries {first} and {index}; a run cannot be its own ancestor",
                    (*loc, "dotted_order"),
                )
            ]
    return []


def parent_cycles(parents: Mapping[str, str | None]) -> list[list[str]]:
    """The loops in runs' parent links (run id -> parent_run_id): runs that are their own ancestors.

    Each loop once, from its first run in ``parents``' order. The per-run rules refuse a
    run that is its own parent, but two runs that name each other are each valid on their
    own, and a database may hold runs stored before the rule. Iterative, linear time.

    >>> parent_cycles({"a": "b", "b": "a", "c": "c", "d": "a", "e": None})
    [['a', 'b'], ['c']]
    """
    state: dict[str, bool] = {}  # True while on the path being followed, then False
    cycles: list[list[str]] = []
    for start in parents:
        path: list[str] = []
        node: str | None = start
        while node is not None and node in parents and node not in state:
            state[node] = True
            path.append(node)
            node = parents[node]
        if node is not None and state.get(node):
            cycles.append(path[path.index(node) :])
        for seen in path:
            state[seen] = False
    return cycles


def check_run_id_last(run_id: str, entries: Entries, loc: Loc) -> list[Violation]:
    """The last entry's UUID is the run's own id (2.3 rules 1 and 2)."""
    if str(entries[-1][1]) == run_id:
        return []
    return [
        Violation(
            run_id,
            "run_id_last",
            f"last dotted_order entry's UUID {entries[-1][1]} is not the run id",
            (*loc, "dotted_order"),
        )
    ]


def check_time_order(run_id: str, entries: Entries, loc: Loc) -> list[Violation]:
    """A child's entry time is never before its parent's: timestamps do not go back along the chain."""
    for index in range(1, len(entries)):
        if entries[index][0] < entries[index - 1][0]:
            return [
                Violation(
                    run_id,
                    "time_order",
                    f"dotted_order entry {index} ({entries[index][0].isoformat()}) is earlier than "
                    f"entry {index - 1} ({entries[index - 1][0].isoformat()})",
                    (*loc, "dotted_order"),
                )
            ]
    return []


def check_start_time_entry(run_id: str, run: Mapping[str, Any], entries: Entries, loc: Loc) -> list[Violation]:
    """start_time is the time of the run's own dotted_order entry, to the microsecond (2.3 rule 1)."""
    start = parse_timestamp(run.get("start_time"))
    if start is None or start == entries[-1][0]:
        return []
    return [
        Violation(
            run_id,
            "start_time_entry",
            f"start_time {run['start_time']} does not match its dotted_order entry "
            f"{entries[-1][0].strftime('%Y%m%dT%H%M%S%fZ')}",
            (*loc, "start_time"),
        )
    ]


def check_session(run_id: str, run: Mapping[str, Any], loc: Loc) -> list[Violation]:
    """A post names exactly one of session_name and session_id (2.3)."""
    given = [key for key in ("session_name", "session_id") if is_present(run, key)]
    if len(given) == 1:
        return []
    msg = "names both session_name and session_id" if given else "names neither session_name nor session_id"
    return [Violation(run_id, "session", f"post {msg}; specify exactly one", loc)]


def check_run(
    kind: OpKind, run_id: str, run: Mapping[str, Any], loc: Loc, *, require_ids: bool, where: str = "part name"
) -> list[Violation]:
    """All per-run rules of 2.3 for one assembled run (main fields only)."""
    out = check_id_matches(run_id, run, loc, where)
    out += check_scalar_fields(run_id, run, loc)
    out += check_not_own_parent(run_id, run, loc)
    out += check_timestamps(run_id, run, loc)
    if require_ids:
        out += check_required_ids(run_id, run, loc)
    if kind == "post":
        out += check_session(run_id, run, loc)
    entries, errors = check_dotted_order_format(run_id, run, loc)
    out += errors
    if entries:
        out += check_trace_id_first(run_id, run, entries, loc)
        if kind == "post" or "parent_run_id" in run:
            out += check_parent_before_last(run_id, run, entries, loc)
        out += check_run_id_last(run_id, entries, loc)
        out += check_no_repeated_entry(run_id, entries, loc)
        out += check_time_order(run_id, entries, loc)
        out += check_start_time_entry(run_id, run, entries, loc)
    return out
