"""Values of types nobody planned for, through the processor path: never an exception into the app.

The SDK checks attribute values, but not span names, event names and times,
status descriptions, or what the ``langsmith.*`` id attributes hold; and the
JSON inside an attribute can be anything. Whatever the build (this module also
runs against the compiled one, from ``test_compiled_build.py``), ``on_start``
and ``on_end`` return normally and each run is either delivered or counted as
a ``convert_error`` drop: never lost uncounted, never raised.
"""

from __future__ import annotations

import enum
import json
import logging
from typing import Any, Callable

import pytest
from opentelemetry.trace import Status, StatusCode

from core.helpers import exporter_provider, processor_provider


class Level(enum.IntEnum):
    HIGH = 7


class Tag(str):
    pass


class Count(int):
    pass


def _odd_json() -> str:
    return json.dumps(
        [
            {"role": 5, "content": {"nested": [1, [2, [3]]]}, "tool_calls": "not a list"},
            {"role": None, "parts": [1, None, {"type": "tool_call", "arguments": {"x": float("inf")}}]},
            {"message": ["a", "b"]},
        ],
        allow_nan=True,
    )


def _span(tracer: Any, **kw: Any) -> Any:
    return tracer.start_span(kw.pop("name", "s"), **kw)


# Each case starts and ends one span in its own odd way.
CASES: dict[str, Callable[[Any], None]] = {
    "name None": lambda t: _span(t, name=None).end(),
    "name int": lambda t: _span(t, name=12345).end(),
    "name str subclass": lambda t: _span(t, name=Tag("tagged")).end(),
    "huge int, int subclasses, bytes": lambda t: _span(
        t,
        attributes={
            "big": 2**200,
            "neg": -(2**90),
            "level": Level.HIGH,
            "count": Count(3),
            "raw": b"\xff\x00",
            "flag": True,
            "gen_ai.usage.input_tokens": Level.HIGH,
            "gen_ai.usage.output_tokens": 2**70,
        },
    ).end(),
    "NaN and infinities": lambda t: _span(
        t, attributes={"nan": float("nan"), "inf": float("-inf"), "floats": (float("nan"), 1.0), "llm.token_count.total": float("nan")}
    ).end(),
    "odd JSON in the conventions' attributes": lambda t: _span(
        t,
        attributes={
            "gen_ai.input.messages": _odd_json(),
            "gen_ai.output.messages": "[1, 2, null]",
            "input.value": '{"messages": [null, 5, "x"]}',
            "input.mime_type": "application/json",
            "output.value": "[[[]]]",
            "llm.invocation_parameters": '{"temperature": "hot"}',
            "metadata": "[1, 2]",
            "langsmith.span.tags": '[null, 1, ["a"]]',
            "langsmith.metadata.deep": '{"a": {"b": [NaN]}}',
            "tool.parameters.0": "first",
            "retrieval.documents.0.document.content": 5,
            "retrieval.documents.0.document.metadata": "{bad json",
        },
    ).end(),
    "langsmith ids of the wrong types": lambda t: _span(
        t,
        attributes={
            "langsmith.span.id": 123,
            "langsmith.trace.id": b"bytes",
            "langsmith.span.dotted_order": 4.5,
            "langsmith.span.parent_id": True,
            "langsmith.trace.session_id": 99,
        },
    ).end(),
    "events named None and timed oddly": lambda t: _odd_events(t),
    "status with odd description": lambda t: _odd_status(t),
    "start time a float": lambda t: _span(t, start_time=1.7e18).end(),
    "kind not a SpanKind, not even hashable": lambda t: _span(t, kind=["odd"]).end(),
}


def _odd_events(tracer: Any) -> None:
    span = _span(tracer)
    span.add_event(None, {"content": "x"})  # type: ignore[arg-type]
    span.add_event("gen_ai.user.message", {"content": "hi"}, timestamp=12.5)  # type: ignore[arg-type]
    span.add_event("new_token", timestamp=3)
    span.add_event("gen_ai.choice", {"index": "first", "message.role": 5, "finish_reason": 1})
    span.add_event("exception", {"exception.type": 1, "exception.message": None, "exception.stacktrace": 2})
    span.end()


def _odd_status(tracer: Any) -> None:
    span = _span(tracer)
    span.set_status(Status(StatusCode.ERROR, description=Tag("went wrong")))
    span.end()


@pytest.mark.parametrize("case", sorted(CASES))
def test_odd_values_are_delivered_or_counted_never_raised(service, case):
    provider, processor = processor_provider(service.url)
    tracer = provider.get_tracer("odd")
    CASES[case](tracer)  # the app's call: raises nothing of ours
    with tracer.start_as_current_span("plain"):  # and the pipeline goes on after it
        pass
    processor.force_flush(5000)  # False when a run was dropped: the stats say which
    stats = processor.stats()
    assert stats.created == 2 and stats.queued == 0, stats
    assert set(stats.dropped) <= {"convert_error"}, stats
    assert stats.delivered + stats.dropped.get("convert_error", 0) == 2, stats
    assert any(r["name"] == "plain" for r in service.runs())


def test_a_malformed_producer_attribute_is_kept_as_text_logged_and_counted(service, caplog):
    # A producer that writes broken JSON or a word where a count belongs must not cost the
    # run, nor its value: the run arrives, the value is in metadata as text, the log names it.
    provider, processor = processor_provider(service.url)
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": '[{"role": "user", "parts": [',
        "gen_ai.usage.input_tokens": "n/a",
        "llm.invocation_parameters": "temperature=0.2",
    }
    tracer = provider.get_tracer("t")
    with caplog.at_level("WARNING", logger="otel_runs_exporter"):
        for _ in range(3):
            with tracer.start_as_current_span("chat m", attributes=attrs):
                pass
        assert processor.force_flush(10_000)
    runs = service.wait_for_runs(3)
    for run in runs:
        metadata = run["extra"]["metadata"]
        for key in ("gen_ai.input.messages", "gen_ai.usage.input_tokens", "llm.invocation_parameters"):
            assert metadata[key] == attrs[key], key
        assert run["run_type"] == "llm" and run["extra"]["metadata"]["ls_model_name"] == "m"
    stats = processor.stats()
    assert stats.malformed == 9 and stats.dropped == {} and stats.delivered == 3
    lines = [r.getMessage() for r in caplog.records if "is not" in r.getMessage()]
    assert len(lines) == 3, lines  # one line per attribute, the repeats held back
    assert any("gen_ai.input.messages" in line and "JSON array of messages" in line for line in lines)


YEAR_10000_NS = 253_402_300_800 * 10**9  # 10000-01-01: past what datetime can write


@pytest.mark.parametrize("make", [processor_provider, exporter_provider], ids=["processor", "exporter"])
def test_a_span_in_year_10000_is_one_counted_drop_and_one_log_line(service, caplog, make):
    """Found: each such span logged its whole traceback twice (the processor converts its post and its patch),
    and the exporter path failed the whole export, counting one span of three."""
    provider, exporter = make(service.url)
    tracer = provider.get_tracer("t")
    with caplog.at_level("DEBUG", logger="otel_runs_exporter"):
        for _ in range(3):
            tracer.start_span("far", start_time=YEAR_10000_NS).end(end_time=YEAR_10000_NS + 1000)
        with tracer.start_as_current_span("plain"):
            pass
        provider.force_flush(5000)
        stats = exporter.stats()
    assert stats.created == 4 and stats.queued == 0 and stats.dropped == {"convert_error": 3}, stats
    assert [r["name"] for r in service.wait_for_runs(1)] == ["plain"]
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1, [r.getMessage() for r in said]
    line = said[0].getMessage()
    assert "'far'" in line and "year 10000 is out of range" in line and "convert_error" in line, line
    assert not said[0].exc_info  # the traceback goes to DEBUG, once per reason
    assert len([r for r in caplog.records if r.exc_info]) == 1
