"""The state one span's mapping shares between its readers (:class:`Ctx`)."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["Ctx"]


class Ctx:
    """What the single passes over attributes and events collected."""

    __slots__ = (
        "attributes", "flat", "consumed", "claim_only", "event_in", "event_out", "finish_reasons", "replies_used",
        "event_prompt", "event_completion", "cache", "malformed", "partial_inputs", "plan", "run_type",
        "events_are_history",
    )

    def __init__(
        self, attributes: Mapping[str, Any], consumed: set[str], flat: dict[str, dict[str, Any]], plan: Any
    ) -> None:
        self.attributes = attributes
        self.consumed = consumed
        #: The flattened families' members, by family (see ``_dispatch.read_keys``).
        self.flat = flat
        #: The rows this span's keys can fire.
        self.plan = plan
        #: Set once a source table has its winner: the remaining readers only
        #: mark their attributes consumed and return without parsing.
        self.claim_only = False
        #: Message events in order, each with whether it is a reply (assistant or tool message).
        self.event_in: list[tuple[bool, list[dict[str, Any]]]] = []
        #: Choice events: (index, messages), and (index, finish_reason).
        self.event_out: list[tuple[int, list[dict[str, Any]]]] = []
        self.finish_reasons: list[tuple[int, Any]] = []
        #: Set when the replies became the outputs (no choice event), so the inputs leave them out.
        self.replies_used = False
        #: Set when the span's producer writes its message events as history only (``FrameworkName``).
        self.events_are_history = False
        self.event_prompt: Any = None
        self.event_completion: Any = None
        #: What a producer's readers decoded once and read again (Logfire's event arrays and
        #: request body), by a key of the producer's own.
        self.cache: dict[str, Any] = {}
        #: (attribute, expected shape) of values a rule could not read; see Mapped.malformed.
        self.malformed: list[tuple[str, str]] = []
        #: Set when the inputs found are only part of what their source will hold (not final).
        self.partial_inputs = False
        #: The run's type, once decided (before the source tables are applied).
        self.run_type = "chain"

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
            self.consumed.update(prefix + k for k in group)
        return group
