"""Which traces ``otel-runs runs`` shows, and what it reads of each: newest first, through the service's read API.

Traces come newest first, as in the viewer: by the start of their root run, or of
their earliest run when the root never arrived (such a trace is listed too, since
that is what ``check`` is for). The one-line list reads one run a trace (its top:
the root, whose tokens and cost are the trace's, and a preview of what it was asked
and answered); ``--tree`` and ``--json`` read every run of each trace.

A trace is named by the shortest prefix of its id (its first 8 characters at least)
that no other stored trace's id begins with, which ``runs tree`` takes back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ._runs_source import Source, instant

__all__ = [
    "Trace", "TraceTop", "newest_trace_ids", "trace_runs", "trace_tops", "short_ids", "match_trace",
    "tree_order",
]

_PAGE = 100  # runs per query page: the service's largest
# What walking the runs needs of each (the service always sends id, name, run_type, start_time and trace_id).
_WALK_FIELDS = ["parent_run_id"]
# What the one-line list shows of a trace's top run: a root's tokens and cost are its trace's.
_TOP_FIELDS = ["parent_run_id", "status", "end_time", "error", "total_tokens", "total_cost", "preview"]
_MAX_IDS = 1000  # ids in one query's id list: the service's bound
_TRACES_A_QUERY = 100  # traces named in one query's filter (about 5,500 of the 10,000 characters a filter may have)
_MATCHES = 100  # ids one prefix is answered with at most
_NEVER = datetime.min.replace(tzinfo=timezone.utc)


@dataclass
class Trace:
    """One trace and all its runs (never empty)."""

    trace_id: str
    runs: list[dict[str, Any]]

    @property
    def top(self) -> dict[str, Any]:
        """Its root; when the root never arrived, its earliest run."""
        roots = [r for r in self.runs if not r.get("parent_run_id")]
        return min(roots or self.runs, key=lambda r: (instant(r.get("start_time")) or _NEVER, str(r.get("id"))))

    def summary(self) -> dict[str, Any]:
        """The ``--json`` line of ``list``: what a script asserts on first, then every run."""
        top = self.top
        rooted = not top.get("parent_run_id")
        return {
            "trace_id": self.trace_id,
            "session_id": top.get("session_id"),
            "root_run_id": top.get("id") if rooted else None,
            "name": top.get("name"),
            "run_type": top.get("run_type"),
            "status": top.get("status"),
            "start_time": top.get("start_time"),
            "end_time": top.get("end_time"),
            "run_count": len(self.runs),
            "error_count": sum(1 for r in self.runs if r.get("error") is not None),
            # The root's are the trace's (the read API's rule); a trace without its root has no totals.
            "total_tokens": top.get("total_tokens") if rooted else None,
            "total_cost": top.get("total_cost") if rooted else None,
            "runs": tree_order(self.runs),
        }


@dataclass
class TraceTop:
    """What the one-line list shows of a trace: its top run and how many of its runs failed."""

    trace_id: str
    top: dict[str, Any]
    errors: int

    @property
    def rooted(self) -> bool:
        return not self.top.get("parent_run_id")


def tree_order(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parents before children, siblings by start: the order of dotted_order, as the tree is printed."""
    return sorted(runs, key=lambda r: (str(r.get("dotted_order") or ""), str(r.get("id"))))


def _utc(value: datetime) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def newest_trace_ids(
    source: Source,
    limit: int,
    *,
    project_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    tree_filter: str | None = None,
) -> list[str]:
    """The ids of the newest ``limit`` traces (0: all) that start in [since, until), newest first.

    ``tree_filter`` keeps the traces with a run that matches it (``--search``, ``--filter``).

    A trace starts when its root run does, so the roots, newest first, are the
    list (the viewer's own query). A trace whose root never arrived starts with
    its earliest run; no query names such runs, so the runs newer than the last
    root kept are walked (a few fields each) for traces whose root is not met
    there, and each of those is asked whether its root exists at all (in bulk: a
    root's id is its trace's id) and, when not, for its earliest run. What is read
    is the runs newer than the last trace listed, not the whole store.
    """
    window: dict[str, Any] = {}
    if project_id is not None:
        window["session"] = [project_id]
    if since is not None:
        window["start_time"] = _utc(since)
    if until is not None:
        window["filter"] = f'lt(start_time, "{_utc(until)}")'
    if tree_filter is not None:
        window["tree_filter"] = tree_filter
    light = {"order": "desc", "limit": _PAGE, "select": _WALK_FIELDS}
    starts: dict[str, datetime] = {}
    walk = {**window, **light}
    if limit:
        for root in source.query_runs({**window, **light, "is_root": True}):
            if isinstance(root.get("trace_id"), str):
                starts.setdefault(root["trace_id"], instant(root.get("start_time")) or _NEVER)
            if len(starts) == limit:
                # A trace starting before the last root kept is not listed: the walk stops there.
                walk["start_time"] = _utc(min(starts.values()))
                break
    rootless: dict[str, None] = {}  # traces met without their root so far, in the order met
    for run in source.query_runs(walk):
        trace_id = run.get("trace_id")
        if not isinstance(trace_id, str):
            continue
        if not run.get("parent_run_id"):
            starts.setdefault(trace_id, instant(run.get("start_time")) or _NEVER)
            rootless.pop(trace_id, None)
        elif trace_id not in starts:
            rootless.setdefault(trace_id)
    unmet = list(rootless)
    for at in range(0, len(unmet), _MAX_IDS):
        for root in source.query_runs({"id": unmet[at : at + _MAX_IDS], "limit": _PAGE, "select": _WALK_FIELDS}):
            rootless.pop(str(root.get("id")), None)  # its root exists, outside the window or before the last kept
    for trace_id in rootless:
        first = {"trace": trace_id, "order": "asc", "limit": 1, "select": _WALK_FIELDS}
        earliest = next(iter(source.query_runs(first)), None)
        start = instant(earliest.get("start_time")) if earliest else None
        if start is not None and (since is None or start >= since) and (until is None or start < until):
            starts[trace_id] = start
    newest = sorted(starts, key=lambda trace_id: starts[trace_id], reverse=True)  # stable: ties keep the query's order
    return newest[:limit] if limit else newest


def _canonical(trace_ids: Sequence[str]) -> list[str]:
    """The ids as stored (only an id goes into a filter's quotes), once each, in the order given."""
    from ..server import canonical_id

    return list(dict.fromkeys(c for c in (canonical_id(t) for t in trace_ids) if c is not None))


def _named(trace_ids: Sequence[str]) -> list[str]:
    """Filters naming the traces, a hundred to a filter."""
    out = []
    for at in range(0, len(trace_ids), _TRACES_A_QUERY):
        terms = [f'eq(trace_id, "{trace_id}")' for trace_id in trace_ids[at : at + _TRACES_A_QUERY]]
        out.append(terms[0] if len(terms) == 1 else f"or({', '.join(terms)})")
    return out


def trace_runs(source: Source, trace_ids: Sequence[str]) -> list[Trace]:
    """Every run of each trace, in the order given (a trace without runs is left out)."""
    found: dict[str, list[dict[str, Any]]] = {trace_id: [] for trace_id in _canonical(trace_ids)}
    for named in _named(list(found)):
        for run in source.query_runs({"filter": named, "order": "asc", "limit": _PAGE}):
            runs = found.get(str(run.get("trace_id")))
            if runs is not None:
                runs.append(run)
    return [Trace(trace_id, runs) for trace_id, runs in found.items() if runs]


def trace_tops(source: Source, trace_ids: Sequence[str]) -> list[TraceTop]:
    """Each trace's top run (its root, else its earliest run) and its count of failed runs, in the order given."""
    wanted = _canonical(trace_ids)
    tops: dict[str, dict[str, Any]] = {}
    for at in range(0, len(wanted), _MAX_IDS):
        # A root's id is its trace's id.
        for root in source.query_runs({"id": wanted[at : at + _MAX_IDS], "limit": _PAGE, "select": _TOP_FIELDS}):
            if not root.get("parent_run_id"):
                tops[str(root.get("trace_id"))] = root
    for trace_id in wanted:
        if trace_id not in tops:
            first = {"trace": trace_id, "order": "asc", "limit": 1, "select": _TOP_FIELDS}
            earliest = next(iter(source.query_runs(first)), None)
            if earliest is not None:
                tops[trace_id] = earliest
    errors: dict[str, int] = {}
    for named in _named([t for t in wanted if t in tops]):
        for run in source.query_runs({"filter": named, "error": True, "limit": _PAGE, "select": []}):
            errors[str(run.get("trace_id"))] = errors.get(str(run.get("trace_id")), 0) + 1
    return [TraceTop(trace_id, tops[trace_id], errors.get(trace_id, 0)) for trace_id in wanted if trace_id in tops]


def short_ids(source: Source, trace_ids: Sequence[str]) -> dict[str, str]:
    """Each trace id's shortest prefix no other stored trace shares (``server.short_prefix``), asked of the service.

    The stored ids that begin as each id does are asked for; when the answer was cut
    (the service answers a prefix with at most 100 ids), the nearest may not be in it,
    so the id is asked again by its longer prefix, until an answer is whole.
    """
    from ..server import short_prefix

    shown = {trace_id: short_prefix(trace_id, ()) for trace_id in trace_ids}
    pending = list(trace_ids)
    while pending:
        matches: dict[str, list[str]] = {}
        for at in range(0, len(pending), _MAX_IDS):
            matches.update(source.match_trace_ids(sorted({shown[t] for t in pending[at : at + _MAX_IDS]}), limit=_MATCHES))
        again = []
        for trace_id in pending:
            found = matches.get(shown[trace_id], [])
            longer = short_prefix(trace_id, found)
            if len(found) >= _MATCHES and len(longer) > len(shown[trace_id]):
                again.append(trace_id)
            shown[trace_id] = longer
        pending = again
    return shown


def match_trace(source: Source, text: str) -> tuple[str | None, list[str]]:
    """The trace ``text`` names (a whole id, or a prefix of one), and, when it names none or several, the matches."""
    from ..server import canonical_id

    whole = canonical_id(text)
    if whole is not None:
        return whole, [whole]
    found = source.match_trace_ids([text], limit=10).get(text, [])
    return (found[0] if len(found) == 1 else None), found
