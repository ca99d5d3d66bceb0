"""OpenLLMetry (traceloop): ``traceloop.*``, ``llm.request.type``, the flattened ``gen_ai.prompt.{n}.*``.

Written by the ``opentelemetry-instrumentation-*`` packages of traceloop's
OpenLLMetry (openai, anthropic ...) and its SDK's workflow and task decorators.
"""

from __future__ import annotations

from ._model import FINAL, FINAL_UNLESS_MODEL, EventRow, Key, Namespace, RunTypeRule, Source, attr
from ._readers import read_flat_messages, read_json_value

__all__ = ["ROWS", "SCOPES", "FUNCTIONS_PREFIX"]

SCOPES = (("opentelemetry.instrumentation.anthropic", "OpenLLMetry anthropic"),)

#: Traceloop writes the tools (or functions) offered to the model flattened
#: (``llm.request.functions.0.name``, ``.description``, ``.parameters``): they
#: become ``invocation_params.tools`` as OpenAI-style tool dicts (``_apply.tool_definition``).
FUNCTIONS_PREFIX = "llm.request.functions."

#: doc: traceloop.association.properties.{key} -> metadata.{key}. "Custom metadata with traceloop prefix"
_ASSOCIATION_PREFIX = "traceloop.association.properties."

ROWS = (
    Namespace(Key("traceloop.")),
    # Traceloop's own name for its request type (its semconv package writes this one).
    RunTypeRule(Key("llm.request.type"), {"chat": "llm", "completion": "llm", "embedding": "embedding",
                                          "rerank": "retriever"}, None, order=40),
    # doc: traceloop.llm.request.type -> Run type. '"embedding" maps to "embedding", others to "llm"'
    RunTypeRule(Key("traceloop.llm.request.type"), {"embedding": "embedding"}, "llm", order=50),
    # doc: traceloop.span.kind -> Run type. "Maps to LangSmith run types"
    RunTypeRule(Key("traceloop.span.kind"), {"tool": "tool", "workflow": "chain", "task": "chain", "agent": "chain",
                                             "llm": "llm", "retriever": "retriever", "embedding": "embedding"},
                "chain", order=60),
    # doc: traceloop.entity.name -> Run name. "Entity name from TraceLoop"
    attr("traceloop.entity.name", name=(None, 20)),
    # Older names for the model asked for and the model that answered.
    attr("llm.request.model_name", request_model=20),
    attr("llm.response.model_name", response_model=10),
    attr(_ASSOCIATION_PREFIX, family=False, metadata_family=(False, 10)),
    attr("gen_ai.prompt.", family=True),
    attr("gen_ai.completion.", family=True),
    attr(FUNCTIONS_PREFIX, family=True),
    # doc: llm.presence_penalty -> invocation_params.presence_penalty. "Presence penalty"
    attr("llm.presence_penalty", param=("presence_penalty", "value", 20)),
    # doc: llm.frequency_penalty -> invocation_params.frequency_penalty. "Frequency penalty"
    attr("llm.frequency_penalty", param=("frequency_penalty", "value", 30)),
    # doc: llm.request.functions -> invocation_params.functions. "Function definitions"
    attr("llm.request.functions", param=("functions", "list", 40)),
    # doc: llm.usage.total_tokens -> usage_metadata.total_tokens. "Alternative total token count"
    attr("llm.usage.total_tokens", usage=(("total_tokens",), 20)),
    attr("gen_ai.usage.cache_read_input_tokens", usage=(("input_token_details", "cache_read"), 20)),
    attr("gen_ai.usage.cache_creation_input_tokens", usage=(("input_token_details", "cache_creation"), 20)),
    attr("gen_ai.usage.reasoning_tokens", usage=(("output_token_details", "reasoning"), 20)),
    # Every streamed chunk is marked by an attribute-less event: the first is the first token, and the
    # rest say nothing a run keeps (one event per chunk would make a long answer's run mostly events).
    EventRow("first_token", "gen_ai.content.completion.chunk"),
    EventRow("first_token", "llm.content.completion.chunk"),
    # doc: gen_ai.prompt.{n}.role -> inputs.messages[n].role. "Role for the nth input message"
    # doc: gen_ai.prompt.{n}.content -> inputs.messages[n].content. "Content for the nth input message"
    # doc: gen_ai.prompt.{n}.message.role -> inputs.messages[n].role. "Alternative format for role"
    # doc: gen_ai.prompt.{n}.message.content -> inputs.messages[n].content. "Alternative format for content"
    Source("in", read_flat_messages, "gen_ai.prompt.", (Key("gen_ai.prompt."),), order=40, final=FINAL),
    # doc: traceloop.entity.input -> inputs. "Full input value from TraceLoop" (always JSON)
    Source("in", read_json_value, "traceloop.entity.input", (Key("traceloop.entity.input"),), order=80,
           final=FINAL_UNLESS_MODEL),
    # doc: gen_ai.completion.{n}.role -> outputs.messages[n].role. "Role for the nth output message"
    # doc: gen_ai.completion.{n}.content -> outputs.messages[n].content. "Content for the nth output message"
    # doc: gen_ai.completion.{n}.message.role -> outputs.messages[n].role. "Alternative format for role"
    # doc: gen_ai.completion.{n}.message.content -> outputs.messages[n].content. "Alternative format for content"
    Source("out", read_flat_messages, "gen_ai.completion.", (Key("gen_ai.completion."),), order=30),
    # doc: traceloop.entity.output -> outputs. "Full output value from TraceLoop"
    Source("out", read_json_value, "traceloop.entity.output", (Key("traceloop.entity.output"),), order=70),
)
