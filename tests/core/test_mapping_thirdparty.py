"""Spans made by third-party instrumentation nobody here wrote, through ``map_span``.

The real ``openai`` client talks to the shared loopback fake (``otel_runs_exporter.testing.fake_llm``),
instrumented by:

* ``openinference-instrumentation-openai``: flattened ``llm.input_messages.N.*`` /
  ``llm.output_messages.N.*``, ``llm.token_count.*`` (with cache_read and reasoning details),
  ``llm.invocation_parameters``, ``input.value``/``output.value`` (the raw request/response) and,
  when streaming, a "First Token Stream Event" span event. Content is on by default.
* ``opentelemetry-instrumentation-openai-v2``: with the installed ``opentelemetry-util-genai``
  it always takes its "latest experimental" path (``is_experimental_mode()`` is hard-wired to
  True there): ``gen_ai.input.messages``/``gen_ai.output.messages`` as JSON strings of GenAI
  ``parts`` messages, ``gen_ai.provider.name``, ``gen_ai.usage.input_tokens``/``output_tokens``
  only (no cached/reasoning counts even when the API returns them), no first-token marker.
  Content lands on the span only with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` set to
  ``span_only``/``span_and_event``; ``true`` (the documented legacy value) means no content on
  this path, and ``event_only`` sends it to the logs API only, as one
  ``gen_ai.client.inference.operation.details`` record per call, which a span exporter never
  sees: ``configure()``'s log record processor joins it to the run (``_genai_events``; tested
  in ``test_genai_events.py`` and the producer matrix, ``tests/producers/test_openai_v2.py``).
  Embedding spans never carry the input texts. Its legacy v1.30 path (``gen_ai.system``, content
  as ``gen_ai.*.message``/``gen_ai.choice`` log events) is exercised by wrapping its patch
  function directly, and the log events are read back as span events would carry them.

openai-v2 2.4b0 imports as is with the pinned util-genai 1.1b0 and ``httpx`` beside the
``httpx2`` that openai>=3 ships. With util-genai 1.3b0 (which renamed ``instruments`` and
``TelemetryHandler.start_inference``) or without ``httpx`` it does not: the ``openai_v2`` fixture
bridges exactly those three names, only when they are missing and only for the test; every
attribute on the spans is still written by the third-party code.

The older traceloop/OpenLLMetry shapes (flattened ``gen_ai.prompt.N.*``) are hand-built with a real
tracer; the installed OpenLLMetry packages run for real in ``tests/producers``.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from typing import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_runs_exporter.mapping import Mapped, SpanEvent, map_span
from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

openai = pytest.importorskip("openai")

MODEL = "gpt-4o-mini"
EMBED_MODEL = "text-embedding-3-small"
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def mapped(span: ReadableSpan) -> Mapped:
    """Exactly what the converter does with a finished span."""
    events = [SpanEvent(e.name, dict(e.attributes or {}), e.timestamp) for e in span.events]
    return map_span(dict(span.attributes or {}), events)


@pytest.fixture(scope="module")
def api() -> Iterator[FakeLLMAPI]:
    with FakeLLMAPI() as fake:
        yield fake


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tp = TracerProvider()  # never the global one
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp
    tp.shutdown()


@pytest.fixture
def client(api: FakeLLMAPI):
    return openai.OpenAI(base_url=api.openai_base_url, api_key="x", max_retries=0)


def only_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    spans = exporter.get_finished_spans()
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def expected_usage(api: FakeLLMAPI, *, details: bool, tool_call: bool = False) -> dict:
    out = api.output_tokens(tool_call=tool_call)
    usage = {"input_tokens": api.input_tokens, "output_tokens": out, "total_tokens": api.input_tokens + out}
    if details:
        # The fake reports zero audio tokens, and OpenInference passes zeros on.
        usage["input_token_details"] = {"cache_read": api.cached_tokens, "audio": 0}
        usage["output_token_details"] = {"reasoning": api.reasoning_tokens, "audio": 0}
    return usage


def chat_tool_round_trip(client) -> None:
    """Ask with tools (the fake answers with a call), then send the tool result back."""
    first = client.chat.completions.create(model=MODEL, messages=[MESSAGES[1]], tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    client.chat.completions.create(
        model=MODEL,
        messages=[
            MESSAGES[1],
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
        tools=TOOLS,
    )


EXPECTED_CALL = {
    "id": "call_fake_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": json.dumps({"city": "fake-city"})},
}


def assert_tool_round_trip(first: Mapped, second: Mapped, reply: str) -> None:
    assert first.run_type == "llm"
    (assistant,) = first.outputs["messages"]
    assert assistant["role"] == "assistant"
    assert [
        {**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
        for c in assistant["tool_calls"]
    ] == [{**EXPECTED_CALL, "function": {"name": "get_weather", "arguments": {"city": "fake-city"}}}]
    sent = second.inputs["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == "call_fake_1"
    assert sent[2] == {"role": "tool", "content": "sunny", "tool_call_id": "call_fake_1"}
    assert second.outputs["messages"] == [{"role": "assistant", "content": reply}]


def assert_chat_run(m, api, *, details: bool, requested: bool = True) -> None:
    """A chat call of MESSAGES read as the llm run it was: the messages in, the assistant's reply, its
    finish reason and usage out; with ``requested``, the model asked for and the one that answered."""
    assert m.run_type == "llm"
    assert m.inputs == {"messages": MESSAGES}
    assert m.outputs == {
        "messages": [{"role": "assistant", "content": api.reply_text}],
        "finish_reason": "stop",
        "usage_metadata": expected_usage(api, details=details),
    }
    if requested:
        assert m.metadata["ls_model_name"] == MODEL
        assert m.metadata["response_model"] == f"{MODEL}-fake-0001"  # the response's, beside the requested one
        assert m.metadata["ls_provider"] == "openai"
        assert m.invocation_params == {"model": MODEL, "temperature": 0.2, "max_tokens": 50}


# ---------------------------------------------------------------------------
# openinference-instrumentation-openai
# ---------------------------------------------------------------------------


@pytest.fixture
def openinference(provider: TracerProvider) -> Iterator[None]:
    mod = pytest.importorskip("openinference.instrumentation.openai")
    instrumentor = mod.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


@pytest.mark.usefixtures("openinference")
def test_openinference_chat(api, client, exporter):
    client.chat.completions.create(model=MODEL, messages=MESSAGES, temperature=0.2, max_tokens=50)
    m = mapped(only_span(exporter))
    # llm.model_name is the response's model; the requested one is in llm.invocation_parameters.
    assert_chat_run(m, api, details=True)
    assert "input.value" in m.consumed and "output.value" in m.consumed


@pytest.mark.usefixtures("openinference")
def test_openinference_chat_streaming(api, client, exporter):
    stream = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == api.reply_text
    span = only_span(exporter)
    m = mapped(span)
    assert m.run_type == "llm"
    assert m.inputs == {"messages": MESSAGES}
    assert m.outputs["messages"] == [{"role": "assistant", "content": api.reply_text}]
    assert m.outputs["usage_metadata"] == expected_usage(api, details=True)
    assert m.first_token_time_ns is not None and span.start_time <= m.first_token_time_ns <= span.end_time
    assert m.consumed_events == {i for i, e in enumerate(span.events) if e.name == "First Token Stream Event"}


@pytest.mark.usefixtures("openinference")
def test_openinference_embeddings(api, client, exporter):
    client.embeddings.create(model=EMBED_MODEL, input="hello world")
    m = mapped(only_span(exporter))
    assert m.run_type == "embedding"
    assert m.inputs["input"] == "hello world"  # input.value: the raw request
    assert m.metadata["ls_model_name"] == EMBED_MODEL  # embedding.invocation_parameters: what was asked for
    assert m.metadata["response_model"] == f"{EMBED_MODEL}-fake-0001"  # embedding.model_name: what answered
    assert m.outputs["usage_metadata"]["input_tokens"] > 0
    # The per-text vectors are consumed, not copied into metadata.
    assert not [k for k in only_span(exporter).attributes if k.startswith("embedding.embeddings.") and k not in m.consumed]


@pytest.mark.usefixtures("openinference")
def test_openinference_tool_calls(api, client, exporter):
    chat_tool_round_trip(client)
    first, second = (mapped(s) for s in exporter.get_finished_spans())
    assert_tool_round_trip(first, second, api.reply_text)
    assert first.outputs["usage_metadata"]["output_tokens"] == api.tool_call_tokens


# ---------------------------------------------------------------------------
# opentelemetry-instrumentation-openai-v2
# ---------------------------------------------------------------------------


def _import_openai_v2(monkeypatch: pytest.MonkeyPatch):
    """Import the instrumentor, bridging the three names the installed versions lack.

    Modules imported through the bridge are forgotten after the test, so no other test finds
    an openai-v2 that only imports with the bridge in place.
    """
    before = set(sys.modules)
    try:
        import httpx  # noqa: F401
    except ImportError:
        httpx2 = pytest.importorskip("httpx2")
        monkeypatch.setitem(sys.modules, "httpx", httpx2)  # only while importing: URL is bound then
    try:
        importlib.import_module("opentelemetry.util.genai.instruments")
    except ImportError:
        shim = types.ModuleType("opentelemetry.util.genai.instruments")
        shim.create_duration_histogram = lambda meter: meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s"
        )
        shim.create_token_histogram = lambda meter: meter.create_histogram("gen_ai.client.token.usage", unit="{token}")
        monkeypatch.setitem(sys.modules, shim.__name__, shim)
    mod = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
    for name in [n for n in sys.modules if n not in before and n.startswith("opentelemetry.instrumentation.openai_v2")]:
        monkeypatch.setitem(sys.modules, name, sys.modules.pop(name))  # absent before: removed at teardown
    from opentelemetry.util.genai.handler import TelemetryHandler

    if not hasattr(TelemetryHandler, "start_inference"):
        monkeypatch.setattr(TelemetryHandler, "start_inference", TelemetryHandler.inference, raising=False)
    return mod


@pytest.fixture
def openai_v2(provider: TracerProvider, monkeypatch: pytest.MonkeyPatch, request) -> Iterator[None]:
    capture = getattr(request, "param", "span_only")
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", capture)
    mod = _import_openai_v2(monkeypatch)
    instrumentor = mod.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


@pytest.mark.parametrize("openai_v2", ["span_only", "span_and_event"], indirect=True)
@pytest.mark.usefixtures("openai_v2")
def test_openai_v2_chat(api, client, exporter):
    client.chat.completions.create(model=MODEL, messages=MESSAGES, temperature=0.2, max_tokens=50)
    span = only_span(exporter)
    assert isinstance(span.attributes["gen_ai.input.messages"], str)  # JSON of GenAI "parts" messages
    assert_chat_run(mapped(span), api, details=False)


@pytest.mark.usefixtures("openai_v2")
def test_openai_v2_chat_streaming(api, client, exporter):
    stream = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == api.reply_text
    m = mapped(only_span(exporter))
    assert_chat_run(m, api, details=False, requested=False)
    assert m.first_token_time_ns is None  # openai-v2 marks no first token on the span


@pytest.mark.usefixtures("openai_v2")
def test_openai_v2_embeddings(api, client, exporter):
    client.embeddings.create(model=EMBED_MODEL, input="hello world")
    m = mapped(only_span(exporter))
    assert m.run_type == "embedding"
    assert m.inputs is None  # openai-v2 never records embedding inputs
    assert m.metadata == {
        "ls_model_name": EMBED_MODEL, "response_model": f"{EMBED_MODEL}-fake-0001", "ls_provider": "openai"
    }
    assert m.outputs["usage_metadata"]["input_tokens"] > 0


@pytest.mark.usefixtures("openai_v2")
def test_openai_v2_tool_calls(api, client, exporter):
    chat_tool_round_trip(client)
    first, second = (mapped(s) for s in exporter.get_finished_spans())
    assert_tool_round_trip(first, second, api.reply_text)


@pytest.mark.parametrize("openai_v2", ["event_only", "true"], indirect=True)
@pytest.mark.usefixtures("openai_v2")
def test_openai_v2_without_span_content_is_still_an_llm_run(api, client, exporter):
    client.chat.completions.create(model=MODEL, messages=MESSAGES)
    m = mapped(only_span(exporter))
    assert (m.run_type, m.inputs) == ("llm", None)
    assert m.outputs == {"usage_metadata": expected_usage(api, details=False)}
    assert m.metadata["ls_model_name"] == MODEL


def test_openai_v2_legacy_v1_30_shape(api, client, exporter, provider, monkeypatch):
    """The older path: ``gen_ai.system`` on the span, content as log events.

    The installed util-genai leaves no switch to reach it, so its patch function is wrapped
    directly; the log events it emits are then handed to ``map_span`` as span events carrying
    their body, as a logs-to-span-events bridge would."""
    _import_openai_v2(monkeypatch)
    from opentelemetry.instrumentation.openai_v2 import instruments, patch
    from opentelemetry.instrumentation.utils import unwrap
    from opentelemetry.metrics import get_meter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from wrapt import wrap_function_wrapper

    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    wrapper = patch.chat_completions_create_v_old(
        provider.get_tracer("legacy"),
        logger_provider.get_logger("legacy"),
        instruments.Instruments(get_meter("legacy")),
        True,
    )
    wrap_function_wrapper("openai.resources.chat.completions", "Completions.create", wrapper)
    try:
        client.chat.completions.create(model=MODEL, messages=MESSAGES)
    finally:
        unwrap(openai.resources.chat.completions.Completions, "create")

    span = only_span(exporter)
    assert "gen_ai.system" in span.attributes and "gen_ai.input.messages" not in span.attributes
    m = mapped(span)
    assert (m.run_type, m.inputs, m.metadata["ls_provider"]) == ("llm", None, "openai")
    assert m.outputs == {"usage_metadata": expected_usage(api, details=False)}

    records = [r.log_record for r in logs.get_finished_logs()]
    assert [r.event_name for r in records] == ["gen_ai.system.message", "gen_ai.user.message", "gen_ai.choice"]
    bridged = [
        SpanEvent(r.event_name, {**(r.attributes or {}), "body": json.dumps(r.body)}, r.timestamp or 0)
        for r in records
    ]
    m = map_span(dict(span.attributes), bridged)
    assert m.inputs == {"messages": MESSAGES}
    assert m.outputs["messages"] == [{"role": "assistant", "content": api.reply_text}]
    assert m.consumed_events == {0, 1, 2}


# ---------------------------------------------------------------------------
# traceloop / OpenLLMetry shapes, hand-built with a real tracer
# ---------------------------------------------------------------------------


def test_traceloop_workflow_task_and_chat(provider, exporter):
    tracer = provider.get_tracer("traceloop-shapes")
    with tracer.start_as_current_span("joke_workflow.workflow") as wf:
        wf.set_attribute("traceloop.span.kind", "workflow")
        wf.set_attribute("traceloop.entity.name", "joke_workflow")
        wf.set_attribute("traceloop.entity.input", json.dumps({"args": ["cats"], "kwargs": {}}))
        wf.set_attribute("traceloop.association.properties.user_id", "u1")
        with tracer.start_as_current_span("lookup.tool") as tool:
            tool.set_attribute("traceloop.span.kind", "tool")
            tool.set_attribute("traceloop.entity.input", json.dumps({"args": [], "kwargs": {"q": "cats"}}))
            tool.set_attribute("traceloop.entity.output", json.dumps("cats are great"))
        with tracer.start_as_current_span("openai.chat") as llm:
            llm.set_attribute("llm.request.type", "chat")
            llm.set_attribute("gen_ai.system", "openai")
            llm.set_attribute("gen_ai.request.model", MODEL)
            llm.set_attribute("gen_ai.response.model", f"{MODEL}-2024")
            llm.set_attribute("gen_ai.request.temperature", 0.7)
            llm.set_attribute("llm.is_streaming", False)
            llm.set_attribute("gen_ai.prompt.0.role", "system")
            llm.set_attribute("gen_ai.prompt.0.content", "Be brief.")
            llm.set_attribute("gen_ai.prompt.1.role", "user")
            llm.set_attribute("gen_ai.prompt.1.content", "Say hello.")
            llm.set_attribute("gen_ai.completion.0.role", "assistant")
            llm.set_attribute("gen_ai.completion.0.finish_reason", "tool_calls")
            llm.set_attribute("gen_ai.completion.0.tool_calls.0.id", "call_1")
            llm.set_attribute("gen_ai.completion.0.tool_calls.0.name", "get_weather")
            llm.set_attribute("gen_ai.completion.0.tool_calls.0.arguments", '{"city": "Paris"}')
            llm.set_attribute("gen_ai.usage.prompt_tokens", 12)
            llm.set_attribute("gen_ai.usage.completion_tokens", 5)
            llm.set_attribute("llm.usage.total_tokens", 17)
            llm.set_attribute("gen_ai.usage.cache_read_input_tokens", 4)
        wf.set_attribute("traceloop.entity.output", json.dumps({"joke": "..."}))

    by_name = {s.name: mapped(s) for s in exporter.get_finished_spans()}
    chat = by_name["openai.chat"]
    assert chat.run_type == "llm"
    assert chat.inputs == {"messages": MESSAGES}
    assert chat.outputs == {
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
                ],
            }
        ],
        "finish_reason": "tool_calls",
        "usage_metadata": {
            "input_tokens": 12,
            "output_tokens": 5,
            "total_tokens": 17,
            "input_token_details": {"cache_read": 4},
        },
    }
    assert chat.metadata == {"ls_model_name": MODEL, "response_model": "gpt-4o-mini-2024", "ls_provider": "openai"}
    assert chat.invocation_params == {"model": MODEL, "temperature": 0.7}

    workflow = by_name["joke_workflow.workflow"]
    assert workflow.run_type == "chain"
    assert workflow.inputs == {"args": ["cats"], "kwargs": {}}
    assert workflow.outputs == {"joke": "..."}
    assert workflow.metadata == {"user_id": "u1"}

    tool = by_name["lookup.tool"]
    assert (tool.run_type, tool.inputs, tool.outputs) == ("tool", {"args": [], "kwargs": {"q": "cats"}},
                                                         {"output": "cats are great"})


def test_older_genai_content_events(provider, exporter):
    """GenAI conventions before 1.28 put the whole prompt/completion in span events."""
    tracer = provider.get_tracer("older-genai")
    with tracer.start_as_current_span("chat gpt") as span:
        span.set_attribute("gen_ai.system", "openai")
        span.set_attribute("gen_ai.request.model", MODEL)
        span.set_attribute("gen_ai.usage.input_tokens", 3)
        span.set_attribute("gen_ai.usage.output_tokens", 2)
        span.add_event("gen_ai.content.prompt", {"gen_ai.prompt": json.dumps(MESSAGES)})
        span.add_event("gen_ai.content.completion",
                       {"gen_ai.completion": json.dumps([{"role": "assistant", "content": "Hello."}])})
        span.add_event("exception", {"exception.message": "not content"})
    s = only_span(exporter)
    m = mapped(s)
    assert m.run_type == "llm"
    assert m.inputs == {"messages": MESSAGES}
    assert m.outputs == {
        "messages": [{"role": "assistant", "content": "Hello."}],
        "usage_metadata": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
    }
    assert m.consumed_events == {0, 1}


# --- shapes two fidelity audits met with the real producers (each failed before) --------------


def test_openinference_image_parts_become_the_image_block_the_chat_view_shows():
    m = map_span({
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "What is this?",
        "llm.input_messages.0.message.contents.1.message_content.type": "image",
        "llm.input_messages.0.message.contents.1.message_content.image.image.url": "data:image/png;base64,iVBORw0KGgo=",
    })
    # Before: {"type": "image", "image": {"image": {"url": ...}}}, which the service cannot show.
    assert m.inputs == {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]}]}


def test_genai_uri_and_blob_image_parts_become_image_blocks():
    parts = [{"type": "text", "content": "what?"}, {"type": "uri", "modality": "image", "uri": "https://x/img.png"},
             {"type": "blob", "modality": "image", "mime_type": "image/jpeg", "content": "AAAA"}]
    m = map_span({"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps([{"role": "user", "parts": parts}])})
    assert m.inputs["messages"][0]["content"][1:] == [
        {"type": "image_url", "image_url": {"url": "https://x/img.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
    ]


def test_a_tool_result_of_content_blocks_reads_as_its_text_not_json():
    """Anthropic's tool_result content as a list of blocks: before, the tool message held their JSON text."""
    messages = [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "t1", "response": [{"type": "text", "text": "sunny"}]}]},
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": "t2", "response": {"temp": 21}}]}]
    m = map_span({"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(messages)})
    assert m.inputs == {"messages": [{"role": "tool", "content": "sunny", "tool_call_id": "t1"},
                                     {"role": "tool", "content": '{"temp":21}', "tool_call_id": "t2"}]}


def test_stop_sequences_written_as_json_text_reach_invocation_params_as_a_list():
    """Logfire writes gen_ai.request.stop_sequences as JSON text: before, stop was that text."""
    m = map_span({"gen_ai.operation.name": "chat", "gen_ai.request.stop_sequences": '["END", "STOP"]'})
    assert m.invocation_params["stop"] == ["END", "STOP"]


def test_a_failed_calls_role_only_reply_is_not_an_empty_answer():
    """OpenInference writes llm.output_messages.0.message.role for a call that failed: before, an empty
    assistant message was shown beside the error."""
    m = map_span({"openinference.span.kind": "LLM", "llm.output_messages.0.message.role": "assistant"})
    assert not (m.outputs or {}).get("messages")


def test_a_conversation_under_another_input_key_reads_as_messages():
    """A MessagesPlaceholder's "history", serialized by message_to_dict: before, kept as {"type", "data"} wrappers."""
    value = {"persona": "terse", "q": "how?", "history": [
        {"type": "human", "data": {"content": "hi", "additional_kwargs": {}, "type": "human"}},
        {"type": "ai", "data": {"content": "hello", "additional_kwargs": {}, "type": "ai", "tool_calls": []}},
    ], "rows": [{"type": "row", "value": 1}]}  # other lists with a "type" stay as they are
    m = map_span({"openinference.span.kind": "CHAIN", "input.value": json.dumps(value), "input.mime_type": "application/json"})
    assert m.inputs == {"persona": "terse", "q": "how?", "rows": [{"type": "row", "value": 1}],
                        "history": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


def test_a_retrievers_text_input_is_its_query_and_its_documents_keep_their_ids():
    """The SDK records {"query": ...} and each document's id; the flattened documents carry no id."""
    documents = {"documents": [{"id": "doc-1", "metadata": {}, "page_content": "Paris is sunny", "type": "Document"}]}
    m = map_span({"openinference.span.kind": "RETRIEVER", "input.value": "weather in Paris",
                  "output.value": json.dumps(documents), "output.mime_type": "application/json",
                  "retrieval.documents.0.document.content": "Paris is sunny"})
    assert m.inputs == {"query": "weather in Paris"}
    assert [d.get("id") for d in m.outputs["documents"]] == ["doc-1"]
