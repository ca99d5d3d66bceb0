"""Carry the current run across process boundaries: the ``runs`` propagator.

The service's own clients pass a run's place in its tree in the
``langsmith-trace`` header, whose value is the run's dotted_order. This
propagator speaks the same header, so a trace that crosses services is one run
tree at the service, also when one side uses the service's own SDK::

    OTEL_PROPAGATORS=tracecontext,baggage,runs

On the sending side ``inject`` writes the dotted_order of the current span's run
(as the processor placed it). On the receiving side ``extract`` parses it and
puts the remote run's ids in the context; when the server span starts, the
processor places it under that run instead of making it a root.

Only the processor path can do this: an exporter sees ended spans, not the
context they started in, so there a span with a remote parent becomes a root
with the remote OTel ids in its metadata (``otel_parent_span_id``,
``otel_parent_is_remote``).
"""

from __future__ import annotations

import logging
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagators.textmap import (
    CarrierT,
    Getter,
    Setter,
    TextMapPropagator,
    default_getter,
    default_setter,
)

from ._ids import MAX_DOTTED_ORDER_CHARS, DottedOrderError, ids_from_dotted_order
from ._registry import remote_run, run_ids_for, with_remote_run

__all__ = ["RunsPropagator", "HEADER"]

logger = logging.getLogger(__name__)

HEADER = "langsmith-trace"
# A hostile header must not cost more than the deepest real trace: the depth limit's length.
_MAX_HEADER_CHARS = MAX_DOTTED_ORDER_CHARS


class RunsPropagator(TextMapPropagator):
    """Injects and extracts the current run's dotted_order (``langsmith-trace``)."""

    def extract(
        self, carrier: CarrierT, context: otel_context.Context | None = None, getter: Getter[CarrierT] = default_getter
    ) -> otel_context.Context:
        ctx = context if context is not None else otel_context.get_current()
        values = getter.get(carrier, HEADER)
        if not values or not isinstance(values[0], str):
            return ctx  # a carrier of bytes or None: not a header we can read
        value = values[0].strip()
        if len(value) > _MAX_HEADER_CHARS:
            logger.debug("ignored an oversized %s header (%d chars)", HEADER, len(value))
            return ctx
        try:
            ids = ids_from_dotted_order(value)
        except DottedOrderError as exc:
            logger.debug("ignored a malformed %s header: %s", HEADER, exc)
            return ctx
        return with_remote_run(ids, ctx)

    def inject(
        self, carrier: CarrierT, context: otel_context.Context | None = None, setter: Setter[CarrierT] = default_setter
    ) -> None:
        span = trace.get_current_span(context)
        span_context = span.get_span_context()
        ids = None
        if span_context.is_valid and not span_context.is_remote:
            ids = run_ids_for(span_context.span_id)
        if ids is None:
            # A service in the middle that only forwards: pass on what it received.
            ids = remote_run(context if context is not None else otel_context.get_current())
        if ids is not None:
            setter.set(carrier, HEADER, ids.dotted_order)

    @property
    def fields(self) -> set[str]:
        return {HEADER}
