"""Pure tests of the attribute-mapping tables in ``mapping/``: one test (or
parametrized case) per table row, per convention shape."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from otel_runs_exporter.mapping import Mapped, SpanEvent, map_span, reads_nothing
from otel_runs_exporter.mapping._dispatch import _map_span, read_keys
from otel_runs_exporter.mapping._plan import every_row

USER_HI = {"role": "user", "content": "hi"}
ASSISTANT_HELLO = {"role": "assistant", "content": "Hello"}


def ev(name: str, time_ns: int = 1, **attributes) -> SpanEvent:
    return SpanEvent(name, attributes, time_ns)


# ---------------------------------------------------------------------------
# run_type table, in precedence order
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ({"langsmith.span.kind": "LLM"}, "llm"),
        ({"langsmith.span.kind": "retriever"}, "retriever"),
        ({"langsmith.span.kind": "parser"}, "parser"),
        ({"openinference.span.kind": "LLM"}, "llm"),
        ({"openinference.span.kind": "EMBEDDING"}, "embedding"),
        ({"openinference.span.kind": "RETRIEVER"}, "retriever"),
        ({"openinference.span.kind": "RERANKER"}, "retriever"),
        ({"openinference.span.kind": "TOOL"}, "tool"),
        ({"openinference.span.kind": "PROMPT"}, "prompt"),
        ({"openinference.span.kind": "AGENT"}, "chain"),
        ({"openinference.span.kind": "CHAIN"}, "chain"),
        ({"openinference.span.kind": "GUARDRAIL"}, "chain"),
        ({"gen_ai.operation.name": "chat"}, "llm"),
        ({"gen_ai.operation.name": "text_completion"}, "llm"),
        ({"gen_ai.operation.name": "generate_content"}, "llm"),
        ({"gen_ai.operation.name": "embeddings"}, "embedding"),
        ({"gen_ai.operation.name": "retrieval"}, "retriever"),
        ({"gen_ai.operation.name": "execute_tool"}, "tool"),
        ({"gen_ai.operation.name": "invoke_agent"}, "chain"),
        ({"gen_ai.operation.name": "create_agent"}, "chain"),
        ({"gen_ai.operation.name": "invoke_workflow"}, "chain"),
        ({"llm.request.type": "chat"}, "llm"),
        ({"llm.request.type": "completion"}, "llm"),
        ({"llm.request.type": "embedding"}, "embedding"),
        ({"llm.request.type": "rerank"}, "retriever"),
        ({"traceloop.span.kind": "tool"}, "tool"),
        ({"traceloop.span.kind": "workflow"}, "chain"),
        ({"traceloop.span.kind": "task"}, "chain"),
        ({"gen_ai.request.model": "m"}, "llm"),
        ({"gen_ai.provider.name": "openai"}, "llm"),
        ({"gen_ai.system": "openai"}, "llm"),
        ({"llm.model_name": "m"}, "llm"),
        ({}, "chain"),
        ({"some.other": 1}, "chain"),
    ],
)
def test_run_type_rows(attributes, expected):
    assert map_span(attributes).run_type == expected


def test_run_type_first_match_wins_in_table_order():
    attrs = {
        "langsmith.span.kind": "tool",
        "openinference.span.kind": "LLM",
        "gen_ai.operation.name": "embeddings",
        "gen_ai.request.model": "m",
    }
    assert map_span(attrs).run_type == "tool"
    del attrs["langsmith.span.kind"]
    assert map_span(attrs).run_type == "llm"
    del attrs["openinference.span.kind"]
    assert map_span(attrs).run_type == "embedding"
    assert map_span({"llm.request.type": "embedding", "traceloop.span.kind": "tool"}).run_type == "embedding"


def test_unknown_values_fall_through_to_the_next_rule():
    # An unknown langsmith kind does not decide; the model rule does.
    assert map_span({"langsmith.span.kind": "bogus", "gen_ai.request.model": "m"}).run_type == "llm"
    assert map_span({"llm.request.type": "unknown"}).run_type == "chain"
    # ... and an unknown GenAI operation falls through to the other kinds and the presence rules.
    assert map_span({"gen_ai.operation.name": "plan", "traceloop.span.kind": "tool"}).run_type == "tool"
    assert map_span({"gen_ai.operation.name": "plan", "gen_ai.tool.name": "f"}).run_type == "tool"


@pytest.mark.parametrize(
    ("operation", "run_type"),
    [("chat", "llm"), ("text_completion", "llm"), ("generate_content", "llm"), ("completion", "llm"),
     ("embeddings", "embedding"), ("embedding", "embedding"), ("CHAT", "llm"),
     # Strands' agent cycle, and any operation the conventions do not list: not a model call
     ("execute_event_loop_cycle", "chain"), ("invoke_agent", "chain"), ("orchestrate", "chain")],
)
def test_the_operation_name_says_whether_a_span_is_a_model_call(operation, run_type):
    # Whatever provider, system or model it names: only a model operation makes an llm run.
    attrs = {"gen_ai.operation.name": operation, "gen_ai.system": "openai", "gen_ai.provider.name": "openai",
             "gen_ai.request.model": "gpt-4o-mini"}
    assert map_span(attrs).run_type == run_type


def test_without_an_operation_name_a_model_or_provider_makes_an_llm_run_as_before():
    assert map_span({"gen_ai.system": "openai"}).run_type == "llm"
    assert map_span({"llm.model_name": "m"}).run_type == "llm"
    assert map_span({"openinference.span.kind": "LLM", "gen_ai.operation.name": "plan"}).run_type == "llm"


def test_a_framework_named_as_the_system_is_not_the_provider_nor_a_model_call():
    # Strands writes its own name as gen_ai.system on every span, whatever model it drives.
    framework = map_span({"gen_ai.system": "strands-agents", "gen_ai.request.model": "gpt-4o-mini",
                          "gen_ai.operation.name": "chat"})
    assert framework.run_type == "llm" and "ls_provider" not in framework.metadata
    assert "gen_ai.system" not in framework.consumed  # kept in metadata, as it came
    assert map_span({"gen_ai.system": "strands-agents"}).run_type == "chain"
    # A real provider beside it is the provider, whichever key it is under.
    named = map_span({"gen_ai.provider.name": "strands-agents", "gen_ai.system": "openai"})
    assert named.metadata["ls_provider"] == "openai"


def test_deciding_kind_attribute_is_consumed():
    m = map_span({"gen_ai.operation.name": "chat", "openinference.span.kind": "LLM"})
    assert "openinference.span.kind" in m.consumed


# ---------------------------------------------------------------------------
# inputs/outputs: GenAI current shape
# ---------------------------------------------------------------------------

GENAI_IN = [
    {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
]
GENAI_OUT = [
    {"role": "assistant", "parts": [{"type": "text", "content": "Hello"}], "finish_reason": "stop"},
]


@pytest.mark.parametrize("encode", [json.dumps, lambda v: v, lambda v: tuple(json.dumps(m) for m in v)],
                         ids=["json-string", "structured", "tuple-of-json"])
def test_genai_input_output_messages(encode):
    m = map_span({"gen_ai.input.messages": encode(GENAI_IN), "gen_ai.output.messages": encode(GENAI_OUT)})
    assert m.inputs == {"messages": [USER_HI]}
    # An output message's finish reason is the run's, as a gen_ai.choice event's is.
    assert m.outputs == {"messages": [ASSISTANT_HELLO], "finish_reason": "stop"}
    assert {"gen_ai.input.messages", "gen_ai.output.messages"} <= m.consumed


def test_inference_details_event_reads_as_the_span_attributes():
    """openai-v2's ``event_only`` record: the span's attributes, messages as objects; the span's own win."""
    details = SpanEvent(
        "gen_ai.client.inference.operation.details",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "from-the-event",
            "gen_ai.input.messages": tuple(GENAI_IN),  # an extended log attribute: a tuple of objects
            "gen_ai.output.messages": tuple(GENAI_OUT),
            "gen_ai.usage.input_tokens": 3,
        },
        5,
    )
    m = map_span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}, [details])
    assert (m.run_type, m.metadata["ls_model_name"]) == ("llm", "m")
    assert m.inputs == {"messages": [USER_HI]}
    assert m.outputs == {
        "messages": [ASSISTANT_HELLO],
        "finish_reason": "stop",
        "usage_metadata": {"input_tokens": 3, "output_tokens": 0, "total_tokens": 3},
    }
    assert m.consumed_events == {0}  # not repeated among the run's events
    # The same content on the span (span_and_event) is read once, from the span.
    both = map_span({"gen_ai.input.messages": json.dumps(GENAI_IN)}, [details])
    assert both.inputs == {"messages": [USER_HI]}


@pytest.mark.parametrize(
    "instructions",
    [json.dumps([{"type": "text", "content": "be brief"}]), [{"type": "text", "content": "be brief"}], "be brief"],
    ids=["json-parts", "structured-parts", "plain-string"],
)
def test_genai_system_instructions_become_the_first_message(instructions):
    m = map_span({"gen_ai.input.messages": json.dumps(GENAI_IN), "gen_ai.system_instructions": instructions})
    assert m.inputs == {"messages": [{"role": "system", "content": "be brief"}, USER_HI]}
    assert "gen_ai.system_instructions" in m.consumed


def test_genai_system_instructions_alone_are_inputs():
    m = map_span({"gen_ai.system_instructions": json.dumps([{"type": "text", "content": "s"}])})
    assert m.inputs == {"messages": [{"role": "system", "content": "s"}]}


def test_genai_tool_calls_and_tool_results():
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "weather?"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "weather", "arguments": {"city": "Paris"}}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "sunny"}]},
    ]
    m = map_span({"gen_ai.input.messages": json.dumps(messages)})
    assert m.inputs == {
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}}
                ],
            },
            {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
        ]
    }


def test_genai_output_finish_reason_is_the_first_replys():
    out = [
        {"role": "assistant", "parts": [{"type": "text", "content": "a"}], "finish_reason": ""},
        {"role": "assistant", "parts": [{"type": "text", "content": "b"}], "finish_reason": "length"},
    ]
    assert map_span({"gen_ai.output.messages": json.dumps(out)}).outputs["finish_reason"] == "length"
    # Inputs never take one, and a reply without one gives none.
    m = map_span({"gen_ai.input.messages": json.dumps(out), "gen_ai.output.messages": json.dumps(out[:1])})
    assert "finish_reason" not in m.inputs and "finish_reason" not in m.outputs


ANTHROPIC_CALL = {"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}}


@pytest.mark.parametrize("encode", [lambda v: v, json.dumps], ids=["blocks", "json-string"])
def test_anthropic_content_blocks(encode):
    """Anthropic's request as a producer passes it through: tool_use and tool_result blocks
    become the OpenAI-style tool call and tool message."""
    messages = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": encode([
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
        ])},
        {"role": "user", "content": encode([
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
        ])},
        {"role": "user", "content": encode([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"},
                                            {"type": "text", "text": "and tomorrow?"}])},
    ]
    m = map_span({"gen_ai.prompt": json.dumps(messages)})
    assert m.inputs == {"messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [ANTHROPIC_CALL]},
        {"role": "tool", "content": "sunny", "tool_call_id": "toolu_1"},
        {"role": "tool", "content": "rain", "tool_call_id": "toolu_1"},
        {"role": "user", "content": "and tomorrow?"},
    ]}


def test_content_blocks_without_tool_blocks_are_unchanged():
    blocks = [{"type": "text", "text": "a"}, {"type": "image", "source": {"type": "url", "url": "u"}}]
    m = map_span({"gen_ai.prompt": json.dumps([{"role": "user", "content": blocks}])})
    assert m.inputs == {"messages": [{"role": "user", "content": blocks}]}




def test_genai_tool_result_under_result_and_as_json_text():
    # pydantic-ai names the tool's output "result" and records a returned dict as an object.
    messages = [{"role": "user", "parts": [
        {"type": "tool_call_response", "id": "c1", "name": "weather", "result": {"city": "Paris", "sky": "clear"}},
        {"type": "tool_call_response", "id": "c2", "name": "time", "result": "noon"},
    ]}]
    m = map_span({"gen_ai.input.messages": json.dumps(messages)})
    assert m.inputs == {"messages": [
        {"role": "tool", "content": '{"city":"Paris","sky":"clear"}', "tool_call_id": "c1"},
        {"role": "tool", "content": "noon", "tool_call_id": "c2"},
    ]}


def test_genai_multi_part_content_stays_a_block_list():
    parts = [
        {"type": "text", "content": "look:"},
        {"type": "uri", "modality": "image", "uri": "https://x/img.png", "mime_type": None},
    ]
    m = map_span({"gen_ai.input.messages": [{"role": "user", "parts": parts}]})
    assert m.inputs["messages"][0]["content"] == [
        {"type": "text", "text": "look:"},
        {"type": "image_url", "image_url": {"url": "https://x/img.png"}},  # the block the service shows
    ]


def test_genai_text_and_tool_call_in_one_message():
    out = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "calling"}, {"type": "tool_call", "id": "t", "name": "f", "arguments": "{}"}],
        }
    ]
    m = map_span({"gen_ai.output.messages": json.dumps(out)})
    assert m.outputs["messages"] == [
        {"role": "assistant", "content": "calling",
         "tool_calls": [{"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    ]


# ---------------------------------------------------------------------------
# inputs/outputs: OpenInference flattened messages
# ---------------------------------------------------------------------------


def test_openinference_flattened_messages_with_tool_calls():
    attrs = {
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "be brief",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.contents.0.message_content.type": "text",
        "llm.input_messages.1.message.contents.0.message_content.text": "hi",
        "llm.input_messages.2.message.role": "tool",
        "llm.input_messages.2.message.content": "42",
        "llm.input_messages.2.message.tool_call_id": "c0",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "f",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"a": 1}',
        "llm.output_messages.0.message.tool_calls.1.tool_call.id": "c2",
        "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "g",
        "llm.output_messages.0.message.tool_calls.1.tool_call.function.arguments": "{}",
    }
    m = map_span(attrs)
    assert m.inputs == {
        "messages": [
            {"role": "system", "content": "be brief"},
            USER_HI,
            {"role": "tool", "content": "42", "tool_call_id": "c0"},
        ]
    }
    assert m.outputs == {
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
                    {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
                ],
            }
        ]
    }
    assert set(attrs) <= m.consumed


def test_openinference_indexes_are_ordered_numerically():
    attrs = {}
    for i in range(12):
        attrs[f"llm.input_messages.{i}.message.role"] = "user"
        attrs[f"llm.input_messages.{i}.message.content"] = str(i)
    m = map_span(dict(reversed(list(attrs.items()))))
    assert [msg["content"] for msg in m.inputs["messages"]] == [str(i) for i in range(12)]


# ---------------------------------------------------------------------------
# inputs/outputs: traceloop flattened gen_ai.prompt.N / gen_ai.completion.N
# ---------------------------------------------------------------------------


def test_traceloop_prompt_and_completion():
    attrs = {
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "be brief",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "hi",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "Hello",
        "gen_ai.completion.0.finish_reason": "stop",
        "gen_ai.prompt.name": "not-a-message",  # a GenAI attribute sharing the prefix
    }
    m = map_span(attrs)
    assert m.inputs == {"messages": [{"role": "system", "content": "be brief"}, USER_HI]}
    assert m.outputs == {"messages": [ASSISTANT_HELLO], "finish_reason": "stop"}
    assert "gen_ai.prompt.name" not in m.consumed
    assert "gen_ai.completion.0.finish_reason" in m.consumed


def test_traceloop_tool_calls_and_json_content_blocks():
    attrs = {
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": json.dumps([{"type": "text", "text": "hi"}]),
        "gen_ai.prompt.1.role": "tool",
        "gen_ai.prompt.1.content": "[not json",
        "gen_ai.prompt.1.tool_call_id": "c0",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.tool_calls.0.id": "c1",
        "gen_ai.completion.0.tool_calls.0.name": "f",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"x": 1}',
    }
    m = map_span(attrs)
    assert m.inputs["messages"] == [USER_HI, {"role": "tool", "content": "[not json", "tool_call_id": "c0"}]
    assert m.outputs["messages"][0]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    ]


@pytest.mark.parametrize("index", ["\u00b2", "1" * 5000, "\u0663"])
def test_an_index_int_cannot_read_is_a_name_not_an_error(index):
    # str.isdigit() says yes to "²" and to 5,000 digits, and int() refuses both: the span
    # was lost as a convert_error. Only a short run of ASCII digits is a position.
    m = map_span({
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi",
        f"gen_ai.prompt.{index}.role": "user", f"gen_ai.prompt.{index}.content": "odd",
        f"gen_ai.completion.{index}": "odd",
    })
    assert m.inputs["messages"][0] == USER_HI


def test_text_that_looks_like_a_list_stays_text():
    m = map_span({"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "[1, 2]"})
    assert m.inputs["messages"][0]["content"] == "[1, 2]"


# ---------------------------------------------------------------------------
# inputs/outputs: older GenAI events
# ---------------------------------------------------------------------------


def test_content_prompt_and_completion_events():
    events = [
        ev("gen_ai.content.prompt", **{"gen_ai.prompt": json.dumps([USER_HI])}),
        ev("other"),
        ev("gen_ai.content.completion", **{"gen_ai.completion": json.dumps([ASSISTANT_HELLO])}),
    ]
    m = map_span({"gen_ai.system": "openai"}, events)
    assert m.inputs == {"messages": [USER_HI]}
    assert m.outputs == {"messages": [ASSISTANT_HELLO]}
    assert m.consumed_events == {0, 2}


def test_per_message_events_and_choice_events():
    events = [
        ev("gen_ai.system.message", **{"gen_ai.system": "openai", "content": "be brief"}),
        ev("gen_ai.user.message", content="hi"),
        ev(
            "gen_ai.assistant.message",
            tool_calls=json.dumps([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]),
        ),
        ev("gen_ai.tool.message", content="42", id="c1"),
        ev("gen_ai.choice", index=1, finish_reason="length", message=json.dumps({"role": "assistant", "content": "B"})),
        ev("gen_ai.choice", index=0, finish_reason="stop", **{"message.role": "assistant", "message.content": "A"}),
    ]
    m = map_span({}, events)
    assert m.inputs == {
        "messages": [
            {"role": "system", "content": "be brief"},
            USER_HI,
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "42", "tool_call_id": "c1"},
        ]
    }
    # Choices come out in index order, not event order; the first choice's finish_reason is kept.
    assert m.outputs == {
        "messages": [{"role": "assistant", "content": "A"}, {"role": "assistant", "content": "B"}],
        "finish_reason": "stop",
    }
    assert m.consumed_events == set(range(6))


def test_message_event_with_json_body_attribute():
    m = map_span({}, [ev("gen_ai.user.message", body=json.dumps({"content": "hi"}))])
    assert m.inputs == {"messages": [USER_HI]}


def test_whole_prompt_attribute_on_the_span():
    # The langsmith SDK's own OTel exporter writes the run's inputs/outputs here.
    m = map_span({"gen_ai.prompt": json.dumps({"question": "q"}), "gen_ai.completion": json.dumps({"answer": "a"})})
    assert m.inputs == {"question": "q"}
    assert m.outputs == {"answer": "a"}
    m = map_span({"gen_ai.prompt": json.dumps({"messages": [USER_HI], "model": "m"})})
    assert m.inputs == {"messages": [USER_HI], "model": "m"}


# ---------------------------------------------------------------------------
# inputs/outputs: input.value / output.value and traceloop entities
# ---------------------------------------------------------------------------


def test_input_output_value():
    m = map_span({"input.value": '{"q": 1}', "output.value": "plain answer", "output.mime_type": "text/plain"})
    assert m.inputs == {"q": 1}
    assert m.outputs == {"output": "plain answer"}
    assert {"input.value", "output.value", "output.mime_type"} <= m.consumed


def test_text_plain_value_is_not_decoded():
    m = map_span({"input.value": '{"not": "decoded"}', "input.mime_type": "text/plain"})
    assert m.inputs == {"input": '{"not": "decoded"}'}


def test_input_value_with_openai_messages_is_normalized():
    body = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    assert map_span({"input.value": json.dumps(body)}).inputs == {"model": "m", "messages": [USER_HI]}


def test_traceloop_entity_input_output():
    m = map_span(
        {
            "traceloop.entity.input": json.dumps({"args": [1], "kwargs": {"x": 2}}),
            "traceloop.entity.output": json.dumps([{"id": 1}, {"id": 2}]),
        }
    )
    assert m.inputs == {"args": [1], "kwargs": {"x": 2}}
    # A list of records is not mistaken for messages.
    assert m.outputs == {"output": [{"id": 1}, {"id": 2}]}


def test_traceloop_entities_are_always_json():
    assert map_span({"traceloop.entity.output": "42"}).outputs == {"output": 42}
    assert map_span({"traceloop.entity.output": '"text"'}).outputs == {"output": "text"}
    assert map_span({"traceloop.entity.output": "not json"}).outputs == {"output": "not json"}
    # input.value is decoded that far only when its mime type says JSON.
    assert map_span({"input.value": '"q"', "input.mime_type": "application/json"}).inputs == {"input": "q"}
    assert map_span({"input.value": '"q"'}).inputs == {"input": '"q"'}


# ---------------------------------------------------------------------------
# source precedence
# ---------------------------------------------------------------------------

ALL_INPUT_SOURCES = [
    ("gen_ai.input.messages", json.dumps([{"role": "user", "parts": [{"type": "text", "content": "genai"}]}])),
    ("llm.input_messages.0.message.role", "user"),
    ("llm.input_messages.0.message.content", "openinference"),
    ("gen_ai.prompt.0.role", "user"),
    ("gen_ai.prompt.0.content", "traceloop"),
    ("input.value", json.dumps({"v": "input.value"})),
    ("traceloop.entity.input", json.dumps({"v": "entity"})),
]
EXPECTED_INPUTS = [
    {"messages": [{"role": "user", "content": "genai"}]},
    {"messages": [{"role": "user", "content": "openinference"}]},
    {"messages": [{"role": "user", "content": "traceloop"}]},
    {"messages": [{"role": "user", "content": "event"}]},
    {"v": "input.value"},
    {"v": "entity"},
]


def test_input_sources_first_present_wins():
    attrs = dict(ALL_INPUT_SOURCES)
    events = [ev("gen_ai.user.message", content="event")]
    drop = [["gen_ai.input.messages"], ["llm.input_messages.0.message.role", "llm.input_messages.0.message.content"],
            ["gen_ai.prompt.0.role", "gen_ai.prompt.0.content"], None, ["input.value"]]
    for step, expected in enumerate(EXPECTED_INPUTS):
        m = map_span(attrs, events)
        assert m.inputs == expected, step
        # The shadowed sources are other encodings of the same content: consumed too.
        assert set(attrs) <= m.consumed
        if step < len(drop):
            if drop[step] is None:
                events = []
            else:
                for key in drop[step]:
                    del attrs[key]


def test_output_sources_first_present_wins():
    attrs = {
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "g"}]}]),
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "o",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "t",
        "output.value": json.dumps({"v": "output.value"}),
        "traceloop.entity.output": json.dumps({"v": "entity"}),
    }
    events = [ev("gen_ai.choice", index=0, message={"role": "assistant", "content": "e"})]
    expected = ["g", "o", "t", "e", {"v": "output.value"}, {"v": "entity"}]
    keys = list(attrs)
    order = [[keys[0]], keys[1:3], keys[3:5], None, [keys[5]], [keys[6]]]
    for step, want in enumerate(expected):
        m = map_span(attrs, events).outputs
        if isinstance(want, str):
            assert m == {"messages": [{"role": "assistant", "content": want}]}, step
        else:
            assert m == want, step
        if step < len(order):
            if order[step] is None:
                events = []
            else:
                for key in order[step]:
                    del attrs[key]


def test_inputs_and_outputs_resolve_independently():
    m = map_span({"gen_ai.input.messages": json.dumps(GENAI_IN), "output.value": '{"a": 1}'})
    assert m.inputs == {"messages": [USER_HI]}
    assert m.outputs == {"a": 1}


# ---------------------------------------------------------------------------
# usage table
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        (
            {"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5},
            {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        ),
        (
            {"gen_ai.usage.prompt_tokens": 10, "gen_ai.usage.completion_tokens": 5, "llm.usage.total_tokens": 16},
            {"input_tokens": 10, "output_tokens": 5, "total_tokens": 16},
        ),
        (
            {
                "gen_ai.usage.input_tokens": 10,
                "gen_ai.usage.output_tokens": 5,
                "gen_ai.usage.cache_read.input_tokens": 3,
                "gen_ai.usage.cache_creation.input_tokens": 2,
                "gen_ai.usage.reasoning.output_tokens": 1,
            },
            {
                "input_tokens": 10,
                "output_tokens": 5,
                "total_tokens": 15,
                "input_token_details": {"cache_read": 3, "cache_creation": 2},
                "output_token_details": {"reasoning": 1},
            },
        ),
        (
            {"gen_ai.usage.cache_read_input_tokens": 4, "gen_ai.usage.cache_creation_input_tokens": 6},
            {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
             "input_token_details": {"cache_read": 4, "cache_creation": 6}},
        ),
        (
            {
                "llm.token_count.prompt": 11,
                "llm.token_count.completion": 7,
                "llm.token_count.total": 18,
                "llm.token_count.prompt_details.cache_read": 3,
                "llm.token_count.prompt_details.cache_write": 1,
                "llm.token_count.prompt_details.audio": 2,
                "llm.token_count.completion_details.reasoning": 4,
                "llm.token_count.completion_details.audio": 5,
            },
            {
                "input_tokens": 11,
                "output_tokens": 7,
                "total_tokens": 18,
                "input_token_details": {"cache_read": 3, "cache_creation": 1, "audio": 2},
                "output_token_details": {"reasoning": 4, "audio": 5},
            },
        ),
        ({"gen_ai.usage.input_tokens": "12"}, {"input_tokens": 12, "output_tokens": 0, "total_tokens": 12}),
        (
            {"gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 5,
             "gen_ai.usage.cache_read.input_tokens": 2, "gen_ai.usage.cache_write.input_tokens": 3},
            {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17,
             "input_token_details": {"cache_read": 2, "cache_creation": 3}},
        ),
    ],
    ids=["genai", "genai-old-names", "genai-details", "traceloop-cache", "openinference", "string-count",
         "anthropic-sdk"],
)
def test_usage_rows(attributes, expected):
    m = map_span(attributes)
    assert m.outputs == {"usage_metadata": expected}
    assert set(attributes) <= m.consumed


def test_usage_prefers_genai_over_openinference_and_lands_beside_outputs():
    m = map_span(
        {
            "gen_ai.usage.input_tokens": 1,
            "llm.token_count.prompt": 100,
            "llm.token_count.completion": 2,
            "output.value": '{"a": 1}',
        }
    )
    assert m.outputs == {"a": 1, "usage_metadata": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}}
    assert "llm.token_count.prompt" in m.consumed


def test_no_usage_no_usage_metadata():
    assert map_span({"gen_ai.usage.input_tokens": "n/a"}).outputs is None


# ---------------------------------------------------------------------------
# model, provider, invocation params, metadata
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "model", "provider"),
    [
        ({"gen_ai.request.model": "req", "gen_ai.response.model": "resp", "gen_ai.provider.name": "openai"}, "req", "openai"),
        ({"gen_ai.response.model": "resp", "gen_ai.system": "anthropic"}, "resp", "anthropic"),
        ({"llm.model_name": "oi", "llm.provider": "azure", "llm.system": "openai"}, "oi", "azure"),
        ({"embedding.model_name": "emb", "llm.system": "openai"}, "emb", "openai"),
        ({"gen_ai.provider.name": "p", "gen_ai.system": "s"}, None, "p"),
    ],
)
def test_model_and_provider(attributes, model, provider):
    m = map_span(attributes)
    assert m.metadata.get("ls_model_name") == model
    assert m.metadata.get("ls_provider") == provider


@pytest.mark.parametrize(
    ("attributes", "model", "response_model"),
    [
        # OTel GenAI: what was asked for, and what answered.
        ({"gen_ai.request.model": "req", "gen_ai.response.model": "resp"}, "req", "resp"),
        ({"gen_ai.request.model": "same", "gen_ai.response.model": "same"}, "same", None),
        # OpenInference: the request is in the invocation params, the response's model in llm.model_name.
        ({"llm.invocation_parameters": '{"model": "req"}', "llm.model_name": "req-0001"}, "req", "req-0001"),
        ({"embedding.invocation_parameters": '{"model": "e"}', "embedding.model_name": "e-0001"}, "e", "e-0001"),
        # A call that failed has no response, and still names the model it asked for.
        ({"llm.invocation_parameters": '{"model": "error-500", "stream": false}'}, "error-500", None),
        # LangChain's invocation params may say model_name.
        ({"llm.invocation_parameters": '{"model_name": "lc"}', "llm.model_name": "lc"}, "lc", None),
        # The explicit request attributes win over the invocation params.
        ({"llm.request.model_name": "r", "llm.response.model_name": "s", "llm.invocation_parameters": '{"model": "x"}'},
         "r", "s"),
        # Invocation params that are not an object name no model (and stay in metadata as they came).
        ({"llm.invocation_parameters": '{"model": ', "llm.model_name": "m"}, "m", None),
    ],
)
def test_requested_model_first_and_the_response_model_kept(attributes, model, response_model):
    m = map_span(attributes)
    assert m.metadata.get("ls_model_name") == model
    assert m.metadata.get("response_model") == response_model
    assert not [k for k in attributes if "model" in k and k not in m.consumed and k != "llm.invocation_parameters"]


def test_openinference_tool_definitions_become_invocation_params_tools():
    tool = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}
    m = map_span({
        "llm.model_name": "m",
        "llm.tools.0.tool.json_schema": json.dumps(tool),
        "llm.tools.1.tool.name": "g",
        "llm.tools.1.tool.description": "gd",
        "llm.tools.2.tool.json_schema": "{not json",
    })
    assert m.invocation_params == {
        "tools": [tool, {"type": "function", "function": {"name": "g", "description": "gd"}}]
    }
    # The one that is not a tool is kept as it came, for metadata.
    assert "llm.tools.2.tool.json_schema" not in m.consumed
    assert {"llm.tools.0.tool.json_schema", "llm.tools.1.tool.name", "llm.tools.1.tool.description"} <= m.consumed
    # Invocation params that carry the tools already (OpenInference langchain) keep theirs; the copies are consumed.
    both = map_span({"llm.invocation_parameters": json.dumps({"tools": [tool]}), "llm.tools.0.tool.json_schema": "x"})
    assert both.invocation_params == {"tools": [tool]}
    assert "llm.tools.0.tool.json_schema" in both.consumed


def test_openinference_finish_reason_is_the_outputs_finish_reason():
    m = map_span({"llm.model_name": "m", "llm.output_messages.0.message.role": "assistant",
                  "llm.output_messages.0.message.content": "hi", "llm.finish_reason": "stop"})
    assert m.outputs == {"messages": [{"role": "assistant", "content": "hi"}], "finish_reason": "stop"}
    assert "llm.finish_reason" in m.consumed
    assert map_span({"llm.model_name": "m", "llm.finish_reason": "length"}).outputs == {"finish_reason": "length"}
    # A finish reason the output source gave (a gen_ai.choice event) is not overridden.
    choice = SpanEvent("gen_ai.choice", {"message.content": "x", "finish_reason": "tool_calls"}, 1)
    assert map_span({"llm.finish_reason": "stop"}, [choice]).outputs["finish_reason"] == "tool_calls"


def test_response_model_is_kept_beside_the_requested_one():
    m = map_span({"gen_ai.request.model": "claude-x", "gen_ai.response.model": "claude-x-20250101"})
    assert (m.metadata["ls_model_name"], m.metadata["response_model"]) == ("claude-x", "claude-x-20250101")
    assert "gen_ai.response.model" in m.consumed
    # The same model twice says nothing new; alone, the response's model is the model.
    assert "response_model" not in map_span({"gen_ai.request.model": "m", "gen_ai.response.model": "m"}).metadata
    m = map_span({"gen_ai.response.model": "resp"})
    assert m.metadata == {"ls_model_name": "resp"} and "gen_ai.response.model" in m.consumed


def test_invocation_params_from_gen_ai_request_and_openinference():
    m = map_span(
        {
            "llm.invocation_parameters": json.dumps({"temperature": 0.1, "tools": []}),
            "gen_ai.request.model": "m",
            "gen_ai.request.temperature": 0.5,
            "gen_ai.request.max_tokens": 20,
            "gen_ai.request.top_p": 0.9,
            "gen_ai.request.top_k": 3,
            "gen_ai.request.frequency_penalty": 0.2,
            "gen_ai.request.presence_penalty": 0.3,
            "gen_ai.request.seed": 7,
            "gen_ai.request.stop_sequences": ("a", "b"),
            "gen_ai.request.choice.count": 2,
        }
    )
    assert m.invocation_params == {
        "temperature": 0.5,
        "tools": [],
        "model": "m",
        "max_tokens": 20,
        "top_p": 0.9,
        "top_k": 3,
        "frequency_penalty": 0.2,
        "presence_penalty": 0.3,
        "seed": 7,
        "stop": ["a", "b"],
        "n": 2,
    }
    assert "gen_ai.request.top_k" in m.consumed and "llm.invocation_parameters" in m.consumed


def test_embedding_invocation_params():
    m = map_span({"embedding.invocation_parameters": '{"model": "e"}'})
    assert m.invocation_params == {"model": "e"}


def test_no_params_is_none():
    assert map_span({}).invocation_params is None


@pytest.mark.parametrize(
    ("key", "target"),
    [("gen_ai.conversation.id", "thread_id"), ("session.id", "session_id"), ("user.id", "user_id")],
)
def test_thread_and_session_ids_go_to_metadata(key, target):
    m = map_span({key: "abc"})
    assert m.metadata == {target: "abc"}
    assert key in m.consumed


def test_metadata_sources_and_explicit_metadata_wins():
    m = map_span(
        {
            "gen_ai.request.model": "derived",
            "metadata": json.dumps({"team": "a", "k": 1}),
            "traceloop.association.properties.team": "b",
            "langsmith.metadata.ls_model_name": "explicit",
            "langsmith.metadata.tags_list": ("x", "y"),
        }
    )
    assert m.metadata == {"ls_model_name": "explicit", "team": "b", "k": 1, "tags_list": ["x", "y"]}
    assert {"metadata", "traceloop.association.properties.team", "langsmith.metadata.ls_model_name"} <= m.consumed


def test_langsmith_metadata_json_is_decoded_only_when_it_is_json():
    m = map_span(
        {
            "langsmith.metadata.obj": '{"a": {"b": [1, null]}}',
            "langsmith.metadata.arr": "[1, 2]",
            "langsmith.metadata.text": "[draft] not json",
            "langsmith.metadata.num": 3,
            "langsmith.metadata.quoted": '"kept as text"',
            "traceloop.association.properties.raw": '{"a": 1}',
        }
    )
    assert m.metadata == {
        "obj": {"a": {"b": [1, None]}},
        "arr": [1, 2],
        "text": "[draft] not json",
        "num": 3,
        "quoted": '"kept as text"',  # a JSON scalar stays the string it was: only objects and arrays are encoded
        "raw": '{"a": 1}',  # traceloop's values are the strings they were
    }


def test_invocation_params_precedence():
    m = map_span(
        {
            "llm.invocation_parameters": '{"model": "oi", "top_k": 3}',
            "gen_ai.request.model": "req",
            "gen_ai.response.model": "resp",
            "gen_ai.request.presence_penalty": 0.1,
            "llm.presence_penalty": 0.9,
        }
    )
    # What was asked for wins; the other encodings of the same parameter fill in only what is missing.
    assert m.invocation_params == {"model": "req", "top_k": 3, "presence_penalty": 0.1}
    # The response's model is not a parameter: it is kept beside the requested one.
    assert (m.metadata["ls_model_name"], m.metadata["response_model"]) == ("req", "resp")
    assert "gen_ai.response.model" in m.consumed
    assert map_span({"gen_ai.response.model": "resp"}).invocation_params == {"model": "resp"}
    # A tools value that is not JSON is still the one tool it names.
    assert map_span({"tools": "search"}).invocation_params == {"tools": ["search"]}
    assert map_span({"tool_arguments": "q=cats"}).invocation_params == {"tool_arguments": "q=cats"}


def test_logfire_attributes_are_claimed_only_in_their_shape():
    for attrs in ({"events": 3}, {"events": '["a", "b"]'}, {"all_messages_events": '[{"role": "user"}]'}):
        m = map_span(attrs)
        assert (m.inputs, m.outputs, m.consumed) == (None, None, set())
    # Beside a stronger source, a Logfire array is consumed (another encoding of the same content), not read.
    events = json.dumps([{"event.name": "gen_ai.user.message", "content": "other", "role": "user"}])
    m = map_span({"input.value": "hi", "events": events})
    assert m.inputs == {"input": "hi"} and "events" in m.consumed
    # A plain "prompt" may be the app's own attribute: beside other inputs it stays in metadata.
    m = map_span({"input.value": "hi", "prompt": "my template"})
    assert m.inputs == {"input": "hi"} and "prompt" not in m.consumed


def test_assistant_and_tool_message_events_are_outputs_without_a_choice():
    events = [
        ev("gen_ai.system.message", content="be brief"),
        ev("gen_ai.user.message", content="hi"),
        ev("gen_ai.assistant.message", content="Hello"),
    ]
    m = map_span({}, events)
    assert m.inputs == {"messages": [{"role": "system", "content": "be brief"}, USER_HI]}
    assert m.outputs == {"messages": [ASSISTANT_HELLO]}
    # With stronger outputs, the replies stay where they were in the conversation.
    m = map_span({"gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "Bye"}])}, events)
    assert m.inputs == {"messages": [{"role": "system", "content": "be brief"}, USER_HI, ASSISTANT_HELLO]}


def test_unmapped_attributes_are_not_consumed():
    m = map_span({"http.method": "GET", "gen_ai.response.id": "r"})
    assert m.consumed == set()


# ---------------------------------------------------------------------------
# langsmith.* name, session, tags
# ---------------------------------------------------------------------------


def test_langsmith_name_session_and_tags():
    m = map_span(
        {
            "langsmith.trace.name": "N",
            "langsmith.trace.session_name": "proj",
            "langsmith.span.tags": "a, b,",
            "tag.tags": ("b", "c"),
        }
    )
    assert (m.name, m.session_name, m.tags) == ("N", "proj", ["a", "b", "c"])
    assert map_span({"langsmith.span.tags": '["x"]'}).tags == ["x"]
    assert map_span({}).tags is None


# ---------------------------------------------------------------------------
# retrieval documents
# ---------------------------------------------------------------------------


def test_openinference_retrieval_documents():
    attrs = {
        "openinference.span.kind": "RETRIEVER",
        "input.value": "what is x",
        "input.mime_type": "text/plain",
        "retrieval.documents.0.document.id": "d0",
        "retrieval.documents.0.document.content": "x is y",
        "retrieval.documents.0.document.score": 0.9,
        "retrieval.documents.0.document.metadata": json.dumps({"source": "wiki"}),
        "retrieval.documents.1.document.content": "second",
    }
    m = map_span(attrs)
    assert m.run_type == "retriever"
    assert m.inputs == {"query": "what is x"}  # as the SDK names a retriever's input
    assert m.outputs == {
        "documents": [
            {"page_content": "x is y", "type": "Document", "metadata": {"source": "wiki", "score": 0.9}, "id": "d0"},
            {"page_content": "second", "type": "Document", "metadata": {}},
        ]
    }
    assert set(attrs) <= m.consumed


def test_reranker_output_documents():
    m = map_span(
        {"openinference.span.kind": "RERANKER", "reranker.output_documents.0.document.content": "top"}
    )
    assert m.outputs["documents"][0]["page_content"] == "top"


@pytest.mark.parametrize("encode", [json.dumps, lambda v: v], ids=["json", "structured"])
def test_genai_retrieval_documents_and_query(encode):
    docs = [{"id": "a", "score": 0.5, "content": "alpha"}, {"id": "b", "score": 0.25}]
    m = map_span(
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": "q",
            "gen_ai.retrieval.documents": encode(docs),
        }
    )
    assert m.run_type == "retriever"
    assert m.inputs == {"query": "q"}
    assert m.outputs == {
        "documents": [
            {"page_content": "alpha", "type": "Document", "metadata": {"score": 0.5}, "id": "a"},
            {"page_content": "", "type": "Document", "metadata": {"score": 0.25}, "id": "b"},
        ]
    }


# ---------------------------------------------------------------------------
# tools
# ---------------------------------------------------------------------------


def test_a_tool_runs_arguments_and_result_come_before_any_message_list():
    # Strands' latest mode: the tool span's inference-details event repeats the model call's conversation.
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather",
            "gen_ai.tool.call.arguments": '{"city": "Paris"}', "gen_ai.tool.call.result": '[{"text": "sunny"}]'}
    details = ev("gen_ai.client.inference.operation.details",
                 **{"gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]),
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": []}])})
    m = map_span(tool, [details])
    assert (m.inputs, m.outputs) == ({"city": "Paris"}, {"output": "sunny"})
    # Anything else keeps the messages first, and does not read a tool's result as its output.
    chain = map_span({"gen_ai.tool.call.result": "x", "output.value": "o"})
    assert chain.outputs == {"output": "o"} and "gen_ai.tool.call.result" not in chain.consumed


def test_genai_tool_span():
    m = map_span(
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "weather",
            "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            "gen_ai.tool.call.result": "sunny",
        }
    )
    assert (m.run_type, m.name) == ("tool", "weather")
    assert m.inputs == {"city": "Paris"}
    assert m.outputs == {"output": "sunny"}
    assert "gen_ai.tool.call.id" not in m.consumed  # kept in metadata


WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
WEATHER_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather", "parameters": WEATHER_SCHEMA},
}


@pytest.mark.parametrize(
    "definitions",
    [
        # GenAI convention (OpenLLMetry's openai instrumentation)
        [{"type": "function", "name": "get_weather", "description": "Weather", "parameters": WEATHER_SCHEMA}],
        # Anthropic's request shape (OpenLLMetry's anthropic instrumentation)
        [{"name": "get_weather", "description": "Weather", "input_schema": WEATHER_SCHEMA}],
        # already OpenAI-style
        [WEATHER_TOOL],
    ],
    ids=["genai", "anthropic", "openai"],
)
def test_tool_definitions_become_openai_style_tools(definitions):
    m = map_span({"gen_ai.tool.definitions": json.dumps(definitions)})
    assert m.invocation_params == {"tools": [WEATHER_TOOL]}
    assert "gen_ai.tool.definitions" in m.consumed


def test_traceloop_flattened_functions_become_tools():
    m = map_span({
        "llm.request.functions.0.name": "get_weather",
        "llm.request.functions.0.description": "Weather",
        "llm.request.functions.0.parameters": json.dumps(WEATHER_SCHEMA),
        "llm.request.functions.1.name": "now",
    })
    assert m.invocation_params == {"tools": [WEATHER_TOOL, {"type": "function", "function": {"name": "now"}}]}


def test_tool_definitions_keep_what_is_not_a_function():
    builtin = {"type": "web_search_preview"}
    m = map_span({"gen_ai.tool.definitions": json.dumps([builtin, "search", {"description": "no name"}])})
    assert m.invocation_params == {"tools": [builtin, "search", {"description": "no name"}]}


@pytest.mark.parametrize("value", ['[{"name": "get_weather"', 3])
def test_malformed_tool_definitions_stay_in_metadata(value):
    m = map_span({"gen_ai.tool.definitions": value, "gen_ai.request.model": "m"})
    assert m.invocation_params == {"model": "m"}
    assert "gen_ai.tool.definitions" not in m.consumed


def test_openinference_tool_span_prefers_input_value_over_parameters():
    base = {"openinference.span.kind": "TOOL", "tool.name": "add", "tool.parameters": '{"a": 1, "b": 2}'}
    m = map_span({**base, "input.value": '{"a": 3}', "output.value": "5", "output.mime_type": "text/plain"})
    assert (m.run_type, m.name, m.inputs, m.outputs) == ("tool", "add", {"a": 3}, {"output": "5"})
    assert "tool.parameters" in m.consumed
    assert map_span(base).inputs == {"a": 1, "b": 2}


def test_indexed_tool_parameters_become_an_object():
    # Inputs must be a JSON object (the service refuses anything else); a list goes under "input".
    m = map_span({"openinference.span.kind": "TOOL", "tool.parameters.0": "a", "tool.parameters.1": "b"})
    assert m.inputs == {"input": ["a", "b"]}
    assert map_span({"tool.parameters.city": "Paris"}).inputs == {"city": "Paris"}


def test_tool_name_only_names_tool_runs_and_langsmith_name_wins():
    assert map_span({"tool.name": "t"}).name is None
    assert map_span({"traceloop.span.kind": "tool", "tool.name": "t", "langsmith.trace.name": "n"}).name == "n"


def test_name_precedence():
    attrs = {"langsmith.trace.name": "ls", "traceloop.entity.name": "tl", "gen_ai.tool.name": "gt", "tool.name": "oi"}
    for expected in ("ls", "tl", "gt", "oi"):
        m = map_span(attrs)
        assert m.name == expected
        attrs.pop(next(k for k, v in attrs.items() if v == expected))
        if expected == "gt":
            attrs["openinference.span.kind"] = "TOOL"  # tool.name names tool runs only


# ---------------------------------------------------------------------------
# run types decided by an attribute's presence
# ---------------------------------------------------------------------------


def test_tool_name_alone_makes_a_tool_run_but_never_overrides_a_kind():
    assert map_span({"gen_ai.tool.name": "search"}).run_type == "tool"
    assert map_span({"gen_ai.tool.name": "search", "gen_ai.system": "openai"}).run_type == "tool"  # beats the model hint
    assert map_span({"gen_ai.tool.name": "search", "gen_ai.operation.name": "chat"}).run_type == "llm"
    assert map_span({"gen_ai.tool.name": "search", "langsmith.span.kind": "chain"}).run_type == "chain"
    assert map_span({"gen_ai.tool.name": ""}).run_type == "chain"
    # Beside a chat span's kind, the tool name is still an invocation param, not the run's name.
    m = map_span({"gen_ai.tool.name": "search", "gen_ai.operation.name": "chat"})
    assert (m.name, m.invocation_params) == (None, {"tool_name": "search"})


def test_prompt_template_variables_make_a_prompt_run_unless_a_kind_says_otherwise():
    variables = '{"topic": "cats"}'
    assert map_span({"llm.prompt_template.variables": variables}).run_type == "prompt"
    assert map_span({"llm.prompt_template.variables": variables, "llm.model_name": "m"}).run_type == "prompt"
    # OpenInference records the template on its LLM spans: still an llm run.
    both = {"llm.prompt_template.variables": variables, "openinference.span.kind": "LLM"}
    assert map_span(both).run_type == "llm"


# ---------------------------------------------------------------------------
# embeddings
# ---------------------------------------------------------------------------


def test_openinference_embedding_texts_and_vectors():
    attrs = {
        "openinference.span.kind": "EMBEDDING",
        "embedding.model_name": "e",
        "embedding.embeddings.0.embedding.text": "a",
        "embedding.embeddings.0.embedding.vector": (0.1, 0.2),
        "embedding.embeddings.1.embedding.text": "b",
    }
    m = map_span(attrs)
    assert m.inputs == {"input": ["a", "b"]}
    assert set(attrs) <= m.consumed  # the vectors are not copied into metadata


# ---------------------------------------------------------------------------
# time to first token
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["new_token", "gen_ai.first_token", "first_token", "First Token Stream Event"])
def test_first_token_event(name):
    m = map_span({}, [ev("x", 5), ev(name, 10)])
    assert m.first_token_time_ns == 10
    assert m.consumed_events == {1}


def test_first_token_takes_the_earliest():
    m = map_span({}, [ev("new_token", 30), ev("first_token", 20), ev("gen_ai.first_token", 25)])
    assert m.first_token_time_ns == 20
    assert m.consumed_events == {0, 1, 2}


def test_openllmetry_stream_chunks_are_the_first_token_and_are_consumed():
    # One attribute-less event per streamed chunk: the first is the first token; none stays an event.
    chunks = [ev("gen_ai.content.completion.chunk", t) for t in (12, 14, 16)]
    m = map_span({"gen_ai.operation.name": "chat"}, [ev("exception", 20, **{"exception.message": "x"}), *chunks])
    assert m.first_token_time_ns == 12
    assert m.consumed_events == {1, 2, 3}
    assert map_span({}, [ev("llm.content.completion.chunk", 7)]).first_token_time_ns == 7


def test_no_events_nothing_consumed():
    m = map_span({"gen_ai.system": "openai"}, [ev("exception", 1, **{"exception.message": "x"})])
    assert (m.first_token_time_ns, m.consumed_events) == (None, set())


# ---------------------------------------------------------------------------
# contract
# ---------------------------------------------------------------------------


def test_defaults():
    m = map_span({})
    assert m == Mapped()


def test_consumed_attributes_all_exist():
    attrs = dict(ALL_INPUT_SOURCES) | {"gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 1, "x": 1}
    assert map_span(attrs).consumed <= set(attrs)


def test_input_is_not_mutated():
    attrs = {"gen_ai.input.messages": GENAI_IN, "metadata": {"a": 1}}
    snapshot = json.dumps(attrs, sort_keys=True)
    map_span(attrs)
    assert json.dumps(attrs, sort_keys=True) == snapshot


def test_malformed_values_do_not_raise():
    attrs = {
        "gen_ai.input.messages": "{not json",
        "gen_ai.output.messages": "[1, 2]",
        "llm.input_messages.0.message.tool_calls.0.tool_call": "x",
        "llm.input_messages.0.message.tool_calls.0.tool_call.id": "shadowed",
        "retrieval.documents.0": 5,
        "gen_ai.retrieval.documents": "nope",
        "gen_ai.usage.input_tokens": None,
        "metadata": "[1]",
    }
    assert isinstance(map_span(attrs, [ev("gen_ai.choice", message="{")]), Mapped)


# ---------------------------------------------------------------------------
# robustness: attributes come from code nobody here wrote
# ---------------------------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

_KEYS = [
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.prompt",
    "gen_ai.completion", "input.value", "output.value", "traceloop.entity.input", "traceloop.entity.output",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "tool.parameters", "gen_ai.retrieval.documents",
    "metadata", "langsmith.span.tags", "tag.tags", "llm.invocation_parameters", "gen_ai.usage.input_tokens",
    "llm.token_count.total", "langsmith.span.kind", "gen_ai.operation.name", "gen_ai.request.model",
    "llm.input_messages.0.message.content", "llm.input_messages.0.message", "llm.input_messages.0.message.contents",
    "llm.input_messages.0.message.tool_calls.0.tool_call", "gen_ai.prompt.0", "gen_ai.prompt.0.tool_calls",
    "retrieval.documents.0.document", "retrieval.documents.0", "embedding.embeddings.0.embedding",
    "embedding.embeddings.0", "tool.parameters.a", "langsmith.metadata.x",
    "langsmith.trace.session_id", "langsmith.span.id", "langsmith.span.dotted_order", "gen_ai.tool.name", "tools",
    "tool_arguments", "prompt", "events", "all_messages_events", "llm.request.functions",
    "llm.request.functions.0.name", "traceloop.entity.name", "llm.prompt_template.variables",
    "gen_ai.usage.details.reasoning_tokens", "gen_ai.response.model", "traceloop.llm.request.type",
    "pydantic_ai.all_messages", "pydantic_ai.new_message_index", "final_result", "tool_response",
    "gen_ai.tool.definitions", "gen_ai.response.finish_reasons", "gen_ai.client.operation.time_to_first_chunk",
    "request_data", "response_data", "gen_ai.usage.raw", "logfire.msg_template", "logfire.tags",
]
_json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["role", "content", "parts", "type", "message", "tool_calls", "tool_call", "function",
                         "id", "name", "arguments", "response", "document", "embedding", "text", "metadata",
                         "score", "index", "message_content", "contents", "event.name", "finish_reason",
                         "result", "parameters", "messages", "system", "input", "usage", "prompt_tokens_details",
                         "cached_tokens"]),
        inner,
        max_size=4,
    ),
    max_leaves=8,
)
_value = _json_leaf | _json.map(json.dumps) | _json | st.tuples(st.text(max_size=3), st.text(max_size=3))


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(
    attributes=st.dictionaries(st.sampled_from(_KEYS), _value, max_size=6),
    events=st.lists(
        st.builds(
            SpanEvent,
            st.sampled_from(["gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message",
                             "gen_ai.choice", "gen_ai.content.prompt", "new_token", "x"]),
            st.dictionaries(st.sampled_from(["content", "message", "body", "gen_ai.prompt", "tool_calls", "index",
                                             "finish_reason"]),
                            _value, max_size=3),
            st.integers(min_value=0, max_value=10),
        ),
        max_size=3,
    ),
)
def test_map_span_never_raises(attributes, events):
    m = map_span(attributes, events)
    assert m.consumed <= set(attributes)
    assert m.consumed_events <= set(range(len(events)))


#: Every row of every table, whatever keys a span has (each row then probes its own keys, as
#: before performance round 3's dispatch by key).
EVERY_ROW = every_row()


def _as_mapped(m: Mapped) -> list[tuple[str, Any]]:
    fields = [(f.name, getattr(m, f.name)) for f in dataclasses.fields(Mapped)]
    return fields + [("metadata order", list(m.metadata))]


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(
    # Several keys of one table at once, so that its order between them matters.
    attributes=st.dictionaries(st.sampled_from(_KEYS + [
        "gen_ai.usage.prompt_tokens", "llm.token_count.prompt", "gen_ai.provider.name", "gen_ai.system",
        "llm.system", "openinference.span.kind", "traceloop.span.kind", "llm.model_name", "llm.response.model_name",
        "gen_ai.prompt.0.content", "gen_ai.completion.0.content", "llm.output_messages.0.message.content",
        "input.mime_type", "langsmith.trace.session_name", "session.id", "embedding.invocation_parameters",
        "gen_ai.request.temperature", "llm.tools.0.tool.json_schema", "traceloop.association.properties.x",
    ]), _value, max_size=8),
    events=st.lists(
        st.builds(
            SpanEvent,
            st.sampled_from(["gen_ai.user.message", "gen_ai.choice", "gen_ai.content.completion", "new_token",
                             "gen_ai.client.inference.operation.details", "x"]),
            st.dictionaries(st.sampled_from(["content", "body", "gen_ai.completion", "gen_ai.input.messages",
                                             "input.value"]), _value, max_size=2),
            st.integers(min_value=0, max_value=10),
        ),
        max_size=2,
    ),
)
def test_the_rows_a_span_selects_map_it_as_every_row_does(attributes, events):
    # Dispatch by key leaves out the rows none of whose keys the span has: they must be rows that do nothing.
    selected = _as_mapped(_map_span(dict(attributes), events))
    assert selected == _as_mapped(_map_span(dict(attributes), events, EVERY_ROW))


# --- the fast path for spans no table reads ------------------------------------------

from hypothesis import given as _given  # noqa: E402
from hypothesis import strategies as _st  # noqa: E402


_KEY_PARTS = ["gen_ai", "llm", "http", "db", "input", "output", "tool", "user", "session", "metadata", "x", "value",
              "request", "model", "messages", "0", "role", "content", "langsmith", "span", "kind", "usage", "tags", "tag",
              "tools", "tool_arguments", "prompt", "events", "all_messages_events", "functions"]


@_given(
    _st.dictionaries(
        _st.lists(_st.sampled_from(_KEY_PARTS), min_size=1, max_size=4).map(".".join),
        _st.one_of(_st.text(max_size=12), _st.integers(), _st.just('{"a": 1}'), _st.just("[1, 2]")),
        max_size=8,
    )
)
def test_fast_path_agrees_with_the_full_mapping(attrs):
    assert _as_mapped(map_span(attrs)) == _as_mapped(_map_span(attrs, ()))


# ---------------------------------------------------------------------------
# the fast path knows every key the tables read
# ---------------------------------------------------------------------------


class _Recording(dict):
    """Attributes that remember every key the mapping looks up, present or not."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.looked_up: set[str] = set()

    def get(self, key, default=None):
        self.looked_up.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.looked_up.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.looked_up.add(key)
        return super().__contains__(key)


@pytest.mark.parametrize("attrs", [{}, dict(ALL_INPUT_SOURCES), {"openinference.span.kind": "TOOL", "x": 1}])
def test_every_key_the_mapping_looks_up_passes_the_fast_path(attrs):
    # A new row whose key reads_nothing() did not know would never fire: the fast path
    # would answer "a plain chain run" before the mapping ever saw the span.
    recording = _Recording(attrs)
    _map_span(recording, [], EVERY_ROW)
    assert recording.looked_up, "the recording saw nothing: the test no longer observes the mapping"
    missed = sorted(k for k in recording.looked_up if reads_nothing({k: "1"}))
    assert missed == []
    for key in recording.looked_up:
        # ... and dispatch by key finds it: a span that has it applies the rows that read it.
        assert read_keys({key: "1"}, {}), key


# ---------------------------------------------------------------------------
# LangChain messages (OpenInference langchain writes them as LangChain serializes them)
# ---------------------------------------------------------------------------

LC_CALL = {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
OPENAI_CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


def _lc(cls: str, **kwargs):
    """``dumpd``/``to_json``: the class named last in ``id``."""
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", cls], "kwargs": kwargs}


def test_langchain_message_types_become_roles():
    # model_dump shapes, as in a ChatPromptValue's output.value
    value = {"messages": [
        {"content": "Be brief.", "additional_kwargs": {}, "response_metadata": {}, "type": "system", "name": None},
        {"content": "hi", "type": "human"},
        {"content": "", "type": "ai", "tool_calls": [LC_CALL], "invalid_tool_calls": []},
        {"content": "sunny", "type": "tool", "tool_call_id": "c1", "name": "get_weather"},
        {"content": "f", "type": "function", "name": "g"},
        {"content": "x", "type": "chat", "role": "critic"},
    ]}
    m = map_span({"openinference.span.kind": "PROMPT", "output.value": json.dumps(value),
                  "output.mime_type": "application/json"})
    assert m.outputs == {"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [OPENAI_CALL]},
        {"role": "tool", "content": "sunny", "tool_call_id": "c1", "name": "get_weather"},
        {"role": "function", "content": "f", "name": "g"},
        {"role": "critic", "content": "x"},
    ]}


def test_langchain_batch_of_serialized_messages_is_one_conversation():
    # An llm run's input.value: {"messages": [[...]]}, each message as dumpd writes it.
    value = {"messages": [[_lc("SystemMessage", content="Be brief.", type="system"),
                           _lc("HumanMessage", content="hi", type="human"),
                           _lc("AIMessageChunk", content="", type="AIMessageChunk", tool_calls=[LC_CALL]),
                           _lc("ToolMessage", content="sunny", type="tool", tool_call_id="c1")]]}
    m = map_span({"input.value": json.dumps(value), "input.mime_type": "application/json"})
    assert m.inputs == {"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [OPENAI_CALL]},
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
    ]}


def test_a_lone_langchain_message_is_shown_as_the_message():
    # A StrOutputParser's input: message_to_dict's {"type", "data"}.
    parser_input = {"type": "ai", "data": {"content": "Hello", "additional_kwargs": {"refusal": None},
                                           "response_metadata": {"finish_reason": "stop"}, "type": "ai",
                                           "tool_calls": [], "usage_metadata": {"input_tokens": 1}}}
    m = map_span({"openinference.span.kind": "CHAIN", "input.value": json.dumps(parser_input),
                  "input.mime_type": "application/json"})
    assert m.inputs == {"messages": [{"role": "assistant", "content": "Hello"}]}
    # A tool run's output: the ToolMessage, raw provider tool calls from additional_kwargs on an AI message.
    tool_output = {"type": "tool", "data": {"content": "sunny", "type": "tool", "tool_call_id": "c1", "status": "ok"}}
    assert map_span({"output.value": json.dumps(tool_output)}).outputs == {
        "messages": [{"role": "tool", "content": "sunny", "tool_call_id": "c1"}]
    }
    raw_calls = _lc("AIMessage", content="", additional_kwargs={"tool_calls": [OPENAI_CALL]})
    assert map_span({"output.value": json.dumps(raw_calls)}).outputs == {
        "messages": [{"role": "assistant", "content": "", "tool_calls": [OPENAI_CALL]}]
    }


@pytest.mark.parametrize(
    "value",
    [
        {"type": "ai", "data": "not an object"},
        {"lc": 1, "type": "constructor", "id": "AIMessage", "kwargs": {"content": "x"}},
        {"lc": 1, "type": "constructor", "id": ["x", "Other"], "kwargs": {"content": "x"}},
        {"lc": 1, "type": "constructor", "id": ["x", "AIMessage"], "kwargs": ["content"]},
        {"type": "ai", "data": {"no": "content"}},
        {"type": "unknown", "content": "x"},
        {"type": "chat", "content": "x", "role": 3},
        {"type": "ai", "content": "x", "tool_calls": "not a list"},
    ],
)
def test_what_is_not_a_langchain_message_is_kept_as_it_came(value):
    m = map_span({"input.value": json.dumps(value), "input.mime_type": "application/json"})
    if value.get("type") == "ai" and "content" in value:
        assert m.inputs == {"messages": [{"role": "assistant", "content": "x"}]}  # only its bad tool calls dropped
    else:
        assert m.inputs == value


def test_system_instructions_alone_are_not_final_inputs():
    # Anthropic's instrumentation sets gen_ai.system_instructions a moment before the messages:
    # an early post made in between must not show the conversation as the system prompt alone.
    early = map_span({"gen_ai.operation.name": "chat", "gen_ai.system_instructions": "Be brief."})
    assert early.inputs == {"messages": [{"role": "system", "content": "Be brief."}]} and not early.inputs_final
    full = map_span({"gen_ai.operation.name": "chat", "gen_ai.system_instructions": "Be brief.",
                     "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'})
    assert full.inputs_final and len(full.inputs["messages"]) == 2


@pytest.mark.parametrize("odd_time", [None, "soon", 1.5, True])
def test_a_first_token_event_with_an_odd_time_stays_an_event(odd_time):
    m = map_span({"gen_ai.operation.name": "chat"}, [SpanEvent("new_token", {}, odd_time), SpanEvent("first_token", {}, 7)])
    assert m.first_token_time_ns == 7 and m.consumed_events == {1}


# pydantic-ai (its Instrumentation capability) and the Logfire shapes
# ---------------------------------------------------------------------------
# Attribute values as pydantic-ai 2.68.0 writes them (format 5; format 2 differs on tool spans only),
# and as its last release with format 1 (1.107.5, event_mode="attributes") wrote the Logfire shape.

TOOL_CALL_PART = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}
OPENAI_TOOL_CALL = {"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
WEATHER = {"city": "Paris", "forecast": "sunny"}


def _all_messages(*before):
    return json.dumps([
        *before,
        {"role": "user", "parts": [{"type": "text", "content": "What is the weather in Paris?"}]},
        {"role": "assistant", "parts": [TOOL_CALL_PART], "finish_reason": "tool_call"},
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "call_1", "name": "get_weather",
                                    "result": WEATHER}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Sunny."}], "finish_reason": "stop"},
    ])


AGENT_RUN = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": "weather",
    "final_result": "Sunny.",
    "pydantic_ai.all_messages": _all_messages(),
    "gen_ai.system_instructions": '[{"type":"text","content":"Be brief."}]',
    "gen_ai.aggregated_usage.input_tokens": 24,
}
PROMPT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is the weather in Paris?"}]


def test_pydantic_ai_agent_run_is_a_chat_turn():
    m = map_span(AGENT_RUN)
    assert m.run_type == "chain"
    assert m.inputs == {"messages": PROMPT}
    assert m.outputs == {"messages": [{"role": "assistant", "content": "Sunny."}]}
    assert {"pydantic_ai.all_messages", "final_result", "gen_ai.system_instructions"} <= m.consumed
    # Set as the run ends: an early post must not carry them.
    assert not m.inputs_final
    # The run's summed usage is its children's: as a chain's usage the service would count it twice.
    assert "gen_ai.aggregated_usage.input_tokens" not in m.consumed


def test_pydantic_ai_agent_run_given_a_history():
    history = [
        {"role": "system", "parts": [{"type": "text", "content": "old prompt"}]},
        {"role": "user", "parts": [{"type": "text", "content": "earlier"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "ok"}], "finish_reason": "stop"},
    ]
    # Two pydantic-ai messages of history (a request of two GenAI messages, a response); the prompt is new.
    m = map_span({**AGENT_RUN, "pydantic_ai.all_messages": _all_messages(*history),
                  "pydantic_ai.new_message_index": 2})
    assert m.inputs == {"messages": [
        PROMPT[0],
        {"role": "system", "content": "old prompt"}, {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": "ok"}, PROMPT[1],
    ]}
    assert "pydantic_ai.new_message_index" in m.consumed


def test_pydantic_ai_failed_or_structured_runs():
    failed = {k: v for k, v in AGENT_RUN.items() if k != "final_result"}
    failed["pydantic_ai.all_messages"] = json.dumps(json.loads(_all_messages())[:1])
    m = map_span(failed)
    assert (m.inputs, m.outputs) == ({"messages": PROMPT}, None)
    structured = map_span({**AGENT_RUN, "final_result": '{"city":"Paris","forecast":"sunny"}'})
    assert structured.outputs == {"messages": [{"role": "assistant",
                                                "content": '{"city":"Paris","forecast":"sunny"}'}]}
    # A final_result alone is some app's attribute, not pydantic-ai's answer.
    assert map_span({"final_result": "x"}).outputs is None


def test_pydantic_ai_format2_tool_span():
    m = map_span({
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "call_1",
        "tool_arguments": '{"city":"Paris"}', "tool_response": json.dumps(WEATHER),
    })
    assert (m.run_type, m.name) == ("tool", "get_weather")
    assert (m.inputs, m.outputs) == ({"city": "Paris"}, WEATHER)
    assert m.inputs_final  # set when the tool span starts
    # The doc's row still applies.
    assert m.invocation_params == {"tool_name": "get_weather", "tool_arguments": {"city": "Paris"}}
    text = map_span({"gen_ai.tool.name": "t", "tool_response": "plain words"})
    assert text.outputs == {"output": "plain words"}


def test_pydantic_ai_chat_span_model_tools_finish_usage_first_chunk():
    m = map_span({
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.tool.definitions": '[{"type":"function","name":"get_weather","description":"Weather",'
                                   '"parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]',
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [TOOL_CALL_PART],
                                               "finish_reason": "tool_call"}]),
        "gen_ai.response.finish_reasons": ("tool_call",),
        "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 7,
        "gen_ai.usage.cache_read.input_tokens": 2, "gen_ai.usage.details.cache_read_tokens": 2,
        "gen_ai.usage.details.cache_write_tokens": 3, "gen_ai.usage.details.reasoning_tokens": 1,
        "gen_ai.usage.details.input_audio_tokens": 4, "gen_ai.usage.details.output_audio_tokens": 5,
        "gen_ai.client.operation.time_to_first_chunk": 0.25,
    })
    assert m.metadata["ls_model_name"] == "gpt-4o-mini"
    assert m.metadata["response_model"] == "gpt-4o-mini-2024-07-18"
    assert m.invocation_params["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    assert m.outputs["messages"] == [{"role": "assistant", "content": None, "tool_calls": [OPENAI_TOOL_CALL]}]
    assert m.outputs["finish_reason"] == "tool_call"
    usage = m.outputs["usage_metadata"]
    assert usage["input_token_details"] == {"cache_read": 2, "cache_creation": 3, "audio": 4}
    assert usage["output_token_details"] == {"reasoning": 1, "audio": 5}
    assert m.first_token_after_s == 0.25
    assert {"gen_ai.tool.definitions", "gen_ai.response.model", "gen_ai.response.finish_reasons",
            "gen_ai.usage.details.cache_read_tokens", "gen_ai.client.operation.time_to_first_chunk"} <= m.consumed


@pytest.mark.parametrize(
    ("key", "value", "seconds"),
    [("gen_ai.client.operation.time_to_first_chunk", 0.25, 0.25),  # the GenAI metric's name (pydantic-ai)
     ("gen_ai.response.time_to_first_chunk", 0.5, 0.5),  # google-genai's instrumentation: float seconds
     ("gen_ai.server.time_to_first_token", 1250, 1.25)],  # Strands: whole milliseconds
)
def test_first_token_delays_in_each_producers_unit(key, value, seconds):
    m = map_span({"gen_ai.operation.name": "chat", key: value})
    assert m.first_token_after_s == pytest.approx(seconds) and key in m.consumed
    # A delay past a day, or of the wrong type, is no first token: kept in metadata.
    assert map_span({"gen_ai.operation.name": "chat", key: 10**12}).first_token_after_s is None
    assert map_span({"gen_ai.operation.name": "chat", key: "soon"}).first_token_after_s is None


def test_finish_reasons_fill_in_and_stay_when_they_say_more():
    out = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "a"}]}])
    m = map_span({"gen_ai.output.messages": out, "gen_ai.response.finish_reasons": ("length",)})
    assert m.outputs["finish_reason"] == "length" and "gen_ai.response.finish_reasons" in m.consumed
    m = map_span({"gen_ai.output.messages": out, "gen_ai.response.finish_reasons": ("stop", "length")})
    assert m.outputs["finish_reason"] == "stop" and "gen_ai.response.finish_reasons" not in m.consumed


def test_tool_definitions_already_nested_or_malformed():
    nested = [{"type": "function", "function": {"name": "f"}}, {"type": "web_search"}]
    assert map_span({"gen_ai.tool.definitions": json.dumps(nested)}).invocation_params == {"tools": nested}
    bad = map_span({"gen_ai.tool.definitions": "[not json"})
    assert bad.invocation_params is None and "gen_ai.tool.definitions" not in bad.consumed


def test_logfire_shape_from_pydantic_ai_format1():
    # The agent run's all_messages_events: one object per message, named by event.name.
    events = [
        {"role": "system", "content": "Be brief.", "event.name": "gen_ai.system.message"},
        {"content": "What is the weather in Paris?", "role": "user", "gen_ai.message.index": 0,
         "event.name": "gen_ai.user.message"},
        {"role": "assistant", "tool_calls": [OPENAI_TOOL_CALL], "gen_ai.message.index": 1,
         "event.name": "gen_ai.assistant.message"},
        {"role": "tool", "id": "call_1", "name": "get_weather", "content": WEATHER, "gen_ai.message.index": 2,
         "event.name": "gen_ai.tool.message"},
        {"role": "assistant", "content": "Sunny.", "gen_ai.message.index": 3, "event.name": "gen_ai.assistant.message"},
    ]
    m = map_span({"gen_ai.operation.name": "invoke_agent", "all_messages_events": json.dumps(events),
                  "final_result": "Sunny."})
    # The doc's row: the whole conversation is the outputs.
    assert m.outputs == {"messages": [
        *PROMPT,
        {"role": "assistant", "content": None, "tool_calls": [OPENAI_TOOL_CALL]},
        {"role": "tool", "content": '{"city":"Paris","forecast":"sunny"}', "tool_call_id": "call_1",
         "name": "get_weather"},
        {"role": "assistant", "content": "Sunny."},
    ]}
    assert "all_messages_events" in m.consumed
    # Its chat span's events: the request's messages, then the choice.
    chat = [events[0], events[1], {"index": 0, "message": {"role": "assistant", "tool_calls": [OPENAI_TOOL_CALL]},
                                   "gen_ai.system": "openai", "event.name": "gen_ai.choice"}]
    m = map_span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "events": json.dumps(chat)})
    assert m.inputs == {"messages": PROMPT}
    assert m.outputs == {"messages": [{"role": "assistant", "content": None, "tool_calls": [OPENAI_TOOL_CALL]}]}


def test_logfire_all_messages_events_as_plain_messages():
    # Logfire writes all_messages_events for other instrumentations' spans as plain messages, no event names.
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}]
    m = map_span({"all_messages_events": json.dumps(plain)})
    assert m.outputs == {"messages": [USER_HI, ASSISTANT_HELLO]} and "all_messages_events" in m.consumed
    # The generic "events" name still needs event names: a list of messages there may be anything.
    assert map_span({"events": json.dumps(plain)}).outputs is None


# Logfire's LLM integrations (logfire 5.4.0, ``instrument_openai``/``instrument_anthropic``): attribute values
# as they write them. Format 2 (the default) writes the GenAI attributes, which their own rows read; these are
# what only Logfire writes. ``tests/producers/test_logfire_openai.py`` runs the real thing in both formats.
LOGFIRE_SPAN = {"logfire.msg_template": "Chat Completion with {request_data[model]!r}", "logfire.span_type": "span",
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 12,
                "gen_ai.usage.output_tokens": 5, "gen_ai.usage.cache_read.input_tokens": 2}
OPENAI_USAGE = {"completion_tokens": 5, "prompt_tokens": 12, "total_tokens": 17,
                "completion_tokens_details": {"accepted_prediction_tokens": None, "audio_tokens": 0,
                                              "reasoning_tokens": 1},
                "prompt_tokens_details": {"audio_tokens": 0, "cached_tokens": 2}}
LOGFIRE_USAGE = {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17,
                 "input_token_details": {"cache_read": 2, "audio": 0},
                 "output_token_details": {"reasoning": 1, "audio": 0}}


def test_logfire_format1_request_and_response_objects():
    request = {"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True},
               "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
               "temperature": 0.2, "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}
    response = {"message": {"content": None, "refusal": None, "role": "assistant", "annotations": None,
                            "audio": None, "function_call": None,
                            "tool_calls": [{"id": "c1", "function": {"arguments": '{"x": 1}', "name": "f"},
                                            "type": "function"}]},
                "usage": OPENAI_USAGE}
    m = map_span({**LOGFIRE_SPAN, "request_data": json.dumps(request), "response_data": json.dumps(response),
                  "gen_ai.response.finish_reasons": '["tool_calls"]'})
    assert m.inputs == {"messages": [{"role": "system", "content": "Be brief."}, USER_HI]} and m.inputs_final
    assert m.outputs == {
        "messages": [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]}],
        "usage_metadata": LOGFIRE_USAGE, "finish_reason": "tool_calls"}
    # The rest of the request body is the invocation parameters.
    assert m.invocation_params == {"model": "gpt-4o-mini", "temperature": 0.2, "stream": True,
                                   "stream_options": {"include_usage": True}, "tools": request["tools"]}
    assert {"request_data", "response_data"} <= m.consumed


def test_logfire_format2_request_data_names_the_model_alone():
    m = map_span({**LOGFIRE_SPAN, "request_data": '{"model":"gpt-4o-mini"}',
                  "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]'})
    assert m.inputs == {"messages": [USER_HI]} and m.invocation_params == {"model": "gpt-4o-mini"}
    assert "request_data" in m.consumed


def test_logfire_format1_anthropic_completions_and_streams():
    anthropic = {**LOGFIRE_SPAN, "gen_ai.system": "anthropic", "gen_ai.provider.name": "anthropic"}
    request = {"model": "claude", "max_tokens": 100, "system": "Be brief.",
               "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    # Logfire's Anthropic message: tool_use blocks as OpenAI tool calls, their arguments wrapped in {"input": ...}.
    response = {"message": {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": "t1", "function": {"arguments": '{"input":{"x":1}}', "name": "f"}}]},
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 2,
                  "cache_creation_input_tokens": 0}}
    m = map_span({**anthropic, "request_data": json.dumps(request), "response_data": json.dumps(response)})
    assert m.inputs == {"messages": [{"role": "system", "content": "Be brief."}, USER_HI]}
    assert m.outputs["messages"] == [{"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}]}]
    assert m.outputs["usage_metadata"]["input_token_details"] == {"cache_read": 2, "cache_creation": 0}
    assert m.invocation_params == {"model": "gpt-4o-mini", "max_tokens": 100}
    # The completions API: the prompt in, the text and its finish reason out.
    m = map_span({**LOGFIRE_SPAN, "request_data": '{"model":"m","prompt":"Say hi"}',
                  "response_data": json.dumps({"finish_reason": "stop", "text": "hi", "usage": OPENAI_USAGE})})
    assert m.inputs == {"prompt": "Say hi"}
    assert m.outputs["messages"] == [{"role": "assistant", "content": "hi"}] and m.outputs["finish_reason"] == "stop"
    # A stream that ended before any chunk: an empty answer.
    m = map_span({**LOGFIRE_SPAN, "response_data": '{"combined_chunk_content":"","chunk_count":0}'})
    assert m.outputs == {"messages": [{"role": "assistant", "content": ""}],
                         "usage_metadata": {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17,
                                            "input_token_details": {"cache_read": 2}}}
    # An embedding: the texts in; its response holds only the usage, which stays in metadata as it came.
    m = map_span({**LOGFIRE_SPAN, "gen_ai.operation.name": "embeddings",
                  "request_data": '{"model":"e","input":["a","b"]}', "response_data": '{"usage":{"prompt_tokens":2}}'})
    assert m.run_type == "embedding" and m.inputs == {"input": ["a", "b"]}
    assert "response_data" not in m.consumed


def test_logfire_request_and_response_names_are_read_on_logfire_spans_only():
    # An app's own attributes of these generic names are data: kept in metadata, never read.
    attributes = {"gen_ai.operation.name": "chat", "request_data": '{"messages":[{"role":"user","content":"x"}]}',
                  "response_data": '{"message":{"role":"assistant","content":"y"}}'}
    m = map_span(attributes)
    assert m.inputs is None and m.outputs is None and not {"request_data", "response_data"} & m.consumed
    # On Logfire's span, a value that is not a JSON object is kept as it came, and reported.
    m = map_span({**LOGFIRE_SPAN, "request_data": "{not json", "response_data": "[1]"})
    assert not {"request_data", "response_data"} & m.consumed
    assert ("request_data", "a JSON object") in m.malformed and ("response_data", "a JSON object") in m.malformed


def test_logfire_usage_raw_completes_the_token_details():
    m = map_span({**LOGFIRE_SPAN, "gen_ai.usage.raw": json.dumps(OPENAI_USAGE)})
    assert m.outputs == {"usage_metadata": LOGFIRE_USAGE} and "gen_ai.usage.raw" in m.consumed
    # The Responses API's names; a detail the GenAI attributes gave is never overridden.
    raw = {"input_tokens": 12, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 9},
           "output_tokens_details": {"reasoning_tokens": 3}}
    usage = map_span({**LOGFIRE_SPAN, "gen_ai.usage.raw": json.dumps(raw)}).outputs["usage_metadata"]
    assert usage["input_token_details"] == {"cache_read": 2} and usage["output_token_details"] == {"reasoning": 3}
    # Not an object: kept in metadata.
    assert "gen_ai.usage.raw" not in map_span({**LOGFIRE_SPAN, "gen_ai.usage.raw": "n/a"}).consumed


def test_logfire_tags_are_the_runs_tags():
    m = map_span({**LOGFIRE_SPAN, "logfire.tags": ("LLM",)})
    assert m.tags == ["LLM"] and "logfire.tags" in m.consumed


# The langsmith SDK's OTel exporter: counts as gen_ai.usage.*, details apart (a Python str() of a dict),
# the whole usage inside the outputs it writes to gen_ai.completion, and again in the run's metadata.
SDK_USAGE = {
    "input_tokens": 12,
    "output_tokens": 5,
    "total_tokens": 17,
    "input_token_details": {"audio": 0, "cache_read": 2},
    "output_token_details": {"audio": 0, "reasoning": 1},
}
SDK_COUNTS = {"gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 5, "gen_ai.usage.total_tokens": 17}


def test_langsmith_sdk_usage_keeps_the_details_its_outputs_carry():
    completion = json.dumps({"choices": [], "usage_metadata": SDK_USAGE})
    m = map_span({**SDK_COUNTS, "gen_ai.completion": completion, "gen_ai.operation.name": "chat"})
    assert m.outputs == {"choices": [], "usage_metadata": SDK_USAGE}


def test_langsmith_sdk_token_detail_attributes_are_read_and_consumed():
    attributes = {
        **SDK_COUNTS,
        "gen_ai.usage.input_token_details": "{'audio': 0, 'cache_read': 2}",
        "gen_ai.usage.output_token_details": '{"audio": 0, "reasoning": 1}',  # JSON is read too
    }
    m = map_span(attributes)
    assert m.outputs == {"usage_metadata": SDK_USAGE}
    assert set(attributes) <= m.consumed


def test_usage_details_are_merged_from_every_source_never_dropped():
    m = map_span(
        {
            "gen_ai.usage.input_tokens": 12,
            "gen_ai.usage.cache_read.input_tokens": 2,  # a row of the table: wins where sources disagree
            "gen_ai.usage.input_token_details": "{'cache_read': 99, 'audio': 3}",
            "langsmith.metadata.usage_metadata": json.dumps(
                {"output_token_details": {"reasoning": 1}, "input_token_details": {"cache_creation": 4}, "total_cost": 0.5}
            ),
            "output.value": json.dumps({"usage_metadata": {"output_tokens": 5, "output_token_details": {"audio": 6}}}),
        }
    )
    assert m.outputs == {
        "usage_metadata": {
            "input_tokens": 12,
            "output_tokens": 5,
            "total_tokens": 17,
            "input_token_details": {"cache_read": 2, "audio": 3, "cache_creation": 4},
            "output_token_details": {"audio": 6, "reasoning": 1},
            "total_cost": 0.5,
        }
    }
    assert m.metadata["usage_metadata"]["total_cost"] == 0.5  # the metadata copy stays, as the SDK keeps it


def test_usage_only_in_the_sdk_metadata_does_not_make_usage_in_the_outputs():
    m = map_span({"langsmith.metadata.usage_metadata": json.dumps(SDK_USAGE), "output.value": '{"a": 1}'})
    assert m.outputs == {"a": 1} and m.metadata["usage_metadata"] == SDK_USAGE


@pytest.mark.parametrize(
    "bad", ["{'audio': 0, 'cache_read': ", "{'x': __import__('os').getcwd()}", "['cache_read']", "{" + "1" * 5000 + "}", 7]
)
def test_unreadable_token_details_stay_in_metadata(bad):
    m = map_span({**SDK_COUNTS, "gen_ai.usage.input_token_details": bad})
    assert m.outputs == {"usage_metadata": {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17}}
    assert "gen_ai.usage.input_token_details" not in m.consumed


def test_tool_call_arguments_orjson_cannot_write_are_kept_as_text():
    # Found by test_map_span_never_raises: orjson refuses integers past 64 bits.
    m = map_span({"llm.input_messages.0.message.tool_calls.0.tool_call": {"arguments": -(2**63) - 1}})
    assert m.inputs == {"messages": [{"role": "user", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": None, "arguments": str(-(2**63) - 1)}}]}]}


@_given(
    role=_st.one_of(_st.sampled_from(["user", "assistant", "system", "tool", ""]), _st.text(max_size=8), _st.none(),
                    _st.integers()),
    text=_st.one_of(
        _st.text(max_size=20), _st.sampled_from(["[1]", '[{"type": "text"}]', "{}", " padded ", ""]), _st.none(),
        _st.integers(),
    ),
    extra=_st.dictionaries(_st.sampled_from(["type", "id", "finish_reason", "name"]), _st.text(max_size=5), max_size=2),
    part_type=_st.sampled_from(["text", "tool_call", "image"]),
)
def test_the_plain_text_message_fast_path_reads_as_the_full_path(role, text, extra, part_type):
    """Performance round 3's shortcut for the commonest GenAI message gives what the full reading gives."""
    from otel_runs_exporter.mapping._messages import plain_text_message as _plain_text_message, read_message as _read_message

    for raw in (
        {"role": role, "parts": [{"type": part_type, "content": text}]},
        {"role": role, "parts": [{"type": part_type, "content": text, **extra}]},
        {"role": role, "parts": [{"type": part_type, "content": text}], **extra},
        {"role": role, "parts": [{"type": "text", "content": text}, {"type": "text", "content": "b"}]},
    ):
        fast = _plain_text_message(raw)
        if fast is not None:
            assert [fast] == _read_message(raw, None), raw
