"""What ``traceable`` does with the service SDK's arguments, read once per decorated function or call.

:class:`Options`: ``process_inputs`` / ``process_outputs`` (what is recorded of a call)
and ``reduce_fn`` (a generator's items into one output), each guarded: one that raises
withholds its payload behind a marker, as the SDK does, never the unprocessed value, and
the call itself runs and returns as without tracing. :class:`Extra`: one call's
``langsmith_extra`` (``metadata``, ``tags``, ``project_name``, ``name``). The SDK's other
arguments and keys are accepted and said once to do nothing here (:func:`say_unsupported`).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from .._logging import RateLimitedLog

__all__ = ["Options", "NO_OPTIONS", "Extra", "say_unsupported"]

logger = logging.getLogger("otel_runs_exporter.instrumentation")
# The user's callables and per-call arguments may fail on every call: one line per reason a minute.
_rl = RateLimitedLog(logger, interval_s=60.0)


def _withheld(what: str, exc: BaseException) -> dict[str, str]:
    """What a run records when the user's ``process_inputs`` / ``process_outputs`` raised: a marker, never the
    unprocessed payload (the function exists to keep something out), as the service's SDK does (``ls_error``).
    The exception's type only: its message may echo the payload."""
    return {"ls_error": f"Processing failed; {what} raised {type(exc).__name__}"}


class Options:
    """What a ``Traceable`` does to a call's payloads: the service SDK's processors and reducer."""

    __slots__ = ("name", "process_inputs", "process_outputs", "reduce_fn")

    def __init__(self, name: str, process_inputs: Any, process_outputs: Any, reduce_fn: Any) -> None:
        self.name = name
        self.process_inputs = process_inputs
        self.process_outputs = process_outputs
        self.reduce_fn = reduce_fn

    def inputs(self, inputs: dict[str, Any]) -> Any:
        if self.process_inputs is None:
            return inputs
        try:
            return self.process_inputs(inputs)
        except Exception as exc:  # noqa: BLE001 - the user's function must not reach the call it traces
            _rl.warning("process_inputs", "traceable: process_inputs of %r raised %s; the run's inputs are withheld",
                        self.name, type(exc).__name__)
            return _withheld("process_inputs", exc)

    def outputs(self, outputs: Any) -> Any:
        if self.process_outputs is None:
            return outputs
        try:
            return self.process_outputs(outputs)
        except Exception as exc:  # noqa: BLE001
            _rl.warning("process_outputs", "traceable: process_outputs of %r raised %s; the run's outputs are withheld",
                        self.name, type(exc).__name__)
            return _withheld("process_outputs", exc)

    def reduced(self, items: list[Any]) -> Any:
        """A generator's outputs: its items, or what ``reduce_fn`` makes of them (a mapping, as the SDK asks)."""
        if self.reduce_fn is None:
            return {"output": items}
        try:
            value = self.reduce_fn(list(items))
        except Exception as exc:  # noqa: BLE001
            _rl.warning("reduce_fn", "traceable: reduce_fn of %r raised %s; the run keeps the yielded items",
                        self.name, type(exc).__name__)
            return {"output": items}
        if not isinstance(value, Mapping):
            _rl.warning("reduce_fn_type", "traceable: reduce_fn of %r returned %s, not a mapping; recorded as "
                        "{'output': ...}", self.name, type(value).__name__)
        return value


NO_OPTIONS = Options("traceable", None, None, None)


# The service SDK's per-call ``langsmith_extra`` keys honoured here; the others are said once to do nothing.
_EXTRA_KEYS = frozenset({"metadata", "tags", "project_name", "name"})
_unsupported_said: set[str] = set()


def say_unsupported(what: str) -> None:
    if what not in _unsupported_said:
        _unsupported_said.add(what)
        logger.warning("traceable: %s is the langsmith SDK's and has no effect here; it is ignored", what)


class Extra:
    """One call's ``langsmith_extra``, read once: what of it this package honours."""

    __slots__ = ("name", "metadata", "tags", "project_name")

    def __init__(self, extra: Any, name: str) -> None:
        self.name: str | None = None
        self.metadata: Mapping[str, Any] | None = None
        self.tags: list[str] = []
        self.project_name: str | None = None
        if not isinstance(extra, Mapping):
            _rl.warning("langsmith_extra", "traceable: langsmith_extra of a call to %r is %s, not a mapping; ignored",
                        name, type(extra).__name__)
            return
        for key in extra:
            if key not in _EXTRA_KEYS:
                say_unsupported(f"langsmith_extra[{key!r}]")
        given, metadata, tags, project = extra.get("name"), extra.get("metadata"), extra.get("tags"), extra.get("project_name")
        self.name = given if isinstance(given, str) and given else None
        self.project_name = project if isinstance(project, str) and project else None
        self.metadata = metadata if isinstance(metadata, Mapping) else None
        if isinstance(tags, (list, tuple)):
            self.tags = [str(t) for t in tags]
        if (metadata is not None and self.metadata is None) or (tags is not None and not isinstance(tags, (list, tuple))):
            _rl.warning("langsmith_extra_shape", "traceable: langsmith_extra of a call to %r: metadata must be a "
                        "mapping and tags a list; what is not was ignored", name)
