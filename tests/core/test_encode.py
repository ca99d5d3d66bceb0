"""Encoding: exact bytes, round trips through the local service's parser, coercion."""

from __future__ import annotations

import math

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_runs_exporter._encode import TRUNCATION_MARKER, basic_body, dumps, encode_run, multipart_body, new_boundary
from otel_runs_exporter.server._multipart import parse


def test_exact_multipart_bytes():
    run = encode_run("post", {"id": "r1", "trace_id": "r1", "inputs": {"q": 1}})
    ctype, body = multipart_body([run], "BOUND")
    assert ctype == "multipart/form-data; boundary=BOUND"
    assert body == (
        b"--BOUND\r\n"
        b'Content-Disposition: form-data; name="post.r1"\r\n'
        b"Content-Type: application/json\r\n"
        b"Content-Length: 27\r\n\r\n"
        b'{"id":"r1","trace_id":"r1"}\r\n'
        b"--BOUND\r\n"
        b'Content-Disposition: form-data; name="post.r1.inputs"\r\n'
        b"Content-Type: application/json\r\n"
        b"Content-Length: 7\r\n\r\n"
        b'{"q":1}\r\n'
        b"--BOUND--\r\n"
    )


def test_absent_fields_get_no_part_and_patch_names():
    run = encode_run("patch", {"id": "r2", "outputs": {"a": 1}, "events": [{"name": "e"}]})
    assert [n for n, _ in run.parts] == ["patch.r2", "patch.r2.outputs", "patch.r2.events"]


def test_boundary_inside_content_is_replaced():
    run = encode_run("post", {"id": "r", "inputs": {"x": "--BOUND in text"}})
    ctype, body = multipart_body([run], "BOUND")
    boundary = ctype.split("boundary=")[1]
    assert boundary != "BOUND"
    assert [p.name for p in parse(body, boundary)] == ["post.r", "post.r.inputs"]


def test_a_drawn_boundary_in_content_is_replaced_though_bodies_are_not_searched_for_it():
    # Bodies of runs whose parts hold no boundary mark are not searched (multipart_body); a part
    # that holds the mark, here with a whole boundary we would draw, is.
    boundary = new_boundary()
    near = encode_run("post", {"id": "a", "inputs": {"x": "--" + boundary[:-1]}})
    echo = encode_run("post", {"id": "r", "inputs": {"x": "body: --" + boundary + "\r\n"}})
    assert near.mark_free is False and echo.mark_free is False
    plain_run = encode_run("post", {"id": "p", "inputs": {"x": "--" + boundary[32:]}})
    assert plain_run.mark_free is True
    ctype, body = multipart_body([plain_run, echo, near], boundary)
    used = ctype.split("boundary=")[1]
    assert used != boundary and used.startswith(boundary[:32])
    assert [p.name for p in parse(body, used)] == [
        "post.p", "post.p.inputs", "post.r", "post.r.inputs", "post.a", "post.a.inputs"
    ]
    ctype, body = multipart_body([plain_run], boundary)
    assert ctype.endswith(boundary) and [p.name for p in parse(body, boundary)] == ["post.p", "post.p.inputs"]


def test_basic_body_splices_parts_back():
    run = encode_run("post", {"id": "r", "name": "n", "inputs": {"q": [1, 2]}, "outputs": {"a": 1}, "events": [{"e": 1}]})
    assert orjson.loads(basic_body(run)) == {
        "id": "r", "name": "n", "inputs": {"q": [1, 2]}, "outputs": {"a": 1}, "events": [{"e": 1}]
    }


def test_empty_inputs_outputs_and_events_send_no_part():
    # Spec 4.4: the separate parts are "sent only when present". An empty {} part with its
    # headers is ~180 bytes, more than a small run's main part; the service reads absent
    # inputs as {} (as the local service does).
    run = encode_run("post", {"id": "r", "name": "n", "inputs": {}, "outputs": {}, "events": []})
    assert [name for name, _ in run.parts] == ["post.r"]
    assert orjson.loads(basic_body(run)) == {"id": "r", "name": "n"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["post", "patch"]), json_values, json_values), min_size=1, max_size=6))
def test_every_body_parses_back_to_the_same_runs(items):
    runs = []
    expected = {}
    for i, (op, inputs, outputs) in enumerate(items):
        run = {"id": f"run-{i}", "trace_id": "t", "dotted_order": "d", "inputs": inputs, "outputs": outputs}
        runs.append(encode_run(op, run))
        expected[f"{op}.run-{i}"] = {"id": f"run-{i}", "trace_id": "t", "dotted_order": "d"}
        # Empty values (None, {}, [], "", 0, False) send no part.
        if inputs:
            expected[f"{op}.run-{i}.inputs"] = inputs
        if outputs:
            expected[f"{op}.run-{i}.outputs"] = outputs
    ctype, body = multipart_body(runs, "b0undary")
    parts = parse(body, ctype.split("boundary=")[1])
    got = {p.name: orjson.loads(p.content) for p in parts}
    for p in parts:
        assert p.declared_length == len(p.content)
    assert got == orjson.loads(orjson.dumps(expected))


class Opaque:
    def __repr__(self):
        return "<Opaque>"


class Broken:
    def __repr__(self):
        raise RuntimeError("no repr")


def test_dumps_coerces_what_orjson_refuses():
    cyclic: list = [1]
    cyclic.append(cyclic)
    deep: list = []
    node = deep
    for _ in range(400):
        node.append([])
        node = node[0]
    value = {
        "bytes": b"\xff\xfe",
        "set": {3},
        "nan": math.nan,
        "inf": -math.inf,
        "surrogate": "a\ud800b",
        "obj": Opaque(),
        "broken": Broken(),
        "cycle": cyclic,
        "deep": deep,
        7: "int key",
    }
    out = orjson.loads(dumps(value))
    assert out["bytes"] == "base64://4="
    assert out["set"] == [3] and out["nan"] == "nan" and out["inf"] == "-inf"
    assert out["surrogate"].startswith("a") and out["surrogate"].endswith("b")
    assert out["obj"] == "<Opaque>" and out["broken"] == "<Broken object>"
    assert out["cycle"] == [1, "[cycle]"]
    assert "[too deep]" in orjson.dumps(out["deep"]).decode()
    assert out["7"] == "int key"


def test_long_strings_are_truncated_with_a_marker():
    out = orjson.loads(dumps({"s": "x" * 50, "short": "ok"}, max_value_chars=10))
    assert out["s"] == "x" * 10 + TRUNCATION_MARKER.format(n=40)
    assert out["short"] == "ok"


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.floats() | st.text() | st.binary() | st.integers(), lambda c: st.lists(c) | st.dictionaries(st.text(), c) | st.frozensets(st.integers()), max_leaves=15))
def test_dumps_never_raises(value):
    orjson.loads(dumps(value, max_value_chars=5))


def test_a_float_subclass_is_kept_when_long_strings_are_cut():
    # The truncating copy is dumped without a fallback, and orjson refuses float subclasses.
    class Ratio(float):
        pass

    out = orjson.loads(dumps({"r": Ratio(0.5), "s": "x" * 50}, max_value_chars=10))
    assert out["r"] == 0.5 and out["s"].startswith("x" * 10)
