"""RunsAnthropicInstrumentor against the real ``anthropic`` client and the fake API on loopback.

The clients are built with ``open_telemetry=False`` (the SDK's own spans off) except in the test
of that very case, where the call must be traced once, by the SDK.
"""

from __future__ import annotations

import asyncio
import json

import anthropic
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from otel_runs_exporter.instrumentation import traceable
from otel_runs_exporter.instrumentation import anthropic as runs_anthropic
from otel_runs_exporter.instrumentation.anthropic import RunsAnthropicInstrumentor

SCOPE = "otel_runs_exporter.instrumentation.anthropic"
MESSAGES = [{"role": "user", "content": "Hi there"}]
TOOL = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.fixture
def instrumentor():
    return RunsAnthropicInstrumentor()


@pytest.fixture
def client(fake_api):
    return anthropic.Anthropic(base_url=fake_api.anthropic_base_url, api_key="test", max_retries=0, open_telemetry=False)


@pytest.fixture
def aclient(fake_api):
    return anthropic.AsyncAnthropic(base_url=fake_api.anthropic_base_url, api_key="test", max_retries=0,
                                    open_telemetry=False)


def messages(span, key):
    return json.loads(span.attributes[key])


def test_messages_create_attributes(instrumented, client, spans, fake_api):
    # anthropic 2.x has no temperature/top_p/top_k arguments; older clients' values are read when given.
    client.messages.create(model="claude-x", max_tokens=64, system="Be brief.", messages=MESSAGES,
                           stop_sequences=["END"])
    span = spans.named("chat claude-x")
    a = span.attributes
    assert span.kind is SpanKind.CLIENT
    assert (a["gen_ai.operation.name"], a["gen_ai.provider.name"]) == ("chat", "anthropic")
    assert a["gen_ai.request.max_tokens"] == 64
    assert tuple(a["gen_ai.request.stop_sequences"]) == ("END",)
    assert a["gen_ai.response.model"] == "claude-x-fake-0001" and a["gen_ai.response.id"] == "msg_fake"
    assert tuple(a["gen_ai.response.finish_reasons"]) == ("end_turn",)
    # input_tokens counts every input token: fresh + cache read + cache creation.
    assert a["gen_ai.usage.input_tokens"] == fake_api.input_tokens
    assert a["gen_ai.usage.cache_read.input_tokens"] == fake_api.cached_tokens
    assert a["gen_ai.usage.cache_creation.input_tokens"] == 0
    assert a["gen_ai.usage.output_tokens"] == fake_api.output_tokens()
    assert messages(span, "gen_ai.system_instructions") == [{"type": "text", "content": "Be brief."}]
    assert messages(span, "gen_ai.input.messages") == [{"role": "user", "parts": [{"type": "text", "content": "Hi there"}]}]
    assert messages(span, "gen_ai.output.messages") == [
        {"role": "assistant", "parts": [{"type": "text", "content": fake_api.reply_text}], "finish_reason": "end_turn"}]


def test_tool_use_and_tool_result_parts(instrumented, client, spans):
    client.messages.create(model="c", max_tokens=64, messages=MESSAGES, tools=[TOOL])
    (out,) = messages(spans.named("chat c"), "gen_ai.output.messages")
    assert out["parts"] == [{"type": "text", "content": "Let me check."},
                            {"type": "tool_call", "id": "toolu_fake_1", "name": "get_weather",
                             "arguments": {"city": "fake-city"}}]
    assert out["finish_reason"] == "tool_use"

    spans.exporter.clear()
    history = MESSAGES + [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
    ]
    client.messages.create(model="c", max_tokens=64, messages=history, tools=[TOOL])
    sent = messages(spans.named("chat c"), "gen_ai.input.messages")
    assert sent[1]["parts"] == [{"type": "tool_call", "id": "toolu_1", "name": "get_weather", "arguments": {"city": "Paris"}}]
    assert sent[2] == {"role": "tool", "parts": [{"type": "tool_call_response", "id": "toolu_1", "response": "sunny"}]}


def test_stream_true_aggregates_and_marks_first_token(instrumented, client, spans, fake_api):
    stream = client.messages.create(model="c", max_tokens=64, messages=MESSAGES, stream=True)
    assert spans.all() == []
    text = "".join(e.delta.text for e in stream if e.type == "content_block_delta")
    assert text == fake_api.reply_text
    span = spans.named("chat c")
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.usage.output_tokens"] == fake_api.output_tokens()
    assert span.attributes["gen_ai.usage.input_tokens"] == fake_api.input_tokens
    assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == fake_api.cached_tokens
    assert span.attributes["gen_ai.usage.cache_creation.input_tokens"] == 0
    assert (span.attributes["gen_ai.response.model"], span.attributes["gen_ai.response.id"]) == ("c-fake-0001", "msg_fake")
    assert tuple(span.attributes["gen_ai.response.finish_reasons"]) == ("end_turn",)
    assert messages(span, "gen_ai.output.messages")[0]["parts"] == [{"type": "text", "content": fake_api.reply_text}]
    (event,) = span.events
    assert event.name == "new_token" and span.start_time <= event.timestamp <= span.end_time


def test_messages_stream_context_manager(instrumented, client, spans):
    with client.messages.stream(model="c", max_tokens=64, messages=MESSAGES, tools=[TOOL]) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    span = spans.named("chat c")
    (out,) = messages(span, "gen_ai.output.messages")
    assert out["parts"][1] == {"type": "tool_call", "id": "toolu_fake_1", "name": "get_weather",
                               "arguments": {"city": "fake-city"}}
    assert [e.name for e in span.events] == ["new_token"]


def test_messages_stream_left_early_ends_the_span(instrumented, client, spans):
    with client.messages.stream(model="c", max_tokens=64, messages=MESSAGES) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                break
    span = spans.named("chat c")
    assert span.end_time is not None and [e.name for e in span.events] == ["new_token"]


def test_async_create_and_stream(instrumented, aclient, spans, fake_api):
    async def main():
        await aclient.messages.create(model="a1", max_tokens=8, messages=MESSAGES)
        stream = await aclient.messages.create(model="a2", max_tokens=8, messages=MESSAGES, stream=True)
        async for _ in stream:
            pass
        async with aclient.messages.stream(model="a3", max_tokens=8, messages=MESSAGES) as s:
            return "".join([t async for t in s.text_stream])

    assert asyncio.run(main()) == fake_api.reply_text
    assert spans.named("chat a1").attributes["gen_ai.usage.output_tokens"] == fake_api.output_tokens()
    for name in ("chat a2", "chat a3"):
        span = spans.named(name)
        assert [e.name for e in span.events] == ["new_token"]
        assert messages(span, "gen_ai.output.messages")[0]["parts"][0]["content"] == fake_api.reply_text


def test_errors_are_recorded_and_reraised(instrumented, client, spans):
    with pytest.raises(anthropic.InternalServerError):
        client.messages.create(model="error-500", max_tokens=8, messages=MESSAGES)
    with pytest.raises(anthropic.RateLimitError):
        with client.messages.stream(model="error-429", max_tokens=8, messages=MESSAGES):
            pass
    for name, error in (("chat error-500", "InternalServerError"), ("chat error-429", "RateLimitError")):
        span = spans.named(name)
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["error.type"] == error


def test_parent_is_the_current_span(instrumented, client, spans):
    @traceable(run_type="chain")
    def agent():
        return client.messages.create(model="c", max_tokens=8, messages=MESSAGES)

    agent()
    assert spans.named("chat c").parent.span_id == spans.named("agent").context.span_id


def test_content_capture_off(instrument, client, spans, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "false")
    instrument()
    client.messages.create(model="c", max_tokens=8, system="secret", messages=MESSAGES)
    for _ in client.messages.create(model="s", max_tokens=8, messages=MESSAGES, stream=True):
        pass
    for span in spans.all():
        assert not any(k in span.attributes for k in
                       ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"))
        assert span.attributes["gen_ai.usage.output_tokens"] > 0 and "gen_ai.request.model" in span.attributes
    assert len(spans.all()) == 2


def test_capture_content_argument_overrides_env(instrument, client, spans, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    instrument(capture_content=False)
    client.messages.create(model="c", max_tokens=8, messages=MESSAGES)
    assert "gen_ai.input.messages" not in spans.named("chat c").attributes


def test_our_bugs_never_reach_the_caller(instrumented, client, spans, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("mapping bug")

    monkeypatch.setattr(runs_anthropic._MessageStream, "add", broken)
    monkeypatch.setattr(runs_anthropic.MessagesCreate, "response_attributes", broken)
    assert client.messages.create(model="c", max_tokens=8, messages=MESSAGES).content
    events = list(client.messages.create(model="s", max_tokens=8, messages=MESSAGES, stream=True))
    assert events[-1].type == "message_stop"
    assert {s.name for s in spans.all()} == {"chat c", "chat s"}
    assert "mapping bug" in caplog.text


def test_sdk_own_spans_mean_one_span_per_call(instrumented, fake_api, spans, tracer_provider):
    native = anthropic.Anthropic(base_url=fake_api.anthropic_base_url, api_key="test", max_retries=0,
                                 open_telemetry={"tracer_provider": tracer_provider})
    native.messages.create(model="c", max_tokens=8, messages=MESSAGES)
    with native.messages.stream(model="s", max_tokens=8, messages=MESSAGES) as stream:
        stream.until_done()
    names = [s.name for s in spans.all()]
    assert names == ["anthropic.messages.create", "anthropic.messages.create"], names
    assert not [s for s in spans.all() if s.instrumentation_scope.name == SCOPE]


def test_uninstrument_restores_the_methods(instrument, client, spans):
    from anthropic.resources.messages.messages import AsyncMessages, Messages

    instrument().uninstrument()
    for owner in (Messages, AsyncMessages):
        for method in ("create", "stream"):
            assert not hasattr(owner.__dict__[method], "_self_wrapper")
    client.messages.create(model="c", max_tokens=8, messages=MESSAGES)
    assert spans.all() == []


# --------------------------------------------------------------------------- request mapping


@pytest.mark.parametrize("kwargs, expected", [
    # temperature/top_p/top_k: arguments of older clients, still read when given.
    pytest.param({"model": "c", "max_tokens": 64, "temperature": 0.4, "top_p": 0.9, "top_k": 5,
                  "stop_sequences": ["END"], "stream": True}, {
        "gen_ai.request.model": "c", "gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.4,
        "gen_ai.request.top_p": 0.9, "gen_ai.request.top_k": 5, "gen_ai.request.stop_sequences": ["END"],
        "gen_ai.request.stream": True,
    }, id="every-keyword"),
    pytest.param({"model": "c", "max_tokens": 8, "temperature": anthropic.NOT_GIVEN, "stop_sequences": anthropic.omit,
                  "stream": False}, {"gen_ai.request.model": "c", "gen_ai.request.max_tokens": 8}, id="absent"),
])
def test_request_keywords_become_attributes(kwargs, expected):
    assert runs_anthropic.MessagesCreate().request_attributes(None, kwargs, capture=False) == expected


@pytest.mark.parametrize("kwargs, expected", [
    pytest.param({"model": "c", "system": None, "tools": []}, {"gen_ai.input.messages": "[]"}, id="none-given"),
    pytest.param({"model": "c", "system": "s", "messages": MESSAGES, "tools": [TOOL]}, {
        "gen_ai.system_instructions": '[{"type":"text","content":"s"}]',
        "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"Hi there"}]}]',
        "gen_ai.tool.definitions": json.dumps([TOOL], separators=(",", ":")),
    }, id="all-given"),
])
def test_content_keywords_become_attributes_only_when_capturing(kwargs, expected):
    op = runs_anthropic.MessagesCreate()
    without = op.request_attributes(None, kwargs, capture=False)
    with_content = op.request_attributes(None, kwargs, capture=True)
    assert {k: v for k, v in with_content.items() if k not in without} == expected
