"""The service's own attributes: ``langsmith.*``, as its SDK's OTel mode and our ``@traceable`` write them.

The four ``langsmith.*`` id attributes place the run in its tree, which is
``_ids.given_run_ids``'s job: they are only consumed here, so they are not
repeated in metadata.
"""

from __future__ import annotations

import ast
from typing import Any, Mapping

from .._ids import ID_ATTRIBUTES, LANGSMITH_SESSION_ID, LANGSMITH_SESSION_NAME
from ._model import (
    RUN_TYPES, SPAN_EVENTS, Fixup, Key, Mapped, Namespace, RunTypeRule, UsageObject, attr, generic,
)
from ._values import json_value

__all__ = ["ROWS", "SCOPES", "langsmith_sdk_usage_object"]

SCOPES = (
    ("langsmith", "the langsmith SDK in its OTel mode"),
    ("otel_runs_exporter", "ours: @traceable, the OpenAI and Anthropic instrumentors, the demo"),
)

#: doc: langsmith.metadata.{key} -> metadata.{key}. "Custom metadata with langsmith prefix"
#: (its objects and arrays arrive JSON-encoded: the SDK writes a dict or list value with json.dumps.)
_METADATA_PREFIX = "langsmith.metadata."


#: A Python ``str()`` of a dict is read only this long (a usage object is a few dozen characters).
_REPR_MAX_CHARS = 4096


def langsmith_sdk_usage_object(value: Any) -> dict[str, Any] | None:
    """A usage object the langsmith SDK's OTel exporter wrote: JSON, or ``str()`` of a dict of counts.

    Its token details (``{'audio': 0, 'cache_read': 2}``) are Python literals; they
    are read with ``ast.literal_eval``, which evaluates literals only, so a
    hostile value cannot run anything. Anything else is None.
    """
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or value[:1] != "{" or len(value) > _REPR_MAX_CHARS:
        return None
    decoded = json_value(value)
    if isinstance(decoded, dict):
        return decoded
    try:
        literal = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return literal if isinstance(literal, dict) else None


def langsmith_sdk_request_tools(out: Mapped) -> None:
    """The tools offered to the model, from an llm run's inputs when they are the request body.

    The langsmith SDK's client wrappers (``wrap_openai``) record the request
    itself as the run's inputs, tools included, and its OTel exporter writes
    them only there (``gen_ai.prompt``); the tools are also made the
    invocation params' ``tools``, as every other producer's are. The inputs
    stay as the SDK's own runs have them.
    """
    inputs = out.inputs
    tools = inputs.get("tools") if inputs is not None else None
    if not isinstance(tools, list) or not tools or not all(isinstance(t, dict) for t in tools):
        return
    params = out.invocation_params if out.invocation_params is not None else {}
    if "tools" not in params:
        out.invocation_params = {**params, "tools": tools}


def _request_tools(out: Mapped, attributes: Mapping[str, Any]) -> None:
    if out.run_type == "llm":
        langsmith_sdk_request_tools(out)


ROWS = (
    Namespace(Key("langsmith.")),
    # doc: langsmith.span.kind -> Run type. "Values: llm, chain, tool, retriever, embedding, prompt, parser"
    # (a kind outside them is ignored: the next rule decides, rather than a run the service rejects)
    RunTypeRule(Key("langsmith.span.kind"), {k: k for k in RUN_TYPES}, None, order=10),
    # doc: langsmith.trace.name -> Run name. "Overrides the span name for the run"
    attr("langsmith.trace.name", name=(None, 10)),
    # doc: langsmith.trace.id -> Trace ID. "The trace (root run) the span belongs to; set to attach to an existing trace"
    # doc: langsmith.span.id -> Run ID. "This span's run ID (a UUID); overrides the ID derived from the OTLP span ID"
    # doc: langsmith.span.parent_id -> Parent run ID. "Nests the span under an existing run by its run ID"
    # doc: langsmith.span.dotted_order -> Dotted order. "Position in the trace tree"
    *(attr(key, ids=10 * (i + 1)) for i, key in enumerate(ID_ATTRIBUTES)),
    # doc: langsmith.trace.session_name -> Session name. "Name of the session"
    # (the project goes with the run's place: ``_convert.span_ids`` reads it where a tree starts).
    attr(LANGSMITH_SESSION_NAME, session_name=10),
    # doc: langsmith.trace.session_id -> Session ID. "Session identifier for related traces"
    # (the name wins when both are given: the service takes exactly one).
    attr(LANGSMITH_SESSION_ID, session_id=10),
    # Last, so explicit metadata wins over everything derived.
    attr(_METADATA_PREFIX, family=False, metadata_family=(True, 20)),
    # doc: langsmith.span.tags -> Tags. "Custom tags attached to the span (comma-separated)"
    attr("langsmith.span.tags", tags=10),
    # Whole usage objects that complete the usage rows, lower in precedence, in this order. The first is
    # the ``usage_metadata`` of the outputs the mapping found (the SDK's OTel exporter writes the run's
    # whole outputs in ``gen_ai.completion``, usage details included); the next two are that exporter's
    # own token-detail attributes (a Python ``str()`` of a dict, not JSON); the last is the usage its
    # ``@traceable`` also keeps in the run's metadata. They only add what the rows did not say (details
    # merged from every source, never dropped); the metadata copy only completes usage another source
    # reported, as the SDK's own runs carry usage in their outputs only where that was so.
    UsageObject(None, "outputs", order=10),
    UsageObject(Key("gen_ai.usage.input_token_details"), "input_token_details", order=20),
    UsageObject(Key("gen_ai.usage.output_token_details"), "output_token_details", order=30),
    UsageObject(Key("langsmith.metadata.usage_metadata"), "usage_metadata", order=40),
    # Where an llm run's inputs may be the request body itself (the SDK's gen_ai.prompt, a raw input.value).
    # (or its events: gen_ai.content.prompt)
    Fixup(_request_tools, (Key("gen_ai.prompt"), generic("input.value"), Key("traceloop.entity.input"),
                           generic(SPAN_EVENTS)), order=10),
)
