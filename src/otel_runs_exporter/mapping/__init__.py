"""How span attributes become run fields: the conventions' rows, gathered into tables and applied per span.

Every rule that reads a semantic convention lives in this package: the
service's own ``langsmith.*`` attributes, the OTel GenAI conventions (spans and
events), OpenInference, OpenLLMetry (traceloop), Logfire and pydantic-ai. It is
pure: :func:`map_span` takes a copy of a span's attributes and events and
returns a :class:`Mapped` value that ``_convert`` places into the run.

The layout follows what a row needs::

    _model          SpanEvent, Mapped, and the row types a producer declares (each names the keys it
                    reads, and whether each marks a span as GenAI)
    _values         attribute values as producers write them (JSON text, tuples, flattened keys)
    _content, _msg_genai, _msg_anthropic, _msg_langchain     one reader per message shape;
    _messages       ... and the one that tells them apart
    _context, _readers   the per-span state, and the source readers several producers share
    _langsmith, _genai, _genai_events, _openinference, _openllmetry, _logfire
                    one module per producer convention: its ROWS and its SCOPES
    _tables         every producer's rows gathered into tables in precedence order; what marks GenAI
    _plan, _apply, _events, _dispatch   which rows a span's keys select, and applying them

Every row of the service's documented mapping ("Supported OpenTelemetry
attribute and event mapping" in its OTel tracing guide) is a row here, with the
doc's words as its comment (``doc:``), so a span means the same run whether the
service converts it or we do. Adding a producer is one module and its line in
``_tables.PRODUCERS`` (``docs/mapping.md``).
"""

from __future__ import annotations

from ._dispatch import map_span, reads_nothing
from ._genai_events import GENAI_EVENT_PREFIX
from ._model import RUN_TYPES, Mapped, SpanEvent
from ._tables import GENERIC_KEYS, MARKING_KEYS, MARKING_PREFIXES, SCOPES

__all__ = ["SpanEvent", "Mapped", "map_span", "reads_nothing", "RUN_TYPES", "GENAI_EVENT_PREFIX", "SCOPES",
           "MARKING_KEYS", "MARKING_PREFIXES", "GENERIC_KEYS"]
