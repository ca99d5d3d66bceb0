"""What a request's body becomes: run ops for the store, with the rules they broke.

One ``read_*`` function per way runs arrive (multipart, ``/runs/batch``, the basic
``POST /runs`` and ``PATCH /runs/{id}``). Each applies the rules of :mod:`._validate`
to what it reads and returns a :class:`ReadResult`; none of them stores anything, so
the handler decides, by the service's validation mode, what is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._ids import (
    MAX_DEPTH,
    MAX_DOTTED_ORDER_CHARS,
    DottedOrderError,
    RunIds,
    child_ids,
    parse_dotted_order,
    root_ids,
)
from ._feedback import check_feedback
from ._multipart import Part
from ._validate import (
    Loc,
    PartName,
    RunOp,
    Violation,
    canonical_id,
    check_dotted_order_format,
    check_field_types,
    check_part_content_type,
    check_part_json,
    check_part_length,
    check_part_name,
    check_run,
    check_split_fields,
    is_present,
    moment_ns,
    parse_timestamp,
)

__all__ = ["Attachment", "ReadResult", "ParentLookup", "stored_run_ids", "read_multipart", "read_batch", "read_basic_post", "read_basic_patch"]


def _normalize_ids(run: dict[str, Any]) -> None:
    # Stored ids are hyphenated so that lookups and trees do not depend on the form sent.
    for key in ("id", "trace_id", "parent_run_id"):
        canon = canonical_id(run.get(key))
        if canon is not None:
            run[key] = canon


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
            # The part's name carries the feedback's id (feedback.<id>), not its run's.
            item, problem = check_feedback(value, default_id=parsed.run_id)
            if item is not None:
                result.feedback.append(item)
            else:
                result.violations.append(Violation(None, "feedback", f"part {part.name!r}: {problem}", loc))
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
            result.violations += check_run(kind, run_id, run, loc, require_ids=True)
            run = dict(run)
            _normalize_ids(run)
            result.ops.append(RunOp(kind, run_id, run, loc))
    return result


ParentLookup = Callable[[str], "Mapping[str, Any] | None"]


def stored_run_ids(parent: Mapping[str, Any]) -> RunIds | None:
    """A stored run's place in its tree, read from its ``dotted_order``, to place a child under it (None: unreadable)."""
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
        moment_ns(entries[-1][0]),
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
    if is_present(run, "dotted_order"):
        if not is_present(run, "trace_id"):
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
        if not is_present(run, "start_time"):
            result.violations.append(
                Violation(run_id, "required_fields", "missing start_time, needed to compute dotted_order", ("body",))
            )
        return
    parent_id = run.get("parent_run_id")
    if parent_id is None:
        ids = root_ids(run_id, moment_ns(start))
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
        parent_ids = stored_run_ids(parent) if parent is not None else None
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
        ids = child_ids(parent_ids, run_id, moment_ns(start))
    if is_present(run, "trace_id") and run["trace_id"] != ids.trace_id:
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
