"""JSON given as text (``input.value`` with a JSON mime type): stored as the JSON it holds.

Such a value is decoded with orjson and kept marked as decoded (``_parsed``), so the
encoder skips its checks for what JSON cannot hold. These tests hold the stored run to
what the rules say without that shortcut: the same JSON, strings cut at the limit,
nesting cut where the encoder cuts it, redaction applied, text that is not JSON kept
as text; and the encoded bytes equal to those of a plain copy of the same run.
"""

from __future__ import annotations

import math
import random
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_runs_exporter import resolve_settings
from otel_runs_exporter._convert import ConvertOptions, RunNode, span_to_run
from otel_runs_exporter._encode import TRUNCATION_MARKER, encode_run
from otel_runs_exporter._parsed import ParsedJson, plain

from core.helpers import exporter_provider, processor_provider

JSON = "application/json"


def _document(size: int, seed: int = 0) -> dict[str, Any]:
    """About ``size`` bytes of JSON of every kind: nulls, floats, nesting, non-ASCII text."""
    rng = random.Random(seed)
    docs = []
    while sum(len(d["text"]) + 80 for d in docs) < size:
        words = " ".join(rng.choice(("alpha", "beta", "gamma", "naïve", "数据", "null", "ünïcode")) for _ in range(60))
        docs.append({"id": f"doc-{len(docs)}", "score": rng.random(), "rank": len(docs), "missing": None,
                     "ok": bool(len(docs) % 2), "text": words, "meta": {"tags": ["a", None, 1.5e-300]}})
    return {"query": "what is in these", "documents": docs}


def _stored(service: Any, attributes: dict[str, Any], via: str = "processor", **settings: Any) -> dict[str, Any]:
    make = processor_provider if via == "processor" else exporter_provider
    provider, _ = make(service.url, **settings)
    with provider.get_tracer("t").start_as_current_span("rerank", attributes=attributes):
        pass
    provider.shutdown()
    (run,) = service.wait_for_runs(1)
    assert service.violations() == []
    service.reset()
    return run


def _cut(value: Any, limit: int) -> Any:
    """What the encoder's limit makes of a JSON value: every string longer than ``limit`` cut."""
    if isinstance(value, str):
        return value[:limit] + TRUNCATION_MARKER.format(n=len(value) - limit) if len(value) > limit else value
    if isinstance(value, dict):
        return {k: _cut(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v, limit) for v in value]
    return value


def test_64kb_json_value_is_stored_as_its_json_on_both_paths(service):
    document = _document(64 * 1024)
    raw = orjson.dumps(document).decode()
    assert len(raw) > 64 * 1024
    attributes = {"input.value": raw, "input.mime_type": JSON, "output.value": "[1, null, 2.5]",
                  "output.mime_type": JSON, "openinference.span.kind": "CHAIN"}
    by_processor = _stored(service, attributes)
    by_exporter = _stored(service, attributes, via="exporter")
    for run in (by_processor, by_exporter):
        assert run["inputs"] == document
        assert run["outputs"] == {"output": [1, None, 2.5]}  # not an object: wrapped, as any such value


def test_json_text_with_whitespace_and_escapes_is_stored_as_the_same_json(service):
    raw = '{\n  "a": "caf\\u00e9 \\ud83d\\ude00",\n  "b": [1E2, -0, 1.0e-5, null],\n  "c": {"d": "\\"q\\""}\n}'
    run = _stored(service, {"input.value": raw, "input.mime_type": JSON})
    assert run["inputs"] == {"a": "café 😀", "b": [100.0, 0, 1e-05, None], "c": {"d": '"q"'}}


def test_text_that_is_not_json_is_kept_as_text(service):
    raw = '{"documents": [' + '{"id": 1}, ' * 3000 + "]"  # cut short: not JSON after all
    run = _stored(service, {"input.value": raw, "input.mime_type": JSON})
    assert run["inputs"] == {"input": raw}


def test_long_strings_in_json_value_are_cut_at_the_limit(service):
    document = _document(20_000, seed=1)
    raw = orjson.dumps(document).decode()
    run = _stored(service, {"input.value": raw, "input.mime_type": JSON}, max_value_chars=300)
    assert run["inputs"] == _cut(document, 300)
    assert run["inputs"]["documents"][0]["text"].endswith("chars]")


def test_json_nested_past_orjson_limit_is_cut_as_before(service):
    raw = '{"deep": ' + "[" * 300 + '"bottom"' + "]" * 300 + "}"
    run = _stored(service, {"input.value": raw, "input.mime_type": JSON})
    depth, value = 0, run["inputs"]["deep"]
    while isinstance(value, list):
        depth, value = depth + 1, value[0]
    assert value == "[too deep]" and depth < 300


def test_redaction_sees_the_decoded_json(service):
    raw = orjson.dumps({"api_key": "abc", "text": "use sk-abcdefghijklmnopqrstu now", "score": 0.5}).decode()
    run = _stored(service, {"input.value": raw, "input.mime_type": JSON}, scrub_secrets=True)
    assert run["inputs"] == {"api_key": "[REDACTED]", "text": "use [REDACTED] now", "score": 0.5}

    def hide(inputs: dict[str, Any]) -> dict[str, Any]:
        inputs["score"] = math.nan  # changed in place: what the encoder writes for NaN, as for any value
        return inputs

    run = _stored(service, {"input.value": raw, "input.mime_type": JSON}, hide_inputs=hide)
    assert run["inputs"]["score"] == "nan"


def _ended_span(attributes: dict[str, Any]) -> Any:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("t").start_span("s", attributes=attributes).end()
    (span,) = exporter.get_finished_spans()
    return span


_OPTS = ConvertOptions.from_settings(resolve_settings({"api_key": "x"}, env={}))
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_json, limit=st.sampled_from([0, 5, 1000]))
def test_encoding_a_decoded_value_gives_the_bytes_of_a_plain_copy(value, limit):
    span = _ended_span({"input.value": orjson.dumps(value).decode(), "input.mime_type": JSON})
    run = span_to_run(span, RunNode(span, None).resolve(_OPTS.id_scheme), _OPTS)
    as_plain = {**run, "inputs": plain(run["inputs"])}
    assert encode_run("post", run, limit).parts == encode_run("post", as_plain, limit).parts


def test_a_decoded_object_or_value_is_marked_and_messages_are_not():
    def inputs(raw: str) -> Any:
        span = _ended_span({"input.value": raw, "input.mime_type": JSON})
        return span_to_run(span, RunNode(span, None).resolve(_OPTS.id_scheme), _OPTS)["inputs"]

    assert type(inputs('{"q": 1}')) is ParsedJson and type(inputs("[1, 2]")) is ParsedJson
    assert inputs("[1, 2]") == {"input": [1, 2]}
    # Reshaped by the conventions: a new value, encoded with every check.
    assert type(inputs('{"messages": [{"role": "user", "content": "hi"}]}')) is dict
    assert type(inputs("not json")) is dict


_genai_part = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_call", "tool_call_response", "image", "other"])},
    optional={"content": _json, "id": st.text(max_size=4), "name": _json, "arguments": _json, "response": _json},
)
_genai_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", ""])},
    optional={"parts": st.lists(_genai_part, max_size=3), "content": _json, "finish_reason": _json},
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(_genai_message | _json, max_size=4),
    system=st.none() | st.text(max_size=12) | _json.map(lambda v: orjson.dumps(v).decode()),
    limit=st.sampled_from([0, 5, 1000]),
)
def test_genai_input_messages_read_from_json_text_are_marked_and_encode_as_a_plain_copy(messages, system, limit):
    # The GenAI conversation is the run's largest part: marked, the encoder skips its NaN search, which
    # must then have nothing to find, whatever shape the messages take.
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": orjson.dumps(messages).decode()}
    if system is not None:
        attributes["gen_ai.system_instructions"] = system
    span = _ended_span(attributes)
    run = span_to_run(span, RunNode(span, None).resolve(_OPTS.id_scheme), _OPTS)
    if run["inputs"]:
        assert type(run["inputs"]) is ParsedJson
    as_plain = {**run, "inputs": plain(run["inputs"])}
    assert encode_run("post", run, limit).parts == encode_run("post", as_plain, limit).parts


def test_genai_system_instructions_given_as_a_sequence_leave_the_messages_unmarked():
    # An attribute's tuple can hold a float orjson would write as null: those inputs get every check.
    span = _ended_span({
        "gen_ai.operation.name": "chat",
        "gen_ai.system_instructions": (float("nan"), "be brief"),
        "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
    })
    run = span_to_run(span, RunNode(span, None).resolve(_OPTS.id_scheme), _OPTS)
    assert type(run["inputs"]) is dict
    (_, inputs), = [part for part in encode_run("post", run).parts if part[0].endswith(".inputs")]
    assert orjson.loads(inputs)["messages"][0] == {"role": "system", "content": ["nan", {"type": "text", "text": "be brief"}]}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    replies=st.lists(_genai_message | _json, max_size=3),
    tokens=st.none() | st.integers(0, 2**70) | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=4),
    reasons=st.none() | st.lists(st.text(max_size=6), max_size=2).map(tuple),
    usage_object=st.none() | _json.map(lambda v: orjson.dumps(v).decode()),
    limit=st.sampled_from([0, 5, 1000]),
)
def test_genai_output_messages_read_from_json_text_encode_as_a_plain_copy(replies, tokens, reasons, usage_object, limit):
    # Marked as the inputs are, and kept marked through the finish reason and usage merged in, but only
    # while what is merged holds no float: whatever the attributes hold, the bytes are a plain copy's.
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": orjson.dumps(replies).decode()}
    if tokens is not None:
        attributes["gen_ai.usage.input_tokens"] = tokens
        attributes["gen_ai.usage.output_tokens"] = 2
    if reasons is not None:
        attributes["gen_ai.response.finish_reasons"] = reasons
    if usage_object is not None:
        attributes["langsmith.metadata.usage_metadata"] = usage_object
    span = _ended_span(attributes)
    run = span_to_run(span, RunNode(span, None).resolve(_OPTS.id_scheme), _OPTS)
    as_plain = {**run, "outputs": plain(run["outputs"])}
    assert encode_run("post", run, limit).parts == encode_run("post", as_plain, limit).parts


def test_genai_outputs_stay_marked_through_text_and_counts_and_not_through_a_float():
    def outputs(**extra: Any) -> Any:
        span = _ended_span({
            "gen_ai.operation.name": "chat",
            "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "hi"}]}]',
            "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 2,
            "gen_ai.response.finish_reasons": ("stop",), **extra,
        })
        return span_to_run(span, RunNode(span, None).resolve(_OPTS.id_scheme), _OPTS)["outputs"]

    marked = outputs()
    assert type(marked) is ParsedJson and marked["finish_reason"] == "stop"
    assert marked["usage_metadata"] == {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
    # A usage object that carries a cost (a float) is merged in: the outputs get every check.
    costed = outputs(**{"langsmith.metadata.usage_metadata": '{"input_tokens": 3, "total_cost": 0.25}'})
    assert type(costed) is dict and costed["usage_metadata"]["total_cost"] == 0.25
