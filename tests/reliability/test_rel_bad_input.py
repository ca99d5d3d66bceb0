"""Bad input: awkward attribute values, 10k attributes, 100k children, traceable's worst cases, and a fuzzer.

The promises under test (README "Values"): whatever orjson refuses is coerced,
never raised and never a reason to drop the run; strings past
``max_value_chars`` are cut with a ``...[truncated N chars]`` marker.
"""

from __future__ import annotations

import base64
import math
import os
import subprocess
import sys
import textwrap
import time

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_runs_exporter import _processor
from otel_runs_exporter._convert import ConvertOptions, span_ids, span_to_run
from otel_runs_exporter._encode import encode_run, multipart_body
from otel_runs_exporter.server._multipart import boundary_from_content_type, parse

from reliability.rel_helpers import processor_provider, report, tally

pytestmark = pytest.mark.heavy(seconds=12)

LIMIT = 1000

AWKWARD = {
    "plain": 1,
    "bytes_utf8": b"hi",
    "bytes_invalid": b"\xff\xfe\x00\x80",
    "huge": "a" * 5000,
    "nan": float("nan"),
    "inf": float("inf"),
    "ninf": float("-inf"),
    "lone_surrogate": "a\ud800b",
    "big_int": 2**70,
    "floats": (1.0, float("nan"), float("inf")),
    "bytes_list": (b"x", b"\xff"),
}
EXPECTED = {
    "plain": 1,
    "bytes_utf8": "hi",
    "bytes_invalid": "base64:" + base64.b64encode(b"\xff\xfe\x00\x80").decode(),
    "huge": "a" * LIMIT + f"...[truncated {5000 - LIMIT} chars]",
    "nan": "nan",
    "inf": "inf",
    "ninf": "-inf",
    "lone_surrogate": "a\ufffd\ufffd\ufffdb",  # each of the surrogate's three bytes is replaced
    "big_int": str(2**70),
    "floats": [1.0, "nan", "inf"],
    "bytes_list": ["x", "base64:" + base64.b64encode(b"\xff").decode()],
}


def test_awkward_attribute_values_arrive_coerced(svc):
    provider, processor = processor_provider(svc.url, max_value_chars=LIMIT)
    tracer = provider.get_tracer("t")
    began = time.monotonic()
    # No try/except: an exception from us would fail the test right here, on the app thread.
    with tracer.start_as_current_span("awkward", attributes=AWKWARD) as span:
        span.add_event("odd-event", {"bad": b"\xff", "nan": float("nan"), "s": "x\udfffy"})
        span.set_attribute("output.value", "z" * 3000)
    assert processor.force_flush(10_000)
    (run,) = svc.wait_for_runs(1)
    t = tally("awkward attribute values", 1, svc, processor.stats(), began)
    report(t)
    meta = run["extra"]["metadata"]
    assert {k: meta.get(k) for k in EXPECTED} == EXPECTED
    assert run["outputs"] == {"output": "z" * LIMIT + f"...[truncated {3000 - LIMIT} chars]"}
    (event,) = [e for e in run["events"] if e["name"] == "odd-event"]
    assert event["kwargs"] == {"bad": "base64:" + base64.b64encode(b"\xff").decode(), "nan": "nan", "s": "x\ufffd\ufffd\ufffdy"}
    assert t.dropped == {} and svc.violations() == []
    provider.shutdown()


def test_10k_attributes_on_one_span(svc):
    provider, processor = processor_provider(svc.url, span_limits=SpanLimits(max_span_attributes=20_000))
    tracer = provider.get_tracer("t")
    began = time.monotonic()
    with tracer.start_as_current_span("wide") as span:
        for i in range(10_000):
            span.set_attribute(f"attr.{i}", i)
    assert processor.force_flush(20_000)
    (run,) = svc.wait_for_runs(1)
    t = tally("10k attributes on one span", 1, svc, processor.stats(), began)
    report(t)
    meta = run["extra"]["metadata"]
    assert all(meta[f"attr.{i}"] == i for i in range(10_000))
    assert t.dropped == {}
    provider.shutdown()


# RELIABILITY.md's figure was taken with 100k: OTEL_RUNS_REL_WIDE_CHILDREN=100000.
WIDE_CHILDREN = int(os.environ.get("OTEL_RUNS_REL_WIDE_CHILDREN", "20000"))


@pytest.mark.parametrize(
    ("children", "remembered"),
    [
        # The suite's size: the processor's memory of ended spans made smaller, so 3,000 children cross it.
        pytest.param(3_000, 2_000, id="3k-past-a-2k-memory"),
        # The real memory (16,384) crossed, in the long step (~18 s).
        pytest.param(WIDE_CHILDREN, None, id="20k", marks=pytest.mark.long),
    ],
)
def test_wide_tree_children_under_one_open_root(service_process, monkeypatch, children, remembered):
    """Proves: a very wide tree keeps every child under its open root, none lost or misplaced.

    The root is posted while open; its children start and end under it, which
    crosses the processor's memory of recently ended spans (16,384, or a smaller
    one set for the suite's size), the batch size (512) several times over and the
    service's per-parent bookkeeping. (The figure in RELIABILITY.md was taken with
    100k; nothing in the code depends on the count beyond those bounds.) The
    service runs in its own process to get the second core.
    """
    if remembered is not None:
        monkeypatch.setattr(_processor, "_RECENT_MAX", remembered)
    svc = service_process
    provider, processor = processor_provider(svc.url, max_queue_size=250_000, max_queue_bytes=2 * 1024**3)
    tracer = provider.get_tracer("t")
    began = time.monotonic()
    with tracer.start_as_current_span("root") as root:
        for i in range(children):
            with tracer.start_as_current_span(f"c{i}"):
                pass
    assert processor.force_flush(300_000)
    stats = processor.stats()
    at = svc.tally()
    root_id = span_ids(root, None).run_id
    report(
        {
            "case": f"{children} children under one root (processor path)",
            "created": children + 1,
            "delivered": at["completed"],
            "dropped": dict(stats.dropped),
            "duplicates": at["duplicates"],
            "stats_completed": stats.delivered,
            "elapsed_s": round(time.monotonic() - began, 1),
            "requests": stats.requests,
            "retried": stats.retried,
            "statuses": at["statuses"],
            "extra": {"children_per_parent": at["children_per_parent"]},
        }
    )
    assert stats.dropped == {}
    assert at["completed"] == at["posted"] == stats.delivered == children + 1
    assert at["children_per_parent"] == {"None": 1, root_id: children}
    assert stats.settled() and stats.created == children + 1
    assert at["missing_parents"] == 0 and at["violations"] == 0
    # No fault is injected, but a request the loaded service answers after timeout_s
    # (10 s) is resent: at-least-once. Duplicates are allowed only with such a retry.
    assert at["duplicates"] == 0 or 0 < at["duplicates"] <= stats.retried * 512, (at["duplicates"], stats.retried)
    provider.shutdown()


def test_traceable_with_deep_cyclic_and_unserializable_values(svc):
    # traceable uses the global provider, which a process sets once: a subprocess.
    code = """
        import math, sys
        from otel_runs_exporter import configure
        from otel_runs_exporter.instrumentation import traceable
        provider = configure(max_value_chars=1000)

        class NoRepr:
            def __repr__(self):
                raise RuntimeError("no repr for you")

        class NoJson:
            __slots__ = ()

        cyclic = {"name": "loop"}
        cyclic["self"] = cyclic
        deep = []
        node = deep
        for _ in range(5000):
            node.append([])
            node = node[0]

        @traceable(run_type="tool")
        def awkward(marker, value):
            return {"marker": marker, "value": value}

        cases = {
            "cyclic": cyclic,
            "deep": deep,
            "no_repr": NoRepr(),
            "no_json": NoJson(),
            "object": object(),
            "bytes_invalid": b"\\xff\\xfe",
            "nan": float("nan"),
            "surrogate": "a\\ud800b",
            "huge": "h" * 5000,
            "big_int": 2**100,
            "set": {1, 2},
        }
        for name, value in cases.items():
            result = awkward(f"keep-{name}", value)  # any exception of ours would end the script here
            assert result["marker"] == f"keep-{name}"
        with traceable("block", inputs={"marker": "keep-block", "value": cyclic}) as run:
            run.set_outputs({"marker": "keep-block-out", "value": NoRepr()})
            run.add_metadata({"odd": NoRepr(), "deep": deep})
        assert provider.force_flush(10000)
        print("APP-OK")
    """
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    env.update(OTEL_EXPORTER_RUNS_ENDPOINT=svc.url, OTEL_EXPORTER_RUNS_API_KEY="k")
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "APP-OK" in proc.stdout, proc.stderr
    runs = svc.wait_for_runs(12, timeout=10)
    report({"case": "traceable: cyclic, 5000-deep, no repr, no JSON form, NaN, surrogates, 2**100", "created": 12,
            "delivered": len(runs), "dropped": {}, "duplicates": sum(svc.duplicate_posts().values()),
            "elapsed_s": round(time.monotonic() - began, 2)})
    assert len(runs) == 12 and svc.violations() == []
    # The rest of the data arrives beside the value that could not be serialized as it
    # was: the marker argument stays a field of inputs/outputs, not text inside a repr.
    lost = []
    for run in runs:
        want_in = "keep-block" if run["name"] == "block" else None
        marker = run["inputs"].get("marker")
        out_marker = run["outputs"].get("marker")
        if not isinstance(marker, str) or not marker.startswith("keep-") or (want_in and marker != want_in):
            lost.append(("inputs", str(run["inputs"])[:160]))
        if not isinstance(out_marker, str) or not out_marker.startswith("keep-"):
            lost.append(("outputs", str(run["outputs"])[:160]))
    assert lost == [], "\n".join(map(str, lost))


# --------------------------------------------------------------------------- the fuzzer

_exporter = InMemorySpanExporter()
_provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=1000, max_event_attributes=1000))
_provider.add_span_processor(SimpleSpanProcessor(_exporter))
_tracer = _provider.get_tracer("fuzz")

_texts = st.text(max_size=150)  # includes lone surrogates; long enough to be truncated
_scalars = st.one_of(
    _texts,
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=30),
)
_values = st.one_of(
    _scalars,
    st.lists(_texts, max_size=4).map(tuple),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4).map(tuple),
    st.lists(st.integers(min_value=-(2**70), max_value=2**70), max_size=4).map(tuple),
    st.lists(st.binary(max_size=8), max_size=3).map(tuple),
)
# Keys the semantic mapping consumes are avoided: the property is about values, not the mapping.
_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_.0123456789", min_size=1, max_size=12).map(lambda k: "fz." + k)
_attrs = st.dictionaries(_keys, _values, max_size=8)


def _coerced(value, limit):
    """The documented coercions, written independently of the encoder."""
    if isinstance(value, str):
        if limit and len(value) > limit:
            value = value[:limit] + f"...[truncated {len(value) - limit} chars]"
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes):
        try:
            return _coerced(value.decode("utf-8"), limit)
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(value).decode()
    if isinstance(value, (list, tuple)):
        return [_coerced(v, limit) for v in value]
    if isinstance(value, dict):
        return {_coerced(k, 0): _coerced(v, limit) for k, v in value.items()}
    raise AssertionError(f"unexpected {type(value)}")


# Event names the mapping reads, written here from the documented rules rather than taken from
# the mapping: a streaming first-token marker becomes the run's one leading ``new_token`` event; a
# GenAI message or choice event becomes inputs or outputs; the first ``exception`` event of a
# span whose status is not an error becomes the run's error. Drawn often enough to be exercised.
# OpenLLMetry's per-chunk events of a stream mark the first token the same way and are consumed;
# the GenAI conventions' one-event form of a call (inputs and outputs) is consumed like a message.
_FIRST_TOKEN_NAMES = ("new_token", "first_token", "gen_ai.first_token", "First Token Stream Event",
                      "gen_ai.content.completion.chunk", "llm.content.completion.chunk")
_MESSAGE_NAMES = ("gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message",
                  "gen_ai.choice", "gen_ai.client.inference.operation.details")
_event_names = st.one_of(_texts.filter(bool), st.sampled_from(_FIRST_TOKEN_NAMES + _MESSAGE_NAMES + ("exception",)))


def _expected_events(events):
    """The run's events for a span's events, by the rules above: (name, kwargs) pairs."""
    out = [(e.name, dict(e.attributes)) for e in events]
    if "exception" in [name for name, _ in out]:
        del out[[name for name, _ in out].index("exception")]
    out = [(n, a) for n, a in out if n not in _FIRST_TOKEN_NAMES and n not in _MESSAGE_NAMES]
    if any(e.name in _FIRST_TOKEN_NAMES for e in events):
        out.insert(0, ("new_token", {}))
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=st.lists(
        st.tuples(_texts.filter(bool), _attrs, st.lists(st.tuples(_event_names, _attrs), max_size=3)),
        min_size=1,
        max_size=4,
    ),
    # Limits above the longest identifier (a root's dotted_order is ~64 chars);
    # smaller ones are test_small_max_value_chars_keeps_ids_and_keys_whole's subject.
    limit=st.sampled_from([0, 100, 1000]),
    boundary=st.text(alphabet="ab-", min_size=1, max_size=3),
)
def test_fuzz_converter_and_multipart_encoder_round_trip(runs, limit, boundary):
    # Short boundaries made of characters the payloads also contain make collisions
    # likely; the encoder must then pick another boundary, never emit a body that
    # parses differently.
    _exporter.clear()
    for name, attributes, events in runs:
        with _tracer.start_as_current_span(name, attributes=attributes) as span:
            for event_name, event_attrs in events:
                span.add_event(event_name, event_attrs)
    finished = _exporter.get_finished_spans()
    opts = ConvertOptions()
    records = [span_to_run(s, span_ids(s, None), opts) for s in finished]
    encoded = [encode_run("post", r, limit, completes=True) for r in records]
    content_type, body = multipart_body(encoded, boundary)
    parts = parse(body, boundary_from_content_type(content_type))
    assert [p.name for p in parts] == [name for e in encoded for name, _ in e.parts]
    assert all(p.declared_length == len(p.content) for p in parts)
    by_name = {p.name: orjson.loads(p.content) for p in parts}
    for span, record in zip(finished, records):
        rid = record["id"]
        back = dict(by_name[f"post.{rid}"])
        for key in ("inputs", "outputs", "events"):
            if f"post.{rid}.{key}" in by_name:
                back[key] = by_name[f"post.{rid}.{key}"]
        # An empty inputs/outputs/events sends no part (spec 4.4: "sent only when present").
        sent = {k: v for k, v in record.items() if v or k not in ("inputs", "outputs", "events")}
        assert back == _coerced(sent, limit)
        # And the user's own values, not only the record, survived: each attribute, coerced.
        meta = back["extra"]["metadata"]
        for key, value in (span.attributes or {}).items():
            assert meta[key] == _coerced(value, limit), key
        got = [(e["name"], e["kwargs"]) for e in back.get("events", [])]
        assert got == [(_coerced(n, limit), _coerced(a, limit)) for n, a in _expected_events(span.events)]


def test_small_max_value_chars_keeps_ids_and_keys_whole(svc):
    # max_value_chars is about the user's values. With a limit of 50 a nested run's
    # dotted_order (about 64 chars per level) and its trace id must still go out whole,
    # and so must dict keys; otherwise the service refuses every run.
    provider, processor = processor_provider(svc.url, max_value_chars=50)
    tracer = provider.get_tracer("t")
    began = time.monotonic()
    with tracer.start_as_current_span("outer", attributes={"input.value": "q" * 200, "k" * 80: "v"}):
        with tracer.start_as_current_span("inner"):
            pass
    processor.force_flush(10_000)
    t = tally("max_value_chars=50: ids and keys stay whole", 2, svc, processor.stats(), began)
    report(t)
    runs = {r["name"]: r for r in svc.runs()}
    assert t.dropped == {}, f"runs dropped: {t.dropped}; service said: {[v['msg'] for v in svc.violations()][:2]}"
    assert sorted(runs) == ["inner", "outer"]
    assert runs["outer"]["inputs"] == {"input": "q" * 50 + "...[truncated 150 chars]"}
    assert runs["outer"]["extra"]["metadata"]["k" * 80] == "v"
