"""Strands Agents: its own name where the provider goes, its first-token delay in milliseconds.

Strands writes the GenAI conventions (``_genai``'s rows read most of its spans)
in one of two shapes: by default, each message as a GenAI event whose text is
JSON-encoded Bedrock Converse blocks (``_msg_bedrock`` reads them), and with
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` as GenAI message
attributes. Its agent cycles (``execute_event_loop_cycle``) name an operation
the conventions do not list: chains, by ``_genai``'s operation rule.
"""

from __future__ import annotations

from ._model import EventRow, FrameworkName, attr

__all__ = ["ROWS", "SCOPES"]

SCOPES = (("strands.telemetry.tracer", "Strands Agents"),)

ROWS = (
    # Written as gen_ai.system (default) or gen_ai.provider.name (latest) on every span: the framework,
    # not the model's provider. With no other provider attribute, the provider stays unset (a known limit).
    # Its message events are the conversation so far: a cycle without a choice event answered nothing itself.
    FrameworkName("strands-agents", events_are_history=True),
    # Milliseconds from the request to the first streamed token (the GenAI metric's name, Strands' unit).
    attr("gen_ai.server.time_to_first_token", first_chunk=(0.001, 30)),
    # Its agent run's cache writes (the Anthropic-style name of the others' cache_creation).
    attr("gen_ai.usage.cache_write_input_tokens", usage=(("input_token_details", "cache_creation"), 60)),
    # A cycle's choice event carries the results of the tools it called: the cycle's outputs end with them.
    EventRow("choice_results", "tool.result"),
    # Its span's own start and end, again as text: said by the run's times.
    attr("gen_ai.event.start_time", said_elsewhere=10),
    attr("gen_ai.event.end_time", said_elsewhere=20),
)
