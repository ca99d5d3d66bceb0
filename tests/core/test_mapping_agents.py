"""The agent frameworks' shapes, from the spans their real packages write (the producer matrix runs the
packages themselves): Strands' Converse blocks in both conventions, LlamaIndex's and smolagents' message
reprs, OpenInference anthropic's tool-use parts. And what each does with a value it cannot read."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider

from otel_runs_exporter._convert import ConvertOptions, span_ids, span_to_run
from otel_runs_exporter.mapping import SpanEvent, map_span

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
TOOL_USE = '[{"toolUse": {"toolUseId": "call_1", "name": "get_weather", "input": {"city": "Paris"}}}]'
TOOL_RESULT = '[{"toolResult": {"toolUseId": "call_1", "status": "success", "content": [{"text": "sunny"}]}}]'


def ev(name: str, **attributes) -> SpanEvent:
    return SpanEvent(name, attributes, 1)


STRANDS = {"gen_ai.system": "strands-agents", "gen_ai.request.model": "gpt-4o-mini"}


# --- Strands, default convention: Converse blocks in GenAI events ---------------------------------


def test_strands_chat_reads_its_blocks_as_messages_and_tool_calls():
    m = map_span({**STRANDS, "gen_ai.operation.name": "chat", "gen_ai.server.time_to_first_token": 911}, [
        ev("gen_ai.system.message", content='[{"text": "Be brief."}]'),
        ev("gen_ai.user.message", content='[{"text": "Weather in Paris?"}]'),
        ev("gen_ai.assistant.message", content=TOOL_USE),
        ev("gen_ai.tool.message", content=TOOL_RESULT),
        ev("gen_ai.choice", finish_reason="end_turn", message='[{"text": "Sunny."}]'),
    ])
    assert m.run_type == "llm"
    assert m.inputs == {"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
    ]}
    assert m.outputs == {"messages": [{"role": "assistant", "content": "Sunny."}], "finish_reason": "end_turn"}
    assert m.first_token_after_s == pytest.approx(0.911)
    # The framework is not the provider, and is kept as it came.
    assert "ls_provider" not in m.metadata and m.metadata["ls_model_name"] == "gpt-4o-mini"
    assert "gen_ai.system" not in m.consumed


def test_strands_tool_call_in_a_choice_is_a_tool_call():
    m = map_span({**STRANDS, "gen_ai.operation.name": "chat"}, [
        ev("gen_ai.user.message", content='[{"text": "Weather in Paris?"}]'),
        ev("gen_ai.choice", finish_reason="tool_use", message=TOOL_USE),
    ])
    assert m.outputs == {"messages": [{"role": "assistant", "content": None, "tool_calls": [CALL]}],
                         "finish_reason": "tool_use"}


def test_strands_agent_cycle_is_a_chain_ending_with_its_tool_results():
    m = map_span({"gen_ai.system": "strands-agents", "gen_ai.operation.name": "execute_event_loop_cycle"}, [
        ev("gen_ai.user.message", content='[{"text": "Weather in Paris?"}]'),
        ev("gen_ai.choice", message=TOOL_USE, **{"tool.result": TOOL_RESULT}),
    ])
    assert m.run_type == "chain"
    assert m.outputs == {"messages": [{"role": "assistant", "content": None, "tool_calls": [CALL]},
                                      {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}]}


def test_a_strands_cycle_without_a_choice_answered_nothing_itself():
    # Its assistant and tool message events are the conversation so far, not its outputs.
    m = map_span({"gen_ai.system": "strands-agents", "gen_ai.operation.name": "execute_event_loop_cycle"}, [
        ev("gen_ai.user.message", content='[{"text": "Weather in Paris?"}]'),
        ev("gen_ai.assistant.message", content=TOOL_USE),
        ev("gen_ai.tool.message", content=TOOL_RESULT),
    ])
    assert m.outputs is None and len(m.inputs["messages"]) == 3


def test_strands_tool_span_takes_the_call_in_and_the_result_out():
    m = map_span({"gen_ai.system": "strands-agents", "gen_ai.operation.name": "execute_tool",
                  "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "call_1"}, [
        ev("gen_ai.tool.message", role="tool", content='{"city": "Paris"}', id="call_1"),
        ev("gen_ai.choice", message='[{"text": "{\\"forecast\\": \\"sunny\\"}"}]', id="call_1"),
    ])
    assert (m.run_type, m.name) == ("tool", "get_weather")
    assert m.inputs == {"city": "Paris"} and m.outputs == {"forecast": "sunny"}


# --- Strands, latest convention: GenAI attributes in inference-details events --------------------


def test_strands_latest_tool_span_reads_the_arguments_not_the_repeated_conversation():
    m = map_span({"gen_ai.provider.name": "strands-agents", "gen_ai.operation.name": "execute_tool",
                  "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                  "gen_ai.tool.call.result": '[{"text": "{\\"forecast\\": \\"sunny\\"}"}]'}, [
        ev("gen_ai.client.inference.operation.details", **{"gen_ai.input.messages": json.dumps(
            [{"role": "tool", "parts": [{"type": "tool_call", "name": "get_weather", "id": "call_1",
                                         "arguments": {"city": "Paris"}}]}])}),
    ])
    assert m.inputs == {"city": "Paris"} and m.outputs == {"forecast": "sunny"}
    assert "ls_provider" not in m.metadata


def test_converse_blocks_in_a_genai_tool_response_read_as_their_text():
    history = [{"role": "user", "parts": [{"type": "tool_call_response", "id": "call_1",
                                           "response": [{"text": "sunny"}]}]}]
    m = map_span({"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(history)})
    assert m.inputs == {"messages": [{"role": "tool", "content": "sunny", "tool_call_id": "call_1"}]}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('[{"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "s"}}}, {"text": "ok"}]',
         [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "ok"}]),
        ('[{"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}}]',
         [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]),
        # A block this reader does not know stays as it came; text that only looks like blocks stays text.
        ('[{"video": {"format": "mp4"}}]', [{"video": {"format": "mp4"}}]),
        ('[{"text": "a", "extra": 1}]', '[{"text": "a", "extra": 1}]'),
        ('[{"text": "unterminated"', '[{"text": "unterminated"'),
        ("[not json]", "[not json]"),
    ],
)
def test_converse_blocks_other_than_text(content, expected):
    m = map_span({"gen_ai.operation.name": "chat"}, [ev("gen_ai.user.message", content=content)])
    assert m.inputs == {"messages": [{"role": "user", "content": expected}]}


def test_a_number_where_text_belongs_is_kept_as_it_came():
    m = map_span({"gen_ai.operation.name": "chat"}, [ev("gen_ai.user.message", content=42)])
    assert m.inputs == {"messages": [{"role": "user", "content": 42}]}


# --- LlamaIndex and smolagents: ChatMessage reprs -------------------------------------------------


def _repr(role: str, text: str) -> str:
    return (f"ChatMessage(role=<MessageRole.{role.upper()}: '{role}'>, additional_kwargs={{}}, "
            f"blocks=[TextBlock(block_type='text', text={text!r})])")


def test_llamaindex_message_reprs_read_for_their_role_and_text():
    value = {"messages": [_repr("system", "Be brief."), _repr("user", "Weather in 'Paris'?"),
                          "ChatMessage(role=<MessageRole.ASSISTANT: 'assistant'>, additional_kwargs={'tool_calls': "
                          "[ChoiceDeltaToolCall(index=0, id='call_1', function=ChoiceDeltaToolCallFunction("
                          "arguments='{\"city\":\"Paris\"}', name='get_weather'), type='function')]}, blocks=[])"],
             "tools": ["<FunctionTool object>"]}
    m = map_span({"openinference.span.kind": "LLM", "output.value": json.dumps(value),
                  "output.mime_type": "application/json"})
    assert m.outputs["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in 'Paris'?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
    ]
    assert m.malformed == []
    # ... and a chat history under another input name.
    history = map_span({"input.value": json.dumps({"chat_history": [_repr("user", "hi")], "user_msg": None}),
                        "input.mime_type": "application/json"})
    assert history.inputs == {"chat_history": [{"role": "user", "content": "hi"}], "user_msg": None}


def test_smolagents_message_reprs_keep_their_own_roles():
    text = ("ChatMessage(role=<MessageRole.TOOL_CALL: 'tool-call'>, content=[{'type': 'text', 'text': 'Calling'}], "
            "tool_calls=None, raw=None, token_usage=None)")
    m = map_span({"input.value": json.dumps({"messages": [text]}), "input.mime_type": "application/json"})
    assert m.inputs == {"messages": [{"role": "tool-call", "content": "Calling"}]}


@pytest.mark.parametrize(
    "text",
    [
        "ChatMessage(role=<MessageRole.USER: 'user'>, blocks=[ImageBlock(url='http://x')])",  # a block it cannot show
        "ChatMessage(role=<MessageRole.USER: 'user'>, blocks=[TextBlock(text=__import__('os').getcwd())])",
        "ChatMessage(role=<MessageRole.USER: 'user'>, blocks=[TextBlock(block_type='text', text='cut off",
        "ChatMessage(role=None, content='x')",
        "ChatMessage(" + "[" * 5000 + "]" * 5000 + ")",
    ],
)
def test_a_repr_that_does_not_parse_exactly_is_text_with_no_role_and_is_reported(text, caplog):
    m = map_span({"openinference.span.kind": "LLM", "output.value": json.dumps({"messages": [text]}),
                  "output.mime_type": "application/json"})
    assert m.outputs["messages"] == [{"content": text}]
    assert m.malformed == [("output.value", "a LlamaIndex ChatMessage repr (role and content)")]
    # Through the converter: the run keeps the text, and one line names the attribute.
    span = TracerProvider().get_tracer("t").start_span(
        "s", attributes={"output.value": json.dumps({"messages": [text]}), "output.mime_type": "application/json"})
    span.end()
    malformed: list[str] = []
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        run = span_to_run(span, span_ids(span, None), ConvertOptions(), malformed=malformed)
    assert run["outputs"]["messages"] == [{"content": text}] and malformed == ["output.value"]


# --- OpenInference anthropic: a tool-use part beside its tool call -------------------------------


def test_openinference_tool_use_parts_are_the_tool_call_once():
    prefix = "llm.output_messages.0.message."
    m = map_span({
        "openinference.span.kind": "LLM", "llm.provider": "anthropic", "llm.system": "anthropic",
        "llm.model_name": "claude-fake", "llm.response.model_name": "claude-fake",
        prefix + "role": "assistant",
        prefix + "contents.0.message_content.type": "text", prefix + "contents.0.message_content.text": "Checking.",
        prefix + "tool_calls.0.tool_call.id": "call_1",
        prefix + "tool_calls.0.tool_call.function.name": "get_weather",
        prefix + "tool_calls.0.tool_call.function.arguments": '{"city":"Paris"}',
        prefix + "contents.1.message_content.type": "tool_use",
        prefix + "contents.1.tool_call.id": "call_1",
        prefix + "contents.1.tool_call.function.name": "get_weather",
        prefix + "contents.1.tool_call.function.arguments": '{"city":"Paris"}',
    })
    assert m.outputs["messages"] == [{"role": "assistant", "content": "Checking.", "tool_calls": [CALL]}]
    # One fact under two names is said once: neither repeats in metadata.
    assert {"llm.system", "llm.provider", "llm.model_name", "llm.response.model_name"} <= m.consumed


def test_two_names_that_disagree_both_stay():
    m = map_span({"llm.provider": "azure", "llm.system": "openai", "openinference.span.kind": "LLM"})
    assert m.metadata["ls_provider"] == "azure" and "llm.system" not in m.consumed


@pytest.mark.parametrize(
    ("value", "inputs"),
    [
        ({"args": [], "sanitize_inputs_outputs": True, "kwargs": {"city": "Paris"}}, {"city": "Paris"}),  # smolagents
        ({"kwargs": {"city": "Paris"}}, {"city": "Paris"}),  # LlamaIndex's FunctionTool
        ({"args": ["Paris"], "kwargs": {}}, {"args": ["Paris"], "kwargs": {}}),  # positional: kept as the call was
        ({"kwargs": {"city": "Paris"}, "other": 1}, {"kwargs": {"city": "Paris"}, "other": 1}),
    ],
)
def test_a_tool_calls_bound_arguments_are_its_keyword_arguments(value, inputs):
    m = map_span({"openinference.span.kind": "TOOL", "tool.name": "get_weather", "input.value": json.dumps(value),
                  "input.mime_type": "application/json"})
    assert m.inputs == inputs
    # Only a tool's: a chain's inputs stay as they came.
    chain = map_span({"openinference.span.kind": "CHAIN", "input.value": json.dumps(value),
                      "input.mime_type": "application/json"})
    assert chain.inputs == value


def test_a_llamaindex_tool_output_is_what_the_tool_returned():
    tool_output = {"blocks": [{"text": "{'forecast': 'sunny'}"}], "tool_name": "get_weather",
                   "raw_input": {"args": [], "kwargs": {"city": "Paris"}}, "raw_output": {"forecast": "sunny"},
                   "is_error": False}
    m = map_span({"openinference.span.kind": "TOOL", "tool.name": "get_weather",
                  "output.value": json.dumps(tool_output), "output.mime_type": "application/json"})
    assert m.outputs == {"forecast": "sunny"}
    text = map_span({"openinference.span.kind": "TOOL", "output.mime_type": "application/json",
                     "output.value": json.dumps({**tool_output, "raw_output": "sunny"})})
    assert text.outputs == {"output": "sunny"}
