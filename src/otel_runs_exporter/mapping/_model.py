"""What the mapping takes and gives (``SpanEvent``, ``Mapped``), and the rows producers declare.

A producer module (``_openinference``, ``_strands`` ...) declares its rows with
the types below; ``_tables`` gathers every producer's rows into the tables the
dispatch applies, each table sorted by its rows' ``order`` (the precedence:
first present wins). A row names the attribute keys it reads as :class:`Key`
values, each saying whether it marks a span as GenAI for ``spans=genai``: a key
as generic as ``input.value`` is read, but does not by itself make a span an
LLM app's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = [
    "SpanEvent", "Mapped", "RUN_TYPES", "Key", "generic", "RunTypeRule", "Attr", "attr", "ROLES", "UsageObject", "Source",
    "EventRow", "Fixup", "FrameworkName", "Namespace", "Row", "FINAL", "FINAL_UNLESS_MODEL", "NOT_FINAL", "SPAN_EVENTS", "reads_of",
    "Reader",
]


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """A span event as the mapper sees it (a plain copy of the SDK's Event).

    ``name`` and ``time_ns`` are whatever the app passed to ``add_event``, not
    always a str and an int: typed ``Any`` so that the compiled build, which
    checks declared types at run time, takes them as the pure one does.
    """

    name: Any
    attributes: Mapping[str, Any]
    time_ns: Any


@dataclass(slots=True)
class Mapped:
    """What the conventions say about a span.

    ``consumed`` names the attributes the mapping used, so ``_convert`` does not
    repeat them in metadata; ``consumed_events`` holds the indexes of span events
    whose content went into inputs or outputs (or into ``first_token_time_ns``),
    so they are not repeated in the run's events either.

    ``first_token_time_ns`` is the earliest streaming "first token" event of the
    span (epoch nanoseconds), for the converter to place as a ``new_token`` event;
    without one, ``first_token_after_s`` places it that many seconds after the
    span's start (a producer that records only the delay).

    ``malformed`` lists ``(attribute, what its convention says it holds)`` for
    values a rule could not read (malformed JSON, a wrong type): they are left
    unconsumed, so the converter keeps them in metadata as text and says so.

    ``inputs_final`` says the inputs came from a source that nothing a producer
    writes later can replace, so a run's early post may carry them (see
    ``Source.final``); otherwise only its patch does.
    """

    run_type: str = "chain"
    name: str | None = None
    inputs: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    invocation_params: dict[str, Any] | None = None
    tags: list[str] | None = None
    session_name: str | None = None
    session_id: Any = None
    consumed: set[str] = field(default_factory=set)
    consumed_events: set[int] = field(default_factory=set)
    first_token_time_ns: Any = None  # an event's time, as the app gave it (see SpanEvent)
    first_token_after_s: float | None = None  # else: seconds after the span's start
    inputs_final: bool = False
    malformed: list[tuple[str, str]] = field(default_factory=list)


#: The run types the service knows; the one list (the converter and traceable use it too).
#: A ``langsmith.span.kind`` outside this set is ignored (the next rule decides)
#: rather than sent and rejected.
RUN_TYPES = frozenset({"llm", "chain", "tool", "retriever", "embedding", "prompt", "parser"})

#: For which run types a value a source holds is final when a span starts (``Source.final``).
FINAL = RUN_TYPES
FINAL_UNLESS_MODEL = RUN_TYPES - {"llm", "embedding"}
NOT_FINAL: frozenset[str] = frozenset()


# ---------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Key:
    """An attribute key a row reads, or a flattened family's prefix (ending in ``.``).

    ``marks``: a span that carries it is a GenAI span (``spans=genai`` keeps it).
    """

    name: str
    marks: bool = True


def generic(name: str) -> Key:
    """A key read by the mapping that is too common to mark a span as GenAI (``input.value``)."""
    return Key(name, marks=False)


@dataclass(frozen=True, slots=True)
class RunTypeRule:
    """The run type from a kind attribute: its value, lower-cased, looked up in ``values``.

    ``default`` answers any other value; None lets an unknown value fall through to the next rule.
    ``lists_model_calls``: ``values`` names every model call, so a span with an unknown value is no
    llm run even when it names a model or provider (the ``model`` table's presence rule does not apply).
    """

    key: Key
    values: Mapping[str, str]
    default: str | None
    order: int
    lists_model_calls: bool = False


#: The roles an attribute may have (:class:`Attr`): each names a table the attribute is a row of, and its
#: value is the row's place in that table's precedence order (first present wins), or a tuple whose
#: last item is that place:
#:
#: ========================  ===========================================================================
#: ``model``                 its presence makes an otherwise unclassified span an llm run
#: ``presence``              ``(run type, place)``: its presence makes the run this type (no kind rule decided)
#: ``name``                  ``(run type or None, place)``: the run's name, for runs of that type
#: ``request_model``         the model asked for (``ls_model_name``)
#: ``response_model``        the model that answered (``response_model`` when they differ)
#: ``provider``              ``ls_provider``
#: ``finish_reason``         ``outputs.finish_reason`` when the output messages gave none
#: ``finish_reasons_array``  every choice's reason; the first one fills in, as above
#: ``first_chunk``           ``(seconds per unit, place)``: the delay to the first streamed chunk
#: ``usage``                 ``(path in usage_metadata, place)``: a token count (places per path); a list
#:                           of them for a count written to two paths
#: ``param``                 ``(invocation param, shape, place)``: fills it when nothing before it did
#: ``param_object``          a JSON object of invocation params, merged
#: ``metadata``              ``(metadata key, place)``: copied there
#: ``metadata_object``       a JSON object merged into metadata
#: ``metadata_family``       ``(decode JSON, place)``: a family whose remainder is a metadata key
#: ``family``                ``indexed``: a flattened family, grouped by prefix (``gen_ai.prompt.0.role``);
#:                           indexed: its next segment must be a list position
#: ``documents``             retrieved documents: a family (``retrieval.documents.``) or one JSON array
#: ``tags``                  tags, merged in this order
#: ``ids``, ``session_name``, ``session_id``   the run's place and project (``_convert``, ``_ids``)
#: ``provider_usage``        where a provider's whole usage object may be (``_logfire``)
#: ``said_elsewhere``        consumed as it is: the run says it already (its own times)
#: ========================  ===========================================================================
ROLES = frozenset({
    "model", "presence", "name", "request_model", "response_model", "provider", "finish_reason",
    "finish_reasons_array", "first_chunk", "usage", "param", "param_object", "metadata", "metadata_object",
    "metadata_family", "family", "documents", "tags", "ids", "session_name", "session_id", "provider_usage",
    "said_elsewhere",
})


@dataclass(frozen=True, slots=True)
class Attr:
    """One attribute (or a family's prefix) and every table it is a row of: its roles (:data:`ROLES`)."""

    key: Key
    roles: Mapping[str, Any]


def attr(key: str, /, *, marks: bool = True, **roles: Any) -> Attr:
    """The row of attribute ``key``: ``attr("gen_ai.system", model=30, provider=20)``.

    ``marks=False`` for a name too common to mark a span as GenAI (``input.value``).
    """
    unknown = set(roles) - ROLES
    if unknown:
        raise ValueError(f"attr({key!r}): no such role {sorted(unknown)}; the roles are {sorted(ROLES)}")
    return Attr(Key(key, marks), roles)


@dataclass(frozen=True, slots=True)
class UsageObject:
    """A whole usage object completing the counts (see ``_apply.usage``); ``key`` None: the outputs' own."""

    key: Key | None
    where: str
    order: int


#: ``reader(ctx, arg)`` -> the inputs or outputs it found, or None (see ``_context.Ctx``).
Reader = Callable[[Any, str], "dict[str, Any] | None"]


@dataclass(frozen=True, slots=True)
class Source:
    """A row of the inputs (``side="in"``) or outputs (``"out"``) table: first present wins.

    ``reads`` is every key (or family prefix) the reader may look up: a span with none of
    them is not offered to it. ``final`` (inputs only): the run types for which the value is
    final when the span starts, so an early post may carry it. ``run_types``: the row applies
    to runs of these types only (empty: to any).
    """

    side: str
    reader: Reader
    arg: str
    reads: tuple[Key, ...]
    order: int
    final: frozenset[str] = NOT_FINAL
    run_types: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class EventRow:
    """A span event the mapping reads: ``kind`` is ``first_token``, ``message`` (``value``: the role),
    ``content`` (``value``: (attribute, side)), ``choice`` or ``attributes``; or, for ``choice_results``,
    the attribute of a choice event that holds the results of the tool calls it made."""

    kind: str
    name: str
    value: Any = None


#: ``fix(out, attributes)``, after every table: a producer's own correction of the mapped run.
FixupFn = Callable[[Mapped, Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Fixup:
    """A producer's step after the tables, run when the span has one of ``reads``."""

    fix: FixupFn
    reads: tuple[Key, ...]
    order: int


@dataclass(frozen=True, slots=True)
class FrameworkName:
    """A value a producer writes as the provider or system that names the framework itself
    (``gen_ai.system = "strands-agents"``): never a run's provider, never a sign of a model call.

    ``events_are_history``: its spans' message events are the conversation so far, never the span's
    own answer (only a choice event is), so a span without a choice has no outputs from them."""

    value: str
    events_are_history: bool = False


@dataclass(frozen=True, slots=True)
class Namespace:
    """A prefix no row reads as a whole, under which any key marks a span as GenAI (``gen_ai.``)."""

    key: Key


Row = Any  # one of the row types above


def reads_of(row: Row) -> tuple[Key, ...]:
    """The keys a row reads (a :class:`Source` or :class:`Fixup` lists several; an event row none)."""
    if isinstance(row, (Source, Fixup)):
        return row.reads
    if isinstance(row, Namespace):
        return ()  # marks, reads nothing
    if isinstance(row, UsageObject):
        return () if row.key is None else (row.key,)
    if isinstance(row, Attr):
        return (row.key,)
    key = getattr(row, "key", None)
    return (key,) if isinstance(key, Key) else ()


#: Stands among a span's read keys when the span has events: the event readers' rows read it.
SPAN_EVENTS = "(span events)"
