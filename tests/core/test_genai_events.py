"""GenAI log events joined to their runs (``_genai_events``): the join's rules, then both paths end to end.

The join is tested on its own with a fake clock (events held, taken, late, aged out,
bounded); the paths with the real SDK ``LoggerProvider`` and tracer, the real local
service, and a producer-shaped record: openai-v2's ``event_only`` details record (the
real producer runs in ``tests/producers/test_openai_v2.py``).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import time

import pytest
from opentelemetry import trace
from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_runs_exporter import _genai_events
from otel_runs_exporter._convert import span_ids
from otel_runs_exporter._genai_events import EventJoin, GenAIEventProcessor
from otel_runs_exporter.mapping import SpanEvent

from core.helpers import exporter_provider, processor_provider

DETAILS = "gen_ai.client.inference.operation.details"
QUESTION = [{"role": "user", "parts": [{"type": "text", "content": "Is it sunny?"}]}]
ANSWER = [{"role": "assistant", "parts": [{"type": "text", "content": "Yes."}], "finish_reason": "stop"}]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ended_span(name: str = "chat m", **attributes):
    span = TracerProvider().get_tracer("t").start_span(name, attributes=attributes or {"gen_ai.operation.name": "chat"})
    span.end()
    return span


def key(span) -> tuple[int, int]:
    return span.context.trace_id, span.context.span_id


def event(name: str = DETAILS, **attributes) -> SpanEvent:
    return SpanEvent(name, attributes or {"gen_ai.input.messages": tuple(QUESTION)}, 1)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def join(clock: Clock):
    j = EventJoin(clock=clock)
    yield j
    j.close()


# ---------------------------------------------------------------------------
# The join's rules
# ---------------------------------------------------------------------------


def test_events_wait_for_their_span_and_are_taken_once(join):
    span, other = ended_span(), ended_span()
    first, second = event(), event("gen_ai.user.message", body={"content": "hi"})
    join.offer(key(span), first, 100)
    join.offer(key(span), second, 100)
    join.offer(key(other), event(), 100)
    assert join.counts().held == 3
    assert join.take(span, span_ids(span, None)) == [first, second]  # in the order they were emitted
    assert join.take(span, span_ids(span, None)) == []
    counts = join.counts()
    assert (counts.joined, counts.held, dict(counts.dropped)) == (2, 1, {})


def test_an_event_no_run_takes_is_dropped_as_unmatched_after_the_hold(join, clock, caplog):
    join.offer(key(ended_span()), event(secret="sk-live-abc"), 100)
    clock.now += _genai_events.HOLD_S - 1
    assert join.counts().held == 1
    clock.now += 2
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter._genai_events"):
        counts = join.counts()
    assert (counts.held, dict(counts.dropped)) == (0, {"unmatched": 1})
    assert "no run took them" in caplog.text and "sk-live" not in caplog.text  # names, never content


def test_an_event_after_its_run_was_converted_makes_a_late_patch(join, clock):
    span = ended_span()
    join.offer(key(span), event(), 100)
    ids = span_ids(span, None)
    join.take(span, ids)
    assert not join.has_late()
    late = event("gen_ai.evaluation.result", score=1)
    join.offer(key(span), late, 50)
    assert join.has_late()
    [(kept_span, kept_ids, events)] = join.late()
    assert (kept_span, kept_ids) == (span, ids) and events[-1] is late and len(events) == 2  # all its events
    assert join.late() == [] and join.counts().joined == 2


def test_a_genai_run_is_kept_for_late_events_even_without_early_ones(join):
    """Once the join has seen a GenAI event, GenAI runs are kept; other spans are not."""
    join.offer(key(ended_span()), event(), 10)
    genai, plain = ended_span(), ended_span("http", **{"http.method": "GET"})
    assert join.take(genai, span_ids(genai, None)) == []
    assert join.take(plain, span_ids(plain, None)) == []
    join.offer(key(genai), event(), 10)
    join.offer(key(plain), event(), 10)
    assert [s for s, _, _ in join.late()] == [genai]
    assert join.counts().held == 2  # the first event's span and the plain span's: they wait, then age out


def test_nothing_is_kept_until_a_genai_event_is_seen(join):
    """Most apps never emit one: their runs cost the join a lock and a flag."""
    span = ended_span()
    join.take(span, span_ids(span, None))
    assert join._kept == {}


def test_a_run_is_kept_for_late_events_only_for_a_while(join, clock):
    span = ended_span()
    join.offer(key(span), event(), 10)
    join.take(span, span_ids(span, None))
    clock.now += _genai_events.LATE_S + 1
    join.offer(key(span), event(), 10)
    assert join.late() == [] and join.counts().held == 1  # waits like an event of an unknown span
    clock.now += _genai_events.HOLD_S
    assert dict(join.counts().dropped) == {"unmatched": 1}


def test_held_events_are_bounded_in_number_and_bytes(join, monkeypatch, caplog):
    monkeypatch.setattr(_genai_events, "MAX_EVENTS", 2)
    monkeypatch.setattr(_genai_events, "MAX_BYTES", 1000)
    span = ended_span()
    join.offer(key(span), event(), 400)
    join.offer(key(span), event(), 700)  # past the bytes
    join.offer(key(span), event(), 400)
    join.offer(key(span), event(), 10)  # past the count
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter._genai_events"):
        counts = join.counts()
    assert (counts.held, dict(counts.dropped)) == (2, {"events_bytes_full": 1, "events_full": 1})
    assert len(join.take(span, span_ids(span, None))) == 2


def test_kept_runs_are_bounded_the_oldest_forgotten(join, monkeypatch):
    monkeypatch.setattr(_genai_events, "LATE_SPANS", 2)
    spans = [ended_span() for _ in range(3)]
    for span in spans:
        join.offer(key(span), event(), 10)
        join.take(span, span_ids(span, None))
    assert list(join._kept) == [key(s) for s in spans[1:]]
    monkeypatch.setattr(_genai_events, "LATE_BYTES", join._kept_bytes)
    join.offer(key(spans[1]), event(), 10)  # a late event, but no room left to keep its run
    assert join.late() == [] and dict(join.counts().dropped) == {"unmatched": 1}


def test_close_counts_what_waits_as_unmatched_says_so_and_stops_taking(join, caplog):
    """A short-lived app's event for a span no run took: it was counted as a shutdown loss, with no warning."""
    span = ended_span()
    join.offer(key(span), event(), 10)
    join.close()
    join.offer(key(span), event(), 10)
    counts = join.counts()
    assert (counts.held, dict(counts.dropped)) == (0, {"unmatched": 1})
    assert "1 GenAI log events dropped at shutdown: no run took them" in caplog.text
    assert join not in _genai_events._joins.live()


# ---------------------------------------------------------------------------
# The log record processor
# ---------------------------------------------------------------------------


@pytest.fixture
def logs(join):
    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(GenAIEventProcessor())
    yield provider.get_logger("genai-producer")
    provider.shutdown()


def test_records_are_offered_by_their_span_with_their_body(logs, join):
    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}) as span:
        logs.emit(LogRecord(event_name=DETAILS, attributes={"gen_ai.input.messages": QUESTION}))
        logs.emit(LogRecord(event_name="gen_ai.choice", body={"index": 0, "message": {"content": "Yes."}},
                            attributes={"gen_ai.system": "openai"}))
        logs.emit(LogRecord(event_name="app.audit", attributes={"x": 1}))  # not GenAI: never held
        logs.emit(LogRecord(body="a plain log line"))
    details, choice = join.take(span, span_ids(span, None))
    assert (details.name, details.attributes["gen_ai.input.messages"][0]["role"]) == (DETAILS, "user")
    assert (choice.name, choice.attributes["body"]["message"]["content"]) == ("gen_ai.choice", "Yes.")
    assert choice.time_ns > 0


def test_records_that_cannot_belong_to_a_run_are_counted(logs, join):
    logs.emit(LogRecord(event_name=DETAILS, attributes={"a": 1}))  # outside any span
    unsampled = SpanContext(0x1234, 0x5678, is_remote=False, trace_flags=TraceFlags(TraceFlags.DEFAULT))
    with trace.use_span(NonRecordingSpan(unsampled)):
        logs.emit(LogRecord(event_name=DETAILS, attributes={"a": 1}))
    # The older Events API names its record in an attribute.
    logs.emit(LogRecord(attributes={"event.name": "gen_ai.user.message", "content": "hi"}))
    assert dict(join.counts().dropped) == {"no_span": 2, "not_sampled": 1}


def test_a_failing_join_never_raises_into_the_app(logs, join, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(EventJoin, "offer", broken)
    with TracerProvider().get_tracer("t").start_as_current_span("chat m"):
        logs.emit(LogRecord(event_name=DETAILS, attributes={"a": 1}))


# ---------------------------------------------------------------------------
# Both paths, end to end
# ---------------------------------------------------------------------------


def _details(logger, span=None) -> None:
    """openai-v2's event_only record for one call: the span's attributes with the messages as objects."""
    context = trace.set_span_in_context(span) if span is not None else None
    logger.emit(
        LogRecord(
            event_name=DETAILS,
            context=context,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.input.messages": QUESTION,
                "gen_ai.output.messages": ANSWER,
            },
        )
    )


def _chat(tracer, logger, emit_inside: bool = True):
    with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat",
                                                            "gen_ai.request.model": "m"}) as span:
        if emit_inside:
            _details(logger)  # as openai-v2 does: just before the span ends
    return span


MESSAGES_IN = {"messages": [{"role": "user", "content": "Is it sunny?"}]}
MESSAGES_OUT = {"messages": [{"role": "assistant", "content": "Yes."}], "finish_reason": "stop"}


@pytest.fixture
def producer_logs():
    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(GenAIEventProcessor())
    yield provider.get_logger("opentelemetry.instrumentation.openai_v2")
    provider.shutdown()


@pytest.mark.parametrize("path", ["processor", "exporter"])
def test_the_run_gets_the_messages_of_its_events(service, producer_logs, path):
    make = processor_provider if path == "processor" else exporter_provider
    provider, runs = make(service.url)
    _chat(provider.get_tracer("t"), producer_logs)
    provider.force_flush(5000)
    [run] = service.wait_for_runs(1)
    assert (run["inputs"], run["outputs"]) == (MESSAGES_IN, MESSAGES_OUT)
    assert not run.get("events")  # the record is the run's content, not one of its events
    stats = runs.stats()
    assert (stats.log_events_joined, stats.log_events_held, dict(stats.log_events_dropped)) == (1, 0, {})


@pytest.mark.parametrize("path", ["processor", "exporter"])
def test_an_event_after_the_run_was_sent_goes_in_a_patch(service, producer_logs, path):
    make = processor_provider if path == "processor" else exporter_provider
    provider, runs = make(service.url)
    tracer = provider.get_tracer("t")
    _chat(tracer, producer_logs)  # a first call's record makes the join keep GenAI runs for late events
    span = _chat(tracer, producer_logs, emit_inside=False)
    provider.force_flush(5000)
    service.wait_for_runs(2)
    assert [r["inputs"] for r in service.runs()].count({}) == 1
    _details(producer_logs, span)  # the span ended and its run was sent
    runs.force_flush(5000)  # the worker's next flush; the exporter's next export or flush
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and [r["inputs"] for r in service.runs()].count({}):
        time.sleep(0.02)
    run = next(r for r in service.runs() if r["extra"]["metadata"]["otel_span_id"] == "%016x" % span.context.span_id)
    assert (run["inputs"], run["outputs"]) == (MESSAGES_IN, MESSAGES_OUT)
    assert run["end_time"] and service.violations() == []
    assert runs.stats().log_events_joined == 2


def test_events_of_a_span_no_path_sees_are_dropped_as_unmatched(service, producer_logs, monkeypatch):
    monkeypatch.setattr(_genai_events, "HOLD_S", 0.05)
    provider, processor = processor_provider(service.url)
    elsewhere = TracerProvider().get_tracer("another provider")  # its spans never reach the processor
    _chat(elsewhere, producer_logs)
    assert processor.stats().log_events_held == 1
    time.sleep(0.1)
    stats = processor.stats()
    assert (stats.log_events_held, dict(stats.log_events_dropped)) == (0, {"unmatched": 1})
    assert stats.created == stats.delivered + stats.dropped_total + stats.spooled + stats.queued  # runs untouched


def test_switched_off_neither_path_holds_events(service, producer_logs):
    provider, processor = processor_provider(service.url, capture_log_events=False)
    _chat(provider.get_tracer("t"), producer_logs)
    provider.force_flush(5000)
    [run] = service.wait_for_runs(1)
    assert run["inputs"] == {} and processor.stats().log_events_held == 0


# ---------------------------------------------------------------------------
# Installed by configure() and the configurator; fork
# ---------------------------------------------------------------------------


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    child_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=child_env, timeout=60)


def test_configure_installs_the_log_processor_once_on_the_global_logger_provider():
    proc = _run(
        """
        from opentelemetry import _logs
        from opentelemetry.sdk._logs import LoggerProvider
        from otel_runs_exporter import configure
        from otel_runs_exporter._genai_events import GenAIEventProcessor
        configure(endpoint="http://127.0.0.1:9", api_key="k", schedule_delay_s=3600)
        configure()
        provider = _logs.get_logger_provider()
        ours = [p for p in provider._multi_log_record_processor._log_record_processors
                if isinstance(p, GenAIEventProcessor)]
        print(type(provider).__name__, len(ours))
        """
    )
    assert proc.stdout.split() == ["LoggerProvider", "1"], proc.stderr


def test_configure_adds_to_a_logger_provider_already_set():
    proc = _run(
        """
        from opentelemetry import _logs
        from opentelemetry.sdk._logs import LoggerProvider
        from otel_runs_exporter import configure
        from otel_runs_exporter._genai_events import GenAIEventProcessor
        mine = LoggerProvider()
        _logs.set_logger_provider(mine)
        configure(endpoint="http://127.0.0.1:9", api_key="k", schedule_delay_s=3600)
        print(_logs.get_logger_provider() is mine,
              sum(isinstance(p, GenAIEventProcessor) for p in mine._multi_log_record_processor._log_record_processors))
        """
    )
    assert proc.stdout.split() == ["True", "1"], proc.stderr


def test_the_runs_configurator_installs_it_on_the_sdk_logger_provider():
    proc = _run(
        """
        from opentelemetry import _logs
        from otel_runs_exporter._genai_events import GenAIEventProcessor
        from otel_runs_exporter.autoconfig import RunsConfigurator
        RunsConfigurator().configure()
        provider = _logs.get_logger_provider()
        print(sum(isinstance(p, GenAIEventProcessor) for p in provider._multi_log_record_processor._log_record_processors))
        """,
        {"OTEL_TRACES_EXPORTER": "runs", "OTEL_EXPORTER_RUNS_ENDPOINT": "http://127.0.0.1:9",
         "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"},
    )
    assert proc.stdout.split() == ["1"], proc.stderr


def test_after_fork_the_child_starts_with_an_empty_join():
    proc = _run(
        """
        import os
        from opentelemetry.sdk.trace import TracerProvider
        from otel_runs_exporter._convert import span_ids
        from otel_runs_exporter._genai_events import EventJoin
        from otel_runs_exporter.mapping import SpanEvent
        span = TracerProvider().get_tracer("t").start_span("chat", attributes={"gen_ai.operation.name": "chat"})
        span.end()
        join = EventJoin()
        join.offer((span.context.trace_id, span.context.span_id), SpanEvent("gen_ai.x", {}, 1), 10)
        join._lock.acquire()  # as if another thread held it at the fork
        pid = os.fork()
        if pid == 0:
            join.offer((1, 2), SpanEvent("gen_ai.x", {}, 1), 10)  # would hang on the parent's lock
            os._exit(0 if join.counts().held == 1 and join.take(span, span_ids(span, None)) == [] else 1)
        join._lock.release()
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), join.counts().held)
        """
    )
    assert proc.stdout.split() == ["0", "1"], proc.stderr

