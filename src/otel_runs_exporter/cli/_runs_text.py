"""What ``otel-runs runs list`` prints: one line a trace for people, JSON with costs rounded for scripts.

One line a trace, the columns that tell traces apart, as ``gh run list`` or
``docker ps`` print theirs::

    TRACE     STARTED (UTC)        NAME               STATUS        LATENCY  TOKENS        COST  INPUT
    0190b3c5  2025-03-01 15:00:00  conversation_turn  ok             2.005s   1,240  $0.0001046  Where is order #1002?

``TRACE`` is the shortest prefix of the trace id no other stored trace shares
(``runs tree`` takes it), ``STATUS`` the root's (and how many runs failed inside a
trace that went on), ``TOKENS`` and ``COST`` the whole trace's, ``INPUT`` what it was
asked (the last user message of a chat), cut to the terminal's width. Costs are
shown to 4 significant digits; in JSON they are numbers rounded to 10 decimal places
of a dollar, so a sum's float noise (0.00010460000000000002) never reaches a script.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from . import _output as output
from ._runs_source import instant
from ._runs_traces import TraceTop

__all__ = ["COST_DECIMALS", "trace_lines", "rounded_costs"]

COST_DECIMALS = 10
"""Decimal places of a dollar a cost keeps in JSON."""
_HEADERS = ("TRACE", "STARTED (UTC)", "NAME", "STATUS", "LATENCY", "TOKENS", "COST", "INPUT")
_RIGHT = (4, 5, 6)
_NAME_CHARS = 40
_INPUT_CHARS = 60  # when stdout is not a terminal
_MIN_INPUT_CHARS = 20
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


def _one_line(text: Any, limit: int) -> str:
    flat = _CONTROL.sub(" ", str(text or "")).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _latency(top: Mapping[str, Any]) -> str:
    start, end = instant(top.get("start_time")), instant(top.get("end_time"))
    return f"{(end - start).total_seconds():.3f}s" if start and end else "-"


def _status(trace: TraceTop) -> str:
    from ..server import run_status

    if not trace.rooted:
        return "no root"
    status = run_status(trace.top)
    failed = trace.errors - (1 if status == "error" else 0)
    return f"{status}, {failed} failed" if failed > 0 else status


def _cost(top: Mapping[str, Any], rooted: bool) -> str:
    from ..server import cost_text

    if not rooted:
        return "-"
    shown = cost_text(top.get("total_cost"))
    return shown or ("no price" if top.get("total_tokens") else "-")


def trace_lines(traces: Sequence[TraceTop], short: Mapping[str, str]) -> str:
    """The table: a header, then a line a trace, newest first as given."""
    rows = []
    for trace in traces:
        top = trace.top
        start = instant(top.get("start_time"))
        preview = top.get("preview")
        rows.append([
            short.get(trace.trace_id, trace.trace_id),
            start.strftime("%Y-%m-%d %H:%M:%S") if start else "-",
            _one_line(top.get("name") or "(unnamed)", _NAME_CHARS),
            _status(trace),
            _latency(top),
            f"{top.get('total_tokens') or 0:,}" if trace.rooted else "-",
            _cost(top, trace.rooted),
            str(preview.get("input") or "") if isinstance(preview, Mapping) else "",
        ])
    fixed = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(_HEADERS[:-1])]
    room = _INPUT_CHARS
    if sys.stdout.isatty():
        room = max(_MIN_INPUT_CHARS, shutil.get_terminal_size().columns - sum(fixed) - 2 * len(fixed))
    for row in rows:
        row[-1] = _one_line(row[-1], room)
    return output.table(_HEADERS, rows, right=_RIGHT)


def rounded_costs(run: Mapping[str, Any]) -> dict[str, Any]:
    """``run`` (a run or a trace's summary) with its ``*_cost`` numbers, and its runs', rounded to 10 decimal places.

    >>> rounded_costs({"total_cost": 0.00010460000000000002, "runs": [{"prompt_cost": 3e-05, "name": "x"}]})
    {'total_cost': 0.0001046, 'runs': [{'prompt_cost': 3e-05, 'name': 'x'}]}
    """
    out = dict(run)
    for key, value in run.items():
        if key.endswith("_cost") and isinstance(value, float):
            out[key] = round(value, COST_DECIMALS)
        elif key == "runs" and isinstance(value, list):
            out[key] = [rounded_costs(r) if isinstance(r, Mapping) else r for r in value]
    return out
