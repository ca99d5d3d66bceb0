"""Attribute-mapping tables: how span attributes become run fields.

This module owns every rule that reads a semantic convention (the service's own
``langsmith.*`` attributes, OpenInference, OTel GenAI, traceloop). It is pure:
``map_span`` takes a copy of a span's attributes and events and returns a
:class:`Mapped` value that ``_convert`` places into the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import orjson

__all__ = ["SpanEvent", "Mapped", "map_span"]


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """A span event as the mapper sees it (a plain copy of the SDK's Event)."""

    name: str
    attributes: Mapping[str, Any]
    time_ns: int


@dataclass(slots=True)
class Mapped:
    """What the conventions say about a span.

    ``consumed`` names the attributes the mapping used, so ``_convert`` does not
    repeat them in metadata; ``consumed_events`` holds the indexes of span events
    whose content went into inputs or outputs, so they are not repeated in the
    run's events either.
    """

    run_type: str = "chain"
    name: str | None = None
    inputs: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    invocation_params: dict[str, Any] | None = None
    tags: list[str] | None = None
    session_name: str | None = None
    consumed: set[str] = field(default_factory=set)
    consumed_events: set[int] = field(default_factory=set)


_MODEL_KEYS = ("gen_ai.request.model", "gen_ai.provider.name", "gen_ai.system", "llm.model_name")


def _json_value(value: Any) -> Any:
    """Decode a JSON string attribute; anything else is returned as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _as_object(value: Any, key: str) -> dict[str, Any]:
    decoded = _json_value(value)
    if isinstance(decoded, dict):
        return decoded
    return {key: decoded}


def map_span(attributes: Mapping[str, Any], events: Sequence[SpanEvent] = ()) -> Mapped:
    """Map a span's attributes and events to run fields.

    >>> m = map_span({"input.value": '{"q": 1}', "gen_ai.request.model": "m"})
    >>> (m.run_type, m.inputs)
    ('llm', {'q': 1})
    """
    out = Mapped()
    consumed = out.consumed

    kind = attributes.get("langsmith.span.kind")
    if isinstance(kind, str) and kind:
        out.run_type = kind.lower()
        consumed.add("langsmith.span.kind")
    elif any(k in attributes for k in _MODEL_KEYS):
        out.run_type = "llm"

    if "input.value" in attributes:
        out.inputs = _as_object(attributes["input.value"], "input")
        consumed.add("input.value")
    if "output.value" in attributes:
        out.outputs = _as_object(attributes["output.value"], "output")
        consumed.add("output.value")

    name = attributes.get("langsmith.trace.name")
    if isinstance(name, str) and name:
        out.name = name
        consumed.add("langsmith.trace.name")
    session = attributes.get("langsmith.trace.session_name")
    if isinstance(session, str) and session:
        out.session_name = session
        consumed.add("langsmith.trace.session_name")
    tags = attributes.get("langsmith.span.tags")
    if tags:
        consumed.add("langsmith.span.tags")
        if isinstance(tags, str):
            decoded = _json_value(tags)
            tags = decoded if isinstance(decoded, list) else [t.strip() for t in tags.split(",") if t.strip()]
        out.tags = [str(t) for t in tags]
    for key, value in attributes.items():
        if key.startswith("langsmith.metadata."):
            out.metadata[key[len("langsmith.metadata.") :]] = value
            consumed.add(key)
    return out
