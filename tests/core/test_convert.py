"""Span to run, without threads or sockets: real SDK spans, captured in memory."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from otel_runs_exporter._convert import (
    ConvertOptions,
    RunNode,
    early_post_summary,
    given_ids,
    patch_fields,
    span_ids,
    span_to_run,
    warn_if_ids_set_late,
)
from otel_runs_exporter._ids import MAX_DEPTH, GivenIds, ids_from_dotted_order, parse_dotted_order
from otel_runs_exporter._settings import resolve as resolve_settings


@pytest.fixture
def capture():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("scope", "1.2"), exporter


def _by_name(exporter):
    return {s.name: s for s in exporter.get_finished_spans()}


def test_full_run_fields(capture):
    tracer, exporter = capture
    with tracer.start_as_current_span("root", attributes={"input.value": '{"q": "hi"}', "custom": 3}) as root:
        root.set_attribute("output.value", "plain text")
        root.add_event("note", {"k": "v"})
    span = _by_name(exporter)["root"]
    ids = span_ids(span, None)
    run = span_to_run(span, ids, ConvertOptions(session={"session_name": "p"}))
    assert run["id"] == run["trace_id"] == ids.run_id and "parent_run_id" not in run
    assert run["name"] == "root" and run["run_type"] == "chain" and run["session_name"] == "p"
    assert run["inputs"] == {"q": "hi"} and run["outputs"] == {"output": "plain text"}
    assert run["events"][0]["name"] == "note" and run["events"][0]["kwargs"] == {"k": "v"}
    meta = run["extra"]["metadata"]
    assert meta["custom"] == 3 and "input.value" not in meta
    assert meta["otel_trace_id"] == format(span.context.trace_id, "032x")
    assert meta["otel_span_id"] == format(span.context.span_id, "016x")
    assert meta["otel_scope_name"] == "scope" and meta["otel_scope_version"] == "1.2"
    assert meta["otel_resource"]["service.name"] == "svc" and meta["otel_span_kind"] == "INTERNAL"
    assert run["start_time"].endswith("+00:00") and run["end_time"] >= run["start_time"]


def test_full_resource_on_the_root_run_only(capture):
    # The resource is the process's, the same on every run of a trace: sent whole on
    # the root, and as service.name plus a digest of it on the others.
    tracer, exporter = capture
    with tracer.start_as_current_span("root"):
        with tracer.start_as_current_span("child"):
            pass
    spans = _by_name(exporter)
    root_ids = span_ids(spans["root"], None)
    root = span_to_run(spans["root"], root_ids, ConvertOptions())["extra"]["metadata"]
    child = span_to_run(spans["child"], span_ids(spans["child"], root_ids), ConvertOptions())["extra"]["metadata"]
    assert root["otel_resource"] == dict(spans["root"].resource.attributes)
    assert root["otel_resource"]["telemetry.sdk.name"] == "opentelemetry"
    assert "otel_resource" not in child and child["otel_service_name"] == "svc"
    assert child["otel_resource_digest"] == root["otel_resource_digest"] and len(root["otel_resource_digest"]) == 16
    # Another resource, another digest; a remote parent makes a root, which gets the whole resource.
    other = TracerProvider(resource=Resource.create({"service.name": "svc", "host.name": "h2"}))
    other.add_span_processor(SimpleSpanProcessor(exporter))
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    with other.get_tracer("s").start_as_current_span("served", context=trace.set_span_in_context(NonRecordingSpan(remote))):
        pass
    served = _by_name(exporter)["served"]
    meta = span_to_run(served, span_ids(served, None), ConvertOptions())["extra"]["metadata"]
    assert meta["otel_resource"]["host.name"] == "h2" and meta["otel_resource_digest"] != root["otel_resource_digest"]


def test_child_ids_and_llm_run_type(capture):
    tracer, exporter = capture
    with tracer.start_as_current_span("root"):
        with tracer.start_as_current_span("call", attributes={"gen_ai.request.model": "m"}):
            pass
    spans = _by_name(exporter)
    root_ids = span_ids(spans["root"], None)
    child = span_ids(spans["call"], root_ids)
    run = span_to_run(spans["call"], child, ConvertOptions())
    assert run["parent_run_id"] == root_ids.run_id and run["trace_id"] == root_ids.run_id
    assert [str(u) for _, u in parse_dotted_order(run["dotted_order"])] == [root_ids.run_id, child.run_id]
    assert run["run_type"] == "llm"


def test_errors_from_status_and_exception_events(capture):
    tracer, exporter = capture
    with pytest.raises(ValueError):
        with tracer.start_as_current_span("boom"):
            raise ValueError("bad input")
    with tracer.start_as_current_span("status") as span:
        span.set_status(Status(StatusCode.ERROR, "it failed"))
    spans = _by_name(exporter)
    boom = span_to_run(spans["boom"], span_ids(spans["boom"], None), ConvertOptions())
    # The error leads with itself (what a list of runs shows), as the service's SDK does, then the stacktrace.
    assert boom["error"].startswith("ValueError: bad input\n\nTraceback (most recent call last):")
    assert boom["error"].endswith("ValueError: bad input")
    assert "events" not in boom  # the exception event became the error; it is not repeated
    status = span_to_run(spans["status"], span_ids(spans["status"], None), ConvertOptions())
    assert status["error"] == "it failed"


def test_error_text_leads_with_the_error(capture):
    """How the error is built from an exception event's type, message and stacktrace."""
    tracer, exporter = capture
    sdk_text = "ValueError('boom')\n\nTraceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom\n"
    cases = {
        # The service's SDK records its error text as a bare Exception it never raised.
        "sdk": {"exception.type": "Exception", "exception.message": sdk_text,
                "exception.stacktrace": f"Exception: {sdk_text}"},
        "no stacktrace": {"exception.type": "KeyError", "exception.message": "'k'"},
        "frames without the message": {"exception.type": "E", "exception.message": "m",
                                       "exception.stacktrace": "at f (a.js:1)"},
    }
    for name, attrs in cases.items():
        with tracer.start_as_current_span(name) as span:
            span.add_event("note")
            span.add_event("exception", attrs)
            span.set_status(Status(StatusCode.ERROR))
    spans = _by_name(exporter)
    errors = {n: span_to_run(spans[n], span_ids(spans[n], None), ConvertOptions()) for n in cases}
    assert errors["sdk"]["error"] == sdk_text  # exactly what the SDK sends as the error without OTel
    assert errors["no stacktrace"]["error"] == "KeyError: 'k'"
    assert errors["frames without the message"]["error"] == "E: m\n\nat f (a.js:1)"
    assert all([e["name"] for e in run["events"]] == ["note"] for run in errors.values())


def test_exception_events_that_did_not_become_the_error_stay_in_events(capture):
    tracer, exporter = capture
    with tracer.start_as_current_span("retried") as span:
        span.add_event("exception", {"exception.type": "TimeoutError", "exception.message": "first try"})
        span.add_event("exception", {"exception.type": "TimeoutError", "exception.message": "second try"})
        span.set_status(Status(StatusCode.ERROR))
    span = _by_name(exporter)["retried"]
    run = span_to_run(span, span_ids(span, None), ConvertOptions())
    assert run["error"] == "TimeoutError: second try"  # the last one ended the span
    assert [e["kwargs"]["exception.message"] for e in run["events"]] == ["first try"]


def test_remote_parent_becomes_root_with_its_ids_in_metadata(capture):
    tracer, exporter = capture
    remote = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    ctx = trace.set_span_in_context(NonRecordingSpan(remote))
    with tracer.start_as_current_span("server", context=ctx):
        pass
    span = _by_name(exporter)["server"]
    run = span_to_run(span, span_ids(span, None), ConvertOptions())
    assert "parent_run_id" not in run and run["trace_id"] == run["id"]
    meta = run["extra"]["metadata"]
    assert meta["otel_parent_span_id"] == format(0xDEF, "016x") and meta["otel_parent_is_remote"] is True


def _remote_chain(depth: int) -> str:
    """A dotted_order ``depth`` entries deep, as a remote sender would pass it."""
    return ".".join(f"20231114T221320{i:06d}Z018bcfe5-68e3-7000-8000-{i:012x}" for i in range(1, depth + 1))


def test_a_span_under_a_run_at_the_depth_limit_starts_a_new_trace_naming_it(capture, caplog):
    tracer, exporter = capture
    with tracer.start_as_current_span("deep"):
        pass
    span = _by_name(exporter)["deep"]
    at_limit = ids_from_dotted_order(_remote_chain(MAX_DEPTH), project="p")
    under = span_ids(span, ids_from_dotted_order(_remote_chain(MAX_DEPTH - 1), project="p"))
    assert under.depth == MAX_DEPTH and under.trace_id == at_limit.trace_id  # up to the limit: one trace
    with caplog.at_level("WARNING", logger="otel_runs_exporter"):
        ids = span_ids(span, at_limit)
    assert ids.run_id == ids.trace_id and ids.parent_run_id is None and ids.depth == 1 and ids.project == "p"
    assert f"nested more than {MAX_DEPTH} runs deep" in caplog.text
    run = span_to_run(span, ids, ConvertOptions())
    assert "parent_run_id" not in run and run["trace_id"] == run["id"]
    meta = run["extra"]["metadata"]
    assert (meta["depth_limit_parent_run_id"], meta["depth_limit_trace_id"]) == (at_limit.run_id, at_limit.trace_id)
    assert len(parse_dotted_order(run["dotted_order"])) == 1 and run["session_name"] == "p"
    # A dotted_order given by attribute past the limit is refused like any unusable one, naming the limit.
    with tracer.start_as_current_span("given", attributes={"langsmith.span.dotted_order": _remote_chain(MAX_DEPTH + 1)}):
        pass
    given = _by_name(exporter)["given"]
    with caplog.at_level("WARNING", logger="otel_runs_exporter"):
        ids = span_ids(given, None, given=given_ids(given.attributes))
    assert ids.depth == 1 and f"the limit is {MAX_DEPTH} entries" in caplog.text


def test_langsmith_overrides(capture):
    tracer, exporter = capture
    attrs = {
        "langsmith.trace.name": "Pretty",
        "langsmith.span.kind": "TOOL",
        "langsmith.metadata.user": "u1",
        "langsmith.span.tags": "a,b",
        "langsmith.trace.session_name": "other-project",
    }
    with tracer.start_as_current_span("raw", attributes=attrs):
        pass
    span = _by_name(exporter)["raw"]
    run = span_to_run(span, span_ids(span, None), ConvertOptions(session={"session_id": "x"}))
    assert run["name"] == "Pretty" and run["run_type"] == "tool" and run["tags"] == ["a", "b"]
    assert run["session_name"] == "other-project" and "session_id" not in run
    assert run["extra"]["metadata"]["user"] == "u1"
    assert not any(k.startswith("langsmith.") for k in run["extra"]["metadata"])


def test_one_tree_one_project_decided_where_the_tree_starts(capture, caplog):
    """The service's SDK in OTel mode names its project on every span; nested under ours, its runs stay in ours."""
    tracer, exporter = capture
    with tracer.start_as_current_span("ours"):
        with tracer.start_as_current_span("sdk-run", attributes={"langsmith.trace.session_name": "sdk-project"}):
            with tracer.start_as_current_span("sdk-child", attributes={"langsmith.trace.session_name": "sdk-project"}):
                pass
    with tracer.start_as_current_span("sdk-root", attributes={"langsmith.trace.session_name": "sdk-project"}):
        with tracer.start_as_current_span("plain-child"):
            pass
    with tracer.start_as_current_span("by-id", attributes={"langsmith.trace.session_id": "0" * 8 + "-0000-4000-8000-" + "1" * 12}):
        with tracer.start_as_current_span("by-id-child"):
            pass
    spans = _by_name(exporter)
    opts = ConvertOptions(session={"session_name": "configured"})

    def place(name, parent=None, **kwargs):
        ids = span_ids(spans[name], parent, **kwargs)
        return ids, span_to_run(spans[name], ids, opts)

    with caplog.at_level("WARNING", logger="otel_runs_exporter"):
        ours, ours_run = place("ours")
        sdk, sdk_run = place("sdk-run", ours)
        _, sdk_child_run = place("sdk-child", sdk)
        root, root_run = place("sdk-root")
        _, plain_run = place("plain-child", root)
        by_id, by_id_run = place("by-id")
        _, by_id_child_run = place("by-id-child", by_id)
        # Under a remote run that came without a project, a span starts its tree here: its own counts.
        _, remote_run = place("sdk-run", ours._replace(project=None), parent_is_remote=True)
    assert {r["session_name"] for r in (ours_run, sdk_run, sdk_child_run)} == {"configured"}
    assert root_run["session_name"] == plain_run["session_name"] == "sdk-project"
    assert by_id_run["session_id"] == by_id_child_run["session_id"] == "00000000-0000-4000-8000-111111111111"
    assert "session_name" not in by_id_child_run and remote_run["session_name"] == "sdk-project"
    # The project named on a nested span is not lost silently: said once per process.
    said = [r.getMessage() for r in caplog.records if "is not used" in r.getMessage()]
    assert len(said) == 1 and "'sdk-project' on span 'sdk-run'" in said[0]


def test_open_span_post_then_patch_does_not_resend_inputs():
    provider = TracerProvider()
    span = provider.get_tracer("t").start_span("long", attributes={"input.value": "x"})
    ids = span_ids(span, None)
    post = span_to_run(span, ids, ConvertOptions())
    assert "end_time" not in post and "outputs" not in post and post["inputs"] == {"input": "x"}
    span.set_attribute("output.value", "y")
    span.end()
    patch = patch_fields(span_to_run(span, ids, ConvertOptions()), early_post_summary(post))
    assert "inputs" not in patch and patch["outputs"] == {"output": "y"} and "end_time" in patch
    assert {"trace_id", "dotted_order", "id"} <= set(patch)


def test_inputs_recorded_after_the_start_go_in_the_patch():
    provider = TracerProvider()
    span = provider.get_tracer("t").start_span("late")
    ids = span_ids(span, None)
    post = span_to_run(span, ids, ConvertOptions())
    span.set_attribute("input.value", '{"a": 1}')
    span.set_attribute("gen_ai.request.model", "m")
    span.end()
    patch = patch_fields(span_to_run(span, ids, ConvertOptions()), early_post_summary(post))
    assert patch["inputs"] == {"a": 1} and patch["run_type"] == "llm"


def test_id_scheme_otlp(capture):
    tracer, exporter = capture
    with tracer.start_as_current_span("s"):
        pass
    span = _by_name(exporter)["s"]
    # Through the one place the setting becomes its rule.
    opts = ConvertOptions.from_settings(resolve_settings({"id_scheme": "otlp", "api_key": "k"}, env={}))
    ids = span_ids(span, None, opts.id_scheme)
    assert ids.run_id == f"00000000-0000-0000-{format(span.context.span_id, '016x')[:4]}-{format(span.context.span_id, '016x')[4:]}"


def test_first_token_becomes_a_new_token_event(capture):
    tracer, exporter = capture
    with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}) as span:
        span.add_event("gen_ai.first_token", timestamp=1_700_000_000_500_000_000)
    span = _by_name(exporter)["chat m"]
    run = span_to_run(span, span_ids(span, None), ConvertOptions())
    assert run["events"][0] == {"name": "new_token", "time": "2023-11-14T22:13:20.500000+00:00", "kwargs": {}}
    assert [e["name"] for e in run["events"]].count("gen_ai.first_token") == 0


def test_as_open_leaves_the_end_to_the_patch(capture):
    # A span that ended between its post's conversion and its patch's queueing: the early
    # post must not carry the end, or a refused patch would be counted lost while the run arrived.
    tracer, exporter = capture
    with tracer.start_as_current_span("just-ended", attributes={"input.value": '{"q": 1}'}) as span:
        span.set_attribute("output.value", "done")
    span = _by_name(exporter)["just-ended"]
    run = span_to_run(span, span_ids(span, None), ConvertOptions(), as_open=True)
    assert run["inputs"] == {"q": 1}
    assert not {"end_time", "outputs", "error", "events"} & set(run)
    assert "end_time" in span_to_run(span, span_ids(span, None), ConvertOptions())


def test_an_early_post_carries_only_what_is_fixed_at_start():
    # A field the post guessed could not be taken back where a service merges patches
    # into posts: metadata, tags and invocation params wait for the patch.
    provider = TracerProvider()
    span = provider.get_tracer("t").start_span(
        "chain", attributes={"input.value": "x", "langsmith.span.tags": "a", "app.user": "u", "gen_ai.request.top_p": 1}
    )
    post = span_to_run(span, span_ids(span, None), ConvertOptions())
    assert set(post) == {"id", "trace_id", "dotted_order", "name", "run_type", "start_time", "session_name", "inputs"}
    span.end()


def test_messages_recorded_after_the_request_body_replace_it_in_the_patch():
    # OpenInference: the raw request as input.value at start, the messages a moment later.
    # input.value is not final for a model run, so the post waits; the patch has the messages.
    provider = TracerProvider()
    request = '{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    span = provider.get_tracer("t").start_span(
        "ChatCompletion", attributes={"openinference.span.kind": "LLM", "input.value": request,
                                      "input.mime_type": "application/json"}
    )
    ids = span_ids(span, None)
    post = span_to_run(span, ids, ConvertOptions())
    assert post["run_type"] == "llm" and "inputs" not in post
    span.set_attribute("llm.input_messages.0.message.role", "user")
    span.set_attribute("llm.input_messages.0.message.content", "hi")
    span.end()
    full = span_to_run(span, ids, ConvertOptions())
    patch = patch_fields(full, early_post_summary(post))
    assert patch["inputs"] == {"messages": [{"role": "user", "content": "hi"}]} == full["inputs"]
    assert patch["extra"] == full["extra"]


def test_inputs_replaced_after_the_post_are_sent_again():
    provider = TracerProvider()
    span = provider.get_tracer("t").start_span("step", attributes={"input.value": '{"q": 1}'})
    ids = span_ids(span, None)
    post = span_to_run(span, ids, ConvertOptions())
    assert post["inputs"] == {"q": 1}
    span.set_attribute("input.value", '{"q": 2}')
    span.end()
    patch = patch_fields(span_to_run(span, ids, ConvertOptions()), early_post_summary(post))
    assert patch["inputs"] == {"q": 2}


# --- ids given by langsmith.* attributes ----------------------------------------------

GIVEN_RUN = "018bcfe5-68e3-7000-8000-000000000003"
GIVEN_PARENT = "018bcfe5-68e3-7000-8000-000000000001"
GIVEN_DOTTED = f"20231114T221320000001Z{GIVEN_PARENT}.20231114T221321000000Z{GIVEN_RUN}"


def test_given_ids_reads_only_the_four_id_attributes():
    assert given_ids(None) is None and given_ids({}) is None
    assert given_ids({"http.method": "GET", "langsmith.metadata.k": "v"}) is None
    span = TracerProvider().get_tracer("t").start_span("s", attributes={"langsmith.span.id": GIVEN_RUN, "x": 1})
    assert given_ids(span.attributes) == GivenIds(span_id=GIVEN_RUN)  # the SDK's read-only mapping
    assert given_ids({"langsmith.span.dotted_order": GIVEN_DOTTED}) == GivenIds(dotted_order=GIVEN_DOTTED)


def test_run_node_keeps_the_ids_the_span_started_with(caplog):
    """Processor path, without its threads: the ids are resolved later, from the start's attributes."""
    tracer = TracerProvider().get_tracer("t")
    span = tracer.start_span("given", attributes={"langsmith.span.dotted_order": GIVEN_DOTTED})
    node = RunNode(span, None)
    child_span = tracer.start_span("child", context=trace.set_span_in_context(span))
    child = RunNode(child_span, node)
    span.set_attribute("langsmith.span.dotted_order", f"20231114T221320000001Z{GIVEN_RUN}")  # too late
    child_span.end()
    span.end()
    ids = node.resolve(ConvertOptions().id_scheme)
    assert (ids.run_id, ids.parent_run_id, ids.dotted_order) == (GIVEN_RUN, GIVEN_PARENT, GIVEN_DOTTED)
    assert child.resolve(ConvertOptions().id_scheme).dotted_order.startswith(GIVEN_DOTTED + ".")
    with caplog.at_level("WARNING", logger="otel_runs_exporter"):
        warn_if_ids_set_late(child_span, child.given)  # nothing given, nothing set: silent
        warn_if_ids_set_late(span, node.given)
        warn_if_ids_set_late(span, node.given)
    assert [r.getMessage().split(" set on ")[0] for r in caplog.records] == ["langsmith.span.dotted_order"]


def test_invalid_given_ids_keep_the_computed_ones(capture, caplog):
    tracer, exporter = capture
    with tracer.start_as_current_span("root"):
        with tracer.start_as_current_span("bad", attributes={"langsmith.span.dotted_order": "20231114"}):
            pass
    spans = _by_name(exporter)
    root = span_ids(spans["root"], None)
    with caplog.at_level("WARNING", logger="otel_runs_exporter"):
        ids = span_ids(spans["bad"], root, given=given_ids(spans["bad"].attributes))
    assert ids == span_ids(spans["bad"], root)
    assert "ignoring langsmith.span.dotted_order on span 'bad'" in caplog.text


def test_first_chunk_delay_becomes_a_new_token_event(capture):
    # pydantic-ai records how long the first streamed chunk took, not when it came.
    tracer, exporter = capture
    span = tracer.start_span("chat m", attributes={"gen_ai.operation.name": "chat"}, start_time=1_700_000_000_000_000_000)
    span.set_attribute("gen_ai.client.operation.time_to_first_chunk", 0.25)
    span.end(end_time=1_700_000_001_000_000_000)
    span = _by_name(exporter)["chat m"]
    run = span_to_run(span, span_ids(span, None), ConvertOptions())
    assert run["events"] == [{"name": "new_token", "time": "2023-11-14T22:13:20.250000+00:00", "kwargs": {}}]
    assert "gen_ai.client.operation.time_to_first_chunk" not in run["extra"]["metadata"]
