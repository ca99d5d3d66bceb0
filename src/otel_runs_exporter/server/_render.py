"""Text views of stored runs: a trace as an indented tree, and the check report.

Example lines (runs as the read API answers them, whose costs are the service's)::

    chain  agent  1.204s  ok  trace: 42 tokens, $0.0001046
      llm  chat gpt-4o-mini  1.100s  ok  tokens in=12 out=30 total=42  $0.0001046

Status is ``error`` when the run has an error, ``ok`` when it has an end_time,
and ``open`` while it has neither. A root's ``total_tokens`` and ``total_cost`` are
its whole trace's (the read API's rule), so its line says ``trace:``; a cost is
shown to 4 significant digits (:func:`cost_text`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from .._cost import token_counts
from ._validate import parent_cycles, parse_timestamp

__all__ = ["render_tree", "render_traces", "render_check", "run_status", "token_counts", "cost_text"]

def cost_text(usd: Any) -> str | None:
    """US dollars to 4 significant digits for people, without float noise; None for no cost (no price).

    >>> cost_text(0.00010460000000000002), cost_text(1.5), cost_text(1234.5678), cost_text(0), cost_text(None)
    ('$0.0001046', '$1.5', '$1,235', '$0', None)
    """
    if isinstance(usd, bool) or not isinstance(usd, (int, float)) or usd != usd or usd in (float("inf"), float("-inf")):
        return None
    if usd == 0:
        return "$0"
    digits = max(0, 3 - math.floor(math.log10(abs(usd))))
    text = f"{usd:,.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"-${text[1:]}" if text.startswith("-") else f"${text}"


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
    cost = cost_text(run.get("total_cost"))
    if run.get("parent_run_id") is None and (run.get("total_tokens") or cost):
        whole = [f"{run.get('total_tokens') or 0:,} tokens"] + ([cost] if cost else [])
        fields.append("trace: " + ", ".join(whole))
    elif cost:
        fields.append(cost)
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


def render_check(report: Mapping[str, Any]) -> str:
    """The check report as text; says so when everything is consistent.

    A report read through the API (``GET /runs/check``) carries ``counts``: a list cut
    short is followed by how many more there are.
    """
    counts = report.get("counts")
    lines: list[str] = []

    def more(key: str) -> None:
        left = (int(counts.get(key) or 0) if isinstance(counts, Mapping) else 0) - len(report.get(key) or [])
        if left > 0:
            lines.append(f"  ... and {left:,} more")

    for run_id in report.get("patched_not_posted", []):
        lines.append(f"patched but never posted: {run_id}")
    more("patched_not_posted")
    for run_id in report.get("never_completed", []):
        lines.append(f"never completed (no end_time): {run_id}")
    more("never_completed")
    for item in report.get("missing_parents", []):
        lines.append(f"missing parent {item['parent_run_id']} of {', '.join(item['children'])}")
    more("missing_parents")
    for item in report.get("parent_cycles", []):
        cycle = item["run_ids"]
        if len(cycle) == 1:
            lines.append(f"run {cycle[0]} is its own parent")
        else:
            lines.append(f"parent cycle: {' -> '.join([*cycle, cycle[0]])}")
    more("parent_cycles")
    for item in report.get("accepted_violations", []):
        lines.append(f"accepted violation [{item['rule']}] run {item['run_id']}: {item['msg']}")
    more("accepted_violations")
    return "\n".join(lines) if lines else "no problems found"
