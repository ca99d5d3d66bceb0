"""``otel-runs demo``: the first thing a new user runs.

Starts the local service on a free port, traces a small nested workload (a
chain that retrieves, calls a model, uses a tool, and survives one failing
tool), delivers it through the real exporter, and prints the tree the service
stored. Nothing leaves the machine.

It ends by saying where the runs are and how to look at them again: with
``--db FILE`` they stay in FILE for ``otel-runs runs list|tree --db FILE``;
without it they were in memory, and the demo says how to keep them next time.
With ``--serve`` the service stays up after the demo and the demo prints the
viewer's address for its trace, until Ctrl-C.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable
from typing import TextIO

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from ._processor import RunsSpanProcessor
from .instrumentation import traceable
from .server import LocalService, render_tree, short_prefix, viewer_link

__all__ = ["run_demo"]

_tracer = trace.get_tracer("otel_runs_exporter.demo")


@traceable(run_type="retriever")
def retrieve(question: str) -> dict:
    return {"documents": [{"page_content": "OpenTelemetry spans become runs.", "metadata": {"source": "readme"}}]}


def call_model(question: str, context: str) -> str:
    """A model call as GenAI instrumentation records it (no network: the answer is canned)."""
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": f"{question}\n\nContext: {context}"},
    ]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "demo-model",
        "gen_ai.request.temperature": 0.0,
        "gen_ai.input.messages": _json(
            [{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in messages]
        ),
    }
    with _tracer.start_as_current_span("chat demo-model", kind=trace.SpanKind.CLIENT, attributes=attributes) as span:
        time.sleep(0.01)
        answer = "Each finished span arrives as a run with its parent, trace_id and dotted_order."
        span.set_attribute(
            "gen_ai.output.messages",
            _json([{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]),
        )
        span.set_attribute("gen_ai.usage.input_tokens", 42)
        span.set_attribute("gen_ai.usage.output_tokens", 17)
        return answer


@traceable(run_type="tool")
def word_count(text: str) -> int:
    return len(text.split())


@traceable(run_type="tool", name="flaky_tool")
def flaky_tool(text: str) -> str:
    raise TimeoutError("the demo tool always times out")


@traceable(run_type="chain", name="answer_question")
def answer_question(question: str) -> dict:
    docs = retrieve(question)["documents"]
    answer = call_model(question, docs[0]["page_content"])
    try:
        flaky_tool(answer)
    except TimeoutError:
        pass  # the error is recorded on the tool's run; the chain carries on
    return {"answer": answer, "words": word_count(answer)}


def _json(value: object) -> str:
    import orjson

    return orjson.dumps(value).decode()


_DEMO_RUNS = 5  # answer_question, retrieve, chat demo-model, flaky_tool, word_count


def run_demo(
    out: TextIO = sys.stdout,
    db: str = ":memory:",
    *,
    port: int = 0,
    until_stopped: Callable[[], None] | None = None,
) -> int:
    """Run the demo; returns 0 when every run arrived and the service found no violation.

    ``db`` may already hold runs (an earlier demo, a ``serve`` database): only the
    trace this run adds is shown and checked. With ``until_stopped`` (the CLI's
    ``--serve``) the service keeps serving after the demo, the viewer's address
    for the trace is printed, and ``until_stopped()`` is called before it stops.
    """
    with LocalService(db=db, port=port) as service:
        where = "in memory" if db == ":memory:" else f"stored in {os.path.abspath(db)}"
        print(f"local service listening on {service.url} (runs {where})", file=out)
        earlier_traces = set(service.store.trace_ids())
        earlier_runs = len(service.store.completed_runs())
        provider = TracerProvider(resource=Resource.create({"service.name": "otel-runs-demo"}))
        processor = RunsSpanProcessor(endpoint=service.url, project="demo")
        provider.add_span_processor(processor)
        trace.set_tracer_provider(provider)
        if trace.get_tracer_provider() is not provider:
            # Someone set a global provider already (an embedding app): add ourselves to it.
            current = trace.get_tracer_provider()
            if isinstance(current, TracerProvider):
                current.add_span_processor(processor)
        result = answer_question("What does otel-runs-exporter do?")
        delivered = processor.force_flush(10_000)
        if delivered:
            service.wait_for_runs(earlier_runs + _DEMO_RUNS, timeout=10)
        new_traces = [tid for tid in service.store.trace_ids() if tid not in earlier_traces]
        runs = [run for tid in new_traces for run in service.trace(tid)]
        print(f"answer: {result['answer']}", file=out)
        for trace_id in new_traces:
            print(f"\ntrace {trace_id} ({len(service.trace(trace_id))} runs):", file=out)
            print(render_tree(service.trace(trace_id)), file=out)
        violations = service.violations()
        stats = processor.stats()
        print(
            f"\ndelivered {stats.delivered} runs in {stats.requests} request(s); "
            f"dropped {stats.dropped_total}; violations {len(violations)}",
            file=out,
        )
        processor.shutdown()
        ok = delivered and len(runs) == _DEMO_RUNS and not violations and stats.dropped_total == 0
        if not ok:
            print("demo FAILED: not every run arrived intact", file=out)
        if until_stopped is None:
            # The prefix `runs list` shows for the trace, which `runs tree` takes back.
            shown = short_prefix(new_traces[0], service.store.trace_ids()) if new_traces else None
            print(_next_steps(db, shown), file=out)
            return 0 if ok else 1
        trace_link = viewer_link(service.url, new_traces[0]) if new_traces else f"{service.url}/"
        print(
            f"\nViewer: {trace_link}\n"
            f"The service keeps serving at {service.url}: open the viewer, or point your app at it\n"
            f"(OTEL_EXPORTER_RUNS_ENDPOINT={service.url}). Ctrl-C stops it"
            + (", and the runs in memory go with it." if db == ":memory:" else "."),
            file=out,
            flush=True,
        )
        until_stopped()
        return 0 if ok else 1


def _next_steps(db: str, trace_id: str | None) -> str:
    """Where the runs are now and the commands that show them again; the service itself stops with the demo."""
    if db == ":memory:":
        return (
            "\nThe runs were in memory and went with the demo. To keep them and look at them later:\n"
            "  otel-runs demo --db demo.db\n"
            "  otel-runs runs list --db demo.db\n"
            "  otel-runs runs tree TRACE_ID --db demo.db\n"
            "(runs list prints a line a trace, --tree their runs; runs tree takes the id's start that list shows)"
        )
    path = shlex.quote(os.path.abspath(db))
    return (
        f"\nThe runs are kept in {path}. Look at them again, a line a trace (--tree: with their runs), and this one:\n"
        f"  otel-runs runs list --db {path}\n"
        f"  otel-runs runs tree {trace_id or 'TRACE_ID'} --db {path}\n"
        f"To add your own app's traces, run `otel-runs serve --db {path}` and point the app at its URL\n"
        "(OTEL_EXPORTER_RUNS_ENDPOINT=http://127.0.0.1:1984)."
    )


if __name__ == "__main__":
    raise SystemExit(run_demo())
