"""Small helpers for the core tests: a provider wired to the local service, a port where nothing listens."""

from __future__ import annotations

import socket
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_runs_exporter import RunsSpanExporter, RunsSpanProcessor

FAST_BACKOFF = (0.01, 0.2)
"""A ``retry_backoff`` for tests against the local service with faults: retry steps
of 10 ms up to 0.2 s instead of 0.5 s up to 30 s, so retrying does not sleep
(Retry-After is still honoured as the service says). Tests of the schedule itself
use the real one on a :class:`~otel_runs_exporter.testing.FakeClock` instead."""

# Providers made by a test, shut down after it even when it fails, so that no
# worker thread of one test keeps sending into the next test's service.
created: list[TracerProvider] = []


def processor_provider(url: str, **settings: Any) -> tuple[TracerProvider, RunsSpanProcessor]:
    settings.setdefault("api_key", "test-key")
    settings.setdefault("schedule_delay_s", 0.05)
    settings.setdefault("retry_backoff", FAST_BACKOFF)
    processor = RunsSpanProcessor(endpoint=url, **settings)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    created.append(provider)
    return provider, processor


def exporter_provider(url: str, **settings: Any) -> tuple[TracerProvider, RunsSpanExporter]:
    settings.setdefault("api_key", "test-key")
    settings.setdefault("retry_backoff", FAST_BACKOFF)
    exporter = RunsSpanExporter(endpoint=url, **settings)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=50))
    created.append(provider)
    return provider, exporter


def tree(runs: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(depth, name) in dotted_order: the shape of a trace, independent of ids and times."""
    ordered = sorted(runs, key=lambda r: r["dotted_order"])
    return [(r["dotted_order"].count("."), r["name"]) for r in ordered]


def closed_port() -> int:
    """A loopback port nothing listens at: a connection there is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again on leaving
