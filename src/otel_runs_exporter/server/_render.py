"""Text views of stored runs: a trace as an indented tree, and the check report.

Example line: ``chain  agent  1.204s  ok  tokens in=12 out=30 total=42``.
Status is ``error`` when the run has an error, ``ok`` when it has an end_time,
and ``open`` while it has neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._cost import token_counts
from ._validate import parent_cycles, parse_timestamp

__all__ = ["render_tree", "render_traces", "render_check", "run_status", "token_counts"]

def run_status(run: Mapping[str, Any]) -> str:
    """``error``, ``ok`` or ``open``."""
    if run.get("error"):
        return "error"
    return "ok" if run.get("end_time") else "open"


def _duration(run: Mapping[str, Any]) -> str:
    start = parse_timestamp(run.get("start_time"))
    end = parse_timestamp(run.get("end_time"))
    if start is None or end is None:
        return "-"
    return f"{(end - start).total_seconds():.3f}s"


def _line(run: Mapping[str, Any], depth: int) -> str:
    fields = [
        "  " * depth + str(run.get("run_type") or "?"),
        str(run.get("name") or "(unnamed)"),
        _duration(run),
        run_status(run),
    ]
    tokens = token_counts(run)
    if tokens:
        fields.append("tokens " + " ".join(f"{k}={v}" for k, v in tokens.items()))
    if run.get("error"):
        error = str(run["error"]).strip().splitlines()
        fields.append(f"error: {error[-1][:100] if error else ''}")
    return "  ".join(fields)


def render_tree(runs: Iterable[Mapping[str, Any]]) -> str:
    """One trace's runs as an indented tree, children under parents in dotted_order.

    Runs whose parent is not among ``runs`` are shown at the top level, marked,
    so a broken tree is still visible; so are runs that are their own ancestors
    (a parent cycle has no top to hang from), once each, marked with the cycle.
    """
    ordered = sorted(runs, key=lambda r: (str(r.get("dotted_order") or ""), str(r.get("id"))))
    ids = {r.get("id") for r in ordered}
    children: dict[Any, list[Mapping[str, Any]]] = {}
    tops: list[Mapping[str, Any]] = []
    for run in ordered:
        parent = run.get("parent_run_id")
        if parent and parent in ids:
            children.setdefault(parent, []).append(run)
        else:
            tops.append(run)
    lines: list[str] = []
    shown: set[Any] = set()

    def walk(top: Mapping[str, Any], note: str) -> None:
        # Iterative: a tree thousands deep must not reach the recursion limit.
        stack: list[tuple[Mapping[str, Any], int, str]] = [(top, 0, note)]
        while stack:
            run, depth, mark = stack.pop()
            if run.get("id") in shown:
                continue  # a cycle leads back to where it began
            shown.add(run.get("id"))
            lines.append(_line(run, depth) + mark)
            stack.extend((child, depth + 1, "") for child in reversed(children.get(run.get("id"), [])))

    for top in tops:
        walk(top, f"  (parent {top['parent_run_id']} missing)" if top.get("parent_run_id") else "")
    by_id = {str(r.get("id")): r for r in ordered}
    rest: dict[str, str | None] = {
        str(r.get("id")): str(r.get("parent_run_id")) for r in ordered if r.get("id") not in shown
    }
    for cycle in parent_cycles(rest):
        loop = f"{cycle[0]} is its own parent" if len(cycle) == 1 else " -> ".join([*cycle, cycle[0]])
        walk(by_id[cycle[0]], f"  (in a parent cycle: {loop})")
    for run in ordered:
        if run.get("id") not in shown:
            walk(run, "")
    return "\n".join(lines)


def render_traces(runs: Iterable[Mapping[str, Any]]) -> str:
    """Every trace among ``runs``, each headed by its trace id and run count."""
    traces: dict[str, list[Mapping[str, Any]]] = {}
    for run in runs:
        traces.setdefault(str(run.get("trace_id") or "(no trace id)"), []).append(run)
    blocks = [f"trace {tid}  ({len(rs)} run{'s' if len(rs) != 1 else ''})\n{render_tree(rs)}" for tid, rs in traces.items()]
    return "\n\n".join(blocks)


def render_check(report: Mapping[str, list[Any]]) -> str:
    """The check report as text; says so when everything is consistent."""
    lines: list[str] = []
    for run_id in report.get("patched_not_posted", []):
        lines.append(f"patched but never posted: {run_id}")
    for run_id in report.get("never_completed", []):
        lines.append(f"never completed (no end_time): {run_id}")
    for item in report.get("missing_parents", []):
        lines.append(f"missing parent {item['parent_run_id']} of {', '.join(item['children'])}")
    for item in report.get("parent_cycles", []):
        cycle = item["run_ids"]
        if len(cycle) == 1:
            lines.append(f"run {cycle[0]} is its own parent")
        else:
            lines.append(f"parent cycle: {' -> '.join([*cycle, cycle[0]])}")
    for item in report.get("accepted_violations", []):
        lines.append(f"accepted violation [{item['rule']}] run {item['run_id']}: {item['msg']}")
    return "\n".join(lines) if lines else "no problems found"
