"""The OTel GenAI semantic conventions on spans: ``gen_ai.*`` attributes, in their current and older shapes.

Written by OpenTelemetry's own instrumentations (openai-v2, google-genai),
OpenLLMetry in its newer releases, pydantic-ai, Strands and our instrumentors.
The older per-message events are ``_genai_events``'.
"""

from __future__ import annotations

from typing import Any

from .._parsed import ParsedJson
from ._context import Ctx
from ._messages import messages_of
from ._model import FINAL, Key, Namespace, RunTypeRule, Source, attr
from ._msg_genai import system_message
from ._readers import message_items, message_list, read_value

__all__ = ["ROWS", "SCOPES", "PARAM_PREFIX", "PARAM_RENAMES", "LIST_PARAMS", "MODEL_OPERATIONS", "OPERATION_NAME"]

#: The instrumentation scopes (prefixes) of producers that write these conventions.
SCOPES = (
    ("opentelemetry.instrumentation.openai", "OpenLLMetry openai, and OpenTelemetry's openai-v2 (openai_v2)"),
    ("opentelemetry.util.genai", "OpenTelemetry's GenAI utilities, which openai-v2 traces through in its latest mode"),
    ("opentelemetry.instrumentation.google_genai", "OpenTelemetry's google-genai instrumentation"),
)

OPERATION_NAME = "gen_ai.operation.name"
#: The GenAI conventions' model-call operations (and ``completion``, the service's own word): llm runs.
#: Any other operation name is not a model call, whatever provider or system the span names.
MODEL_OPERATIONS = {"chat": "llm", "completion": "llm", "text_completion": "llm", "generate_content": "llm"}

#: ``gen_ai.request.*`` becomes invocation params under its remainder, renamed
#: where the OpenAI-style parameter name differs.
#: doc: gen_ai.request.model -> invocation_params.model. "The model name used for the request"
#: doc: gen_ai.request.temperature -> invocation_params.temperature. "Temperature setting"
#: doc: gen_ai.request.top_p -> invocation_params.top_p. "Top-p sampling setting"
#: doc: gen_ai.request.max_tokens -> invocation_params.max_tokens. "Maximum tokens setting"
#: doc: gen_ai.request.frequency_penalty -> invocation_params.frequency_penalty. "Frequency penalty setting"
#: doc: gen_ai.request.presence_penalty -> invocation_params.presence_penalty. "Presence penalty setting"
#: doc: gen_ai.request.seed -> invocation_params.seed. "Random seed used for generation"
#: doc: gen_ai.request.stop_sequences -> invocation_params.stop. "Sequences that stop generation"
#: doc: gen_ai.request.top_k -> invocation_params.top_k. "Top-k sampling parameter"
#: doc: gen_ai.request.encoding_formats -> invocation_params.encoding_formats. "Output encoding formats"
PARAM_PREFIX = "gen_ai.request."
PARAM_RENAMES = {"stop_sequences": "stop", "choice.count": "n"}
LIST_PARAMS = frozenset({"stop_sequences", "encoding_formats"})  # arrays in the semconv


def _read_genai_input(ctx: Ctx, key: str) -> dict[str, Any] | None:
    raw = ctx.take(key)
    system = ctx.take("gen_ai.system_instructions")
    if ctx.claim_only:
        return None
    messages = messages_of(message_items(ctx, key, raw)) if raw is not None else []
    if raw is None and system is not None:
        # The system instructions alone are not the inputs yet: producers set them just
        # before the messages, and an early post must not show a conversation without them.
        ctx.partial_inputs = True
    sys_msg = system_message(system) if system is not None else None
    if sys_msg:
        messages.insert(0, sys_msg)
    if not messages:
        return None
    if type(raw) is str and (system is None or type(system) is str):
        # Read from JSON text only (messages keep text and what orjson.loads made, never a float of an
        # attribute's tuple): nothing the encoder's NaN check could find, and a GenAI conversation is
        # the run's largest part to search. (Typed here: the compiled build sees ParsedJson as untyped.)
        marked: dict[str, Any] = ParsedJson(messages=messages)
        return marked
    return {"messages": messages}


def _read_genai_messages(ctx: Ctx, key: str) -> dict[str, Any] | None:
    raw = ctx.take(key)
    if ctx.claim_only or raw is None:
        return None
    replies = message_list(message_items(ctx, key, raw), True)
    if replies is not None and type(raw) is str:
        # As the input messages (_read_genai_input): read from JSON text only, nothing for the NaN search.
        marked: dict[str, Any] = ParsedJson(replies)
        return marked
    return replies


def _read_query(ctx: Ctx, key: str) -> dict[str, Any] | None:
    value = ctx.take(key)
    return {"query": value} if value is not None and not ctx.claim_only else None


ROWS = (
    # Any gen_ai.* attribute marks a GenAI span, including those no row reads (the semconv grows).
    Namespace(Key("gen_ai.")),
    # doc: gen_ai.operation.name -> Run type. 'Maps "chat"/"completion" to "llm", "embedding" to "embedding"'
    # (the service's words), and the GenAI semconv's own values. An operation it does not know is a chain
    # (``_apply.find_run_type``): Strands' agent cycles name their provider but call no model.
    RunTypeRule(
        Key(OPERATION_NAME),
        {**MODEL_OPERATIONS, "embedding": "embedding", "embeddings": "embedding", "retrieval": "retriever",
         "execute_tool": "tool", "create_agent": "chain", "invoke_agent": "chain", "invoke_workflow": "chain",
         "workflow": "chain", "agent": "chain"},
        None, order=30, lists_model_calls=True,
    ),
    # doc: gen_ai.tool.name -> invocation_params.tool_name. 'Tool name, also sets run type to "tool"'
    # (and a GenAI execute_tool span names its tool here)
    attr("gen_ai.tool.name", presence=("tool", 10), name=("tool", 30), param=("tool_name", "value", 80)),
    attr("gen_ai.request.model", model=10, request_model=10),
    attr("gen_ai.provider.name", model=20, provider=10),
    # doc: gen_ai.system -> metadata.ls_provider. 'The GenAI system (e.g., "openai", "anthropic")'
    attr("gen_ai.system", model=30, provider=20),
    # doc: gen_ai.response.model -> invocation_params.model. "The model name returned in the response".
    # After gen_ai.request.model (doc: "The model name used for the request"): invocation params say
    # what was asked for; the response's model fills in when the request's is not recorded.
    attr("gen_ai.response.model", response_model=20, param=("model", "value", 10)),
    # ``outputs.finish_reason`` of a model run whose output messages carry none: the first choice's.
    attr("gen_ai.response.finish_reasons", finish_reasons_array=10),
    # The GenAI retrieval span's documents, as one JSON attribute.
    attr("gen_ai.retrieval.documents", documents=30),
    # Seconds from the request to its first streamed chunk: the GenAI metric's name, which pydantic-ai
    # writes as a span attribute, and google-genai's instrumentation's own name for it.
    attr("gen_ai.client.operation.time_to_first_chunk", first_chunk=(1.0, 10)),
    attr("gen_ai.response.time_to_first_chunk", first_chunk=(1.0, 20)),
    # The key the service groups threads by (its thread keys are session_id, thread_id, conversation_id).
    attr("gen_ai.conversation.id", metadata=("thread_id", 10)),
    attr(PARAM_PREFIX, family=False),
    # The GenAI convention's tool definitions (a JSON array; OpenLLMetry writes it, in the OpenAI or the
    # Anthropic request's shape).
    attr("gen_ai.tool.definitions", param=("tools", "tools", 50)),
    # doc: gen_ai.usage.input_tokens -> usage_metadata.input_tokens. "Number of input tokens used"
    attr("gen_ai.usage.input_tokens", usage=(("input_tokens",), 10)),
    # doc: gen_ai.usage.prompt_tokens -> usage_metadata.input_tokens. "Number of input tokens used (deprecated)"
    attr("gen_ai.usage.prompt_tokens", usage=(("input_tokens",), 20)),
    # doc: gen_ai.usage.output_tokens -> usage_metadata.output_tokens. "Number of output tokens used"
    attr("gen_ai.usage.output_tokens", usage=(("output_tokens",), 10)),
    # doc: gen_ai.usage.completion_tokens -> usage_metadata.output_tokens. "Number of output tokens used (deprecated)"
    attr("gen_ai.usage.completion_tokens", usage=(("output_tokens",), 20)),
    # doc: gen_ai.usage.total_tokens -> usage_metadata.total_tokens. "Total number of tokens used"
    attr("gen_ai.usage.total_tokens", usage=(("total_tokens",), 10)),
    attr("gen_ai.usage.cache_read.input_tokens", usage=(("input_token_details", "cache_read"), 10)),
    attr("gen_ai.usage.cache_creation.input_tokens", usage=(("input_token_details", "cache_creation"), 10)),
    # (the anthropic SDK's own spans, traced by default in anthropic 2.x)
    attr("gen_ai.usage.cache_write.input_tokens", usage=(("input_token_details", "cache_creation"), 30)),
    attr("gen_ai.usage.reasoning.output_tokens", usage=(("output_token_details", "reasoning"), 10)),
    # doc: gen_ai.usage.details.reasoning_tokens -> usage_metadata.reasoning_tokens. "Number of reasoning
    # tokens used". Where the doc puts it, and where the SDK's usage shape and the rest of the usage rows
    # put reasoning tokens, so both readers find it (pydantic-ai writes it, with ``_logfire``'s details).
    attr("gen_ai.usage.details.reasoning_tokens",
         usage=[(("reasoning_tokens",), 10), (("output_token_details", "reasoning"), 30)]),
    # doc: gen_ai.input.messages -> inputs.messages. "Array of input messages"
    Source("in", _read_genai_input, "gen_ai.input.messages",
           (Key("gen_ai.input.messages"), Key("gen_ai.system_instructions")), order=20, final=FINAL),
    Source("in", _read_query, "gen_ai.retrieval.query.text", (Key("gen_ai.retrieval.query.text"),), order=100,
           final=FINAL),
    # A tool run's arguments and result, before any message list: a tool span may carry the model call's
    # details too (Strands' latest mode repeats the conversation in its inference-details event).
    Source("in", read_value, "gen_ai.tool.call.arguments", (Key("gen_ai.tool.call.arguments"),), order=15,
           final=FINAL, run_types=frozenset({"tool"})),
    # doc: gen_ai.output.messages -> outputs.messages. "Array of output messages"
    Source("out", _read_genai_messages, "gen_ai.output.messages", (Key("gen_ai.output.messages"),), order=10),
    Source("out", read_value, "gen_ai.tool.call.result", (Key("gen_ai.tool.call.result"),), order=5,
           run_types=frozenset({"tool"})),
)
