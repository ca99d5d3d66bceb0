"""The current run, as the service's SDK hands it out: :func:`get_current_run_tree` and :class:`RunHandle`.

A handle is a way to fill in a run from inside it: its ids, metadata, tags,
inputs and outputs, written as the span attributes the converter reads
(``langsmith.metadata.<key>``, ``langsmith.span.tags``, ``input.value``,
``output.value``). Any recording span has one, whoever made it; inside a
``traceable`` call it is that call's own handle, so outputs set there replace
the return value's::

    >>> from otel_runs_exporter import get_current_run_tree, traceable
    >>> @traceable
    ... def answer(question: str) -> str:
    ...     run = get_current_run_tree()
    ...     if run is not None:
    ...         run.add_metadata({"thread_id": "t-1", "user_id": "u-7"})
    ...     return "42"
    >>> answer("why?"), get_current_run_tree() is None
    ('42', True)
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Mapping
from uuid import UUID

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

from .. import _registry
from .._encode import json_value
from ._span import json_dumps

__all__ = ["RunHandle", "get_current_run_tree", "UNSET", "guard", "as_object", "set_metadata", "tags_text", "HANDLE_KEY"]

logger = logging.getLogger("otel_runs_exporter.instrumentation")

TAGS = "langsmith.span.tags"
#: The context key under which a ``traceable`` call keeps its handle while its code runs.
HANDLE_KEY = otel_context.create_key("otel_runs_exporter.run_handle")


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = _Unset()


def guard(fn: Callable[..., Any], *args: Any) -> None:
    """Run one step of ours on the user's behalf; a failure is logged, never raised into the app."""
    try:
        fn(*args)
    except Exception:
        logger.warning("traceable: %s failed", getattr(fn, "__name__", fn), exc_info=True)


def as_object(value: Any, key: str) -> Any:
    return value if isinstance(value, Mapping) else {key: value}


def attribute_value(value: Any) -> Any:
    """A value OTel accepts as an attribute: primitives as they are, anything else as JSON.

    A value JSON has no type for is first what ``json_value`` makes of it, so a Decimal stays a
    number and a path a plain string, as they would inside the inputs.
    """
    if not isinstance(value, (str, bool, int, float, list, tuple, dict)):
        value = json_value(value)
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return json_dumps(value)


def set_metadata(span: Span, metadata: Mapping[str, Any]) -> None:
    for key, value in metadata.items():
        span.set_attribute(f"langsmith.metadata.{key}", attribute_value(value))


def tags_text(tags: Iterable[str]) -> str:
    return json_dumps([str(t) for t in tags])


def _tags_on(span: Span) -> list[str]:
    """The tags a span already carries (a span made elsewhere may have some)."""
    text = (getattr(span, "attributes", None) or {}).get(TAGS)
    if not isinstance(text, str):
        return []
    try:
        tags = orjson.loads(text)
    except orjson.JSONDecodeError:
        return []
    return [str(t) for t in tags] if isinstance(tags, list) else []


class RunHandle:
    """A way to fill in a run before it ends: what ``with traceable(...) as run`` yields, and
    what :func:`get_current_run_tree` returns.

    >>> with traceable("lookup", run_type="retriever", inputs={"q": "x"}) as run:  # doctest: +SKIP
    ...     run.set_outputs({"documents": []})
    ...     run.add_metadata({"index": "v2"})
    ...     run.add_tags(["beta"])
    """

    __slots__ = ("span", "_outputs", "_tags", "_deferred")

    def __init__(self, span: Span, tags: Iterable[str] | None = None, *, deferred: bool = True) -> None:
        self.span = span
        self._outputs: Any = UNSET
        self._tags: list[str] | None = list(tags) if tags is not None else None
        # A traceable call writes its outputs as it ends; a span made elsewhere gets them at once.
        self._deferred = deferred

    @property
    def id(self) -> UUID | None:
        """The run's id as the service stores it; None while it is not known here (no processor of ours
        gave the span a run yet: the exporter path learns ids at the span's end)."""
        ids = self._ids()
        return UUID(ids.run_id) if ids is not None else None

    @property
    def trace_id(self) -> UUID | None:
        """The id of the run tree's root run, as the service stores it; None as for :attr:`id`."""
        ids = self._ids()
        return UUID(ids.trace_id) if ids is not None else None

    def _ids(self) -> Any:
        context = self.span.get_span_context()
        return _registry.run_ids_for(context.span_id) if context.is_valid else None

    def set_inputs(self, inputs: Mapping[str, Any] | Any) -> None:
        """Replace the run's inputs (a mapping; anything else becomes ``{"input": value}``)."""
        guard(self.span.set_attribute, "input.value", json_dumps(as_object(inputs, "input")))

    def set_outputs(self, outputs: Mapping[str, Any] | Any) -> None:
        """Set the run's outputs (non-mappings become ``{"output": value}``). Inside a traceable call they
        are written when it ends, in place of its return value's."""
        self._outputs = outputs
        if not self._deferred:
            guard(self.span.set_attribute, "output.value", json_dumps(as_object(outputs, "output")))

    def add_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Add metadata (``langsmith.metadata.<key>``): ``thread_id`` puts the trace in a thread, ``user_id`` names who asked."""
        guard(set_metadata, self.span, metadata)

    def add_tags(self, tags: Iterable[str]) -> None:
        """Append tags to the run's (as the service's SDK does); a single string is one tag."""
        guard(self._append_tags, [tags] if isinstance(tags, str) else tags)

    def _append_tags(self, tags: Iterable[str]) -> None:
        if self._tags is None:
            self._tags = _tags_on(self.span)
        self._tags.extend(str(t) for t in tags)
        self.span.set_attribute(TAGS, tags_text(self._tags))


def get_current_run_tree() -> RunHandle | None:
    """A handle on the current run: the recording span that is current, whoever made it; None outside one.

    Inside a ``traceable`` call it is that call's handle (``set_outputs`` there
    replaces what the return value would have recorded); in a thread where no
    traced call is current, None.
    """
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    handle = otel_context.get_value(HANDLE_KEY)
    if isinstance(handle, RunHandle) and handle.span is span:
        return handle
    return RunHandle(span, deferred=False)
