"""Which spans become runs, and which traces are sent: the rules, in one place.

Two questions, both asked of what a span carries, never of what was sent:

* **The span filter** (``spans``, ``blocked_scopes``, ``should_export``):
  :meth:`SpanFilter.verdict` says whether a span becomes a run. Under
  ``spans=genai`` a span is kept when its instrumentation scope is a known
  GenAI producer's (:data:`GENAI_SCOPES`, matched as prefixes) or it carries
  an attribute the mapping declares as marking a GenAI span; any other span is a
  :data:`ROOT` verdict: kept only as the root of its tree, and only when some
  descendant is kept, so each trace keeps its entry point. What a left-out
  span's children become (they nest under its nearest kept ancestor) is the
  paths' business: ``_choice`` on the processor path, ``_exporter``'s
  holding area on the other.
* **Tail sampling** (``sample_rate``, ``keep_errors``, ``keep_slower_than_s``):
  :meth:`TailRule.rate_keeps` decides from the OTel trace id exactly as
  OpenTelemetry's ``TraceIdRatioBased`` does, so every process of a
  distributed trace decides the same; :meth:`TailRule.rescues` says why an
  ended span keeps its whole trace whatever the rate (an error, or slowness).
  Holding a trace until it is decided is ``_hold``'s.

Everything here is pure and cheap, and reads a span only (scope, attributes,
status, events, times): it runs on the application thread at span start on
the processor path, or on the exporter's thread at span end::

    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> tracer = TracerProvider().get_tracer("opentelemetry.instrumentation.sqlalchemy")
    >>> rule = SpanFilter(genai_only=True)
    >>> rule.verdict(tracer.start_span("SELECT", attributes={"db.system": "postgresql"})) == ROOT
    True
    >>> rule.verdict(tracer.start_span("chat", attributes={"gen_ai.operation.name": "chat"})) == KEEP
    True
    >>> TailRule(0.5).rate_keeps(0x0123456789abcdef_0000000000000001)
    True
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Final

from opentelemetry.trace import StatusCode

from ._logging import RateLimitedLog
from ._settings import Settings
from .mapping import MARKING_KEYS, MARKING_PREFIXES, SCOPES

__all__ = ["GENAI_SCOPES", "GENAI_ATTRIBUTE_PREFIXES", "KEEP", "SKIP", "ROOT", "SpanFilter", "TailRule",
           "is_genai_span", "genai_scope", "has_genai_attributes"]

logger = logging.getLogger(__name__)
_once = RateLimitedLog(logger, interval_s=float("inf"))

# The GenAI producers, by the instrumentation scope their tracer is named after (prefix match),
# and ours: each producer module of the mapping declares its own (``mapping._tables.SCOPES``).
GENAI_SCOPES: Final[tuple[tuple[str, str], ...]] = SCOPES

# What makes any span a GenAI one: the keys the mapping's rows declare as marking (exact names)
# and its marking prefixes (``gen_ai.``, a family such as ``retrieval.documents.``). The keys it
# also reads that are too generic to mark (``input.value``, ``session.id``) do not.
GENAI_ATTRIBUTE_PREFIXES: Final[tuple[str, ...]] = MARKING_PREFIXES
_GENAI_KEYS: Final = MARKING_KEYS

_GENAI_SCOPE_PREFIXES: Final = tuple(prefix for prefix, _ in GENAI_SCOPES)
# Their first letters: most names of a noise span (http.*, db.*, server.*) are told apart by one.
_GENAI_FIRST_LETTERS: Final = frozenset(name[0] for name in (*GENAI_ATTRIBUTE_PREFIXES, *_GENAI_KEYS))

# A span's verdict. ROOT: not a GenAI span under spans=genai; a run only as the root of a
# tree with kept descendants (each path finds out whether it has any).
KEEP: Final = 0
SKIP: Final = 1
ROOT: Final = 2

_SCOPE_CACHE_MAX = 1024  # an app has a handful of tracers; past this, someone names them per call


def genai_scope(name: str) -> bool:
    """Whether ``name`` is the instrumentation scope of a known GenAI producer (:data:`GENAI_SCOPES`).

    >>> genai_scope("openinference.instrumentation.langchain"), genai_scope("opentelemetry.instrumentation.requests")
    (True, False)
    """
    return name.startswith(_GENAI_SCOPE_PREFIXES)


def has_genai_attributes(attributes: Any) -> bool:
    """Whether any attribute name is a GenAI one (a marking key, or under :data:`GENAI_ATTRIBUTE_PREFIXES`).

    >>> has_genai_attributes({"llm.model_name": "x"}), has_genai_attributes({"http.method": "GET"})
    (True, False)
    """
    try:
        # Iterating the SDK's mapping lists its keys under its lock through Python methods; a copy
        # of its dict is one C call (as _convert.given_ids does), and an empty one is the answer.
        keys = attributes.copy()
    except AttributeError:
        if not attributes:
            return False
        keys = attributes
    letters = _GENAI_FIRST_LETTERS
    for key in keys:
        if key[:1] in letters and (key in _GENAI_KEYS or key.startswith(GENAI_ATTRIBUTE_PREFIXES)):
            return True
    return False


def _scope_name(span: Any) -> str:
    scope = span.instrumentation_scope
    return scope.name if scope is not None and scope.name else ""


def is_genai_span(span: Any) -> bool:
    """Whether ``spans=genai`` keeps this span for what it is (its scope or attributes), root or not.

    For a ``should_export`` that widens the GenAI rule rather than replacing it::

        configure(should_export=lambda span: is_genai_span(span) or span.name.startswith("checkout"))
    """
    return genai_scope(_scope_name(span)) or has_genai_attributes(span.attributes)


class SpanFilter:
    """``spans``, ``blocked_scopes`` and ``should_export``, resolved once; :meth:`verdict` per span."""

    __slots__ = ("_genai_only", "_blocked", "_should_export", "_scopes")

    def __init__(
        self,
        genai_only: bool = False,
        blocked: tuple[str, ...] = (),
        should_export: Callable[[Any], bool] | None = None,
    ) -> None:
        self._genai_only = genai_only
        self._blocked = tuple(blocked)
        self._should_export = should_export
        # scope name -> SKIP (blocked), KEEP (a GenAI producer's) or ROOT (decided by the span)
        self._scopes: dict[str, int] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> "SpanFilter | None":
        """None when every span is kept (``spans=all``, nothing blocked, no ``should_export``): no work per span."""
        if settings.spans == "all" and not settings.blocked_scopes and settings.should_export is None:
            return None
        return cls(settings.spans == "genai", settings.blocked_scopes, settings.should_export)

    def _by_scope(self, name: str) -> int:
        """What the scope alone says (cached): SKIP (blocked), KEEP (a GenAI producer's), ROOT (ask the span)."""
        if self._blocked and name.startswith(self._blocked):
            found = SKIP
        else:
            found = KEEP if genai_scope(name) else ROOT
        if len(self._scopes) >= _SCOPE_CACHE_MAX:
            self._scopes.clear()
        self._scopes[name] = found
        return found

    def verdict(self, span: Any) -> int:
        """:data:`KEEP`, :data:`SKIP`, or :data:`ROOT` (a run only as a root with kept descendants).

        A blocked scope is left out whatever else is said; ``should_export`` (when
        given) decides the rest instead of ``spans``, and an exception it raises
        keeps the span (logged once).
        """
        name = _scope_name(span)
        by_scope = self._scopes.get(name)
        if by_scope is None:
            by_scope = self._by_scope(name)
        if by_scope == SKIP:
            return SKIP
        should_export = self._should_export
        if should_export is not None:
            try:
                return KEEP if should_export(span) else SKIP
            except Exception:  # noqa: BLE001 - the user's function must never cost a span or raise into the app
                _once.warning(
                    "should_export",
                    "should_export raised on span %r; the span is kept, and further errors are not reported",
                    getattr(span, "name", "?"),
                    exc_info=True,
                )
                return KEEP
        if not self._genai_only or by_scope == KEEP or has_genai_attributes(span.attributes):
            return KEEP
        return ROOT


_TRACE_ID_LIMIT: Final = (1 << 64) - 1


class TailRule:
    """``sample_rate``, ``keep_errors`` and ``keep_slower_than_s``, resolved once."""

    __slots__ = ("bound", "keep_errors", "slower_than_ns", "can_rescue")

    def __init__(self, rate: float, keep_errors: bool = True, slower_than_s: float = 0.0) -> None:
        # TraceIdRatioBased's bound, on the same 64 low bits of the trace id: a head sampler
        # at this rate and this rule agree on every trace.
        self.bound = round(rate * (_TRACE_ID_LIMIT + 1))
        self.keep_errors = keep_errors
        self.slower_than_ns = int(slower_than_s * 1e9) if slower_than_s > 0 else 0
        # Whether anything but the rate can keep a trace (else a trace the rate drops is dropped at once).
        self.can_rescue = keep_errors or self.slower_than_ns > 0

    @classmethod
    def from_settings(cls, settings: Settings) -> "TailRule | None":
        """None when every trace is sent (``sample_rate`` 1): nothing is held."""
        if settings.sample_rate >= 1:
            return None
        return cls(settings.sample_rate, settings.keep_errors, settings.keep_slower_than_s)

    def rate_keeps(self, trace_id: int) -> bool:
        """Whether the rate alone sends the trace ``trace_id`` (an OTel trace id).

        >>> TailRule(0.0).rate_keeps(1), TailRule(0.5).rate_keeps(1 << 63), TailRule(0.5).rate_keeps((1 << 63) - 1)
        (False, False, True)
        """
        return (trace_id & _TRACE_ID_LIMIT) < self.bound

    def rescues(self, span: Any, events: Any = None) -> str | None:
        """Why this ended span keeps its trace whatever the rate (``"error"``, ``"slow"``), or None.

        An error is what the run's ``error`` is made from: an ERROR status or an exception event.
        ``events``: the span's events when the caller has read them already (the SDK copies them per read).
        """
        if self.keep_errors:
            status = span.status
            if status is not None and status.status_code is StatusCode.ERROR:
                return "error"
            for event in span.events if events is None else events:
                if event.name == "exception":
                    return "error"
        slower = self.slower_than_ns
        if slower and (span.end_time or 0) - (span.start_time or 0) > slower:
            return "slow"
        return None
