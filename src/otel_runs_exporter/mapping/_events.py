"""One pass over a span's events with every producer's event rows (``EventRow``).

Message and choice events are read into the span's :class:`~._context.Ctx` for
``_genai_events.read_events``; first-token marks set ``Mapped.first_token_time_ns``;
an inference-details event's attributes stand beneath the span's own.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ._context import Ctx, EventState
from ._messages import message_of
from ._model import Mapped, SpanEvent
from ._tables import (
    ATTRIBUTE_EVENTS, CHOICE_EVENTS, CHOICE_RESULT_ATTRIBUTES, CONTENT_EVENTS, FIRST_TOKEN_EVENTS, HISTORY_FRAMEWORKS,
    MESSAGE_EVENT_ROLES, PROVIDER_KEYS,
)
from ._values import as_int, json_value, plain, unflatten

__all__ = ["scan_events", "event_body", "with_event_attributes"]

#: The roles of replies: beside a choice event they are the conversation so far, else the outputs.
_REPLY_ROLES = frozenset({"assistant", "tool"})


def scan_events(ctx: Ctx, events: Sequence[SpanEvent], out: Mapped) -> None:
    """One pass over the events: content events and first-token events."""
    state = ctx.events = EventState()
    if HISTORY_FRAMEWORKS:
        attributes = ctx.attributes
        state.history_only = any(attributes.get(key) in HISTORY_FRAMEWORKS for key in PROVIDER_KEYS
                                 if isinstance(attributes.get(key), str))
    for index, event in enumerate(events):
        name = event.name
        # Only an event with a whole-number time can be compared and placed: one with an odd
        # time (an app's own add_event) stays among the run's events as it came.
        time_ns = event.time_ns
        if name in FIRST_TOKEN_EVENTS and isinstance(time_ns, int) and not isinstance(time_ns, bool):
            out.consumed_events.add(index)
            if out.first_token_time_ns is None or time_ns < out.first_token_time_ns:
                out.first_token_time_ns = time_ns
            continue
        attrs = event.attributes
        role = MESSAGE_EVENT_ROLES.get(name)
        if role is not None:
            body = event_body(attrs)
            state.messages.append((role in _REPLY_ROLES, message_of(body, role)))
            out.consumed_events.add(index)
        elif name in CHOICE_EVENTS:
            body = event_body(attrs)
            position = (as_int(body.get("index")) if isinstance(body, dict) else None) or 0
            messages = message_of(body, "assistant")
            for key in CHOICE_RESULT_ATTRIBUTES:
                if attrs.get(key) is not None:  # the results of the calls it made, answered in the same step
                    messages.extend(message_of({"role": "tool", "content": attrs[key]}, "tool"))
            state.choices.append((position, messages))
            reason = body.get("finish_reason") if isinstance(body, dict) else None
            reason = reason if reason is not None else attrs.get("finish_reason")
            if reason is not None:
                state.finish_reasons.append((position, plain(reason)))
            out.consumed_events.add(index)
        elif name in CONTENT_EVENTS:
            key, side = CONTENT_EVENTS[name]
            if key in attrs:
                if side == "in":
                    state.prompt = attrs[key]
                else:
                    state.completion = attrs[key]
                out.consumed_events.add(index)


def event_body(attrs: Mapping[str, Any]) -> Any:
    """The message an older GenAI event carries: a JSON ``body``/``gen_ai.event.content``
    attribute (log events bridged to span events), or the attributes themselves,
    flattened (``message.content``) or not."""
    for key in ("body", "gen_ai.event.content"):
        if key in attrs:
            return json_value(attrs[key])
    body = unflatten({k: v for k, v in attrs.items() if not k.startswith("gen_ai.") and k not in CHOICE_RESULT_ATTRIBUTES})
    return body if isinstance(body, dict) else {}


def with_event_attributes(
    attributes: Mapping[str, Any], events: Sequence[SpanEvent], consumed_events: set[int]
) -> Mapping[str, Any]:
    """The span's attributes with those of its attribute events beneath them (the span's own win)."""
    merged: dict[str, Any] | None = None
    for index, event in enumerate(events):
        if event.name in ATTRIBUTE_EVENTS:
            if merged is None:
                merged = dict(attributes)
            for key, value in event.attributes.items():
                if key not in merged:
                    merged[key] = value
            consumed_events.add(index)
    return attributes if merged is None else merged
