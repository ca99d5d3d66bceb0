"""Shared pieces of the reliability tests: a provider on a service, the tally each test reports.

Every test ends by comparing what the exporter says it did (``stats()``) with
what the service actually stored, and records the figures it measured with
:func:`report`. Set ``OTEL_RUNS_REL_FIGURES=/path/file.jsonl`` to collect them
(that is how the table in RELIABILITY.md was filled).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from opentelemetry.sdk.trace import SpanLimits, TracerProvider

from core.helpers import FAST_BACKOFF
from otel_runs_exporter import ExporterStats, RunsSpanProcessor
from otel_runs_exporter.server import LocalService

# Read at import: the suite's autouse fixture clears OTEL_* variables before each test.
FIGURES_FILE = os.environ.get("OTEL_RUNS_REL_FIGURES")


def processor_provider(
    url: str, *, span_limits: SpanLimits | None = None, **settings: Any
) -> tuple[TracerProvider, RunsSpanProcessor]:
    """A provider whose only processor sends to ``url``; short schedule and retry steps so tests do not idle."""
    settings.setdefault("api_key", "test-key")
    settings.setdefault("schedule_delay_s", 0.05)
    settings.setdefault("retry_backoff", FAST_BACKOFF)
    processor = RunsSpanProcessor(endpoint=url, **settings)
    provider = TracerProvider(span_limits=span_limits) if span_limits else TracerProvider()
    provider.add_span_processor(processor)
    return provider, processor


@dataclass
class Tally:
    """What a test created, what the service holds, and what the exporter reported."""

    case: str
    created: int
    delivered: int = 0  # completed runs at the service (posts merged with patches, by id)
    posted_incomplete: int = 0  # posted, never completed
    duplicates: int = 0  # extra posts of an already-stored run id (at-least-once resends)
    dropped: dict[str, int] = field(default_factory=dict)  # stats().dropped
    stats_completed: int = 0
    retried: int = 0
    requests: int = 0
    faults_fired: dict[str, int] = field(default_factory=dict)  # service request log, by fault
    statuses: dict[str, int] = field(default_factory=dict)  # service request log, by status (0 = dropped)
    elapsed_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())


def tally(case: str, created: int, service: LocalService, stats: ExporterStats, began: float, **extra: Any) -> Tally:
    """Count at the service (one pass over its runs) and take the exporter's counters beside it.

    Every scenario ends settled: each run the test created is accounted for
    exactly once, as delivered, dropped with a reason, or spooled.
    """
    assert_accounted(stats, created)
    runs = service.runs()
    completed = sum(1 for r in runs if r.get("end_time") is not None)
    faults: dict[str, int] = {}
    statuses: dict[str, int] = {}
    for entry in service.requests():
        if entry["fault"]:
            faults[entry["fault"]] = faults.get(entry["fault"], 0) + 1
        key = str(entry["status"])
        statuses[key] = statuses.get(key, 0) + 1
    return Tally(
        case=case,
        created=created,
        delivered=completed,
        posted_incomplete=len(runs) - completed,
        duplicates=sum(service.duplicate_posts().values()),
        dropped=dict(stats.dropped),
        stats_completed=stats.delivered,
        retried=stats.retried,
        requests=stats.requests,
        faults_fired=faults,
        statuses=statuses,
        elapsed_s=round(time.monotonic() - began, 2),
        extra=extra,
    )


def assert_accounted(stats: ExporterStats, created: int) -> None:
    """created = delivered + dropped (by reason) + spooled, nothing left queued, and created is what the test made."""
    assert stats.created == created, (stats.created, created, stats)
    assert stats.settled(), stats  # queued == 0 and created == delivered + dropped + spooled


def report(t: Tally | dict[str, Any]) -> None:
    """Print the figures (shown with ``-s`` or on failure) and append them to the figures file."""
    data = asdict(t) if isinstance(t, Tally) else dict(t)
    line = json.dumps(data, sort_keys=True)
    print("RELIABILITY", line)
    if FIGURES_FILE:
        with open(FIGURES_FILE, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def spans(tracer: Any, n: int, prefix: str, **attributes: Any) -> list[str]:
    """``n`` ended root spans named ``prefix-i``; returns the names (the expected set at the service)."""
    names = [f"{prefix}-{i}" for i in range(n)]
    for name in names:
        with tracer.start_as_current_span(name, attributes=attributes or None):
            pass
    return names


def completed_names(service: LocalService) -> list[str]:
    return sorted(r["name"] for r in service.runs() if r.get("end_time") is not None)
