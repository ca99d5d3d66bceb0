"""Writes the generated part of ``docs/mapping.md``: every producer's rows, as the tables assemble them.

    python -m otel_runs_exporter.mapping              # rewrite the block in docs/mapping.md (from a clone)
    python -m otel_runs_exporter.mapping --check      # exit 1 when the file is not what this writes
    python -m otel_runs_exporter.mapping --print      # print the block

A test runs ``--check``'s comparison, so the document cannot drift from the rows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from . import _tables
from ._model import Attr, EventRow, Fixup, FrameworkName, Namespace, RunTypeRule, Source, UsageObject

BEGIN = "<!-- mapping-rows:begin (python -m otel_runs_exporter.mapping) -->"
END = "<!-- mapping-rows:end -->"
DOC = Path(__file__).resolve().parents[3] / "docs" / "mapping.md"


def _place(value: Any) -> str:
    values = value if isinstance(value, list) else [value]
    parts = []
    for one in values:
        if isinstance(one, bool):
            parts.append("indexed" if one else "named")
        elif isinstance(one, tuple):
            head = ", ".join("/".join(v) if isinstance(v, tuple) else str(v) for v in one[:-1])
            parts.append(f"{head} @{one[-1]}")
        else:
            parts.append(f"@{one}")
    return "; ".join(parts)


def _row(producer: str, row: Any) -> str | None:
    if isinstance(row, Attr):
        roles = ", ".join(f"{role} {_place(value)}" for role, value in row.roles.items())
        return f"| `{row.key.name}` | {producer} | {roles} | {'yes' if row.key.marks else 'no'} |".replace(" None @", " any @")
    if isinstance(row, RunTypeRule):
        values = ", ".join(f"{k} → {v}" for k, v in sorted(row.values.items()))
        other = row.default or ("chain, and no model call" if row.lists_model_calls else "next rule")
        return f"| `{row.key.name}` | {producer} | run type @{row.order}: {values}; any other → {other} | yes |"
    if isinstance(row, Source):
        keys = ", ".join(f"`{k.name}`" for k in row.reads)
        only = f" (runs of type {', '.join(sorted(row.run_types))})" if row.run_types else ""
        side = "inputs" if row.side == "in" else "outputs"
        return f"| {keys} | {producer} | {side} @{row.order}{only}: `{row.reader.__name__.lstrip('_')}` | — |"
    if isinstance(row, UsageObject):
        key = f"`{row.key.name}`" if row.key is not None else "the outputs' own `usage_metadata`"
        return f"| {key} | {producer} | usage object @{row.order} → {row.where} | — |"
    if isinstance(row, EventRow):
        value = f" ({row.value})" if row.value is not None else ""
        return f"| event `{row.name}` | {producer} | {row.kind}{value} | — |"
    if isinstance(row, Fixup):
        keys = ", ".join(f"`{k.name}`" for k in row.reads) or "any span"
        return f"| {keys} | {producer} | after the tables: `{row.fix.__name__.lstrip('_')}` | — |"
    if isinstance(row, FrameworkName):
        return f"| value `{row.value}` | {producer} | a framework's own name: never the provider | — |"
    if isinstance(row, Namespace):
        return f"| `{row.key.name}*` | {producer} | any key under it marks a GenAI span | yes |"
    return None


def block() -> str:
    """The generated block, between its markers."""
    lines = [BEGIN, "", "| Attribute | Producer module | Tables it is a row of (@ its place: first present wins) "
             "| Marks a GenAI span |", "|---|---|---|---|"]
    for producer in _tables.PRODUCERS:
        name = producer.__name__.rpartition(".")[2].lstrip("_")
        lines += [line for line in (_row(name, row) for row in producer.ROWS) if line is not None]
    lines += ["", "Instrumentation scopes kept under `spans=genai` (prefixes): "
              + ", ".join(f"`{prefix}` ({what})" for prefix, what in _tables.SCOPES) + ".", "", END]
    return "\n".join(lines)


def written(text: str) -> str:
    """``text`` (the document) with its generated block replaced by :func:`block`."""
    head, found, rest = text.partition(BEGIN)
    if not found or END not in rest:
        raise SystemExit(f"{DOC}: no {BEGIN!r} ... {END!r} block to write")
    return head + block() + rest.partition(END)[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/mapping.md is not current")
    parser.add_argument("--print", action="store_true", help="print the block instead of writing it")
    args = parser.parse_args(argv)
    if args.print:
        print(block())
        return 0
    current = DOC.read_text(encoding="utf-8")
    wanted = written(current)
    if args.check:
        if current != wanted:
            print(f"{DOC} is not current: run python -m otel_runs_exporter.mapping", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
