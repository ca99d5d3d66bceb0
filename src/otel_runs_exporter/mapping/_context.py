"""The state one span's mapping shares between its readers (:class:`Ctx`), and what its events said."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["Ctx", "EventState"]


@dataclass(slots=True)
class EventState:
    """What the one pass over a span's events (``_events.scan_events``) found, for ``read_events``."""

    #: Message events in order, each with whether it is a reply (assistant or tool message).
    messages: list[tuple[bool, list[dict[str, Any]]]] = field(default_factory=list)
    #: Choice events: (index, messages), and (index, finish_reason).
    choices: list[tuple[int, list[dict[str, Any]]]] = field(default_factory=list)
    finish_reasons: list[tuple[int, Any]] = field(default_factory=list)
    #: The whole-content events' values (``gen_ai.content.prompt`` / ``.completion``).
    prompt: Any = None
    completion: Any = None
    #: Set when the replies became the outputs (no choice event), so the inputs leave them out.
    replies_used: bool = False
    #: Set when the span's producer writes its message events as history only (``FrameworkName``).
    history_only: bool = False


@dataclass(slots=True)
class Ctx:
    """What the single pass over a span's attributes collected, and what its readers share."""

    attributes: Mapping[str, Any]
    consumed: set[str]
    #: The flattened families' members, by family (see ``_dispatch.read_keys``).
    flat: dict[str, dict[str, Any]]
    #: The rows this span's keys can fire (a ``_plan.Plan``).
    plan: Any
    #: Set once a source table has its winner: the remaining readers only
    #: mark their attributes consumed and return without parsing.
    claim_only: bool = False
    #: What a producer's readers decoded once and read again (Logfire's event arrays and
    #: request body), by a key of the producer's own.
    cache: dict[str, Any] = field(default_factory=dict)
    #: (attribute, expected shape) of values a rule could not read; see Mapped.malformed.
    malformed: list[tuple[str, str]] = field(default_factory=list)
    #: Set when the inputs found are only part of what their source will hold (not final).
    partial_inputs: bool = False
    #: The run's type, once decided (before the source tables are applied), and the side of the
    #: source table being applied ("in" or "out").
    run_type: str = "chain"
    side: str = "in"
    #: What the span's events said (None: it has none).
    events: EventState | None = None

    def take(self, key: str) -> Any:
        """The attribute's value, marked consumed (None when absent)."""
        value = self.attributes.get(key)
        if value is not None:
            self.consumed.add(key)
        return value

    def refuse(self, key: str, expected: str) -> None:
        """A value this rule cannot read: not consumed, so it stays in metadata, and reported."""
        self.consumed.discard(key)
        self.malformed.append((key, expected))

    def take_flat(self, prefix: str) -> dict[str, Any] | None:
        group = self.flat.get(prefix)
        if group:
            consumed = self.consumed
            for rest in group:  # a loop: a generator costs more than the few keys of a family
                consumed.add(prefix + rest)
        return group
