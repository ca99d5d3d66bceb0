"""``POST /runs/stats`` for the local service: the SDK's ``Client.get_run_stats``, over the runs a query matches.

The body takes the same keys as ``POST /runs/query`` (:func:`._query.parse_run_query`
checks them) except the ones that shape a page (``select``, ``limit``, ``order``,
``cursor``), which mean nothing for one summary. The answer has the fields of the
hosted service's run stats that this service keeps the data for; the rest are null::

    {"run_count": 5, "error_rate": 0.2, "latency_p50": 0.001, "latency_p99": 0.012,
     "total_tokens": 59, "prompt_tokens": 42, "completion_tokens": 17,
     "last_run_start_time": "2025-03-01T12:00:00.123456Z", ...}

Tokens and costs are each matching run's own (as ``otel-runs runs`` reads usage,
:mod:`otel_runs_exporter._cost`), added up: over a trace that is the trace's total.
A model run whose model has no price adds its tokens, not a cost (``unpriced_runs``
counts them); with no priced run the costs are null. The viewer asks this once per
trace for the run count, tokens and cost of its list and header.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ._query import QueryError, RunQuery, parse_run_query
from ._store import RunSummary

__all__ = ["parse_stats_query", "run_stats", "percentile"]

_PAGE_KEYS = ("select", "limit", "order", "cursor")
# Fields of the hosted service's answer that need data this service does not keep.
_NOT_KEPT = (
    "first_token_p50", "first_token_p99", "median_tokens", "feedback_stats", "run_facets", "streaming_rate",
)


def parse_stats_query(body: Any) -> RunQuery:
    """Check a ``POST /runs/stats`` body: a run query without the keys that shape a page.

    >>> parse_stats_query({"trace": "0190b3c5f1b87a3e9c1d2e3f4a5b6c7d"}).where.sql
    '(r.trace_id = ?)'
    """
    if isinstance(body, dict):
        for key in _PAGE_KEYS:
            if body.get(key) is not None:
                raise QueryError(("body", key), f"{key} shapes a page of runs; /runs/stats answers one summary without it")
    return parse_run_query(body)


def percentile(sorted_values: Sequence[float], share: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least ``share`` of the values at or below it."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(share * len(sorted_values)))
    return sorted_values[rank - 1]


def run_stats(summary: RunSummary, prices_updated: str | None = None) -> dict[str, Any]:
    """The stats answer for what :meth:`RunStore.summarize` found.

    >>> s = run_stats(RunSummary(2, 1, "2025-03-01T12:00:01.000000Z", [2.0],
    ...               {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5, "prompt_cost": None,
    ...                "completion_cost": None, "total_cost": None, "unpriced": 1}))
    >>> s["run_count"], s["error_rate"], s["total_tokens"], s["latency_p50"], s["total_cost"], s["unpriced_runs"]
    (2, 0.5, 5, 2.0, None, 1)
    """
    usage = summary.usage
    answer: dict[str, Any] = {
        "run_count": summary.count,
        "error_rate": summary.errors / summary.count if summary.count else None,
        "latency_p50": percentile(summary.latencies, 0.5),
        "latency_p99": percentile(summary.latencies, 0.99),
        "total_tokens": usage.get("total_tokens", 0),
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "completion_tokens": usage.get("completion_tokens", 0),
        "total_cost": usage.get("total_cost"),
        "prompt_cost": usage.get("prompt_cost"),
        "completion_cost": usage.get("completion_cost"),
        # The local service's own: model runs with tokens but no price (their cost is not in the totals),
        # and the date of the price table the costs come from.
        "unpriced_runs": usage.get("unpriced", 0),
        "prices_updated": prices_updated,
        "last_run_start_time": summary.last_start_time,
    }
    answer.update(dict.fromkeys(_NOT_KEPT))
    return answer
