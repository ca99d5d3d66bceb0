"""The GenAI conventions' events: the older per-message events, the first-token marks, the inference details.

``_events.scan_events`` reads a span's events in one pass with the event rows
of every producer (``EventRow``); :func:`read_events` is the source row that
turns what it found into inputs and outputs.
"""

from __future__ import annotations

from typing import Any

from ._context import Ctx, EventState
from ._messages import payload_of
from ._model import NOT_FINAL, SPAN_EVENTS, EventRow, Key, Source, generic

__all__ = ["ROWS", "SCOPES", "GENAI_EVENT_PREFIX", "CHOICE_EVENT", "ASSISTANT_EVENT", "MESSAGE_EVENT_ROLES",
           "read_events"]

SCOPES: tuple[tuple[str, str], ...] = ()

#: Older GenAI per-message events and the role each one carries.
#: doc: gen_ai.system.message -> inputs.messages[]. "System message in conversation"
#: doc: gen_ai.user.message -> inputs.messages[]. "User message in conversation"
#: doc: gen_ai.assistant.message -> outputs.messages[]. "Assistant message in conversation"
#: doc: gen_ai.tool.message -> outputs.messages[]. "Tool response message"
#: (assistant and tool messages are the outputs when the span has no gen_ai.choice;
#: beside a choice they are the conversation so far, so they stay in the inputs, in order.)
MESSAGE_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
ASSISTANT_EVENT = "gen_ai.assistant.message"
#: doc: gen_ai.choice -> outputs. "Model choice/response with finish reason" (the finish_reason of the
#: first choice is kept as outputs.finish_reason).
CHOICE_EVENT = "gen_ai.choice"
#: Older GenAI whole-content events: event name -> (attribute, side).
#: doc: gen_ai.content.prompt -> inputs. "Extracts prompt content from event attributes"
#: doc: gen_ai.content.completion -> outputs. "Extracts completion content from event attributes"
_CONTENT_EVENTS = {"gen_ai.content.prompt": ("gen_ai.prompt", "in"), "gen_ai.content.completion": ("gen_ai.completion", "out")}
#: The GenAI semconv's event for one inference call. It carries the span's own attributes, the
#: conversation included (``gen_ai.input.messages``, ``gen_ai.output.messages``,
#: ``gen_ai.system_instructions``, ``gen_ai.tool.definitions``, as objects rather than JSON text):
#: openai-v2 with ``event_only`` content writes the messages only there. Read as attributes of
#: the span, under its own: an attribute the span has wins.
_ATTRIBUTE_EVENT = "gen_ai.client.inference.operation.details"
#: The name every GenAI event starts with, the ones above and any newer one: the OTel log
#: records ``otel_runs_exporter._genai_events`` joins to their span's run (an event no row reads
#: stays a run event).
GENAI_EVENT_PREFIX = "gen_ai."
#: doc: exception -> status, error. "Sets status to "error" and extracts exception message/stacktrace"
#: (applied by ``_convert``, which owns the run's error.)


def read_events(ctx: Ctx, side: str) -> dict[str, Any] | None:
    if ctx.claim_only:
        ctx.take("gen_ai.prompt" if side == "in" else "gen_ai.completion")
        return None
    state = ctx.events if ctx.events is not None else _NO_EVENTS
    if ctx.run_type == "tool":
        call = _tool_call_events(state, side)
        if call is not None:
            return call
    if side == "in":
        messages = [m for reply, msgs in state.messages if not (reply and state.replies_used) for m in msgs]
        if messages:
            return {"messages": messages}
        whole, key = state.prompt, "gen_ai.prompt"
    else:
        if state.choices:
            out: dict[str, Any] = {
                "messages": [m for _, msgs in sorted(state.choices, key=lambda e: e[0]) for m in msgs]
            }
            if state.finish_reasons:
                out["finish_reason"] = min(state.finish_reasons, key=lambda e: e[0])[1]
            return out
        replies = [m for reply, msgs in state.messages if reply for m in msgs] if not state.history_only else []
        if replies:
            state.replies_used = True
            return {"messages": replies}
        whole, key = state.completion, "gen_ai.completion"
    if whole is None:
        # The same whole-content attribute set on the span itself (the langsmith
        # SDK's own OTel exporter writes the run's inputs/outputs this way).
        whole = ctx.take(key)
    return payload_of(whole, "input" if side == "in" else "output") if whole is not None else None


#: What a span without events says (nothing: read, never written).
_NO_EVENTS = EventState()


def _tool_call_events(state: EventState, side: str) -> dict[str, Any] | None:
    """A tool span's events: its tool message is the call (the arguments it was given), its choice the
    tool's result (Strands), as a tool run's inputs and outputs are everywhere else, not a conversation."""
    if side == "in":
        calls = [m for reply, msgs in state.messages if reply for m in msgs if m.get("role") == "tool"]
        content = calls[0].get("content") if calls else None
        return payload_of(content, "input") if content is not None else None
    for _, msgs in sorted(state.choices, key=lambda e: e[0]):
        for m in msgs:
            if m.get("content") is not None:
                return payload_of(m["content"], "output")
    return None


#: The whole-content attributes the events stand for: the langsmith SDK's own OTel exporter writes
#: the run's inputs and outputs as these span attributes.
#: doc: gen_ai.prompt -> inputs. "The input prompt sent to the model"
#: doc: gen_ai.completion -> outputs. "The output generated by the model"
_EVENTS = generic(SPAN_EVENTS)

ROWS = (
    # Span events that mark the first streamed token: ours (and the SDK's) and the GenAI names. The
    # earliest one wins.
    EventRow("first_token", "new_token"),
    EventRow("first_token", "gen_ai.first_token"),
    EventRow("first_token", "first_token"),
    *(EventRow("message", name, role) for name, role in MESSAGE_EVENT_ROLES.items()),
    EventRow("choice", CHOICE_EVENT),
    *(EventRow("content", name, where) for name, where in _CONTENT_EVENTS.items()),
    EventRow("attributes", _ATTRIBUTE_EVENT),
    # The message and content events, then the same whole-content attribute on the span.
    Source("in", read_events, "in", (_EVENTS, Key("gen_ai.prompt")), order=60, final=NOT_FINAL),
    Source("out", read_events, "out", (_EVENTS, Key("gen_ai.completion")), order=50),
)
