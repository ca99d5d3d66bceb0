"""Every producer's rows gathered into the tables the dispatch applies, each in precedence order.

A producer module (one per convention) declares ``ROWS`` and ``SCOPES``; adding
a producer is a module and its line in :data:`PRODUCERS`. Each table here is
built once, at import, from the rows of its type, sorted by their ``order``
(first present wins), in the plain shapes ``_dispatch`` and ``_apply`` read per
span. ``docs/mapping.md`` lists every table as it is assembled here
(``python -m otel_runs_exporter.mapping``), and a test keeps it current.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from . import _genai, _genai_events, _langsmith, _logfire, _openinference, _openllmetry, _strands
from ._model import (
    SPAN_EVENTS, Attr, EventRow, Fixup, FixupFn, FrameworkName, Key, Namespace, Reader, RunTypeRule, Source, UsageObject,
    reads_of,
)

__all__ = ["PRODUCERS", "ROWS", "SCOPES", "MARKING_KEYS", "MARKING_PREFIXES", "GENERIC_KEYS", "TABLE_KEYS",
           "USAGE_PATHS"]

#: The conventions, one module each.
PRODUCERS: tuple[Any, ...] = (_langsmith, _genai, _genai_events, _openinference, _openllmetry, _logfire, _strands)

ROWS: tuple[Any, ...] = tuple(row for producer in PRODUCERS for row in producer.ROWS)

#: The instrumentation scopes (prefixes) of the GenAI producers: ``spans=genai`` keeps their spans.
SCOPES: tuple[tuple[str, str], ...] = tuple(scope for producer in PRODUCERS for scope in producer.SCOPES)


def _sorted(kind: type, where: Callable[[Any], bool] = lambda row: True) -> list[Any]:
    return sorted((row for row in ROWS if isinstance(row, kind) and where(row)), key=lambda row: row.order)


#: ``role -> [(place, key, the role's other values)]`` from every :class:`Attr`, each list in precedence order.
_ROLES: dict[str, list[tuple[int, str, tuple[Any, ...]]]] = {}
for _row in ROWS:
    if isinstance(_row, Attr):
        for _role, _value in _row.roles.items():
            for _one in (_value if isinstance(_value, list) else [_value]):
                _place, _rest = (_one, ()) if isinstance(_one, int) and not isinstance(_one, bool) else (
                    (0, (_one,)) if not isinstance(_one, tuple) else (_one[-1], _one[:-1]))
                _ROLES.setdefault(_role, []).append((_place, _row.key.name, _rest))
for _entries in _ROLES.values():
    _entries.sort(key=lambda entry: entry[0])


def _keys(role: str) -> tuple[str, ...]:
    return tuple(key for _, key, _ in _ROLES.get(role, ()))


def _with(role: str) -> tuple[tuple[Any, ...], ...]:
    """``(key, *the role's other values)`` in precedence order."""
    return tuple((key, *rest) for _, key, rest in _ROLES.get(role, ()))


RUN_TYPE_RULES: tuple[tuple[str, Mapping[str, str], str | None, bool], ...] = tuple(
    (row.key.name, row.values, row.default, row.lists_model_calls) for row in _sorted(RunTypeRule)
)
RUN_TYPE_PRESENCE: tuple[tuple[str, str], ...] = _with("presence")
NAME_RULES: tuple[tuple[str, str | None], ...] = _with("name")
MODEL_KEYS = _keys("model")
REQUEST_MODEL_KEYS = _keys("request_model")
RESPONSE_MODEL_KEYS = _keys("response_model")
PROVIDER_KEYS = _keys("provider")
FINISH_REASON_KEYS = _keys("finish_reason")
FINISH_REASONS_ARRAY_KEYS = _keys("finish_reasons_array")
TAG_KEYS = _keys("tags")
ID_KEYS = _keys("ids")
SAID_ELSEWHERE_KEYS = _keys("said_elsewhere")
SESSION_NAME_KEYS = _keys("session_name")
SESSION_ID_KEYS = _keys("session_id")
PARAM_OBJECT_KEYS = _keys("param_object")
METADATA_OBJECT_KEYS = _keys("metadata_object")
DOCUMENT_KEYS = _keys("documents")
PROVIDER_USAGE_KEYS = _keys("provider_usage")
FIRST_CHUNK_AFTER: tuple[tuple[str, float], ...] = _with("first_chunk")
METADATA_KEYS: tuple[tuple[str, str], ...] = _with("metadata")
METADATA_PREFIXES: tuple[tuple[str, bool], ...] = _with("metadata_family")
PARAM_FIELDS: tuple[tuple[str, str, str], ...] = _with("param")

#: Where a count can go in ``usage_metadata``, in the order a run's usage lists them: every ``usage``
#: role names one of these (a test checks they are all among ``_cost``'s token keys).
USAGE_PATHS: tuple[tuple[str, ...], ...] = (
    ("input_tokens",),
    ("output_tokens",),
    ("total_tokens",),
    ("input_token_details", "cache_read"),
    ("input_token_details", "cache_creation"),
    ("input_token_details", "audio"),
    ("output_token_details", "reasoning"),
    ("output_token_details", "audio"),
    ("reasoning_tokens",),
)
USAGE_FIELDS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = tuple(
    (path, tuple(key for key, where in _with("usage") if where == path)) for path in USAGE_PATHS
)
USAGE_OBJECTS: tuple[tuple[str | None, str], ...] = tuple(
    (None if row.key is None else row.key.name, row.where) for row in _sorted(UsageObject)
)

_INPUTS = _sorted(Source, lambda row: row.side == "in")
_OUTPUTS = _sorted(Source, lambda row: row.side == "out")
#: ``(reader, argument, run types for which its value is final at start)``, first present wins.
INPUT_SOURCES: tuple[tuple[Reader, str, frozenset[str]], ...] = tuple((r.reader, r.arg, r.final) for r in _INPUTS)
#: ``(reader, argument)``, first present wins.
OUTPUT_SOURCES: tuple[tuple[Reader, str], ...] = tuple((r.reader, r.arg) for r in _OUTPUTS)
#: The keys each source row may look up, parallel to the tables above: a span with none of them skips the row.
INPUT_READS: tuple[frozenset[str], ...] = tuple(frozenset(k.name for k in r.reads) for r in _INPUTS)
OUTPUT_READS: tuple[frozenset[str], ...] = tuple(frozenset(k.name for k in r.reads) for r in _OUTPUTS)
#: The run types each source row applies to (empty: any), parallel to the tables above.
INPUT_RUN_TYPES: tuple[frozenset[str], ...] = tuple(r.run_types for r in _INPUTS)
OUTPUT_RUN_TYPES: tuple[frozenset[str], ...] = tuple(r.run_types for r in _OUTPUTS)

#: The flattened families (by prefix), and those whose next segment must be a list position.
FLAT_PREFIXES: tuple[str, ...] = tuple(key for key, _ in _with("family"))
INDEXED_PREFIXES: frozenset[str] = frozenset(key for key, indexed in _with("family") if indexed)


def _events(kind: str) -> list[EventRow]:
    return [row for row in ROWS if isinstance(row, EventRow) and row.kind == kind]


FIRST_TOKEN_EVENTS: frozenset[str] = frozenset(row.name for row in _events("first_token"))
MESSAGE_EVENT_ROLES: dict[str, str] = {row.name: row.value for row in _events("message")}
CHOICE_EVENTS: frozenset[str] = frozenset(row.name for row in _events("choice"))
CONTENT_EVENTS: dict[str, tuple[str, str]] = {row.name: row.value for row in _events("content")}
ATTRIBUTE_EVENTS: frozenset[str] = frozenset(row.name for row in _events("attributes"))
#: Attributes of a choice event holding the results of the tool calls it made (``EventRow`` "choice_results").
CHOICE_RESULT_ATTRIBUTES: tuple[str, ...] = tuple(row.name for row in _events("choice_results"))

#: Provider or system values that name a framework, not the model's provider (``FrameworkName``).
FRAMEWORK_NAMES: frozenset[str] = frozenset(row.value for row in ROWS if isinstance(row, FrameworkName))
#: Of those, the frameworks whose message events are the conversation so far, never a span's answer.
HISTORY_FRAMEWORKS: frozenset[str] = frozenset(
    row.value for row in ROWS if isinstance(row, FrameworkName) and row.events_are_history
)

#: ``(fix, keys)``: a producer's step after the tables, when the span has one of ``keys`` (none: always).
FIXUPS: tuple[tuple[FixupFn, frozenset[str]], ...] = tuple(
    (row.fix, frozenset(k.name for k in row.reads)) for row in _sorted(Fixup)
)

_READ: list[Key] = [key for row in ROWS for key in reads_of(row) if key.name != SPAN_EVENTS]
#: Every attribute key (or family prefix) a row reads: dispatch by key, and ``reads_nothing``, know them all.
TABLE_KEYS: frozenset[str] = frozenset(key.name for key in _READ)
_NAMESPACES = tuple(row.key.name for row in ROWS if isinstance(row, Namespace))
#: What marks a span as GenAI (``_select``'s attribute test): a key that some row declares marking,
#: or a key under a marking prefix (a family's, or a namespace no row reads whole, ``gen_ai.``).
MARKING_PREFIXES: tuple[str, ...] = tuple(sorted(
    {key.name for key in _READ if key.marks and key.name.endswith(".") and not key.name.startswith(_NAMESPACES)}
    | set(_NAMESPACES)
))
MARKING_KEYS: frozenset[str] = frozenset(
    key.name for key in _READ if key.marks and not key.name.endswith(".") and not key.name.startswith(MARKING_PREFIXES)
)
#: Keys the mapping reads that do not mark a span (``input.value``, ``session.id``): a span carrying
#: only these is no GenAI span by itself.
GENERIC_KEYS: frozenset[str] = frozenset(
    key.name for key in _READ if not key.marks and not key.name.startswith(MARKING_PREFIXES)
) - MARKING_KEYS
