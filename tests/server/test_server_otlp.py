"""``POST /otel/v1/traces``: OTLP from any sender, stored as the exporter stores the same spans.

The reference is our own exporter path: the same spans, recorded once by a real SDK
``TracerProvider``, go to three local services, through the OTel SDK's own
``OTLPSpanExporter`` (protobuf, gzip, one request per span, so each child arrives before
its parent), as an OTLP JSON body written here by hand, and through
``RunsSpanExporter(id_scheme="otlp")``. Every stored run must be equal, field by field.
"""

from __future__ import annotations

import doctest
import gzip
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import pytest
import requests
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_runs_exporter import RunsSpanExporter, resolve_settings
from otel_runs_exporter.server import LocalService, RunStore, _once
from otel_runs_exporter.server._otlp import MAX_VALUE_CHARS, OtlpIngest
from otel_runs_exporter.server._otlp_decode import MAX_SPANS, decode_json
from otel_runs_exporter.server._otlp_hold import OtlpHold
from otel_runs_exporter._clock import FakeClock

KEY = "otlp-key"
TRACES = "/otel/v1/traces"


# --- OTLP JSON, written here by hand (the spec's mapping: hex ids, 64-bit integers as strings) ---------------


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    raise TypeError(value)


def _attributes(attributes: Any) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in (attributes or {}).items()]


def otlp_json(spans: Sequence[ReadableSpan]) -> bytes:
    """An ExportTraceServiceRequest in OTLP JSON, one resourceSpans per span (as a Collector may group them)."""
    resource_spans = []
    for span in spans:
        ctx = span.context
        body: dict[str, Any] = {
            "traceId": f"{ctx.trace_id:032x}",
            "spanId": f"{ctx.span_id:016x}",
            "name": span.name,
            "kind": span.kind.value + 1,
            "startTimeUnixNano": str(span.start_time),
            "endTimeUnixNano": str(span.end_time),
            "attributes": _attributes(span.attributes),
            "events": [
                {"name": e.name, "timeUnixNano": str(e.timestamp), "attributes": _attributes(e.attributes)}
                for e in span.events
            ],
            "status": {"code": span.status.status_code.value, "message": span.status.description or ""},
        }
        if span.parent is not None:
            body["parentSpanId"] = f"{span.parent.span_id:016x}"
            body["flags"] = 0x100 | (0x200 if span.parent.is_remote else 0)
        scope = span.instrumentation_scope
        resource_spans.append({
            "resource": {"attributes": _attributes(span.resource.attributes)},
            "scopeSpans": [{"scope": {"name": scope.name, "version": scope.version}, "spans": [body]}],
        })
    return orjson.dumps({"resourceSpans": resource_spans})


def post(url: str, body: bytes, content_type: str = "application/json", **headers: str) -> requests.Response:
    return requests.post(url + TRACES, data=body, headers={"Content-Type": content_type, **headers}, timeout=10)


def span_json(span_id: str, *, trace: str = "5b8efff798038103d269b633813fc60c", parent: str | None = None,
              start: int = 1_700_000_000_000_000_000, end: int = 1_700_000_001_000_000_000, **more: Any) -> dict[str, Any]:
    body = {"traceId": trace, "spanId": span_id, "name": f"span {span_id}", "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end), **more}
    if parent is not None:
        body["parentSpanId"] = parent
    return body


def request_json(*spans: dict[str, Any]) -> bytes:
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]})


# --- the workload ----------------------------------------------------------------------------------------


def workload(provider: TracerProvider) -> None:
    """A GenAI-shaped trace: an agent, a chat model call with messages and usage, a tool, a failure."""
    tracer = provider.get_tracer("app.agent", "1.2.0")
    with tracer.start_as_current_span("agent", attributes={"input.value": "What is the weather?"}) as agent:
        with tracer.start_as_current_span(
            "chat gpt-4o-mini",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.request.temperature": 0.2,
                "gen_ai.usage.input_tokens": 31,
                "gen_ai.usage.output_tokens": 9,
                "gen_ai.input.messages": orjson.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "What is the weather?"}]}]
                ).decode(),
                "gen_ai.output.messages": orjson.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "Sunny."}], "finish_reason": "stop"}]
                ).decode(),
                "gen_ai.response.finish_reasons": ("stop",),
                "user.tags": ("a", "b"),
            },
        ) as chat:
            chat.add_event("first token", {"index": 0})
        with tracer.start_as_current_span("lookup", attributes={"openinference.span.kind": "TOOL", "input.value": "x"}):
            pass
        with tracer.start_as_current_span("failing") as failing:
            failing.record_exception(ValueError("boom"))
            failing.set_status(Status(StatusCode.ERROR, "boom"))
        agent.set_attribute("output.value", "Sunny.")


@pytest.fixture
def services() -> Iterator[tuple[LocalService, LocalService, LocalService]]:
    with LocalService(strict=True) as a, LocalService(strict=True) as b, LocalService(strict=True) as c:
        yield a, b, c


def test_the_sdks_otlp_exporter_and_an_otlp_json_body_store_the_exporters_runs(services) -> None:
    over_protobuf, over_json, exporter_path = services
    provider = TracerProvider(resource=Resource({"service.name": "weather-app", "deployment.environment": "test"}))
    recorded = InMemorySpanExporter()
    headers = {"Langsmith-Project": "weather"}
    provider.add_span_processor(SimpleSpanProcessor(recorded))
    # One request per span, each at its end: every child reaches the service before its parent.
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=over_protobuf.url + TRACES, compression=Compression.Gzip, headers=headers,
    )))
    ours = RunsSpanExporter(endpoint=exporter_path.url, api_key="k", project="weather", id_scheme="otlp")
    provider.add_span_processor(BatchSpanProcessor(ours, schedule_delay_millis=50))
    workload(provider)
    provider.shutdown()
    answer = post(over_json.url, otlp_json(recorded.get_finished_spans()), **headers)
    assert answer.status_code == 200 and answer.json() == {}, answer.text

    expected = {run["id"]: run for run in exporter_path.wait_for_runs(4)}
    for service in (over_protobuf, over_json):
        stored = {run["id"]: run for run in service.wait_for_runs(4)}
        assert stored.keys() == expected.keys()
        for run_id, run in expected.items():
            assert stored[run_id] == run, run["name"]
        assert service.violations() == [] and service.check()["missing_parents"] == []
    by_name = {run["name"]: run for run in expected.values()}
    assert {run["session_name"] for run in expected.values()} == {"weather"}
    # What the runs say, spelled out: the mapping ran on the service's side too.
    chat = by_name["chat gpt-4o-mini"]
    assert chat["run_type"] == "llm" and chat["parent_run_id"] == by_name["agent"]["id"]
    assert chat["outputs"]["usage_metadata"]["input_tokens"] == 31
    assert by_name["failing"]["error"].startswith("ValueError: boom")
    assert by_name["agent"]["extra"]["metadata"]["otel_resource"]["service.name"] == "weather-app"
    # The protobuf requests: one per span; the children were held until the agent's came, then stored with it.
    otlp = [r for r in over_protobuf.requests() if r["path"] == TRACES]
    assert [r["status"] for r in otlp] == [200] * 4 and all(r["content_encoding"] == "gzip" for r in otlp)
    assert [len(r["run_ids"]) for r in otlp] == [0, 0, 0, 4]


# --- the hold: a parent that comes later, or never ------------------------------------------------------------


def test_a_parent_that_never_comes_leaves_a_root_after_the_bound_and_not_before() -> None:
    clock = FakeClock(1000.0)
    ingest = OtlpIngest(OtlpHold(max_s=30.0), clock=clock.now)
    store = RunStore(":memory:")
    try:
        child = span_json("00000000000000c1", parent="00000000000000a1")
        grandchild = span_json("00000000000000c2", parent="00000000000000c1")
        outcome = ingest.receive(decode_json(request_json(grandchild, child), "p"), store, "strict")
        assert (outcome.stored, outcome.rejected, ingest.hold.held) == ([], [], 2)
        clock.advance(29.9)
        assert ingest.sweep(store, "strict").stored == [] and store.count() == 0
        clock.advance(0.2)
        stored = ingest.sweep(store, "strict").stored
        assert len(stored) == 2 and ingest.hold.held == 0 and ingest.hold.orphaned == 1
        root = next(r for r in store.runs() if r["name"] == "span 00000000000000c1")
        below = next(r for r in store.runs() if r["name"] == "span 00000000000000c2")
        # The root of its own tree, saying where it hung; the span under it keeps its place.
        assert root.get("parent_run_id") is None and below["parent_run_id"] == root["id"]
        metadata = root["extra"]["metadata"]
        assert (metadata["otel_parent_span_id"], metadata["otel_parent_trace_id"]) == (
            "00000000000000a1", "5b8efff798038103d269b633813fc60c",
        )
        assert store.violations() == []
    finally:
        store.close()


def test_the_count_and_byte_bounds_release_the_oldest_as_roots_at_once() -> None:
    clock = FakeClock(1000.0)
    ingest = OtlpIngest(OtlpHold(max_s=30.0, max_spans=2), clock=clock.now)
    store = RunStore(":memory:")
    try:
        orphans = [span_json(f"00000000000000{i:02x}", parent=f"00000000000001{i:02x}") for i in range(1, 4)]
        outcome = ingest.receive(decode_json(request_json(*orphans), None), store, "strict")
        assert len(outcome.stored) == 1 and ingest.hold.held == 2  # the third over the count: the oldest goes
        ingest = OtlpIngest(OtlpHold(max_s=30.0, max_bytes=1), clock=clock.now)
        outcome = ingest.receive(decode_json(request_json(span_json("00000000000000f1", parent="00000000000000f2")), None),
                                 store, "strict")
        assert len(outcome.stored) == 1 and ingest.hold.held == 0
        assert {r["session_name"] for r in store.runs()} == {"default"}  # no Langsmith-Project: the default project
    finally:
        store.close()


def test_a_retried_request_holds_its_spans_once() -> None:
    ingest = OtlpIngest(OtlpHold(max_s=30.0))
    store = RunStore(":memory:")
    try:
        child = decode_json(request_json(span_json("00000000000000c1", parent="00000000000000a1")), None)
        for _ in range(3):  # a Collector retrying after a lost answer
            assert ingest.receive(child, store, "strict").stored == []
        assert (ingest.hold.held, ingest.hold.held_bytes) == (1, child.spans[0].size)
        stored = ingest.receive(decode_json(request_json(span_json("00000000000000a1")), None), store, "strict").stored
        assert len(stored) == 2 and (ingest.hold.held, ingest.hold.held_bytes) == (0, 0)
    finally:
        store.close()


def test_a_service_stores_what_waits_as_roots_after_its_bound_and_at_shutdown(tmp_path) -> None:
    db = str(tmp_path / "runs.db")
    with LocalService(db=db, otlp_hold_s=0.05) as svc:
        assert post(svc.url, request_json(span_json("00000000000000c1", parent="00000000000000a1"))).json() == {}
        (root,) = svc.wait_for_runs(1, timeout=5)  # the service's own sweep, without another request
        assert root["extra"]["metadata"]["otel_parent_span_id"] == "00000000000000a1"
    with LocalService(db=db) as svc:
        post(svc.url, request_json(span_json("00000000000000c2", parent="00000000000000a2")))
        assert svc.otlp.hold.held == 1
    # Stopped with a span still waiting (30 s hold): stored as a root, never lost to the restart.
    with LocalService(db=db) as svc:
        assert {r["name"] for r in svc.runs()} == {"span 00000000000000c1", "span 00000000000000c2"}
        # A parent that comes after the restart is a root of its own: the child was placed already.
        post(svc.url, request_json(span_json("00000000000000a2")))
        parent = svc.wait_for_runs(3)[-1]
        assert parent["name"] == "span 00000000000000a2" and svc.get_run(parent["id"]).get("parent_run_id") is None


def test_two_services_on_one_database_nest_a_child_under_the_parent_the_other_stored(tmp_path) -> None:
    db = str(tmp_path / "runs.db")
    with LocalService(db=db, otlp_hold_s=0.2) as first, LocalService(db=db) as second:
        # The parent first, through the other service: found in the store.
        post(second.url, request_json(span_json("00000000000000a1")))
        post(first.url, request_json(span_json("00000000000000b1", parent="00000000000000a1")))
        # The child first: held here while the other stores its parent, then found there before its bound ends it.
        post(first.url, request_json(span_json("00000000000000b2", parent="00000000000000a2")))
        post(second.url, request_json(span_json("00000000000000a2")))
        runs = {r["name"]: r for r in first.wait_for_runs(4, timeout=5)}
        assert runs["span 00000000000000b1"]["parent_run_id"] == runs["span 00000000000000a1"]["id"]
        assert runs["span 00000000000000b2"]["parent_run_id"] == runs["span 00000000000000a2"]["id"]
        assert first.otlp.hold.orphaned == 0


# --- what a sender gets back ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def keyed() -> Iterator[LocalService]:
    with LocalService(api_key=KEY, strict=True) as svc:
        yield svc


@pytest.fixture
def svc(keyed: LocalService) -> LocalService:
    keyed.reset()
    return keyed


def test_ingest_takes_the_key_and_the_project_header_like_the_other_ingest_routes(svc) -> None:
    body = request_json(span_json("00000000000000a1"))
    assert post(svc.url, body).status_code == 401
    assert post(svc.url, body, **{"x-api-key": "wrong"}).status_code == 401
    answer = post(svc.url, body, **{"x-api-key": KEY, "Langsmith-Project": "from-header"})
    assert answer.status_code == 200 and answer.headers["Content-Type"] == "application/json"
    (run,) = svc.wait_for_runs(1)
    assert run["session_name"] == "from-header"
    # Under /api/v1 too, and gzip.
    answer = requests.post(svc.url + "/api/v1" + TRACES, data=gzip.compress(request_json(span_json("00000000000000a2"))),
                           headers={"Content-Type": "application/json", "Content-Encoding": "gzip", "x-api-key": KEY})
    assert answer.status_code == 200 and len(svc.wait_for_runs(2)) == 2


def test_bad_spans_are_rejected_by_name_and_the_rest_of_the_request_is_stored(svc) -> None:
    trace = "5b8efff798038103d269b633813fc60c"
    spans = [
        span_json("00000000000000a1", name="good"),
        span_json("00000000000000a2", name="huge", attributes=[{"key": "big", "value": {"stringValue": "x" * 10_000_000}}]),
        span_json("00a3"),
        span_json("00000000000000a4", trace="0" * 32),
        span_json("00000000000000a5", start=2_000, end=1_000),
        span_json("00000000000000a6", end=0),
        span_json("00000000000000a7", parent="00000000000000a7"),
        span_json("00000000000000a8", attributes=[{"key": "k", "value": {"intValue": "twelve"}}]),
    ]
    answer = post(svc.url, request_json(*spans), **{"x-api-key": KEY})
    assert answer.status_code == 200
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "6"
    message = partial["errorMessage"]
    for reason in ("span_id '00a3' is not 8 bytes", "trace_id is all zeros", "ends (1000) before it starts (2000)",
                   "only ended spans become runs", "cannot be its own parent"):
        assert reason in message, message
    runs = {r["name"]: r for r in svc.wait_for_runs(2)}
    assert set(runs) == {"good", "huge"}
    big = runs["huge"]["extra"]["metadata"]["big"]
    assert len(big) < MAX_VALUE_CHARS + 100 and big.endswith("...[truncated 9000000 chars]")
    # A parent cycle, which no SDK makes: neither span can wait for the other. Both are stored, named in the answer.
    cycle = [span_json("00000000000000b1", trace=trace, parent="00000000000000b2"),
             span_json("00000000000000b2", trace=trace, parent="00000000000000b1")]
    partial = post(svc.url, request_json(*cycle), **{"x-api-key": KEY}).json()["partialSuccess"]
    assert partial["rejectedSpans"] == "0" and "parent cycle" in partial["errorMessage"]
    runs = {r["name"]: r for r in svc.wait_for_runs(4)}
    # b2 closed the loop: it is the root, and b1 (waiting for it) its child.
    assert runs["span 00000000000000b1"]["parent_run_id"] == runs["span 00000000000000b2"]["id"]
    assert svc.violations() == []


@pytest.mark.parametrize(
    ("body", "headers", "status", "says"),
    [
        (b"{not json", {}, 400, "not JSON"),
        (b'{"resourceSpans": {"a": 1}}', {}, 400, "resourceSpans is dict, not a list"),
        # A protobuf field that declares 2 GB more than the body holds.
        (b"\x0a\xff\xff\xff\xff\x07", {"Content-Type": "application/x-protobuf"}, 400, "not protobuf"),
        (b"{}", {"Content-Type": "text/plain"}, 415, "is not OTLP"),
        # 30 MB of zeros in a 30 kB gzip body: stopped at the body limit while decompressing.
        (gzip.compress(b"\0" * 30_000_000), {"Content-Encoding": "gzip"}, 413, "decompressed body too large"),
    ],
    ids=["json", "shape", "protobuf-bomb", "type", "gzip-bomb"],
)
def test_a_body_that_does_not_parse_is_refused_whole_with_a_reason(svc, body, headers, status, says) -> None:
    answer = requests.post(svc.url + TRACES, data=body, headers={"Content-Type": "application/json", "x-api-key": KEY,
                                                                 **headers}, timeout=10)
    assert answer.status_code == status and says in answer.json()["detail"], answer.text
    assert svc.runs() == []


def test_too_many_spans_in_one_request_is_a_413_before_any_span_is_built(svc) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for i in range(MAX_SPANS + 1):
        spans.add(trace_id=b"\1" * 16, span_id=(i + 1).to_bytes(8, "big"), start_time_unix_nano=1, end_time_unix_nano=2)
    answer = post(svc.url, request.SerializeToString(), "application/x-protobuf", **{"x-api-key": KEY})
    assert answer.status_code == 413 and answer.json()["max_spans"] == MAX_SPANS and svc.runs() == []


def test_the_answer_is_otlps_in_protobuf_for_a_protobuf_request(svc) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    spans.add(trace_id=b"\1" * 16, span_id=b"\2" * 8, name="ok", start_time_unix_nano=10, end_time_unix_nano=20)
    spans.add(trace_id=b"\1" * 16, span_id=b"\3" * 7, name="short id", start_time_unix_nano=10, end_time_unix_nano=20)
    answer = post(svc.url, request.SerializeToString(), "application/x-protobuf", **{"x-api-key": KEY})
    assert answer.status_code == 200 and answer.headers["Content-Type"] == "application/x-protobuf"
    partial = ExportTraceServiceResponse.FromString(answer.content).partial_success
    assert partial.rejected_spans == 1 and "span_id is 7 bytes, not 8" in partial.error_message
    assert [r["name"] for r in svc.wait_for_runs(1)] == ["ok"]


def test_without_opentelemetry_proto_a_protobuf_body_gets_415_with_the_install_command(svc, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.proto.collector.trace.v1.trace_service_pb2", None)
    answer = post(svc.url, b"\x0a\x00", "application/x-protobuf", **{"x-api-key": KEY})
    assert answer.status_code == 415
    assert "pip install 'otel-runs-exporter[otlp]'" in answer.json()["detail"] and "Traceback" not in answer.text
    # JSON needs no protobuf.
    assert post(svc.url, request_json(span_json("00000000000000a1")), **{"x-api-key": KEY}).status_code == 200


def test_without_opentelemetry_proto_the_service_log_says_why_once_a_minute(svc, monkeypatch, caplog) -> None:
    """Other languages' exporters show the 415 as "Unsupported Media Type" alone: the service's log names the extra."""
    monkeypatch.setitem(sys.modules, "opentelemetry.proto.collector.trace.v1.trace_service_pb2", None)
    monkeypatch.delitem(_once._said, "no_otlp_proto", raising=False)  # the test above was refused within the minute
    with caplog.at_level(logging.INFO, logger="otel_runs_exporter"):
        assert post(svc.url, request_json(span_json("00000000000000a1")), **{"x-api-key": KEY}).status_code == 200
        assert post(svc.url, b"x", "text/plain", **{"x-api-key": KEY}).status_code == 415  # not OTLP: the answer says so
        for _ in range(3):  # an exporter's batches, refused one after another
            assert post(svc.url, b"\x0a\x00", "application/x-protobuf", **{"x-api-key": KEY}).status_code == 415
    said = [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1, said
    name, level, message = said[0]
    assert name.startswith("otel_runs_exporter.") and level == "WARNING"
    assert "opentelemetry-proto" in message and "pip install 'otel-runs-exporter[otlp]'" in message, message


def test_a_page_may_not_send_otlp_unless_its_origin_is_allowed(svc) -> None:
    answer = post(svc.url, request_json(span_json("00000000000000a1")), Origin="http://elsewhere.example",
                  **{"x-api-key": KEY})
    assert answer.status_code == 403 and svc.runs() == []


def test_the_value_limit_is_the_exporters_default() -> None:
    assert MAX_VALUE_CHARS == resolve_settings().max_value_chars


# --- the service's own SDK, in its OTel mode ----------------------------------------------------------------


def test_the_langsmith_sdk_in_otel_mode_exports_to_the_service(svc, monkeypatch) -> None:
    from langsmith import Client, traceable, tracing_context
    from langsmith import utils as ls_utils
    from langsmith._internal.otel._otel_client import get_otlp_tracer_provider

    for name, value in {
        "LANGSMITH_OTEL_ENABLED": "true", "LANGSMITH_OTEL_ONLY": "true", "LANGSMITH_ENDPOINT": svc.url,
        "LANGSMITH_API_KEY": KEY, "LANGSMITH_PROJECT": "sdk-otel",
    }.items():
        monkeypatch.setenv(name, value)
    ls_utils.get_env_var.cache_clear()
    # The provider the SDK builds itself when the app has none: OTLP/HTTP to {endpoint}/otel/v1/traces.
    provider = get_otlp_tracer_provider()
    client = Client(otel_tracer_provider=provider)

    @traceable(name="tool-step", run_type="tool")
    def tool(q: str) -> str:
        return q.upper()

    @traceable(name="pipeline")
    def pipeline(q: str) -> str:
        return tool(q)

    try:
        with tracing_context(enabled=True, client=client):
            pipeline("hi")
        provider.force_flush()
    finally:
        client.cleanup(timeout=5)
        provider.shutdown()
        ls_utils.get_env_var.cache_clear()
    runs = {r["name"]: r for r in svc.wait_for_runs(2)}
    assert runs["tool-step"]["parent_run_id"] == runs["pipeline"]["id"] and runs["tool-step"]["run_type"] == "tool"
    assert runs["pipeline"]["session_name"] == "sdk-otel" and runs["pipeline"]["outputs"] == {"output": "HI"}
    assert [r["path"] for r in svc.requests()] == [TRACES] * len(svc.requests())


def test_serve_takes_the_hold_bounds_as_flags(capsys: pytest.CaptureFixture[str]) -> None:
    import inspect

    from otel_runs_exporter.cli import build_parser
    from otel_runs_exporter.cli._serve import _OTLP_FLAGS, _keywords

    defaults = _keywords(_OTLP_FLAGS, build_parser().parse_args(["serve"]))
    signature = inspect.signature(LocalService).parameters
    assert defaults == {name: signature[name].default for name in defaults}  # the flags' defaults are the service's
    given = _keywords(_OTLP_FLAGS, build_parser().parse_args(
        ["serve", "--otlp-hold-seconds", "2.5", "--otlp-hold-spans", "7", "--otlp-hold-bytes", "4096"]
    ))
    hold = LocalService(**given).otlp.hold
    assert (hold.max_s, hold.max_spans, hold.max_bytes) == (2.5, 7, 4096)
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", "--otlp-hold-seconds", "0"])
    assert exited.value.code == 2 and "--otlp-hold-seconds" in capsys.readouterr().err


def test_doctests() -> None:
    from otel_runs_exporter.server import _otlp_decode

    assert doctest.testmod(_otlp_decode).failed == 0
