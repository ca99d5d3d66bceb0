"""What the local service accepts: the rules of spec 2.3 and 4.4, one function each.

Every ``check_*`` function is pure and returns a list of :class:`Violation` (empty
when the rule holds). The ``read_*`` functions at the bottom combine them for one
kind of request and turn its body into :class:`RunOp` values for the store. The
dotted_order format itself lives in :mod:`otel_runs_exporter._ids`, which the
exporter uses to build the values this module checks.

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

Runs (2.3), for every way a run arrives
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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal
from uuid import UUID

import orjson

from .._ids import (
    MAX_DEPTH,
    MAX_DOTTED_ORDER_CHARS,
    DottedOrderError,
    DottedOrderTooDeep,
    RunIds,
    canonical_uuid,
    child_ids,
    parse_dotted_order,
    root_ids,
)
from ._multipart import Part
from ._numbers import plain_int

__all__ = [
    "MAIN_FIELD_PARTS",
    "LIMIT_RULES",
    "EXTRA_FIELD_PARTS",
    "PartName",
    "Attachment",
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
    "read_multipart",
    "read_batch",
    "read_basic_post",
    "read_basic_patch",
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
    return parsed.astimezone(timezone.utc)


def _ns(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000


def _present(run: Mapping[str, Any], key: str) -> bool:
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
        value = orjson.loads(part.content)
    except orjson.JSONDecodeError as exc:
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
    missing = [key for key in ("trace_id", "dotted_order") if not _present(run, key)]
    if not missing:
        return []
    return [Violation(run_id, "required_fields", f"missing {' and '.join(missing)}", loc)]


def check_id_matches(run_id: str, run: Mapping[str, Any], loc: Loc, where: str = "part name") -> list[Violation]:
    """Ids are UUIDs, and an id in the body names the same run as the part name or path."""
    out = []
    for key in ("id", "trace_id", "parent_run_id"):
        if _present(run, key) and canonical_id(run[key]) is None:
            out.append(Violation(run_id, "uuid", f"{key} {str(run[key])[:80]!r} is not a UUID", (*loc, key)))
    if _present(run, "id") and canonical_id(run["id"]) not in (None, run_id):
        out.append(Violation(run_id, "id_match", f"body id {run['id']!r} differs from the {where}", (*loc, "id")))
    return out


def check_timestamps(run_id: str, run: Mapping[str, Any], loc: Loc) -> list[Violation]:
    """start_time and end_time, when present, are ISO 8601 timestamps."""
    return [
        Violation(run_id, "timestamp_format", f"{key} {str(run[key])[:60]!r} is not an ISO 8601 timestamp", (*loc, key))
        for key in ("start_time", "end_time")
        if _present(run, key) and parse_timestamp(run[key]) is None
    ]


Entries = list[tuple[datetime, UUID]]


def check_dotted_order_format(run_id: str, run: Mapping[str, Any], loc: Loc) -> tuple[Entries | None, list[Violation]]:
    """dotted_order is dot-separated ``%Y%m%dT%H%M%S%fZ<uuid>`` entries (2.3 rule 1)."""
    if not _present(run, "dotted_order"):
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
    given = [key for key in ("session_name", "session_id") if _present(run, key)]
    if len(given) == 1:
        return []
    msg = "names both session_name and session_id" if given else "names neither session_name nor session_id"
    return [Violation(run_id, "session", f"post {msg}; specify exactly one", loc)]


def check_run(
    kind: OpKind, run_id: str, run: Mapping[str, Any], loc: Loc, *, require_ids: bool, where: str = "part name"
) -> list[Violation]:
    """All per-run rules of 2.3 for one assembled run (main fields only)."""
    out = check_id_matches(run_id, run, loc, where)
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


def _normalize_ids(run: dict[str, Any]) -> None:
    # Stored ids are hyphenated so that lookups and trees do not depend on the form sent.
    for key in ("id", "trace_id", "parent_run_id"):
        canon = canonical_id(run.get(key))
        if canon is not None:
            run[key] = canon


# --- whole requests ----------------------------------------------------------------


@dataclass(frozen=True)
class Attachment:
    """The bytes of one ``attachment.<run_id>.<name>`` part, for the store."""

    run_id: str
    name: str
    content_type: str
    data: bytes


@dataclass
class ReadResult:
    """Runs read from one request and the rules they broke."""

    ops: list[RunOp] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    feedback: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)

    @property
    def run_ids(self) -> set[str]:
        """Every run id the request mentions."""
        return {op.run_id for op in self.ops}


def read_multipart(parts: Iterable[Part]) -> ReadResult:
    """Assemble multipart parts into run ops, checking 4.4's part rules and 2.3's run rules.

    Parts that cannot be used (bad name, bad JSON) are left out of the ops, so a
    lenient service stores the rest.
    """
    result = ReadResult()
    mains: dict[tuple[str, str], tuple[dict[str, Any], Loc]] = {}
    fields: list[tuple[PartName, Any, Loc]] = []
    attachments: list[tuple[PartName, Part, Loc]] = []
    for part in parts:
        loc: Loc = ("body", part.name)
        parsed, errors = check_part_name(part.name, loc)
        result.violations += errors
        if parsed is None:
            continue
        result.violations += check_part_content_type(part, parsed, loc)
        result.violations += check_part_length(part, parsed.run_id, loc)
        if parsed.kind == "attachment":
            attachments.append((parsed, part, loc))
            continue
        value, errors = check_part_json(part, parsed.run_id, loc)
        result.violations += errors
        if errors:
            continue
        if parsed.kind == "feedback":
            result.feedback.append({"run_id": parsed.run_id, **(value if isinstance(value, dict) else {})})
            continue
        result.violations += check_field_types(parsed.run_id, parsed.field or "main", value, loc)
        if parsed.field is None:
            if not isinstance(value, dict):
                continue
            key = (parsed.kind, parsed.run_id)
            if key in mains:
                result.violations.append(
                    Violation(parsed.run_id, "part_name", f"part {part.name!r} appears twice", loc)
                )
                continue
            mains[key] = (value, loc)
        else:
            fields.append((parsed, value, loc))

    for (kind, run_id), (run, loc) in mains.items():
        result.violations += check_split_fields(run_id, run, loc)
        result.violations += check_run(kind, run_id, run, loc, require_ids=True)  # type: ignore[arg-type]
    for parsed, value, loc in fields:
        main = mains.get((parsed.kind, parsed.run_id))
        if main is None:
            result.violations.append(
                Violation(
                    parsed.run_id,
                    "part_without_run",
                    f"part {parsed.kind}.{parsed.run_id}.{parsed.field} has no {parsed.kind}.{parsed.run_id} part "
                    "in this request",
                    loc,
                )
            )
            continue
        main[0][parsed.field] = value  # type: ignore[index]
    for parsed, part, loc in attachments:
        owner = mains.get(("post", parsed.run_id)) or mains.get(("patch", parsed.run_id))
        if owner is None:
            result.violations.append(
                Violation(parsed.run_id, "part_without_run", f"attachment {parsed.field!r} has no run in this request", loc)
            )
            continue
        owner[0].setdefault("attachments", {})[parsed.field] = {
            "content_type": part.content_type,
            "size": len(part.content),
        }
        assert parsed.field is not None
        media_type = part.media_type or "application/octet-stream"
        result.attachments.append(Attachment(parsed.run_id, parsed.field, media_type, part.content))
    for (kind, run_id), (run, loc) in mains.items():
        _normalize_ids(run)
        run["id"] = run_id
        result.ops.append(RunOp(kind, run_id, run, loc))  # type: ignore[arg-type]
    return result


def read_batch(body: Any) -> ReadResult:
    """``POST /runs/batch``: ``{"post": [...], "patch": [...]}``, each run carrying trace_id and dotted_order."""
    result = ReadResult()
    if not isinstance(body, dict):
        result.violations.append(Violation(None, "field_types", "batch body must be an object with post and patch lists"))
        return result
    for kind in ("post", "patch"):
        runs = body.get(kind) or []
        if not isinstance(runs, list):
            result.violations.append(Violation(None, "field_types", f"{kind} must be a list", ("body", kind)))
            continue
        for index, run in enumerate(runs):
            loc: Loc = ("body", kind, index)
            if not isinstance(run, dict):
                result.violations += check_field_types(None, "main", run, loc)
                continue
            run_id = canonical_id(run.get("id"))
            if run_id is None:
                result.violations.append(Violation(None, "uuid", f"{kind}[{index}] has no UUID id", (*loc, "id")))
                continue
            for name in ("inputs", "outputs", "events", "extra"):
                result.violations += check_field_types(run_id, name, run.get(name), (*loc, name))
            result.violations += check_run(kind, run_id, run, loc, require_ids=True)  # type: ignore[arg-type]
            run = dict(run)
            _normalize_ids(run)
            result.ops.append(RunOp(kind, run_id, run, loc))  # type: ignore[arg-type]
    return result


ParentLookup = Callable[[str], "Mapping[str, Any] | None"]


def _parent_ids(parent: Mapping[str, Any]) -> RunIds | None:
    dotted = parent.get("dotted_order")
    if not dotted:
        return None
    try:
        entries = parse_dotted_order(dotted)
    except DottedOrderError:
        return None
    return RunIds(
        str(parent["id"]),
        str(entries[0][1]),
        str(entries[-2][1]) if len(entries) > 1 else None,
        dotted,
        _ns(entries[-1][0]),
        depth=len(entries),
    )


def read_basic_post(body: Any, parent_lookup: ParentLookup) -> ReadResult:
    """``POST /runs``: one run; trace_id and dotted_order are computed when not sent (2.3 rule 4).

    ``parent_lookup`` returns the stored parent run (or None) so the child's
    dotted_order can extend the parent's.
    """
    result = ReadResult()
    loc: Loc = ("body",)
    if not isinstance(body, dict):
        result.violations += check_field_types(None, "main", body, loc)
        return result
    run_id = canonical_id(body.get("id"))
    if run_id is None:
        result.violations.append(Violation(None, "required_fields", "POST /runs needs a UUID id", ("body", "id")))
        return result
    for name in ("inputs", "outputs", "events", "extra"):
        result.violations += check_field_types(run_id, name, body.get(name), ("body", name))
    result.violations += check_run("post", run_id, body, loc, require_ids=False)
    run = dict(body)
    _normalize_ids(run)
    if _present(run, "dotted_order"):
        if not _present(run, "trace_id"):
            entries, _ = check_dotted_order_format(run_id, run, loc)
            if entries:
                run["trace_id"] = str(entries[0][1])
    else:
        _compute_ids(run_id, run, parent_lookup, result)
    result.ops.append(RunOp("post", run_id, run, loc))
    return result


def _compute_ids(run_id: str, run: dict[str, Any], parent_lookup: ParentLookup, result: ReadResult) -> None:
    start = parse_timestamp(run.get("start_time"))
    if start is None:
        if not _present(run, "start_time"):
            result.violations.append(
                Violation(run_id, "required_fields", "missing start_time, needed to compute dotted_order", ("body",))
            )
        return
    parent_id = run.get("parent_run_id")
    if parent_id is None:
        ids = root_ids(run_id, _ns(start))
    else:
        parent = parent_lookup(parent_id)
        stored = parent.get("dotted_order") if parent is not None else None
        # Counted, not parsed: a database written before the limit may hold a parent deeper than it.
        depth = stored.count(".") + 1 if isinstance(stored, str) and stored else 0
        if depth >= MAX_DEPTH:
            result.violations.append(
                Violation(
                    run_id,
                    "dotted_order_depth",
                    f"parent run {parent_id} is {depth} deep in its trace; the limit is {MAX_DEPTH} "
                    f"entries ({MAX_DOTTED_ORDER_CHARS} characters) of dotted_order, so a child of it cannot be "
                    "stored: post it as the root of a new trace",
                    ("body", "parent_run_id"),
                )
            )
            return
        parent_ids = _parent_ids(parent) if parent is not None else None
        if parent_ids is None:
            result.violations.append(
                Violation(
                    run_id,
                    "parent_known",
                    f"parent run {parent_id} is not stored, so dotted_order cannot be computed; "
                    "post the parent first or send trace_id and dotted_order",
                    ("body", "parent_run_id"),
                )
            )
            return
        ids = child_ids(parent_ids, run_id, _ns(start))
    if _present(run, "trace_id") and run["trace_id"] != ids.trace_id:
        result.violations.append(
            Violation(
                run_id,
                "trace_id_first",
                f"trace_id {run['trace_id']} is not the trace's root {ids.trace_id} (from the parent's dotted_order)",
                ("body", "trace_id"),
            )
        )
    run["trace_id"] = ids.trace_id
    run["dotted_order"] = ids.dotted_order


def read_basic_patch(path_run_id: str, body: Any) -> ReadResult:
    """``PATCH /runs/{run_id}``: outputs and end_time for one run; ids are checked when sent."""
    result = ReadResult()
    loc: Loc = ("body",)
    run_id = canonical_id(path_run_id)
    if run_id is None:
        result.violations.append(Violation(None, "uuid", f"path run id {path_run_id[:80]!r} is not a UUID", ("path",)))
        return result
    if not isinstance(body, dict):
        result.violations += check_field_types(run_id, "main", body, loc)
        return result
    for name in ("inputs", "outputs", "events", "extra"):
        result.violations += check_field_types(run_id, name, body.get(name), ("body", name))
    result.violations += check_run("patch", run_id, body, loc, require_ids=False, where="path")
    run = dict(body)
    _normalize_ids(run)
    run["id"] = run_id
    result.ops.append(RunOp("patch", run_id, run, loc))
    return result
