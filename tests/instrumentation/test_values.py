"""Values JSON has no type for read as a user expects, in every place user values are taken.

One table of values (``CASES``: the value and what a reader of the run should see), checked in
each place: the encoder (its orjson fallback and its slow path), ``@traceable``'s inputs,
outputs, generator items and metadata attributes, and the OpenAI and Anthropic instrumentors'
messages and request attributes. The rule itself is ``_encode.json_value``; before it, these
were reprs (``"Decimal('1.10')"``, ``"PosixPath('/tmp/x')"``, ``"<Arr object at 0x...>"``).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import uuid
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import Any

import pydantic
import pytest

from otel_runs_exporter import traceable
from otel_runs_exporter._encode import dumps, json_value
from otel_runs_exporter.instrumentation import anthropic as runs_anthropic
from otel_runs_exporter.instrumentation import openai as runs_openai


class ArrayLike:
    """numpy, pandas and torch values all offer ``tolist()`` (numpy is not installed here)."""

    def tolist(self) -> list[Any]:
        return [1, 2.5]


class Scalar0d:
    def tolist(self) -> float:
        return 0.25


class Model(pydantic.BaseModel):
    name: str = "m"
    when: datetime.date = datetime.date(2024, 5, 6)


class LooksLikeAModel:
    """A ``model_dump`` without pydantic's ``mode`` keyword."""

    def model_dump(self) -> dict[str, Any]:
        return {"dumped": True}


class V1Model:
    def dict(self) -> dict[str, Any]:
        return {"v": 1}


@dataclasses.dataclass
class Point:
    x: int
    where: Path


class Color(enum.Enum):
    RED = "red"


class Level(enum.Enum):
    HIGH = 3


UTC_TIME = datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc)

CASES: list[tuple[str, Any, Any]] = [
    ("decimal", Decimal("1.10"), 1.1),
    ("decimal-integral", Decimal("3"), 3),
    ("decimal-more-digits-than-a-float", Decimal("0.12345678901234567890123"), "0.12345678901234567890123"),
    ("decimal-nan", Decimal("NaN"), "NaN"),
    ("decimal-infinity", Decimal("-Infinity"), "-Infinity"),
    ("path", Path("/tmp/x"), "/tmp/x"),
    ("pure-path", PurePosixPath("rel/y"), "rel/y"),
    ("tolist", ArrayLike(), [1, 2.5]),
    ("tolist-scalar", Scalar0d(), 0.25),
    ("pydantic", Model(), {"name": "m", "when": "2024-05-06"}),
    ("model-dump-without-mode", LooksLikeAModel(), {"dumped": True}),
    ("dict-method", V1Model(), {"v": 1}),
    ("dataclass", Point(1, Path("/p")), {"x": 1, "where": "/p"}),
    ("enum", Color.RED, "red"),
    ("enum-number", Level.HIGH, 3),
    ("datetime", UTC_TIME, "2024-01-02T03:04:05.000006+00:00"),
    ("date", datetime.date(2024, 1, 2), "2024-01-02"),
    ("time", datetime.time(1, 2, 3), "01:02:03"),
    ("uuid", uuid.UUID(int=5), "00000000-0000-0000-0000-000000000005"),
]
IDS = [case[0] for case in CASES]
VALUES = [pytest.param(value, expected, id=name) for name, value, expected in CASES]


def attribute_shape(expected: Any) -> Any:
    """What an attribute holds: an OTel primitive as itself, anything else as its JSON."""
    if isinstance(expected, (str, bool, int, float)):
        return expected
    return json.dumps(expected, separators=(",", ":"))


# --------------------------------------------------------------------------- the encoder


@pytest.mark.parametrize("value, expected", VALUES)
def test_the_rule(value, expected):
    assert json_value(value) == expected or json.loads(dumps(json_value(value))) == expected


@pytest.mark.parametrize("value, expected", VALUES)
def test_the_encoders_fallback(value, expected):
    assert json.loads(dumps({"v": value})) == {"v": expected}


@pytest.mark.parametrize("value, expected", VALUES)
def test_the_encoders_slow_path(value, expected):
    # A NaN elsewhere sends the whole value through the slow path, which used to repr what
    # orjson itself knows (dataclasses, enums, datetimes, UUIDs).
    assert json.loads(dumps({"v": value, "nan": float("nan")})) == {"v": expected, "nan": "nan"}


def test_a_misbehaving_object_still_becomes_its_repr():
    class Broken:
        def model_dump(self, **kwargs: Any) -> Any:
            raise RuntimeError("no")

        def tolist(self) -> Any:
            return self  # would come straight back

        def __repr__(self) -> str:
            return "<Broken>"

    assert json.loads(dumps([Broken()])) == ["<Broken>"]


# --------------------------------------------------------------------------- @traceable


@pytest.mark.parametrize("value, expected", VALUES)
def test_traceable_inputs_outputs_and_metadata(spans, value, expected):
    @traceable(metadata={"given": value})
    def echo(x):
        return x

    assert echo(value) is value
    span = spans.named("echo")
    assert json.loads(span.attributes["input.value"]) == {"x": expected}
    assert json.loads(span.attributes["output.value"]) == {"output": expected}
    assert span.attributes["langsmith.metadata.given"] == attribute_shape(expected)


@pytest.mark.parametrize("value, expected", VALUES)
def test_traceable_generator_items_and_run_handle(spans, value, expected):
    @traceable
    def items():
        yield value

    assert list(items()) == [value]
    assert json.loads(spans.named("items").attributes["output.value"]) == {"output": [expected]}

    with traceable("block", inputs={"v": value}) as run:
        run.add_metadata({"later": value})
        run.set_outputs(value)
    block = spans.named("block")
    assert json.loads(block.attributes["input.value"]) == {"v": expected}
    assert json.loads(block.attributes["output.value"]) == {"output": expected}
    assert block.attributes["langsmith.metadata.later"] == attribute_shape(expected)


# --------------------------------------------------------------------------- the instrumentors


def messages(attributes: dict[str, Any]) -> Any:
    return json.loads(attributes["gen_ai.input.messages"])


@pytest.mark.parametrize("value, expected", VALUES)
def test_openai_messages_tool_results_and_arguments(value, expected):
    kwargs = {
        "model": "m",
        "messages": [
            {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"v": value}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": value},
        ],
    }
    sent = messages(runs_openai.ChatCompletions().request_attributes(None, kwargs, capture=True))
    assert sent[0]["parts"][0]["arguments"] == {"v": expected}
    assert sent[1]["parts"][0]["response"] == expected


@pytest.mark.parametrize("value, expected", VALUES)
def test_openai_responses_and_embeddings_inputs(value, expected):
    kwargs = {"model": "m", "input": [{"type": "function_call_output", "call_id": "c1", "output": value}]}
    sent = messages(runs_openai.Responses().request_attributes(None, kwargs, capture=True))
    assert sent[0]["parts"][0]["response"] == expected
    embedded = runs_openai.Embeddings().request_attributes(None, {"model": "m", "input": value}, capture=True)
    assert json.loads(embedded["input.value"]) == {"input": expected}


@pytest.mark.parametrize("value, expected", VALUES)
def test_anthropic_tool_use_and_tool_results(value, expected):
    kwargs = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"v": value}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": value}]},
        ],
    }
    sent = messages(runs_anthropic.MessagesCreate().request_attributes(None, kwargs, capture=True))
    assert sent[0]["parts"][0]["arguments"] == {"v": expected}
    assert sent[1]["parts"][0]["response"] == expected


@pytest.mark.parametrize("value, expected", VALUES)
def test_instrumentor_request_attributes(value, expected):
    # Request keywords such as ``temperature`` become attributes when OTel can hold them.
    for op in (runs_openai.ChatCompletions(), runs_anthropic.MessagesCreate()):
        attrs = op.request_attributes(None, {"model": "m", "temperature": value}, capture=False)
        if isinstance(expected, (str, bool, int, float)):
            assert attrs["gen_ai.request.temperature"] == expected
        elif isinstance(expected, list) and all(isinstance(v, (int, float)) for v in expected):
            assert attrs["gen_ai.request.temperature"] == expected
        else:
            assert "gen_ai.request.temperature" not in attrs  # a dict is nothing OTel can hold
