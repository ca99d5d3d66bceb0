"""Tail sampling end to end (``sample_rate``, ``keep_errors``, ``keep_slower_than_s`` and the hold's bounds):
real SDK providers, the real local service, both paths. A trace arrives whole or not at all, and every run
is accounted for: created (sent), sampling_held (waiting), sampled_out or filtered, never lost silently."""

from __future__ import annotations

import collections
import logging
import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased
from opentelemetry.trace import Status, StatusCode

from core.helpers import exporter_provider, processor_provider

PATHS = {"processor": processor_provider, "exporter": exporter_provider}


def one_trace(tracer, name, error=False, slow_ns=0):
    """root -> (work -> step), check; ``error`` marks step failed, ``slow_ns`` makes check that long."""
    with tracer.start_as_current_span(name):
        with tracer.start_as_current_span("work"):
            with tracer.start_as_current_span("step") as step:
                if error:
                    step.set_status(Status(StatusCode.ERROR, "boom"))
        start = time.time_ns()
        tracer.start_span("check", start_time=start - slow_ns).end(end_time=start)


def _accounted(stats, spans):
    """Every ended span is one of created, held, sampled out or filtered; the delivery identity holds."""
    assert stats.created == stats.delivered + stats.dropped_total + stats.spooled + stats.queued
    assert stats.created + stats.sampling_held + stats.sampled_out + stats.filtered == spans


@pytest.mark.parametrize("path", PATHS)
def test_at_rate_0_with_keep_errors_exactly_the_traces_with_an_error_arrive_each_complete(service, path):
    provider, sender = PATHS[path](service.url, sample_rate=0.0)
    tracer = provider.get_tracer("app")
    failing = {f"trace-{i}" for i in range(12) if i % 4 == 1}
    for i in range(12):
        one_trace(tracer, f"trace-{i}", error=f"trace-{i}" in failing)
    assert provider.force_flush(5000)
    runs = service.wait_for_runs(4 * len(failing))
    time.sleep(0.1)  # nothing else is coming
    runs = service.runs()
    by_trace = collections.defaultdict(list)
    for run in runs:
        by_trace[run["trace_id"]].append(run)
    assert {r["name"] for r in runs if not r.get("parent_run_id")} == failing
    for trace_runs in by_trace.values():  # each one whole
        root = next(r["name"] for r in trace_runs if not r.get("parent_run_id"))
        assert sorted(r["name"] for r in trace_runs) == sorted([root, "work", "step", "check"])
    assert {k: v for k, v in service.check().items() if v} == {}
    stats = sender.stats()
    assert (stats.created, stats.sampled_out, stats.sampling_held) == (12, 36, 0)
    _accounted(stats, 48)


@pytest.mark.parametrize("path", PATHS)
def test_the_rate_keeps_the_traces_trace_id_ratio_based_keeps(service, path):
    """Decided from the trace id as OTel's sampler decides: a head sampler at the same rate agrees."""
    provider, sender = PATHS[path](service.url, sample_rate=0.5, keep_errors=False)
    tracer = provider.get_tracer("app")
    head = TraceIdRatioBased(0.5)
    expected = set()
    for i in range(24):
        with tracer.start_as_current_span(f"trace-{i}") as root:
            with tracer.start_as_current_span("child"):
                pass
        trace_id = root.get_span_context().trace_id
        if head.should_sample(None, trace_id, "x").decision is Decision.RECORD_AND_SAMPLE:
            expected.add(f"trace-{i}")
    assert 0 < len(expected) < 24
    assert provider.force_flush(5000)
    runs = service.wait_for_runs(2 * len(expected))
    assert {r["name"] for r in runs if not r.get("parent_run_id")} == expected and len(runs) == 2 * len(expected)
    _accounted(sender.stats(), 48)


def test_a_slow_run_keeps_its_trace(service):
    provider, processor = processor_provider(service.url, sample_rate=0.0, keep_errors=False, keep_slower_than_s=2)
    tracer = provider.get_tracer("app")
    one_trace(tracer, "quick", slow_ns=int(1.5e9))
    one_trace(tracer, "slow", slow_ns=int(2.5e9))
    one_trace(tracer, "failed", error=True)  # errors are not kept here
    assert processor.force_flush(5000)
    assert sorted(r["name"] for r in service.wait_for_runs(4)) == ["check", "slow", "step", "work"]
    _accounted(processor.stats(), 12)


def test_an_error_keeps_a_running_trace_at_once_and_its_open_runs_are_posted_early(service):
    """Kept before its root ends: the open ancestors go out at once, so their children never wait parentless."""
    provider, processor = processor_provider(service.url, sample_rate=0.0)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("agent"):
        with tracer.start_as_current_span("plan"):
            pass
        assert processor.force_flush(5000)
        stats = processor.stats()
        assert service.runs() == [] and (stats.sampling_held, stats.created) == (1, 0)
        _accounted(stats, 1)  # held, outside the identity: nothing created, nothing lost
        with tracer.start_as_current_span("tool") as tool:
            tool.record_exception(ValueError("no such city"))
        assert processor.force_flush(5000)
        runs = {r["name"]: r for r in service.wait_for_runs(3, completed=False)}
        assert runs["agent"].get("end_time") is None and runs["tool"]["error"].startswith("ValueError")
        with tracer.start_as_current_span("answer"):  # after the decision: flows as any other run
            pass
    assert processor.force_flush(5000)
    runs = service.wait_for_runs(4)
    assert {r["name"] for r in runs} == {"agent", "plan", "tool", "answer"}
    assert {k: v for k, v in service.check().items() if v} == {}
    _accounted(processor.stats(), 4)


@pytest.mark.parametrize("path", PATHS)
def test_a_trace_past_the_span_bound_is_decided_by_the_rate_and_counted(service, path):
    provider, sender = PATHS[path](service.url, sample_rate=0.0, sample_hold_max_spans=4)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("big"):
        for i in range(4):
            with tracer.start_as_current_span(f"part-{i}"):
                pass
    one_trace(tracer, "kept", error=True)
    assert provider.force_flush(5000)
    assert {r["name"] for r in service.wait_for_runs(4)} == {"kept", "work", "step", "check"}
    stats = sender.stats()
    assert dict(stats.sampled_at_bound) == {"spans": 1} and stats.sampled_out == 5
    _accounted(stats, 9)


@pytest.mark.parametrize("path", PATHS)
def test_a_trace_held_past_its_time_is_decided_by_the_rate_and_counted(service, path):
    # The exporter path holds a child for its parent first (hold_max_s), then for its trace's decision.
    extra = {"hold_max_s": 0.05} if path == "exporter" else {}
    provider, sender = PATHS[path](service.url, sample_rate=0.0, sample_hold_max_s=0.1, **extra)
    tracer = provider.get_tracer("app")
    root = tracer.start_span("long agent run")
    with tracer.start_as_current_span("early step", context=trace.set_span_in_context(root)):
        pass
    assert provider.force_flush(5000)
    if path == "exporter":
        time.sleep(0.06)
        sender.export([])  # no longer waiting for its parent (an orphan now): waiting for its trace's decision
        assert sender.stats().orphaned == 1 and sender.stats().sampling_held == 1
    time.sleep(0.15)
    assert provider.force_flush(5000)  # the processor looks at its held traces' age on a flush too
    if path == "exporter":
        sender.export([])  # the exporter on its next export
    stats = sender.stats()
    assert dict(stats.sampled_at_bound) == {"seconds": 1} and (stats.sampled_out, stats.sampling_held) == (1, 0)
    root.end()  # ended after its trace was decided: sampled out with it
    assert provider.force_flush(5000)
    _accounted(sender.stats(), 2)
    assert sender.stats().sampled_out == 2 and service.runs() == []


def test_held_bytes_have_a_bound_and_count_in_max_queue_bytes(service):
    provider, processor = processor_provider(service.url, sample_rate=0.0, sample_hold_max_bytes=25_000)
    tracer = provider.get_tracer("app")
    roots = [tracer.start_span(f"root-{i}") for i in range(3)]
    for i, root in enumerate(roots):
        with tracer.start_as_current_span("reply", context=trace.set_span_in_context(root)) as reply:
            reply.set_attribute("output.value", "x" * 8_000)
        assert processor._worker.hold.bytes <= 25_000
    # The first root's trace gave way for the third's: the oldest goes first.
    assert dict(processor.stats().sampled_at_bound) == {"bytes": 1} and processor.stats().sampling_held == 2
    for root in roots:
        root.end()
    assert processor.force_flush(5000)
    _accounted(processor.stats(), 6)


@pytest.mark.parametrize("waiting_bytes", [17_000, 0])
def test_what_is_held_counts_in_max_queue_bytes(service, waiting_bytes):
    """A trace kept while another waits has less room: together they stay within max_queue_bytes."""
    provider, processor = processor_provider(
        service.url, sample_rate=0.0, max_queue_bytes=40_000, schedule_delay_s=10, max_export_batch_size=100_000
    )
    tracer = provider.get_tracer("app")
    waiting = tracer.start_span("waiting")
    for _ in range(2):
        with tracer.start_as_current_span("reply", context=trace.set_span_in_context(waiting)) as reply:
            reply.set_attribute("output.value", "x" * waiting_bytes)
    one_trace(tracer, "failing", error=True)  # kept at once, its 4 runs queued beside what waits
    stats = processor.stats()
    lost = stats.dropped.get("queue_bytes_full", 0)
    assert lost > 0 if waiting_bytes else lost == 0
    waiting.end()
    assert processor.force_flush(5000)
    _accounted(processor.stats(), 7)


@pytest.mark.parametrize("path", PATHS)
def test_shutdown_decides_what_is_held_by_the_rate_and_says_so_in_the_stats(service, path):
    provider, sender = PATHS[path](service.url, sample_rate=0.0)
    tracer = provider.get_tracer("app")
    root = tracer.start_span("never ends")
    with tracer.start_as_current_span("step", context=trace.set_span_in_context(root)):
        pass
    provider.shutdown()
    stats = sender.stats()
    assert dict(stats.sampled_at_bound) == {"shutdown": 1} and (stats.sampled_out, stats.sampling_held) == (1, 0)
    _accounted(stats, 1)


def test_malformed_sampling_variables_warn_and_tracing_goes_on(service, monkeypatch, caplog):
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_SAMPLE_RATE", "1.5")
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_KEEP_SLOWER_THAN", "-2")
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_SPANS", "llm-only")
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        provider, processor = processor_provider(service.url)
    warned = " ".join(r.getMessage() for r in caplog.records)
    for var in ("OTEL_EXPORTER_RUNS_SAMPLE_RATE", "OTEL_EXPORTER_RUNS_KEEP_SLOWER_THAN", "OTEL_EXPORTER_RUNS_SPANS"):
        assert var in warned
    s = processor.settings
    assert (s.sample_rate, s.keep_slower_than_s, s.spans) == (1.0, 0.0, "all")
    one_trace(provider.get_tracer("app"), "traced")
    assert processor.force_flush(5000)
    assert len(service.wait_for_runs(4)) == 4
