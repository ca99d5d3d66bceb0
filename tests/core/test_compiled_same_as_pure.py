"""The compiled build gives the same bytes as the pure one, on values of any type.

mypyc checks declared types at run time and unboxes ints and floats, so a value
of a type the annotations did not foresee could raise, or come out different,
in the compiled build only. These tests feed both builds the same odd inputs
(None, int and str subclasses, huge ints, NaN, bytes, nested tuples, JSON of any
shape in the conventions' attributes, spans with odd names, kinds, statuses and
events) and compare the outcome: the same bytes, or both raising.

They need the compiled build loaded, so they run from ``test_compiled_build.py``
(which builds it and runs this module against it) and skip in the default run.
The pure build is a copy of the same sources imported under another name.
"""

from __future__ import annotations

import enum
import os
import shutil
import sys
from typing import Any, Callable

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import SpanKind, Status, StatusCode

import otel_runs_exporter
from otel_runs_exporter._ids import SCHEMES

pytestmark = pytest.mark.skipif(
    not otel_runs_exporter.build_info()["compiled"],
    reason="compares the compiled build with the pure one; test_compiled_build.py runs it against a compiled build",
)

PURE = "pure_otel_runs_exporter"


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """(compiled, pure) modules by name; the pure ones are the .py files beside the compiled ones."""
    root = tmp_path_factory.mktemp("pure")
    package = root / PURE
    package.mkdir()
    here = os.path.dirname(otel_runs_exporter.__file__)
    for name in os.listdir(here):
        if name.endswith(".py") and name != "__init__.py":  # an empty __init__: only the modules are wanted
            shutil.copy(os.path.join(here, name), package / name)
    (package / "__init__.py").write_text("")
    # The mapping package whole (its __init__ gathers it), as .py files only.
    shutil.copytree(os.path.join(here, "mapping"), package / "mapping", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    sys.path.insert(0, str(root))
    try:
        import importlib

        names = ("_ids", "_encode", "_convert", "mapping", "mapping._dispatch")
        compiled = {n: importlib.import_module(f"otel_runs_exporter.{n}") for n in names}
        pure = {n: importlib.import_module(f"{PURE}.{n}") for n in names}
    finally:
        sys.path.remove(str(root))
    # (the mapping package's __init__ is never compiled: its modules are)
    assert all(not m.__file__.endswith(".py") for n, m in compiled.items() if n != "mapping")
    assert all(m.__file__.endswith(".py") for m in pure.values())
    return compiled, pure


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except Exception:  # noqa: BLE001 - which exception may differ; raising or not must not
        return ("raised",)


class Level(enum.IntEnum):
    HIGH = 5


class Tag(str):
    pass


class Ratio(float):
    pass


class Count(int):
    pass


_leaf = (
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63, max_value=2**200) | st.floats()
    | st.text(max_size=5) | st.binary(max_size=4)
    | st.sampled_from([Level.HIGH, Tag("t"), Ratio(1.5), Count(3)])
)
_json_leaf = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=5)
_JSON_KEYS = ["role", "content", "parts", "type", "message", "tool_calls", "tool_call", "function", "id", "name",
              "arguments", "response", "document", "embedding", "text", "metadata", "score", "index",
              "message_content", "contents", "event.name", "finish_reason", "page_content", "function_call_name",
              "tool_call_id", "result", "parameters"]
_json = st.recursive(
    _json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_JSON_KEYS), inner, max_size=4),
    max_leaves=10,
)
_value = (
    _leaf | _json.map(lambda v: orjson.dumps(v).decode()) | _json | st.tuples(_leaf, _leaf)
    | st.lists(_leaf, max_size=3).map(tuple) | st.tuples(st.tuples(_leaf))
)
_ATTRIBUTE_KEYS = [
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.prompt",
    "gen_ai.completion", "gen_ai.prompt.0.content", "gen_ai.completion.0.role", "input.value", "input.mime_type",
    "output.value", "output.mime_type", "traceloop.entity.input", "traceloop.entity.output", "traceloop.span.kind",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "tool.parameters", "tool.parameters.0", "tool.name",
    "gen_ai.retrieval.documents", "retrieval.documents.0.document", "reranker.output_documents.0.document",
    "metadata", "langsmith.span.tags", "tag.tags", "llm.invocation_parameters", "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.total", "langsmith.span.kind",
    "openinference.span.kind", "gen_ai.operation.name", "gen_ai.request.model", "gen_ai.request.temperature",
    "gen_ai.request.stop_sequences", "llm.input_messages.0.message.content", "llm.input_messages.0.message.role",
    "llm.output_messages.0.message.tool_calls.0.tool_call", "embedding.embeddings.0.embedding", "langsmith.metadata.x",
    "traceloop.association.properties.k", "langsmith.trace.session_id", "langsmith.trace.session_name",
    "langsmith.trace.name", "gen_ai.tool.name", "tools", "tool_arguments", "prompt", "events", "all_messages_events",
    "llm.request.functions.0.name", "gen_ai.provider.name", "gen_ai.response.model", "session.id", "user.id",
    "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.details.reasoning_tokens", "app.anything",
    "pydantic_ai.all_messages", "pydantic_ai.new_message_index", "final_result", "tool_response",
    "gen_ai.tool.definitions", "gen_ai.response.finish_reasons", "gen_ai.client.operation.time_to_first_chunk",
]
_EVENT_NAMES = ["gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message", "gen_ai.system.message",
                "gen_ai.choice", "gen_ai.content.prompt", "gen_ai.content.completion", "new_token",
                "First Token Stream Event", "exception", "custom"]
_EVENT_KEYS = ["content", "message", "body", "gen_ai.prompt", "gen_ai.completion", "tool_calls", "index", "role",
               "finish_reason", "exception.type", "exception.message", "exception.stacktrace", "gen_ai.event.content"]
_attributes = st.dictionaries(st.sampled_from(_ATTRIBUTE_KEYS), _value, max_size=7)
_events = st.lists(
    st.tuples(st.sampled_from(_EVENT_NAMES) | _leaf, st.dictionaries(st.sampled_from(_EVENT_KEYS), _value, max_size=3),
              st.integers(min_value=0, max_value=10) | _leaf),
    max_size=3,
)
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def _mapped(m: Any) -> bytes:
    fields = [m.run_type, m.name, m.inputs, m.outputs, m.metadata, m.invocation_params, m.tags, m.session_name,
              m.session_id, sorted(m.consumed), sorted(m.consumed_events), m.first_token_time_ns]
    return orjson.dumps(fields, default=repr, option=orjson.OPT_NON_STR_KEYS)


@_SETTINGS
@given(attributes=_attributes, events=_events)
def test_map_span(builds, attributes, events):
    outcomes = [
        _outcome(lambda: _mapped(b["mapping"].map_span(dict(attributes), [b["mapping"].SpanEvent(*e) for e in events])))
        for b in builds
    ]
    assert outcomes[0] == outcomes[1]


@_SETTINGS
@given(value=_value | st.dictionaries(st.text(max_size=3) | st.integers(), _value, max_size=4),
       limit=st.sampled_from([0, 1, 3, 1000]))
def test_dumps(builds, value, limit):
    outcomes = [_outcome(lambda: b["_encode"].dumps(value, limit)) for b in builds]
    assert outcomes[0] == outcomes[1]


# Ids come from the SDK's SpanContext, which holds ints in range (or their subclasses); times are the app's.
_id = st.integers(min_value=1, max_value=2**128 - 1) | st.booleans() | st.sampled_from([Level.HIGH, Count(3)])


@_SETTINGS
@given(trace_id=_id, span_id=_id, time_ns=_leaf | st.integers(min_value=-(10**19), max_value=10**19),
       scheme=st.sampled_from(sorted(SCHEMES)))
def test_ids(builds, trace_id, span_id, time_ns, scheme):
    def go(ids: Any) -> Any:
        run_id = ids.run_id_str(ids.SCHEMES[scheme], trace_id, span_id, time_ns)
        return run_id, ids.format_entry(time_ns, run_id), ids.iso_time(time_ns)

    outcomes = [_outcome(lambda: go(b["_ids"])) for b in builds]
    assert outcomes[0] == outcomes[1]


class _Obj:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


@_SETTINGS
@given(
    name=_leaf,
    attributes=st.dictionaries(st.sampled_from(_ATTRIBUTE_KEYS) | st.text(max_size=4), _value, max_size=6),
    events=_events,
    kind=st.sampled_from(list(SpanKind)) | _leaf,
    status=st.none() | st.builds(Status, st.sampled_from(list(StatusCode)), st.none() | _leaf)
    | st.builds(_Obj, status_code=_leaf, description=_leaf),
    parent=st.none() | st.builds(_Obj, span_id=st.integers(0, 2**64), trace_id=st.integers(0, 2**128), is_remote=_leaf),
    scope=st.none() | st.builds(_Obj, name=_leaf, version=_leaf),
    start=st.integers(0, 2**62) | _leaf,
    end=st.none() | st.integers(0, 2**62) | _leaf,
    as_open=st.booleans(),
    limit=st.sampled_from([0, 4, 1_000_000]),
    under_a_parent=st.booleans(),
)
def test_span_to_run_and_encode_run(builds, name, attributes, events, kind, status, parent, scope, start, end,
                                    as_open, limit, under_a_parent):
    def go(b: dict[str, Any]) -> Any:
        span = _Obj(
            name=name, attributes=dict(attributes), kind=kind, parent=parent, instrumentation_scope=scope,
            resource=None, start_time=start, end_time=end, context=_Obj(trace_id=0xABC, span_id=0x12),
            events=[_Obj(name=n, attributes=a, timestamp=t) for n, a, t in events], status=status,
        )
        above = b["_ids"].root_ids("018bcfe5-68e3-7000-8000-000000000001", 1_700_000_000_000_000_000)
        ids = b["_convert"].span_ids(span, above if under_a_parent else None)
        run = b["_convert"].span_to_run(span, ids, b["_convert"].ConvertOptions(), as_open=as_open)
        encoded = b["_encode"].encode_run("post", run, limit, completes=True)
        return encoded.parts, encoded.size, encoded.dotted_order

    outcomes = [_outcome(lambda: go(b)) for b in builds]
    assert outcomes[0] == outcomes[1]
