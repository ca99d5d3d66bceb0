"""RunsOpenAIInstrumentor against the real ``openai`` client and the fake API on loopback."""

from __future__ import annotations

import asyncio
import json
import sys

import openai
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from otel_runs_exporter.instrumentation import traceable
from otel_runs_exporter.instrumentation import openai as runs_openai
from otel_runs_exporter.instrumentation.openai import RunsOpenAIInstrumentor

SCOPE = "otel_runs_exporter.instrumentation.openai"
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
WEATHER_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


@pytest.fixture
def instrumentor():
    return RunsOpenAIInstrumentor()


@pytest.fixture
def client(fake_api):
    return openai.OpenAI(base_url=fake_api.openai_base_url, api_key="test", max_retries=0)


@pytest.fixture
def aclient(fake_api):
    return openai.AsyncOpenAI(base_url=fake_api.openai_base_url, api_key="test", max_retries=0)


def ours(spans):
    return [s for s in spans.all() if s.instrumentation_scope.name == SCOPE]


def messages(span, key):
    return json.loads(span.attributes[key])


def test_chat_completion_attributes(instrumented, client, spans, fake_api):
    client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, temperature=0.2, max_tokens=50,
                                   top_p=0.9, seed=7, stop="END")
    span = spans.named("chat gpt-4o-mini")
    a = span.attributes
    assert span.kind is SpanKind.CLIENT
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "gpt-4o-mini"
    assert (a["gen_ai.request.temperature"], a["gen_ai.request.max_tokens"], a["gen_ai.request.top_p"]) == (0.2, 50, 0.9)
    assert a["gen_ai.request.seed"] == 7 and tuple(a["gen_ai.request.stop_sequences"]) == ("END",)
    assert a["gen_ai.response.model"] == "gpt-4o-mini-fake-0001"
    assert a["gen_ai.response.id"] == "chatcmpl-fake"
    assert tuple(a["gen_ai.response.finish_reasons"]) == ("stop",)
    assert a["gen_ai.usage.input_tokens"] == fake_api.input_tokens
    assert a["gen_ai.usage.output_tokens"] == fake_api.output_tokens()
    assert a["gen_ai.usage.cache_read.input_tokens"] == fake_api.cached_tokens
    assert a["gen_ai.usage.reasoning.output_tokens"] == fake_api.reasoning_tokens
    assert a["server.address"] == "127.0.0.1"
    assert messages(span, "gen_ai.input.messages") == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Hi there"}]},
    ]
    assert messages(span, "gen_ai.output.messages") == [
        {"role": "assistant", "parts": [{"type": "text", "content": fake_api.reply_text}], "finish_reason": "stop"}
    ]
    assert span.status.status_code is not StatusCode.ERROR


def test_tool_calls_and_tool_results_in_parts(instrumented, client, spans):
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "weather?"}], tools=[WEATHER_TOOL])
    out = messages(spans.named("chat m"), "gen_ai.output.messages")
    assert out[0]["parts"] == [
        {"type": "tool_call", "id": "call_fake_1", "name": "get_weather", "arguments": {"city": "fake-city"}}
    ]
    assert out[0]["finish_reason"] == "tool_calls"
    assert "get_weather" in spans.named("chat m").attributes["gen_ai.tool.definitions"]

    spans.exporter.clear()
    history = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    client.chat.completions.create(model="m", messages=history, tools=[WEATHER_TOOL])
    sent = messages(spans.named("chat m"), "gen_ai.input.messages")
    assert sent[1] == {"role": "assistant", "parts": [
        {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}]}
    assert sent[2] == {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "sunny"}]}


def test_streaming_chat_aggregates_and_marks_first_token(instrumented, client, spans, fake_api):
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                            stream_options={"include_usage": True})
    assert ours(spans) == []  # the span lasts as long as the stream
    chunks = [c.choices[0].delta.content for c in stream if c.choices]
    assert "".join(c or "" for c in chunks) == fake_api.reply_text
    span = spans.named("chat m")
    a = span.attributes
    assert a["gen_ai.request.stream"] is True
    assert messages(span, "gen_ai.output.messages")[0]["parts"] == [{"type": "text", "content": fake_api.reply_text}]
    assert (a["gen_ai.response.model"], a["gen_ai.response.id"]) == ("m-fake-0001", "chatcmpl-fake")
    assert a["gen_ai.usage.input_tokens"] == fake_api.input_tokens
    assert a["gen_ai.usage.output_tokens"] == fake_api.output_tokens()
    assert a["gen_ai.usage.cache_read.input_tokens"] == fake_api.cached_tokens
    assert a["gen_ai.usage.reasoning.output_tokens"] == fake_api.reasoning_tokens
    assert tuple(a["gen_ai.response.finish_reasons"]) == ("stop",)
    (event,) = [e for e in span.events if e.name == "new_token"]
    assert span.start_time <= event.timestamp <= span.end_time


def test_streaming_tool_call_arguments_are_joined(instrumented, client, spans):
    with client.chat.completions.create(model="m", messages=MESSAGES, tools=[WEATHER_TOOL], stream=True) as stream:
        for _ in stream:
            pass
    span = spans.named("chat m")
    (msg,) = messages(span, "gen_ai.output.messages")
    assert msg["parts"] == [{"type": "tool_call", "id": "call_fake_1", "name": "get_weather",
                             "arguments": {"city": "fake-city"}}]
    assert msg["finish_reason"] == "tool_calls"
    assert "gen_ai.usage.input_tokens" not in span.attributes  # no include_usage: the API sends none


def test_stream_closed_early_ends_the_span(instrumented, client, spans):
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    next(iter(stream))
    next(iter(stream))
    stream.close()
    span = spans.named("chat m")
    assert span.end_time is not None
    assert [e.name for e in span.events] == ["new_token"]


def test_a_stream_let_go_unfinished_ends_its_span_with_what_was_read(instrumented, client, aclient, spans):
    """An app that stops reading a stream and drops it without closing it (a ``break`` out of the loop)
    still gets its call's run ended, with the text read so far, as OpenInference and OpenLLMetry do."""
    import gc

    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    for i, _ in enumerate(stream):  # the role, then the first words
        if i == 1:
            break
    del stream
    gc.collect()

    async def main():
        stream = await aclient.chat.completions.create(model="m-async", messages=MESSAGES, stream=True)
        i = 0
        async for _ in stream:
            if i == 1:
                break
            i += 1
        del stream
        gc.collect()

    asyncio.run(main())
    for name in ("chat m", "chat m-async"):
        span = spans.named(name)
        assert span.end_time is not None and span.status.status_code is not StatusCode.ERROR
        assert [e.name for e in span.events] == ["new_token"]


def test_stream_failing_midway_records_the_error_and_ends_the_span(instrumented, client, aclient, spans, fake_api):
    stream = client.chat.completions.create(model="fail-midstream", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError, match="fake mid-stream failure"):
        for _ in stream:
            pass

    async def main():
        stream = await aclient.chat.completions.create(model="fail-midstream", messages=MESSAGES, stream=True)
        with pytest.raises(openai.APIError, match="fake mid-stream failure"):
            async for _ in stream:
                pass

    asyncio.run(main())
    failed = [s for s in ours(spans) if s.name == "chat fail-midstream"]
    assert len(failed) == 2
    for span in failed:
        assert span.status.status_code is StatusCode.ERROR and span.attributes["error.type"] == "APIError"
        assert [e.name for e in span.events] == ["new_token", "exception"]


def test_async_chat_and_stream(instrumented, aclient, spans, fake_api):
    async def main():
        await aclient.chat.completions.create(model="a1", messages=MESSAGES)
        stream = await aclient.chat.completions.create(model="a2", messages=MESSAGES, stream=True,
                                                       stream_options={"include_usage": True})
        text = ""
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
        return text

    assert asyncio.run(main()) == fake_api.reply_text
    assert spans.named("chat a1").attributes["gen_ai.usage.output_tokens"] == fake_api.output_tokens()
    s2 = spans.named("chat a2")
    assert [e.name for e in s2.events] == ["new_token"]
    assert messages(s2, "gen_ai.output.messages")[0]["parts"][0]["content"] == fake_api.reply_text


def test_embeddings(instrumented, client, spans, fake_api):
    result = client.embeddings.create(model="text-embedding-3-small", input=["a", "b"])
    assert len(result.data) == 2
    span = spans.named("embeddings text-embedding-3-small")
    a = span.attributes
    assert a["gen_ai.operation.name"] == "embeddings"
    assert a["gen_ai.response.model"] == "text-embedding-3-small-fake-0001"
    assert a["gen_ai.usage.input_tokens"] == fake_api.input_tokens
    assert a["gen_ai.embeddings.dimension.count"] == 3
    assert json.loads(a["input.value"]) == {"input": ["a", "b"]}


def test_responses_json_and_stream(instrumented, client, spans, fake_api):
    client.responses.create(model="r1", input="Hi", instructions="Be brief.", max_output_tokens=20)
    span = spans.named("chat r1")
    a = span.attributes
    assert messages(span, "gen_ai.system_instructions") == [{"type": "text", "content": "Be brief."}]
    assert messages(span, "gen_ai.input.messages") == [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]
    assert messages(span, "gen_ai.output.messages") == [
        {"role": "assistant", "parts": [{"type": "text", "content": fake_api.reply_text}], "finish_reason": "stop"}]
    assert a["gen_ai.request.max_tokens"] == 20 and a["gen_ai.response.id"] == "resp_fake"
    assert a["gen_ai.usage.cache_read.input_tokens"] == fake_api.cached_tokens

    events = [e.type for e in client.responses.create(model="r2", input="Hi", stream=True)]
    assert events[-1] == "response.completed"
    s2 = spans.named("chat r2")
    assert [e.name for e in s2.events] == ["new_token"]
    assert s2.attributes["gen_ai.usage.output_tokens"] == fake_api.output_tokens()
    assert (s2.attributes["gen_ai.response.model"], s2.attributes["gen_ai.response.id"]) == ("r2-fake-0001", "resp_fake")
    assert tuple(s2.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert s2.attributes["gen_ai.usage.reasoning.output_tokens"] == fake_api.reasoning_tokens
    assert messages(s2, "gen_ai.output.messages")[0]["parts"] == [{"type": "text", "content": fake_api.reply_text}]


def test_responses_tool_call(instrumented, client, spans):
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {"id": {}}}}
    client.responses.create(model="r", input=[{"role": "user", "content": "find"}], tools=[tool])
    span = spans.named("chat r")
    (msg,) = messages(span, "gen_ai.output.messages")
    assert msg["parts"] == [{"type": "tool_call", "id": "call_fake_1", "name": "lookup", "arguments": {"id": "fake-id"}}]
    assert tuple(span.attributes["gen_ai.response.finish_reasons"]) == ("tool_call",)


def test_async_responses_stream(instrumented, aclient, spans):
    async def main():
        stream = await aclient.responses.create(model="ar", input="Hi", stream=True)
        return [e.type async for e in stream]

    assert asyncio.run(main())[-1] == "response.completed"
    assert [e.name for e in spans.named("chat ar").events] == ["new_token"]


def test_errors_are_recorded_and_reraised(instrumented, client, spans):
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="error-500", messages=MESSAGES)
    span = spans.named("chat error-500")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "InternalServerError"
    assert [e.name for e in span.events] == ["exception"]


def test_parent_is_the_current_span(instrumented, client, spans):
    @traceable
    def answer(question):
        return client.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])

    answer("hi")
    assert spans.named("chat m").parent.span_id == spans.named("answer").context.span_id


def test_content_capture_off_keeps_model_and_usage(instrument, client, spans, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "false")
    instrument()
    client.chat.completions.create(model="m", messages=MESSAGES)
    client.responses.create(model="r", input="Hi", instructions="x")
    client.embeddings.create(model="e", input="x")
    for span in ours(spans):
        for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "input.value"):
            assert key not in span.attributes
        assert "gen_ai.request.model" in span.attributes and "gen_ai.usage.input_tokens" in span.attributes
    assert len(ours(spans)) == 3


def test_our_bugs_never_reach_the_caller(instrumented, client, spans, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("mapping bug")

    monkeypatch.setattr(runs_openai.ChatCompletions, "response_attributes", broken)
    result = client.chat.completions.create(model="m", messages=MESSAGES)
    assert result.choices[0].message.content
    assert spans.named("chat m").end_time is not None

    monkeypatch.setattr(runs_openai.ChatCompletions, "request_attributes", broken)
    assert client.chat.completions.create(model="m2", messages=MESSAGES).choices
    assert "mapping bug" in caplog.text


def test_uninstrument_restores_the_methods(instrument, client, spans):
    inst = instrument()
    inst.uninstrument()
    from openai.resources.chat.completions.completions import Completions
    from openai.resources.embeddings import Embeddings

    assert not hasattr(Completions.__dict__["create"], "_self_wrapper")
    assert not hasattr(Embeddings.__dict__["create"], "_self_wrapper")
    client.chat.completions.create(model="m", messages=MESSAGES)
    assert spans.all() == []


# --------------------------------------------------------------------------- tracing once


@pytest.fixture
def openai_v2(monkeypatch):
    """``opentelemetry.instrumentation.openai_v2``, or a skip saying why it cannot load here.

    openai-v2 2.4b0 does ``from httpx import URL`` at import, but openai 3.x moved to the
    ``httpx2`` fork and ``httpx`` is not installed: alias it for that import only (restored after
    the test). It also needs ``opentelemetry.util.genai.instruments``, which the installed
    opentelemetry-util-genai lacks; then the test is skipped, and the stand-in tests below cover
    the same two wrapping orders.
    """
    try:
        httpx2 = __import__("httpx2")
        if "httpx" not in sys.modules:
            monkeypatch.setitem(sys.modules, "httpx", httpx2)
    except ImportError:
        pass
    try:
        import opentelemetry.instrumentation.openai_v2 as module
    except ImportError as exc:
        pytest.skip(f"opentelemetry-instrumentation-openai-v2 cannot be imported here: {exc}")
    return module


def _standin_wrapper(tracer_provider):
    """A wrapper shaped like openai-v2's (a CLIENT span "chat {model}" around the call), declared
    in an ``opentelemetry.instrumentation.*`` module as the real one is."""
    tracer = tracer_provider.get_tracer("standin")

    def traced_method(wrapped, instance, args, kwargs):
        with tracer.start_as_current_span(f"chat {kwargs.get('model')}", kind=SpanKind.CLIENT,
                                          attributes={"gen_ai.operation.name": "chat",
                                                      "gen_ai.provider.name": "openai"}):
            return wrapped(*args, **kwargs)

    traced_method.__module__ = "opentelemetry.instrumentation.standin.patch"
    return traced_method


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-inner", "ours-outer"])
def test_not_traced_twice_with_a_standin_contrib_wrapper(tracer_provider, client, spans, ours_first):
    import wrapt
    from openai.resources.chat.completions.completions import Completions
    from opentelemetry.instrumentation.utils import unwrap

    runs = RunsOpenAIInstrumentor()
    if ours_first:
        runs.instrument(tracer_provider=tracer_provider)
    wrapt.wrap_function_wrapper(Completions, "create", _standin_wrapper(tracer_provider))
    if not ours_first:
        runs.instrument(tracer_provider=tracer_provider)
    try:
        client.chat.completions.create(model="m", messages=MESSAGES)
    finally:
        if ours_first:
            unwrap(Completions, "create")
            runs.uninstrument()
        else:
            runs.uninstrument()
            unwrap(Completions, "create")
    assert [s.name for s in spans.all()] == ["chat m"]
    assert ours(spans) == []
    assert not hasattr(Completions.__dict__["create"], "_self_wrapper")


def chat_spans(spans):
    return [s for s in spans.all() if s.attributes.get("gen_ai.operation.name") == "chat"
            or s.attributes.get("openinference.span.kind") == "LLM"]


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-inner-contrib-outer", "contrib-inner-ours-outer"])
def test_not_traced_twice_with_openai_v2(tracer_provider, client, spans, ours_first, openai_v2):
    contrib, runs = openai_v2.OpenAIInstrumentor(), RunsOpenAIInstrumentor()
    first, second = (runs, contrib) if ours_first else (contrib, runs)
    first.instrument(tracer_provider=tracer_provider)
    second.instrument(tracer_provider=tracer_provider)
    try:
        client.chat.completions.create(model="m", messages=MESSAGES)
        stream = client.chat.completions.create(model="s", messages=MESSAGES, stream=True)
        for _ in stream:
            pass
        client.embeddings.create(model="e", input="x")
    finally:
        second.uninstrument()  # wrapt stacks: the outer wrapper comes off first
        first.uninstrument()
    names = sorted(s.name for s in spans.all())
    assert names == ["chat m", "chat s", "embeddings e"], names
    assert ours(spans) == []  # the other instrumentor was there too, so it traced
    from openai.resources.chat.completions.completions import Completions

    assert not hasattr(Completions.__dict__["create"], "_self_wrapper")


def test_not_traced_twice_with_openinference(tracer_provider, client, spans):
    from openinference.instrumentation.openai import OpenAIInstrumentor

    other, runs = OpenAIInstrumentor(), RunsOpenAIInstrumentor()
    other.instrument(tracer_provider=tracer_provider)
    runs.instrument(tracer_provider=tracer_provider)
    try:
        client.chat.completions.create(model="m", messages=MESSAGES)
        for _ in client.chat.completions.create(model="s", messages=MESSAGES, stream=True):
            pass
    finally:
        runs.uninstrument()
        other.uninstrument()
    assert len(chat_spans(spans)) == 2
    assert ours(spans) == []


def test_uninstrument_under_a_foreign_wrapper_turns_ours_off(tracer_provider, client, spans):
    import wrapt
    from openai.resources.chat.completions.completions import Completions
    from opentelemetry.instrumentation.utils import unwrap

    runs = RunsOpenAIInstrumentor()
    runs.instrument(tracer_provider=tracer_provider)
    wrapt.wrap_function_wrapper(Completions, "create", lambda wrapped, instance, args, kwargs: wrapped(*args, **kwargs))
    try:
        runs.uninstrument()  # ours is under another wrapper: it cannot come off, so it goes inert
        client.chat.completions.create(model="m", messages=MESSAGES)
        assert spans.all() == []
    finally:
        while hasattr(Completions.__dict__["create"], "_self_wrapper"):
            unwrap(Completions, "create")


# --------------------------------------------------------------------------- request mapping

# What the SDK passes for an argument the caller left out; it must read as absent.
NOT_GIVEN, OMIT = openai.NOT_GIVEN, openai.omit


@pytest.mark.parametrize("op, kwargs, expected", [
    pytest.param(runs_openai.ChatCompletions(), {
        "model": "m", "temperature": 0.5, "top_p": 0.9, "max_completion_tokens": 30, "max_tokens": 50,
        "frequency_penalty": 0.1, "presence_penalty": 0.2, "seed": 7, "stop": ["a", "b"], "n": 2,
        "response_format": {"type": "json_schema", "json_schema": {}}, "stream": True,
    }, {
        "gen_ai.request.model": "m", "gen_ai.request.temperature": 0.5, "gen_ai.request.top_p": 0.9,
        "gen_ai.request.max_tokens": 30, "gen_ai.request.frequency_penalty": 0.1,
        "gen_ai.request.presence_penalty": 0.2, "gen_ai.request.seed": 7,
        "gen_ai.request.stop_sequences": ["a", "b"], "gen_ai.request.choice.count": 2,
        "gen_ai.output.type": "json", "gen_ai.request.stream": True,
    }, id="chat-every-keyword"),
    pytest.param(runs_openai.ChatCompletions(), {
        "model": "m", "temperature": NOT_GIVEN, "top_p": OMIT, "max_tokens": 50, "stop": "END", "n": 1,
        "response_format": {"type": "text"}, "stream": False, "seed": {"not": "a number"},
    }, {
        "gen_ai.request.model": "m", "gen_ai.request.max_tokens": 50, "gen_ai.request.stop_sequences": ["END"],
        "gen_ai.output.type": "text",
    }, id="chat-absent-default-and-odd-values"),
    pytest.param(runs_openai.Embeddings(), {"model": "e", "dimensions": 256, "encoding_format": "float", "input": "x"}, {
        "gen_ai.request.model": "e", "gen_ai.embeddings.dimension.count": 256,
        "gen_ai.request.encoding_formats": ["float"],
    }, id="embeddings"),
    pytest.param(runs_openai.Embeddings(), {"model": "e", "encoding_format": NOT_GIVEN, "dimensions": OMIT},
                 {"gen_ai.request.model": "e"}, id="embeddings-absent"),
    pytest.param(runs_openai.Responses(), {
        "model": "r", "temperature": 0.3, "top_p": 0.8, "max_output_tokens": 20, "conversation": "conv_1",
        "text": {"format": {"type": "json_object"}}, "stream": True,
    }, {
        "gen_ai.request.model": "r", "gen_ai.request.temperature": 0.3, "gen_ai.request.top_p": 0.8,
        "gen_ai.request.max_tokens": 20, "gen_ai.conversation.id": "conv_1", "gen_ai.output.type": "json",
        "gen_ai.request.stream": True,
    }, id="responses-every-keyword"),
    pytest.param(runs_openai.Responses(), {"model": "r", "conversation": {"id": "conv_2"}, "text": {"format": {"type": "text"}}},
                 {"gen_ai.request.model": "r", "gen_ai.conversation.id": "conv_2", "gen_ai.output.type": "text"},
                 id="responses-conversation-object"),
    pytest.param(runs_openai.Responses(), {"model": "r", "conversation": NOT_GIVEN, "text": OMIT},
                 {"gen_ai.request.model": "r"}, id="responses-absent"),
])
def test_request_keywords_become_attributes(op, kwargs, expected):
    assert op.request_attributes(None, kwargs, capture=False) == expected


@pytest.mark.parametrize("op, kwargs, expected", [
    pytest.param(runs_openai.ChatCompletions(), {"model": "m", "tools": []},
                 {"gen_ai.input.messages": "[]"}, id="chat-no-messages-no-tools"),
    pytest.param(runs_openai.ChatCompletions(), {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                 "tools": [WEATHER_TOOL]},
                 {"gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]',
                  "gen_ai.tool.definitions": json.dumps([WEATHER_TOOL], separators=(",", ":"))}, id="chat"),
    pytest.param(runs_openai.Responses(), {"model": "r", "instructions": ["not", "text"]},
                 {"gen_ai.input.messages": "[]"}, id="responses-no-input-odd-instructions"),
    pytest.param(runs_openai.Responses(), {"model": "r", "instructions": "x", "input": "hi"},
                 {"gen_ai.system_instructions": '[{"type":"text","content":"x"}]',
                  "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]'},
                 id="responses"),
    pytest.param(runs_openai.Embeddings(), {"model": "e"}, {"input.value": '{"input":null}'}, id="embeddings-no-input"),
])
def test_content_keywords_become_attributes_only_when_capturing(op, kwargs, expected):
    without = op.request_attributes(None, kwargs, capture=False)
    with_content = op.request_attributes(None, kwargs, capture=True)
    assert {k: v for k, v in with_content.items() if k not in without} == expected
    assert not set(expected) & set(without)


def test_the_shared_table_helpers_doctests():
    import doctest

    from otel_runs_exporter.instrumentation import _genai

    assert doctest.testmod(_genai).failed == 0
