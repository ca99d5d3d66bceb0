"""The selection rules (``_select``) and the hold (``_hold``), pure: which spans are GenAI, the trace-id
ratio, what keeps a trace, and the hold's bounds."""

from __future__ import annotations

import doctest
import logging
import random

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import Decision as OTelDecision
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased
from opentelemetry.trace import Status, StatusCode

from otel_runs_exporter import _hold, _select
from otel_runs_exporter._hold import TraceHold
from otel_runs_exporter._select import KEEP, ROOT, SKIP, SpanFilter, TailRule, genai_scope
from otel_runs_exporter._settings import resolve

# The scope each producer of the README's matrix names its tracer (read from the installed
# packages: tracer = get_tracer(__name__) in each instrumentor, Logfire's logfire.<suffix>,
# pydantic-ai's scope_name, langsmith's exporter), and ours.
PRODUCER_SCOPES = [
    "openinference.instrumentation.openai",
    "openinference.instrumentation.langchain",
    "opentelemetry.instrumentation.openai_v2",
    "opentelemetry.util.genai.handler",
    "opentelemetry.instrumentation.openai.v1",
    "opentelemetry.instrumentation.openai",
    "opentelemetry.instrumentation.anthropic",
    "pydantic-ai",
    "logfire.openai",
    "langsmith",
    "otel_runs_exporter",
    "otel_runs_exporter.instrumentation.openai",
    "otel_runs_exporter.instrumentation.anthropic",
]
NOISE_SCOPES = [
    "opentelemetry.instrumentation.requests",
    "opentelemetry.instrumentation.fastapi",
    "opentelemetry.instrumentation.sqlalchemy",
    "opentelemetry.instrumentation.asgi",
    "logfire",
    "logfire.fastapi",
    "myapp",
    "",
]


def test_doctests():
    for module in (_select, _hold):
        assert doctest.testmod(module).failed == 0, module.__name__


@pytest.mark.parametrize("scope", PRODUCER_SCOPES)
def test_every_producer_of_the_matrix_is_a_genai_scope(scope):
    assert genai_scope(scope)


@pytest.mark.parametrize("scope", NOISE_SCOPES)
def test_http_db_and_framework_scopes_are_not(scope):
    assert not genai_scope(scope)


def _span(scope="myapp", name="s", attributes=None):
    return TracerProvider().get_tracer(scope).start_span(name, attributes=attributes)


@pytest.mark.parametrize(
    "attributes",
    [{"gen_ai.operation.name": "chat"}, {"llm.model_name": "m"}, {"openinference.span.kind": "CHAIN"},
     {"traceloop.entity.name": "x"}, {"langsmith.span.kind": "llm"}],
)
def test_genai_attributes_at_start_make_any_span_genai(attributes):
    assert SpanFilter(genai_only=True).verdict(_span(attributes={"http.method": "GET", **attributes})) == KEEP


def test_a_span_of_another_scope_without_genai_attributes_is_a_root_only():
    rule = SpanFilter(genai_only=True)
    assert rule.verdict(_span("opentelemetry.instrumentation.requests", attributes={"http.method": "GET"})) == ROOT
    assert rule.verdict(_span("myapp", attributes={"llm_ish": 1, "genai": 2})) == ROOT  # prefixes, not substrings
    assert SpanFilter(genai_only=False).verdict(_span("myapp")) == KEEP


def test_a_blocked_scope_is_a_prefix_and_wins_over_everything_else():
    rule = SpanFilter(genai_only=True, blocked=("pydantic-ai", "opentelemetry.instrumentation.sql"),
                      should_export=lambda span: True)
    assert rule.verdict(_span("pydantic-ai", attributes={"gen_ai.operation.name": "chat"})) == SKIP
    assert rule.verdict(_span("opentelemetry.instrumentation.sqlalchemy")) == SKIP
    assert rule.verdict(_span("opentelemetry.instrumentation.requests")) == KEEP  # should_export said so


def test_should_export_replaces_the_spans_rule_and_its_exception_keeps_the_span(caplog):
    def choose(span):
        if span.name == "bad":
            raise KeyError("oops")
        return span.name == "mine"

    rule = SpanFilter(genai_only=True, should_export=choose)
    assert rule.verdict(_span(name="mine")) == KEEP
    assert rule.verdict(_span("pydantic-ai", name="chat")) == SKIP  # a GenAI scope, but the function decides
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        assert [rule.verdict(_span(name="bad")) for _ in range(3)] == [KEEP] * 3
    assert len([r for r in caplog.records if "should_export raised" in r.getMessage()]) == 1


def test_nothing_is_asked_by_default():
    settings = resolve(env={})
    assert SpanFilter.from_settings(settings) is None and TailRule.from_settings(settings) is None
    assert TraceHold.from_settings(settings) is None


@pytest.mark.parametrize("rate", [0.0, 0.001, 0.1, 0.5, 0.9, 1.0])
def test_the_rate_decides_as_trace_id_ratio_based_does(rate):
    """The same trace ids kept as OTel's head sampler at that rate keeps: alike in every process."""
    rng = random.Random(rate)
    head = TraceIdRatioBased(rate)
    rule = TailRule(rate)
    for _ in range(2000):
        trace_id = rng.getrandbits(128)
        assert rule.rate_keeps(trace_id) is (head.should_sample(None, trace_id, "x").decision is OTelDecision.RECORD_AND_SAMPLE)


def test_an_error_or_a_slow_run_rescues_its_trace():
    tracer = TracerProvider().get_tracer("t")
    rule = TailRule(0.0, keep_errors=True, slower_than_s=1.0)
    failed = tracer.start_span("failed", start_time=0)
    failed.set_status(Status(StatusCode.ERROR))
    failed.end(end_time=10)
    raised = tracer.start_span("raised", start_time=0)
    raised.record_exception(ValueError("x"))
    raised.end(end_time=10)
    slow = tracer.start_span("slow", start_time=0)
    slow.end(end_time=int(1.5e9))
    quick = tracer.start_span("quick", start_time=0)
    quick.end(end_time=int(0.5e9))
    assert [rule.rescues(s) for s in (failed, raised, slow, quick)] == ["error", "error", "slow", None]
    assert TailRule(0.0, keep_errors=False).rescues(failed) is None and not TailRule(0.0, keep_errors=False).can_rescue


def test_the_hold_decides_at_each_bound_oldest_first_and_remembers():
    hold = TraceHold(max_spans=3, max_s=10.0, max_bytes=1000)
    assert hold.start(1, 11, "root-1", root=True, now=0.0) is None
    assert hold.start(2, 21, "root-2", root=True, now=1.0) is None
    assert hold.end(2, 21, 100) is True  # its last open local root ended: to be decided
    assert (hold.runs, hold.bytes) == (1, 100)
    kept = hold.decide(2, True, "error")
    assert (kept.keep, kept.ended, kept.open) == (True, ["root-2"], [])
    # Seconds: the trace held since 0 is decided at 10, with what is still open in it.
    hold.add(3, "x", 100, now=5.0)
    expired = hold.expire(10.0)
    assert [(d.trace_id, d.keep, d.open, d.reason) for d in expired] == [(1, False, ["root-1"], "seconds")]
    # Bytes: the oldest trace gives way; room taken by others counts too.
    hold.add(4, "y", 600, now=11.0)
    assert [(d.trace_id, d.reason) for d in hold.over_bytes()] == []
    assert [(d.trace_id, d.reason) for d in hold.over_bytes(room=400)] == [(3, "bytes")]
    assert [(d.trace_id, d.reason) for d in hold.close()] == [(4, "shutdown")]
    assert (len(hold), hold.runs, hold.bytes) == (0, 0, 0)
    assert [hold.decision(t) for t in (1, 2, 3, 4, 5)] == [False, True, False, False, None]
