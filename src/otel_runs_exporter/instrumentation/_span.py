"""One traced call's span, as ``traceable`` and the client instrumentors both hold it.

Shared by :mod:`._traceable` and :mod:`._genai` (which must not import each other:
the set-up ``traceable`` may run instruments the model clients): making the span
current for a stretch of the user's code, recording the user's exception, and the
one JSON rule for attribute values.
"""

from __future__ import annotations

import logging
from contextvars import Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import Span

from .._encode import dumps

__all__ = ["SpanCall", "json_dumps"]

logger = logging.getLogger("otel_runs_exporter.instrumentation")


def json_dumps(value: Any) -> str:
    """Serialize ``value`` to a JSON string for a span attribute; never raises.

    The exporter's one coercion rule applies (``_encode.dumps``, whose fallback is
    ``_encode.json_value``): a Decimal a number, a path its string, pydantic models and
    dataclasses dicts, arrays lists, sets listed, cycles and excessive depth marked where
    they occur, only what no rule knows ``repr``-ed, so one odd argument never loses the others.

    >>> json_dumps({"a": {1, 2}, "b": object}).startswith('{"a":[')
    True
    """
    return dumps(value).decode()


class SpanCall:
    """The span of one traced call, shared by ``traceable`` and the client instrumentors.

    ``with call:`` runs a stretch of the user's code with the span current. An exception that
    leaves the block is the user's: it is recorded by :meth:`fail` (which ends the span) and goes
    on unchanged. Ending on success is the caller's part, since only it knows the outputs.
    """

    __slots__ = ("span", "ctx", "_token")

    def __init__(self, span: Span, ctx: otel_context.Context) -> None:
        self.span = span
        self.ctx = ctx
        self._token: Token[otel_context.Context] | None = None

    def attach(self) -> Token[otel_context.Context] | None:
        """Make the span current; the token for :meth:`detach`, or None if that failed (logged)."""
        try:
            return otel_context.attach(self.ctx)
        except Exception:
            logger.warning("could not make the span current", exc_info=True)
            return None

    @staticmethod
    def detach(token: Token[otel_context.Context] | None) -> None:
        """Undo :meth:`attach`."""
        if token is not None:
            otel_context.detach(token)  # logs its own failures, never raises

    def fail(self, exc: BaseException) -> None:
        """Record the user's exception and end the span; must not raise."""
        raise NotImplementedError

    def __enter__(self) -> None:
        self._token = self.attach()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        token, self._token = self._token, None
        self.detach(token)
        if exc is not None:
            self.fail(exc)
