"""The span filter end to end (``spans=genai``, ``blocked_scopes``, ``should_export``): real SDK providers,
the real local service, both paths. What is left out is spliced out: no run is ever an orphan."""

from __future__ import annotations

import gc
import logging
import weakref

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_runs_exporter import _choice, is_genai_span
from otel_runs_exporter.propagation import HEADER, RunsPropagator

from core.helpers import exporter_provider, processor_provider

PATHS = {"processor": processor_provider, "exporter": exporter_provider}


def fastapi_style(provider, llm_attributes=None):
    """A FastAPI request as opentelemetry-instrument traces it: server span, ASGI and DB noise, and an
    agent that calls a tool that calls an LLM, with the app's own plain spans in between."""
    server = provider.get_tracer("opentelemetry.instrumentation.fastapi")
    db = provider.get_tracer("opentelemetry.instrumentation.sqlalchemy")
    agent = provider.get_tracer("pydantic-ai")
    app = provider.get_tracer("myapp.handlers")
    with server.start_as_current_span("POST /chat", kind=trace.SpanKind.SERVER, attributes={"http.method": "POST"}):
        with server.start_as_current_span("POST /chat http receive"):
            pass
        with db.start_as_current_span("SELECT users", attributes={"db.system": "postgresql"}):
            pass
        with agent.start_as_current_span("invoke_agent support", attributes={"gen_ai.agent.name": "support"}):
            with app.start_as_current_span("load_context"):
                with db.start_as_current_span("SELECT history"):
                    pass
                with agent.start_as_current_span("search", attributes={"gen_ai.tool.name": "search"}):
                    with db.start_as_current_span("SELECT documents"):
                        pass
                    with app.start_as_current_span("rank"):
                        attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
                        with agent.start_as_current_span("chat m", attributes=llm_attributes or attributes):
                            pass
        with server.start_as_current_span("POST /chat http send"):
            pass


def _edges(runs):
    by_id = {r["id"]: r for r in runs}
    return sorted((r["name"], by_id[r["parent_run_id"]]["name"] if r.get("parent_run_id") else None) for r in runs)


def _sent(service, path, runs, **settings):
    """The FastAPI-style request sent down ``path`` with ``settings``: the ``runs`` stored, and the sender."""
    provider, sender = PATHS[path](service.url, **settings)
    fastapi_style(provider)
    assert provider.force_flush(5000)
    return service.wait_for_runs(runs), sender


def _clean(service):
    report = service.check()
    assert {k: v for k, v in report.items() if v} == {}, report
    assert service.violations() == []


@pytest.mark.parametrize("path", PATHS)
def test_a_fastapi_style_tree_under_genai_arrives_as_agent_tool_llm_under_the_kept_root(service, path):
    runs, sender = _sent(service, path, 4, spans="genai")
    assert set(_edges(runs)) == {
        ("POST /chat", None),
        ("invoke_agent support", "POST /chat"),
        ("search", "invoke_agent support"),
        ("chat m", "search"),
    }
    # One trace, and each run's place agrees with its parent's: trace_id and dotted_order spliced, not just the parent.
    by_id = {r["id"]: r for r in runs}
    assert len({r["trace_id"] for r in runs}) == 1
    for run in runs:
        if run.get("parent_run_id"):
            assert run["dotted_order"].rsplit(".", 1)[0] == by_id[run["parent_run_id"]]["dotted_order"]
    _clean(service)
    stats = sender.stats()
    assert (stats.filtered, stats.created, stats.delivered, stats.queued) == (7, 4, 4, 0)
    assert stats.settled()


@pytest.mark.parametrize("path", PATHS)
def test_a_root_with_no_genai_descendant_is_left_out_and_counted(service, path):
    provider, sender = PATHS[path](service.url, spans="genai")
    tracer = provider.get_tracer("opentelemetry.instrumentation.fastapi")
    with tracer.start_as_current_span("GET /health"):
        with tracer.start_as_current_span("GET /health http send"):
            pass
    fastapi_style(provider)
    assert provider.force_flush(5000)
    assert {r["name"] for r in service.wait_for_runs(4)} == {"POST /chat", "invoke_agent support", "search", "chat m"}
    assert sender.stats().filtered == 9 and sender.stats().created == 4 and sender.stats().dropped_total == 0


def test_a_waiting_root_is_not_posted_at_its_start_but_with_its_first_kept_descendant(service):
    provider, processor = processor_provider(service.url, spans="genai")
    server = provider.get_tracer("opentelemetry.instrumentation.fastapi")
    agent = provider.get_tracer("opentelemetry.instrumentation.openai_v2")
    with server.start_as_current_span("POST /chat"):
        with server.start_as_current_span("http receive"):
            pass
        assert processor.force_flush(5000)
        assert service.runs() == []  # a root with no kept descendant yet is not sent
        with agent.start_as_current_span("chat gpt"):
            assert processor.force_flush(5000)
            posted = service.wait_for_runs(2, completed=False)
            # Both went out while open, in one request: the root's post just before its child's.
            assert [r["name"] for r in posted] == ["POST /chat", "chat gpt"]
            assert all(r.get("end_time") is None for r in posted)
            multipart = [e for e in service.requests() if e["path"] == "/runs/multipart"]
            assert len(multipart) == 1 and len(multipart[0]["run_ids"]) == 2
    assert processor.force_flush(5000)
    assert _edges(service.wait_for_runs(2)) == [("POST /chat", None), ("chat gpt", "POST /chat")]
    _clean(service)


def test_a_root_left_out_at_its_end_hands_its_place_to_children_that_start_later(service):
    """A child that starts after its root ended (async work outliving its request) is not orphaned."""
    provider, processor = processor_provider(service.url, spans="genai")
    server = provider.get_tracer("opentelemetry.instrumentation.fastapi")
    llm = provider.get_tracer("openinference.instrumentation.openai")
    root = server.start_span("POST /enqueue")
    noise = server.start_span("http send", context=trace.set_span_in_context(root))
    noise.end()
    root.end()  # no kept descendant by now: left out
    with llm.start_as_current_span("ChatCompletion", context=trace.set_span_in_context(noise)):
        pass
    assert processor.force_flush(5000)
    (run,) = service.wait_for_runs(1)
    assert run["name"] == "ChatCompletion" and run.get("parent_run_id") is None and run["trace_id"] == run["id"]
    _clean(service)
    assert processor.stats().filtered == 2


def test_a_left_out_root_does_not_keep_its_span_alive(service):
    """What is remembered of a left-out root, for children that start late, is its place: before, each
    of the last 16,384 kept its live SDK span (~3.3 KB; 20,000 requests of noise held 54.7 MB)."""
    provider, processor = processor_provider(service.url, spans="genai")
    server = provider.get_tracer("opentelemetry.instrumentation.fastapi")
    db = provider.get_tracer("opentelemetry.instrumentation.sqlalchemy")
    roots = []
    for i in range(3):
        with server.start_as_current_span(f"GET /health/{i}") as root:
            with db.start_as_current_span("SELECT 1", attributes={"db.system": "postgresql"}):
                pass
        roots.append(weakref.ref(root))
    del root
    gc.collect()
    assert [ref() for ref in roots] == [None, None, None]
    assert processor.stats().filtered == 6 and len(processor._choice._left_out) == 3


def test_a_late_child_under_a_root_left_out_long_ago_starts_its_own_tree(service, monkeypatch):
    """A span that outlives its left-out root by more requests than are remembered (``_ENDED_MAX``) still
    places its late GenAI child as a root (before: under the left-out root's computed id, an orphan)."""
    monkeypatch.setattr(_choice, "_ENDED_MAX", 2)
    provider, processor = processor_provider(service.url, spans="genai")
    server = provider.get_tracer("opentelemetry.instrumentation.fastapi")
    llm = provider.get_tracer("openinference.instrumentation.openai")
    root = server.start_span("POST /enqueue")
    worker = server.start_span("background job", context=trace.set_span_in_context(root))
    root.end()  # left out, its open child still waiting for work
    for i in range(3):  # more left-out requests than are remembered: the root's entry is forgotten
        server.start_span(f"GET /health/{i}").end()
    with llm.start_as_current_span("ChatCompletion", context=trace.set_span_in_context(worker)):
        pass
    worker.end()
    assert processor.force_flush(5000)
    (run,) = service.wait_for_runs(1)
    assert run["name"] == "ChatCompletion" and run.get("parent_run_id") is None and run["trace_id"] == run["id"]
    _clean(service)
    assert processor.stats().filtered == 5


def test_a_waiting_root_whose_run_is_handed_to_another_process_is_kept(service):
    """The other process may keep runs under it: the propagator's header makes the root a run."""
    provider, processor = processor_provider(service.url, spans="genai")
    server = provider.get_tracer("opentelemetry.instrumentation.fastapi")
    client = provider.get_tracer("opentelemetry.instrumentation.requests")
    with server.start_as_current_span("POST /plan") as root:
        with client.start_as_current_span("POST http://planner/run"):
            headers: dict[str, str] = {}
            RunsPropagator().inject(headers)  # from the left-out client span: its nearest kept ancestor, the root
    assert processor.force_flush(5000)
    (run,) = service.wait_for_runs(1)
    assert run["name"] == "POST /plan" and headers[HEADER] == run["dotted_order"]
    assert root.get_span_context().span_id == int(run["extra"]["metadata"]["otel_span_id"], 16)


def test_a_left_out_span_under_a_remote_run_hands_the_remote_run_to_its_children(service):
    """A server span whose caller is another process: its GenAI children nest under the caller's run."""
    provider, processor = processor_provider(service.url, spans="genai", blocked_scopes="opentelemetry.instrumentation")
    caller = "20260101T120000000000Z018bcfe5-68e3-7000-8000-000000000001"
    context = RunsPropagator().extract({HEADER: caller})
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    context = trace.set_span_in_context(NonRecordingSpan(remote), context)
    token = otel_context.attach(context)
    try:
        server = provider.get_tracer("opentelemetry.instrumentation.flask")  # blocked: left out even as a root
        with server.start_as_current_span("POST /answer"):
            with provider.get_tracer("otel_runs_exporter").start_as_current_span("compose"):
                pass
    finally:
        otel_context.detach(token)
    assert processor.force_flush(5000)
    (run,) = service.wait_for_runs(1)
    assert run["name"] == "compose" and run["parent_run_id"] == "018bcfe5-68e3-7000-8000-000000000001"
    assert run["dotted_order"].startswith(caller + ".")


@pytest.mark.parametrize("path", PATHS)
def test_blocked_scopes_are_prefixes_and_win_over_the_genai_rule(service, path):
    runs, sender = _sent(service, path, 5, blocked_scopes="pydantic-ai, opentelemetry.instrumentation.sql")
    assert _edges(runs) == [
        ("POST /chat", None),
        ("POST /chat http receive", "POST /chat"),
        ("POST /chat http send", "POST /chat"),
        ("load_context", "POST /chat"),
        ("rank", "load_context"),
    ]
    _clean(service)
    assert sender.stats().filtered == 6


@pytest.mark.parametrize("path", PATHS)
def test_should_export_decides_and_an_exception_in_it_keeps_the_span_and_is_logged_once(service, path, caplog):
    def should_export(span):
        if span.name == "SELECT history":
            raise RuntimeError("a bug in the user's filter")
        return is_genai_span(span) or span.name.startswith("load_")

    provider, sender = PATHS[path](service.url, spans="genai", should_export=should_export)
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        fastapi_style(provider)
        fastapi_style(provider)
        assert provider.force_flush(5000)
    runs = service.wait_for_runs(10)
    # should_export replaces the genai rule: the root is not kept for its descendants.
    assert {name for name, _ in _edges(runs)} == {"SELECT history", "chat m", "search", "invoke_agent support", "load_context"}
    assert ("SELECT history", "load_context") in _edges(runs) and ("invoke_agent support", None) in _edges(runs)
    raised = [r for r in caplog.records if "should_export raised" in r.getMessage()]
    assert len(raised) == 1 and "SELECT history" in raised[0].getMessage()
    _clean(service)


@pytest.mark.parametrize("path", PATHS)
def test_a_span_that_becomes_genai_after_its_start_is_judged_when_each_path_decides(service, path):
    """The processor decides at start (the span then has no GenAI attribute); the exporter at end, whole."""
    provider, _ = PATHS[path](service.url, spans="genai")
    tracer = provider.get_tracer("myapp")
    with tracer.start_as_current_span("handler"):
        with tracer.start_as_current_span("call_model") as span:
            span.set_attribute("gen_ai.request.model", "m")
        with provider.get_tracer("otel_runs_exporter").start_as_current_span("traced"):
            pass
    assert provider.force_flush(5000)
    names = {name for name, _ in _edges(service.wait_for_runs(2))}
    assert names == ({"handler", "traced"} if path == "processor" else {"handler", "call_model", "traced"})


def test_by_default_every_span_is_a_run_and_nothing_is_asked(service):
    runs, processor = _sent(service, "processor", 11)
    assert processor._choice is None  # the default path never calls the filter's hooks
    assert len(runs) == 11 and processor.stats().filtered == 0
