"""Held spans (``sample_rate`` below 1, processor path) get their node only when something needs it.

Most held traces are sampled out, so a held span is kept as the span it is, and
its place in the run tree is made when its trace is kept, when a child's place
or its run id is asked for, or at once when the span filter places it. A run
must not depend on that: the same spans give the same stored runs whether their
trace was sent at once, held and then kept, or went through the exporter path.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from core.helpers import FAST_BACKOFF, processor_provider
from otel_runs_exporter import RunsSpanExporter, RunsSpanProcessor

_T0 = 1_760_000_000_000_000_000


class _SameIds(IdGenerator):
    """The same trace and span ids on every path, so their runs can be compared whole."""

    def __init__(self) -> None:
        self._next = 0

    def generate_span_id(self) -> int:
        self._next += 1
        return 0x1000 + self._next

    def generate_trace_id(self) -> int:
        self._next += 1
        return (0xABCD << 64) | (0xFFFF_0000_0000_0000 + self._next)  # high: no rate below 1 keeps it


# parents[i]: the index of span i's parent (None: the root); spans start in index order and all
# stay open until the last has started, then end last-started first, so a trace kept by an error
# still has open ancestors (posted early) and ended descendants (sent whole).
SHAPES = {
    "chain, error at the leaf": ([None, 0, 1, 2, 3], 4),
    "fan, error in the middle": ([None, 0, 0, 1, 1, 0, 5], 3),
    "error on the root": ([None, 0, 1, 0], 0),
}


def _trace(tracer: Any, parents: list[int | None], error: int | None, tag: str) -> None:
    spans: list[Any] = []
    for i, parent in enumerate(parents):
        context = set_span_in_context(spans[parent]) if parent is not None else None
        spans.append(tracer.start_span(f"{tag}-{i}", context=context, start_time=_T0 + i * 1000,
                                       attributes={"input.value": f"in {i}"}))
    for i in reversed(range(len(spans))):
        spans[i].set_attribute("output.value", f"out {i}")
        if i == error:
            spans[i].set_status(Status(StatusCode.ERROR, "went wrong"))
        spans[i].end(end_time=_T0 + 10_000_000 - i * 1000)


def _stored(service: Any, path: str, parents: list[int | None], error: int) -> list[bytes]:
    service.reset()
    provider = TracerProvider(id_generator=_SameIds())
    sender: Any
    if path == "exporter":
        sender = RunsSpanExporter(endpoint=service.url, api_key="k", retry_backoff=FAST_BACKOFF, sample_rate=0.0)
        provider.add_span_processor(BatchSpanProcessor(sender, schedule_delay_millis=50))
    else:
        rate = 1.0 if path == "sent at once" else 0.0
        sender = RunsSpanProcessor(endpoint=service.url, api_key="k", retry_backoff=FAST_BACKOFF,
                                   schedule_delay_s=0.05, sample_rate=rate)
        provider.add_span_processor(sender)
    tracer = provider.get_tracer("app")
    _trace(tracer, parents, error, "kept")
    if path != "sent at once":
        _trace(tracer, parents, None, "dropped")  # sampled out whole
    provider.force_flush(10_000)
    runs = service.wait_for_runs(len(parents))
    provider.shutdown()
    assert service.violations() == [] and {k: v for k, v in service.check().items() if v} == {}
    stats = sender.stats()
    assert stats.created == stats.delivered == len(parents) and stats.dropped_total == 0
    assert stats.sampled_out == (0 if path == "sent at once" else len(parents))
    return sorted(orjson.dumps(run, option=orjson.OPT_SORT_KEYS) for run in runs)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_held_trace_kept_later_stores_the_runs_a_trace_sent_at_once_stores(service, shape):
    parents, error = SHAPES[shape]
    at_once = _stored(service, "sent at once", parents, error)
    assert len(at_once) == len(parents)
    assert _stored(service, "held, then kept", parents, error) == at_once
    assert _stored(service, "exporter", parents, error) == at_once


def test_a_held_spans_run_handed_on_before_the_decision_is_the_run_that_arrives(service):
    """The propagator asks for a held span's run id: its node is made then, and the keep sends that run."""
    provider, processor = processor_provider(service.url, sample_rate=0.0)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("agent"):
        with tracer.start_as_current_span("call-out") as call_out:
            handed = processor.run_ids(call_out.get_span_context().span_id)
            assert handed is not None
        assert service.runs() == []  # still held
        with tracer.start_as_current_span("tool") as tool:
            tool.record_exception(ValueError("no such city"))
    assert processor.force_flush(5000)
    runs = {r["name"]: r for r in service.wait_for_runs(3)}
    assert (runs["call-out"]["id"], runs["call-out"]["dotted_order"]) == (str(handed.run_id), handed.dotted_order)
    assert runs["call-out"]["parent_run_id"] == runs["agent"]["id"] == runs["tool"]["parent_run_id"]


def test_a_held_spans_run_handed_on_is_sampled_out_with_its_trace(service):
    provider, processor = processor_provider(service.url, sample_rate=0.0)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("agent"):
        with tracer.start_as_current_span("call-out") as call_out:
            assert processor.run_ids(call_out.get_span_context().span_id) is not None
    assert processor.force_flush(5000)
    stats = processor.stats()
    assert service.runs() == [] and (stats.created, stats.sampled_out, stats.sampling_held) == (0, 2, 0)


@pytest.mark.parametrize("error", [True, False])
def test_the_span_filter_and_tail_sampling_together_keep_a_spliced_tree_whole_or_nothing(service, error):
    """``spans=genai`` with ``sample_rate=0``: a failing LLM call keeps its trace, spliced under the kept root."""
    provider, processor = processor_provider(service.url, spans="genai", sample_rate=0.0)
    server = provider.get_tracer("opentelemetry.instrumentation.fastapi")
    db = provider.get_tracer("opentelemetry.instrumentation.sqlalchemy")
    with server.start_as_current_span("POST /chat"):
        with db.start_as_current_span("SELECT"):
            pass
        with server.start_as_current_span("agent", attributes={"openinference.span.kind": "AGENT"}):
            with db.start_as_current_span("SELECT"):  # left out: the LLM call below is spliced to the agent
                with server.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}) as chat:
                    if error:
                        chat.set_status(Status(StatusCode.ERROR, "rate limited"))
    assert processor.force_flush(5000)
    stats = processor.stats()
    if not error:
        assert service.runs() == [] and stats.created == 0 and stats.filtered == 2
        return
    runs = {r["name"]: r for r in service.wait_for_runs(3)}
    assert set(runs) == {"POST /chat", "agent", "chat"}
    assert runs["chat"]["parent_run_id"] == runs["agent"]["id"] and runs["agent"]["parent_run_id"] == runs["POST /chat"]["id"]
    assert {k: v for k, v in service.check().items() if v} == {}
    assert (stats.created, stats.filtered) == (3, 2)


def test_a_deep_held_chain_is_placed_whole_when_an_error_at_its_leaf_keeps_it(service):
    """The leaf's node is made with its ancestors' at the keep, past the depth limit too (which splits it)."""
    provider, processor = processor_provider(service.url, sample_rate=0.0)
    tracer = provider.get_tracer("app")
    depth = 300
    spans = [tracer.start_span("level-0")]
    for i in range(1, depth):
        spans.append(tracer.start_span(f"level-{i}", context=set_span_in_context(spans[-1])))
    spans[-1].set_status(Status(StatusCode.ERROR, "deep down"))
    for span in reversed(spans):
        span.end()
    assert processor.force_flush(10_000)
    runs = service.wait_for_runs(depth)
    assert len(runs) == depth and {k: v for k, v in service.check().items() if v} == {}
    by_name = {r["name"]: r for r in runs}
    for i in range(1, depth):
        run, above = by_name[f"level-{i}"], by_name[f"level-{i - 1}"]["id"]
        # Past the depth limit a run starts a new trace, naming its parent run in metadata.
        parent = run.get("parent_run_id") or run["extra"]["metadata"]["depth_limit_parent_run_id"]
        assert parent == above


def test_threads_ending_spans_as_their_trace_is_kept_lose_no_run(service):
    """One trace, many threads: an error keeps it while other threads' spans are still open or ending."""
    provider, processor = processor_provider(service.url, sample_rate=0.0)
    tracer = provider.get_tracer("app")
    threads, per_thread = 8, 30
    start = threading.Barrier(threads)
    with tracer.start_as_current_span("request") as root:
        context = set_span_in_context(root)

        def work(n: int) -> None:
            start.wait()
            for i in range(per_thread):
                with tracer.start_as_current_span(f"t{n}-{i}", context=context) as span:
                    if n == 3 and i == per_thread // 2:
                        span.set_status(Status(StatusCode.ERROR, "one failure"))

        pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    assert processor.force_flush(10_000)
    total = threads * per_thread + 1
    runs = service.wait_for_runs(total)
    assert len(runs) == total and {k: v for k, v in service.check().items() if v} == {}
    stats = processor.stats()
    assert stats.created == stats.delivered == total and stats.sampled_out == stats.dropped_total == 0


@pytest.mark.parametrize("spans", ["all", "genai"])
def test_what_the_hold_keeps_is_let_go_whatever_decides_a_trace(service, spans):
    """Kept by an error, dropped at its root's end, or decided at the span bound while its root runs:
    once every span has ended the processor and the hold keep nothing for the trace (nothing leaks)."""
    provider, processor = processor_provider(service.url, sample_rate=0.0, spans=spans, sample_hold_max_spans=4)
    server = provider.get_tracer("opentelemetry.instrumentation.fastapi")
    llm = provider.get_tracer("opentelemetry.instrumentation.openai_v2")
    for name, error, children in (("kept", True, 2), ("dropped", False, 2), ("past the bound", False, 6)):
        with server.start_as_current_span(name):
            for i in range(children):
                with llm.start_as_current_span(f"chat-{i}", attributes={"gen_ai.operation.name": "chat"}) as chat:
                    if error and i == 1:
                        chat.set_status(Status(StatusCode.ERROR, "rate limited"))
    assert processor.force_flush(5000)
    choice = processor._choice
    assert (processor._open, choice._held, choice._made, choice._waiting) == ({}, {}, {}, {})
    assert len(processor._worker.hold) == 0
    stats = processor.stats()
    assert stats.created == 3 and stats.sampled_at_bound == {"spans": 1}
    assert stats.created + stats.sampled_out + stats.filtered + stats.sampling_held == 3 + 3 + 7
    assert {r["name"] for r in service.wait_for_runs(3)} == {"kept", "chat-0", "chat-1"}


def test_a_waiting_root_of_a_trace_decided_while_it_runs_is_settled_at_its_end(service):
    """``spans=genai``: a root still waiting for a kept descendant when the time bound decides its
    trace ends left out (filtered, as with no sampling), and nothing of it is kept."""
    provider, processor = processor_provider(service.url, sample_rate=0.0, spans="genai", sample_hold_max_s=0.01)
    server = provider.get_tracer("opentelemetry.instrumentation.fastapi")
    with server.start_as_current_span("GET /health"):
        time.sleep(0.03)
        assert processor.force_flush(5000)  # decides the held traces past their time bound
        assert processor.stats().sampled_at_bound == {"seconds": 1}
    assert processor.force_flush(5000)
    choice = processor._choice
    assert (processor._open, choice._held, choice._made, choice._waiting) == ({}, {}, {}, {})
    stats = processor.stats()
    assert (stats.created, stats.filtered, stats.sampled_out) == (0, 1, 0)
