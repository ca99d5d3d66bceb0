"""Where a span's run is: the lookups that let a run tree cross boundaries.

Two questions are asked from outside the processor, and both are answered here
so that no module reaches into another's privates or rewires its globals:

* *Which run did a live processor give this span?* A processor registers
  itself (:func:`register`) while it runs; the ``runs`` propagator asks
  :func:`run_ids_for` when it injects the current run into an outgoing request.
* *Does this process send runs at all?* Every live processor and exporter of
  ours is known here (:func:`add_sender`), so ``traceable`` can tell an app whose
  tracer provider has none of ours (:func:`any_sender`), and the end of a
  process that runs no ``atexit`` reaches each of them (:func:`senders`).
* *Did this context arrive with a remote run?* The propagator stores the
  extracted run in the context (:func:`with_remote_run`); the processor reads it
  (:func:`remote_run`) when a span with a remote parent starts.
"""

from __future__ import annotations

from typing import Any, Protocol

from opentelemetry import context as otel_context

from ._fork import WeakRegistry
from ._ids import RunIds

__all__ = [
    "RunLookup", "register", "unregister", "run_ids_for", "remote_run", "with_remote_run", "add_sender", "any_sender",
    "senders",
]

_REMOTE_RUN_KEY = otel_context.create_key("otel_runs_exporter.remote_run")


class RunLookup(Protocol):
    def run_ids(self, span_id: int) -> RunIds | None:
        """The run ids given to the open or recently ended span ``span_id``, or None."""


# The live processors; one nobody holds any more is not kept alive by being registered.
_lookups: WeakRegistry[RunLookup] = WeakRegistry()


# Every live processor and exporter of ours, whether or not it can look runs up.
_senders: WeakRegistry[object] = WeakRegistry()


def register(lookup: RunLookup) -> None:
    _lookups.add(lookup)
    _senders.add(lookup)


def add_sender(sender: object) -> None:
    """A processor or exporter of ours that sends runs (the exporter path registers here only)."""
    _senders.add(sender)


def any_sender() -> bool:
    """Whether any processor or exporter of ours is alive in this process."""
    return bool(_senders.live())


def senders() -> list[Any]:
    """Every live processor and exporter of ours (for the end of a process: ``_process_end``)."""
    return _senders.live()


def unregister(lookup: RunLookup) -> None:
    _lookups.discard(lookup)


def run_ids_for(span_id: int) -> RunIds | None:
    """The run ids a registered processor gave the span ``span_id`` (open or recently ended)."""
    for lookup in _lookups.live():
        ids = lookup.run_ids(span_id)
        if ids is not None:
            return ids
    return None


def remote_run(context: otel_context.Context | None) -> RunIds | None:
    """The remote run ``context`` arrived with (set by the ``runs`` propagator), if any."""
    return otel_context.get_value(_REMOTE_RUN_KEY, context)  # type: ignore[return-value]


def with_remote_run(ids: RunIds, context: otel_context.Context | None = None) -> otel_context.Context:
    return otel_context.set_value(_REMOTE_RUN_KEY, ids, context)
