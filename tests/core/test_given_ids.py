"""Spans placed by the service's ``langsmith.*`` id attributes, end to end.

A real SDK provider, our processor or exporter, and the real local service; the
parent run is created by the service's own SDK (``langsmith.RunTree``, posted to
the local service), as a run made in another process would be.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timezone

import pytest
from langsmith import Client, RunTree

from core.helpers import exporter_provider, processor_provider

PROJECT = "mixed"


@pytest.fixture
def sdk_parent(service):
    """A run the SDK posted (still open), and a function that ends it and waits until it is sent."""
    client = Client(api_url=service.url, api_key="test-key")
    run = RunTree(name="sdk-parent", run_type="chain", inputs={"q": 1}, client=client, project_name=PROJECT)
    run.post()

    def finish() -> None:
        run.end(outputs={"a": 2})
        run.patch()
        client.flush()

    yield run, finish
    client.flush()


def under(parent: RunTree) -> dict[str, str]:
    """The four id attributes placing a new span under ``parent``, built as the service's guide shows."""
    child_id = uuid.uuid4()
    start = datetime.now(timezone.utc)
    return {
        "langsmith.trace.id": str(parent.trace_id),
        "langsmith.span.parent_id": str(parent.id),
        "langsmith.span.id": str(child_id),
        "langsmith.span.dotted_order": f"{parent.dotted_order}.{start.strftime('%Y%m%dT%H%M%S%fZ')}{child_id}",
    }


def _assert_nested_under(runs: dict, parent: RunTree, given: dict[str, str]) -> None:
    child, grandchild = runs["otel-child"], runs["grandchild"]
    assert child["id"] == given["langsmith.span.id"]
    assert child["parent_run_id"] == str(parent.id) and child["trace_id"] == str(parent.trace_id)
    assert child["dotted_order"] == given["langsmith.span.dotted_order"]
    # The span's own children extend the given dotted_order.
    assert grandchild["parent_run_id"] == child["id"] and grandchild["trace_id"] == str(parent.trace_id)
    assert grandchild["dotted_order"].startswith(child["dotted_order"] + ".")
    assert not any(k.startswith("langsmith.") for k in child["extra"]["metadata"])


def _id_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "otel_runs_exporter._convert"]


def test_processor_nests_a_span_and_its_children_under_an_sdk_run(service, sdk_parent):
    parent, finish = sdk_parent
    provider, processor = processor_provider(service.url, project=PROJECT)
    tracer = provider.get_tracer("t")
    given = under(parent)
    with tracer.start_as_current_span("otel-child", attributes=given):
        with tracer.start_as_current_span("grandchild"):
            pass
    finish()
    assert processor.force_flush(5000)
    runs = {r["name"]: r for r in service.wait_for_runs(3)}
    _assert_nested_under(runs, parent, given)
    report = service.check()
    assert service.violations() == [] and report["missing_parents"] == [] and report["never_completed"] == []


def test_exporter_honours_ids_set_at_any_time_and_children_held_before_them(service, sdk_parent):
    """The guide's own recipe: the attributes are set after the span started."""
    parent, finish = sdk_parent
    provider, exporter = exporter_provider(service.url, project=PROJECT)
    tracer = provider.get_tracer("t")
    given = under(parent)
    with tracer.start_as_current_span("otel-child") as span:
        with tracer.start_as_current_span("grandchild"):
            pass  # ends first: held until its parent's ids are known
        span.set_attributes(given)
    finish()
    provider.force_flush()
    runs = {r["name"]: r for r in service.wait_for_runs(3)}
    _assert_nested_under(runs, parent, given)
    assert service.violations() == [] and service.check()["missing_parents"] == []
    assert exporter.stats().orphaned == 0


@pytest.mark.parametrize("path", ["processor", "exporter"])
def test_invalid_ids_are_ignored_with_one_warning_per_attribute(service, caplog, path):
    make = processor_provider if path == "processor" else exporter_provider
    provider, _ = make(service.url)
    tracer = provider.get_tracer("t")
    stranger = str(uuid.uuid4())
    not_under_stranger = f"20260101T120000000000Z{uuid.uuid4()}.20260101T120000000001Z{uuid.uuid4()}"
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        with tracer.start_as_current_span("root"):
            with tracer.start_as_current_span("bad-1", attributes={"langsmith.span.id": "run-1"}):
                with tracer.start_as_current_span("under-bad-1"):
                    pass
            with tracer.start_as_current_span("bad-2", attributes={"langsmith.span.id": "run-2"}):
                pass
            with tracer.start_as_current_span(
                "bad-parent",
                attributes={"langsmith.span.parent_id": stranger, "langsmith.span.dotted_order": not_under_stranger},
            ):
                pass
        provider.force_flush()
        runs = {r["name"]: r for r in service.wait_for_runs(5)}
    # Each keeps the ids derived from the span: under its OTel parent, in one valid tree.
    root = runs["root"]
    assert {runs[n]["parent_run_id"] for n in ("bad-1", "bad-2", "bad-parent")} == {root["id"]}
    assert runs["under-bad-1"]["parent_run_id"] == runs["bad-1"]["id"]
    assert all(r["trace_id"] == root["id"] for r in runs.values())
    assert service.violations() == []
    warnings = _id_warnings(caplog)
    assert len(warnings) == 2, warnings  # two bad langsmith.span.id values, said once
    span_id_warning, parent_warning = sorted(warnings, key=lambda m: "parent_id" in m)
    # Which of the two is said first depends on the order the path resolves them in.
    assert span_id_warning.startswith("ignoring langsmith.span.id on span 'bad-") and "is not a UUID" in span_id_warning
    assert parent_warning.startswith("ignoring langsmith.span.parent_id on span 'bad-parent'")


def test_processor_ignores_ids_set_after_the_start_with_one_warning(service, sdk_parent, caplog):
    parent, finish = sdk_parent
    provider, processor = processor_provider(service.url, project=PROJECT)
    tracer = provider.get_tracer("t")
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        for name in ("late-1", "late-2"):
            with tracer.start_as_current_span(name) as span:
                with tracer.start_as_current_span(f"{name}-child"):
                    pass
                span.set_attributes(under(parent))
        finish()
        assert processor.force_flush(5000)
        runs = {r["name"]: r for r in service.wait_for_runs(5)}
    for name in ("late-1", "late-2"):
        late, child = runs[name], runs[f"{name}-child"]
        # Placed as if the attributes were never set: a root of its own tree, its child under it.
        assert "parent_run_id" not in late or late["parent_run_id"] is None
        assert late["trace_id"] == late["id"] != str(parent.trace_id)
        assert child["parent_run_id"] == late["id"]
    assert service.violations() == []
    warnings = _id_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "langsmith.trace.id, langsmith.span.id, langsmith.span.parent_id, langsmith.span.dotted_order" in warnings[0]
    assert "span 'late-1' after it started" in warnings[0] and "start_span(attributes=...)" in warnings[0]


def _provider(path: str, url: str):
    return (processor_provider if path == "processor" else exporter_provider)(url, project=PROJECT)


def _flush(provider, runs_expected: int, service) -> dict:
    provider.force_flush()
    return {r["name"]: r for r in service.wait_for_runs(runs_expected)}


@pytest.mark.parametrize("path", ["processor", "exporter"])
def test_a_span_id_alone_becomes_the_run_id_and_children_nest_under_it(service, caplog, path):
    provider, _ = _provider(path, service.url)
    tracer = provider.get_tracer("t")
    root_id, mid_id = str(uuid.uuid4()), str(uuid.uuid4())
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        with tracer.start_as_current_span("root", attributes={"langsmith.span.id": root_id}):
            with tracer.start_as_current_span("mid", attributes={"langsmith.span.id": mid_id}):
                with tracer.start_as_current_span("leaf"):
                    pass
        runs = _flush(provider, 3, service)
    root, mid, leaf = runs["root"], runs["mid"], runs["leaf"]
    assert root["id"] == root["trace_id"] == root_id and mid["id"] == mid_id
    assert mid["parent_run_id"] == root_id and leaf["parent_run_id"] == mid_id
    assert mid["dotted_order"].startswith(root["dotted_order"] + ".")
    assert leaf["dotted_order"].startswith(mid["dotted_order"] + ".")
    assert {r["trace_id"] for r in runs.values()} == {root_id}
    assert service.violations() == [] and service.check()["missing_parents"] == []
    assert _id_warnings(caplog) == []


@pytest.mark.parametrize("path", ["processor", "exporter"])
def test_a_parent_id_alone_nests_the_run_under_that_run_above_it(service, caplog, path):
    """The parent named is an ancestor (here one placed by its own given id): its dotted_order is known."""
    provider, _ = _provider(path, service.url)
    tracer = provider.get_tracer("t")
    root_id = str(uuid.uuid4())
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        with tracer.start_as_current_span("root", attributes={"langsmith.span.id": root_id}):
            with tracer.start_as_current_span("mid"):
                with tracer.start_as_current_span("hoisted", attributes={"langsmith.span.parent_id": root_id}):
                    with tracer.start_as_current_span("under-hoisted"):
                        pass
        runs = _flush(provider, 4, service)
    root, hoisted, under_hoisted = runs["root"], runs["hoisted"], runs["under-hoisted"]
    assert hoisted["parent_run_id"] == root_id and hoisted["trace_id"] == root_id
    assert hoisted["dotted_order"].count(".") == 1 and hoisted["dotted_order"].startswith(root["dotted_order"] + ".")
    assert under_hoisted["parent_run_id"] == hoisted["id"]
    assert under_hoisted["dotted_order"].startswith(hoisted["dotted_order"] + ".")
    assert service.violations() == [] and service.check()["missing_parents"] == []
    assert _id_warnings(caplog) == []


@pytest.mark.parametrize("path", ["processor", "exporter"])
def test_a_trace_id_alone_is_honoured_in_its_trace_and_refused_elsewhere(service, caplog, path):
    provider, _ = _provider(path, service.url)
    tracer = provider.get_tracer("t")
    root_id, stranger, unknown_parent = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        with tracer.start_as_current_span("root", attributes={"langsmith.span.id": root_id}):
            with tracer.start_as_current_span("same-trace", attributes={"langsmith.trace.id": root_id}):
                pass
            with tracer.start_as_current_span("other-trace", attributes={"langsmith.trace.id": stranger}):
                pass
            with tracer.start_as_current_span("unknown-parent", attributes={"langsmith.span.parent_id": unknown_parent}):
                pass
        runs = _flush(provider, 4, service)
    # Refused ones keep the computed ids: under their OTel parent, in one valid tree.
    assert {runs[n]["parent_run_id"] for n in ("same-trace", "other-trace", "unknown-parent")} == {root_id}
    assert {r["trace_id"] for r in runs.values()} == {root_id}
    assert service.violations() == []
    warnings = sorted(_id_warnings(caplog))
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("ignoring langsmith.span.parent_id on span 'unknown-parent'")
    assert "needs langsmith.span.dotted_order" in warnings[0]
    assert warnings[1].startswith("ignoring langsmith.trace.id on span 'other-trace'")


def test_ids_read_at_start_from_the_sdks_dict_are_the_ids_its_public_view_gives():
    """``on_start`` reads the SDK span's own attribute dict (0.3 µs against 0.7 through the public
    view); it must answer as the public view does, for every key, and fall back for any other span."""
    from opentelemetry.sdk.trace import TracerProvider

    from otel_runs_exporter._convert import given_ids, given_ids_at_start

    tracer = TracerProvider().get_tracer("t")
    parent = RunTree(name="p", run_type="chain")
    ids = under(parent)
    cases = [{}, {"http.method": "GET"}, *({key: value, "x": 1} for key, value in ids.items()), {**ids, "x": 1}]
    for attributes in cases:
        span = tracer.start_span("s", attributes=attributes)
        # The SDK still keeps a plain dict where the fast path looks: a renamed field would quietly
        # send every span down the public path (correct, but slower), so the test says so.
        assert type(span._attributes._dict) is dict
        assert given_ids_at_start(span) == given_ids(span.attributes), attributes
        span.end()

    class Foreign:  # any other span type: its public attributes are what count
        attributes = {"langsmith.span.id": ids["langsmith.span.id"]}

    assert given_ids_at_start(Foreign()) == given_ids(Foreign.attributes) != None  # noqa: E711
