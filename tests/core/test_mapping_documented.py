"""The service's documented OTel mapping, one case per row, as an executable spec.

Source: "Supported OpenTelemetry attribute and event mapping" in the service's
OTel tracing guide (langchain-ai/docs, ``src/langsmith/trace-with-opentelemetry.mdx``).
Each case id is the documented attribute (or event); the expected value is
where the doc says it lands. Rows about the run's place in its tree
(``langsmith.trace.id`` ...) and the ``exception`` event are owned by
``_convert``/``_ids``: they are checked through ``span_to_run`` on real SDK
spans at the end, still without threads or sockets.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from otel_runs_exporter._convert import ConvertOptions, given_ids, span_ids, span_to_run
from otel_runs_exporter import mapping
from otel_runs_exporter.mapping import Mapped, SpanEvent, map_span

USER = {"role": "user", "content": "hi"}
ASSISTANT = {"role": "assistant", "content": "Hello"}
RUN_ID = "018bcfe5-68e3-7000-8000-000000000003"
PARENT_ID = "018bcfe5-68e3-7000-8000-000000000002"
TRACE_ID = "018bcfe5-68e3-7000-8000-000000000001"
DOTTED = (
    f"20231114T221320000001Z{TRACE_ID}.20231114T221320000500Z{PARENT_ID}.20231114T221321000000Z{RUN_ID}"
)


def _get(m: Mapped, path: str) -> Any:
    """``"invocation_params.model"`` -> ``m.invocation_params["model"]``."""
    head, *rest = path.split(".", 1)
    value = getattr(m, head)
    for key in rest[0].split("|") if rest else ():
        value = value[key]
    return value


def ev(name: str, **attributes: Any) -> SpanEvent:
    return SpanEvent(name, attributes, 1)


# (doc attribute, span attributes, span events, {path: expected}); a path's
# segments after the field are joined with "|" so keys may contain dots.
ROWS: list[tuple[str, dict[str, Any], list[SpanEvent], dict[str, Any]]] = [
    # --- Core LangSmith attributes -------------------------------------------------
    ("langsmith.trace.name", {"langsmith.trace.name": "Pretty"}, [], {"name": "Pretty"}),
    ("langsmith.span.kind", {"langsmith.span.kind": "retriever"}, [], {"run_type": "retriever"}),
    ("langsmith.trace.session_id", {"langsmith.trace.session_id": TRACE_ID}, [], {"session_id": TRACE_ID}),
    ("langsmith.trace.session_name", {"langsmith.trace.session_name": "proj"}, [], {"session_name": "proj"}),
    ("langsmith.span.tags", {"langsmith.span.tags": "a, b"}, [], {"tags": ["a", "b"]}),
    ("langsmith.metadata.{key}", {"langsmith.metadata.user": "u1"}, [], {"metadata.user": "u1"}),
    (
        "langsmith.metadata.{key} (JSON-encoded object and array)",
        {"langsmith.metadata.cfg": '{"a": [1, 2]}', "langsmith.metadata.ids": '["x", "y"]'},
        [],
        {"metadata.cfg": {"a": [1, 2]}, "metadata.ids": ["x", "y"]},
    ),
    # --- GenAI standard attributes -------------------------------------------------
    ("gen_ai.system", {"gen_ai.system": "anthropic"}, [], {"metadata.ls_provider": "anthropic"}),
    ("gen_ai.operation.name=chat", {"gen_ai.operation.name": "chat"}, [], {"run_type": "llm"}),
    ("gen_ai.operation.name=completion", {"gen_ai.operation.name": "completion"}, [], {"run_type": "llm"}),
    ("gen_ai.operation.name=embedding", {"gen_ai.operation.name": "embedding"}, [], {"run_type": "embedding"}),
    ("gen_ai.prompt", {"gen_ai.prompt": json.dumps({"question": "q"})}, [], {"inputs": {"question": "q"}}),
    ("gen_ai.completion", {"gen_ai.completion": json.dumps({"answer": "a"})}, [], {"outputs": {"answer": "a"}}),
    (
        "gen_ai.prompt.{n}.role/content",
        {"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi"},
        [],
        {"inputs": {"messages": [USER]}},
    ),
    (
        "gen_ai.prompt.{n}.message.role/content",
        {"gen_ai.prompt.0.message.role": "user", "gen_ai.prompt.0.message.content": "hi"},
        [],
        {"inputs": {"messages": [USER]}},
    ),
    (
        "gen_ai.completion.{n}.role/content",
        {"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Hello"},
        [],
        {"outputs": {"messages": [ASSISTANT]}},
    ),
    (
        "gen_ai.completion.{n}.message.role/content",
        {"gen_ai.completion.0.message.role": "assistant", "gen_ai.completion.0.message.content": "Hello"},
        [],
        {"outputs": {"messages": [ASSISTANT]}},
    ),
    ("gen_ai.input.messages", {"gen_ai.input.messages": json.dumps([USER])}, [], {"inputs": {"messages": [USER]}}),
    (
        "gen_ai.output.messages",
        {"gen_ai.output.messages": json.dumps([ASSISTANT])},
        [],
        {"outputs": {"messages": [ASSISTANT]}},
    ),
    (
        "gen_ai.tool.name",
        {"gen_ai.tool.name": "search"},
        [],
        {"run_type": "tool", "invocation_params.tool_name": "search", "name": "search"},
    ),
    # --- GenAI request parameters --------------------------------------------------
    *[
        (f"gen_ai.request.{p}", {f"gen_ai.request.{p}": v}, [], {f"invocation_params.{target}": expected})
        for p, v, target, expected in [
            ("model", "m", "model", "m"),
            ("temperature", 0.2, "temperature", 0.2),
            ("top_p", 0.9, "top_p", 0.9),
            ("max_tokens", 50, "max_tokens", 50),
            ("frequency_penalty", 0.1, "frequency_penalty", 0.1),
            ("presence_penalty", 0.3, "presence_penalty", 0.3),
            ("seed", 7, "seed", 7),
            ("stop_sequences", ("\n",), "stop", ["\n"]),
            ("top_k", 40, "top_k", 40),
            ("encoding_formats", ("float",), "encoding_formats", ["float"]),
        ]
    ],
    ("gen_ai.response.model", {"gen_ai.response.model": "m-2024"}, [], {"invocation_params.model": "m-2024"}),
    # --- GenAI usage metrics -------------------------------------------------------
    ("gen_ai.usage.input_tokens", {"gen_ai.usage.input_tokens": 3}, [], {"outputs.usage_metadata|input_tokens": 3}),
    (
        "gen_ai.usage.output_tokens",
        {"gen_ai.usage.output_tokens": 2},
        [],
        {"outputs.usage_metadata|output_tokens": 2},
    ),
    ("gen_ai.usage.total_tokens", {"gen_ai.usage.total_tokens": 9}, [], {"outputs.usage_metadata|total_tokens": 9}),
    ("gen_ai.usage.prompt_tokens", {"gen_ai.usage.prompt_tokens": 3}, [], {"outputs.usage_metadata|input_tokens": 3}),
    (
        "gen_ai.usage.completion_tokens",
        {"gen_ai.usage.completion_tokens": 2},
        [],
        {"outputs.usage_metadata|output_tokens": 2},
    ),
    (
        "gen_ai.usage.details.reasoning_tokens",
        {"gen_ai.usage.output_tokens": 10, "gen_ai.usage.details.reasoning_tokens": 4},
        [],
        {"outputs.usage_metadata|reasoning_tokens": 4, "outputs.usage_metadata|output_token_details": {"reasoning": 4}},
    ),
    # --- TraceLoop attributes ------------------------------------------------------
    ("traceloop.entity.input", {"traceloop.entity.input": '{"a": 1}'}, [], {"inputs": {"a": 1}}),
    ("traceloop.entity.output", {"traceloop.entity.output": '{"b": 2}'}, [], {"outputs": {"b": 2}}),
    ("traceloop.entity.name", {"traceloop.entity.name": "joke_workflow"}, [], {"name": "joke_workflow"}),
    ("traceloop.span.kind", {"traceloop.span.kind": "tool"}, [], {"run_type": "tool"}),
    ("traceloop.llm.request.type=embedding", {"traceloop.llm.request.type": "embedding"}, [], {"run_type": "embedding"}),
    ("traceloop.llm.request.type=chat", {"traceloop.llm.request.type": "chat"}, [], {"run_type": "llm"}),
    ("traceloop.llm.request.type=rerank", {"traceloop.llm.request.type": "rerank"}, [], {"run_type": "llm"}),
    (
        "traceloop.association.properties.{key}",
        {"traceloop.association.properties.team": "a"},
        [],
        {"metadata.team": "a"},
    ),
    # --- OpenInference attributes --------------------------------------------------
    ("input.value", {"input.value": '{"q": 1}'}, [], {"inputs": {"q": 1}}),
    ("output.value", {"output.value": "plain"}, [], {"outputs": {"output": "plain"}}),
    ("openinference.span.kind", {"openinference.span.kind": "EMBEDDING"}, [], {"run_type": "embedding"}),
    ("llm.system", {"llm.system": "openai"}, [], {"metadata.ls_provider": "openai"}),
    ("llm.model_name", {"llm.model_name": "m"}, [], {"metadata.ls_model_name": "m"}),
    ("tool.name", {"openinference.span.kind": "TOOL", "tool.name": "calc"}, [], {"name": "calc"}),
    ("metadata", {"metadata": '{"k": 1}'}, [], {"metadata.k": 1}),
    # --- LLM attributes ------------------------------------------------------------
    (
        "llm.input_messages",
        {"llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "hi"},
        [],
        {"inputs": {"messages": [USER]}},
    ),
    (
        "llm.output_messages",
        {"llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "Hello"},
        [],
        {"outputs": {"messages": [ASSISTANT]}},
    ),
    ("llm.token_count.prompt", {"llm.token_count.prompt": 3}, [], {"outputs.usage_metadata|input_tokens": 3}),
    ("llm.token_count.completion", {"llm.token_count.completion": 2}, [], {"outputs.usage_metadata|output_tokens": 2}),
    ("llm.token_count.total", {"llm.token_count.total": 9}, [], {"outputs.usage_metadata|total_tokens": 9}),
    ("llm.usage.total_tokens", {"llm.usage.total_tokens": 9}, [], {"outputs.usage_metadata|total_tokens": 9}),
    (
        "llm.invocation_parameters",
        {"llm.invocation_parameters": '{"temperature": 0}'},
        [],
        {"invocation_params.temperature": 0},
    ),
    ("llm.presence_penalty", {"llm.presence_penalty": 0.5}, [], {"invocation_params.presence_penalty": 0.5}),
    ("llm.frequency_penalty", {"llm.frequency_penalty": 0.25}, [], {"invocation_params.frequency_penalty": 0.25}),
    (
        "llm.request.functions (JSON)",
        {"llm.request.functions": json.dumps([{"name": "f", "parameters": {}}])},
        [],
        {"invocation_params.functions": [{"name": "f", "parameters": {}}]},
    ),
    (
        # Not the doc's shape: traceloop's flattened tools, shown as the tools offered (OpenAI-style).
        "llm.request.functions (flattened, as traceloop writes it)",
        {"llm.request.functions.0.name": "f", "llm.request.functions.0.description": "does f",
         "llm.request.functions.0.parameters": '{"type": "object"}'},
        [],
        {"invocation_params.tools": [
            {"type": "function", "function": {"name": "f", "description": "does f", "parameters": {"type": "object"}}}
        ]},
    ),
    # --- Prompt template attributes ------------------------------------------------
    (
        "llm.prompt_template.variables",
        {"llm.prompt_template.variables": '{"topic": "cats"}', "input.value": '{"topic": "cats"}'},
        [],
        {"run_type": "prompt", "inputs": {"topic": "cats"}},
    ),
    # --- Retriever attributes ------------------------------------------------------
    (
        "retrieval.documents.{n}.document.content/metadata",
        {
            "retrieval.documents.0.document.content": "x is y",
            "retrieval.documents.0.document.metadata": '{"source": "wiki"}',
        },
        [],
        {"outputs.documents": [{"page_content": "x is y", "type": "Document", "metadata": {"source": "wiki"}}]},
    ),
    # --- Tool attributes -----------------------------------------------------------
    (
        "tools (JSON array)",
        {"tools": json.dumps([{"type": "function", "function": {"name": "f"}}])},
        [],
        {"invocation_params.tools": [{"type": "function", "function": {"name": "f"}}]},
    ),
    ("tools (attribute array)", {"tools": ("search", "calc")}, [], {"invocation_params.tools": ["search", "calc"]}),
    ("tool_arguments (JSON)", {"tool_arguments": '{"q": "cats"}'}, [], {"invocation_params.tool_arguments": {"q": "cats"}}),
    (
        "tool_arguments (key-value pairs)",
        {"tool_arguments": {"q": "cats", "n": (1, 2)}},
        [],
        {"invocation_params.tool_arguments": {"q": "cats", "n": [1, 2]}},
    ),
    # --- Logfire attributes --------------------------------------------------------
    ("prompt", {"prompt": "Tell me a joke"}, [], {"inputs": {"input": "Tell me a joke"}}),
    (
        "all_messages_events",
        {
            "all_messages_events": json.dumps(
                [
                    {"event.name": "gen_ai.user.message", "content": "hi", "role": "user"},
                    {"event.name": "gen_ai.assistant.message", "content": "Hello", "role": "assistant"},
                ]
            )
        },
        [],
        {"outputs": {"messages": [USER, ASSISTANT]}},
    ),
    (
        "events",
        {
            "events": json.dumps(
                [
                    {"event.name": "gen_ai.system.message", "content": "be brief", "role": "system"},
                    {"event.name": "gen_ai.user.message", "content": "hi", "role": "user"},
                    {"event.name": "gen_ai.choice", "index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Hello"}},
                ]
            )
        },
        [],
        {
            "inputs": {"messages": [{"role": "system", "content": "be brief"}, USER]},
            "outputs": {"messages": [ASSISTANT], "finish_reason": "stop"},
        },
    ),
    # --- OpenTelemetry event mapping ------------------------------------------------
    (
        "event gen_ai.content.prompt",
        {},
        [ev("gen_ai.content.prompt", **{"gen_ai.prompt": json.dumps([USER])})],
        {"inputs": {"messages": [USER]}},
    ),
    (
        "event gen_ai.content.completion",
        {},
        [ev("gen_ai.content.completion", **{"gen_ai.completion": json.dumps([ASSISTANT])})],
        {"outputs": {"messages": [ASSISTANT]}},
    ),
    ("event gen_ai.system.message", {}, [ev("gen_ai.system.message", content="sys", role="system")],
     {"inputs": {"messages": [{"role": "system", "content": "sys"}]}}),
    ("event gen_ai.user.message", {}, [ev("gen_ai.user.message", content="hi")], {"inputs": {"messages": [USER]}}),
    (
        "event gen_ai.assistant.message",
        {},
        [ev("gen_ai.user.message", content="hi"), ev("gen_ai.assistant.message", content="Hello")],
        {"inputs": {"messages": [USER]}, "outputs": {"messages": [ASSISTANT]}},
    ),
    (
        "event gen_ai.tool.message",
        {},
        [ev("gen_ai.tool.message", content="42", id="c1")],
        {"outputs": {"messages": [{"role": "tool", "content": "42", "tool_call_id": "c1"}]}},
    ),
    (
        "event gen_ai.choice (finish_reason, message, tool_calls)",
        {},
        [
            ev(
                "gen_ai.choice",
                finish_reason="tool_calls",
                **{
                    "message.role": "assistant",
                    "message.content": "",
                    "tool_calls.0.id": "c1",
                    "tool_calls.0.type": "function",
                    "tool_calls.0.function.name": "f",
                    "tool_calls.0.function.arguments": "{}",
                },
            )
        ],
        {
            "outputs": {
                "messages": [
                    {"role": "assistant", "content": "",
                     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
                ],
                "finish_reason": "tool_calls",
            }
        },
    ),
]


@pytest.mark.parametrize(("attributes", "events", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_documented_row(attributes, events, expected):
    m = map_span(attributes, events)
    for path, value in expected.items():
        assert _get(m, path) == value, path
    # A documented attribute is used, so it is not repeated in metadata; the prompt template's
    # variables only decide the run type, and are data worth keeping there.
    assert set(attributes) - {"llm.prompt_template.variables"} <= m.consumed
    assert "llm.prompt_template.variables" not in m.consumed
    assert m.consumed_events == set(range(len(events)))


#: The doc's attribute column, copied from the guide (a role row stands for its content row).
DOCUMENTED = """
        langsmith.trace.name langsmith.span.kind langsmith.trace.id langsmith.span.id langsmith.span.parent_id
        langsmith.span.dotted_order langsmith.trace.session_id langsmith.trace.session_name langsmith.span.tags
        langsmith.metadata.{key} gen_ai.system gen_ai.operation.name gen_ai.prompt gen_ai.completion
        gen_ai.prompt.{n}.role gen_ai.prompt.{n}.message.role gen_ai.completion.{n}.role
        gen_ai.completion.{n}.message.role gen_ai.input.messages gen_ai.output.messages gen_ai.tool.name
        gen_ai.request.model gen_ai.response.model gen_ai.request.temperature gen_ai.request.top_p
        gen_ai.request.max_tokens gen_ai.request.frequency_penalty gen_ai.request.presence_penalty
        gen_ai.request.seed gen_ai.request.stop_sequences gen_ai.request.top_k gen_ai.request.encoding_formats
        gen_ai.usage.input_tokens gen_ai.usage.output_tokens gen_ai.usage.total_tokens gen_ai.usage.prompt_tokens
        gen_ai.usage.completion_tokens gen_ai.usage.details.reasoning_tokens traceloop.entity.input
        traceloop.entity.output traceloop.entity.name traceloop.span.kind traceloop.llm.request.type
        traceloop.association.properties.{key} input.value output.value openinference.span.kind llm.system
        llm.model_name tool.name metadata llm.input_messages llm.output_messages llm.token_count.prompt
        llm.token_count.completion llm.token_count.total llm.usage.total_tokens llm.invocation_parameters
        llm.presence_penalty llm.frequency_penalty llm.request.functions llm.prompt_template.variables
        retrieval.documents.{n}.document.content tools tool_arguments prompt all_messages_events events
        gen_ai.content.prompt gen_ai.content.completion gen_ai.system.message gen_ai.user.message
        gen_ai.assistant.message gen_ai.tool.message gen_ai.choice exception
    """.split()


def test_every_documented_attribute_has_a_case():
    """Each documented attribute must appear among the cases above."""
    documented = DOCUMENTED
    covered = " ".join(r[0] for r in ROWS) + " " + " ".join(CONVERT_ROWS)
    missing = [a for a in documented if a not in covered]
    assert missing == []


def test_every_documented_attribute_has_a_table_row_quoting_the_doc():
    """The mapping package keeps one ``#: doc: <attribute> -> <field>. "<notes>"`` comment per documented
    attribute, on the table row that applies it, so a change to the guide can be checked row by row."""
    source = "".join(p.read_text(encoding="utf-8") for p in Path(mapping.__file__).parent.glob("*.py"))
    quoted = set(re.findall(r"doc: (\S+) -> ", source))
    missing = [a for a in DOCUMENTED if a not in quoted]
    assert missing == []


# ---------------------------------------------------------------------------
# Rows applied by _convert: the run's place, its project, its error
# ---------------------------------------------------------------------------

CONVERT_ROWS = (
    "langsmith.trace.id",
    "langsmith.span.id",
    "langsmith.span.parent_id",
    "langsmith.span.dotted_order",
    "exception",
)


def _run(attributes: dict[str, Any], error: bool = False) -> dict[str, Any]:
    span = TracerProvider().get_tracer("t").start_span("s", attributes=attributes)
    if error:
        try:
            raise RuntimeError("broke")
        except RuntimeError as exc:
            span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR))
    span.end()
    return span_to_run(span, span_ids(span, None, given=given_ids(span.attributes)), ConvertOptions())


def test_langsmith_ids_rows():
    # doc: trace.id "The trace (root run) the span belongs to"; span.id "This span's run ID";
    # span.parent_id "Nests the span under an existing run"; span.dotted_order "Position in the trace tree".
    run = _run(
        {
            "langsmith.trace.id": TRACE_ID,
            "langsmith.span.id": RUN_ID,
            "langsmith.span.parent_id": PARENT_ID,
            "langsmith.span.dotted_order": DOTTED,
        }
    )
    assert (run["id"], run["trace_id"], run["parent_run_id"], run["dotted_order"]) == (
        RUN_ID, TRACE_ID, PARENT_ID, DOTTED
    )
    assert run["start_time"] == "2023-11-14T22:13:21.000000+00:00"  # its own dotted_order entry
    assert not any(k.startswith("langsmith.") for k in run["extra"]["metadata"])


def test_session_id_row_and_precedence(caplog):
    assert _run({"langsmith.trace.session_id": TRACE_ID.upper()})["session_id"] == TRACE_ID
    both = _run({"langsmith.trace.session_id": TRACE_ID, "langsmith.trace.session_name": "p"})
    assert both["session_name"] == "p" and "session_id" not in both  # the service takes exactly one
    assert both["extra"]["metadata"]["langsmith.trace.session_id"] == TRACE_ID  # kept, not lost
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        bad = _run({"langsmith.trace.session_id": "my-project"})
        _run({"langsmith.trace.session_id": "another"})
    assert bad["session_name"] == "default" and "session_id" not in bad
    assert [r.getMessage()[:52] for r in caplog.records] == ["ignoring langsmith.trace.session_id 'my-project': no"]


def test_exception_event_row():
    # doc: exception -> status, error. "Sets status to "error" and extracts exception message/stacktrace";
    # exception.stacktrace "appended to message": the message first (what a list shows), then the stacktrace.
    run = _run({}, error=True)
    assert run["error"].startswith("RuntimeError: broke\n\nTraceback (most recent call last):")
    assert run["error"].endswith("RuntimeError: broke")
    assert "events" not in run
