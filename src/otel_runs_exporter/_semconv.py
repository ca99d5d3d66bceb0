"""Attribute-mapping tables: how span attributes become run fields.

This module owns every rule that reads a semantic convention (the service's own
``langsmith.*`` attributes, OpenInference, OTel GenAI in its current and older
shapes, traceloop/OpenLLMetry). It is pure: ``map_span`` takes a copy of a
span's attributes and events and returns a :class:`Mapped` value that
``_convert`` places into the run.

The rules are data (the ``_RUN_TYPE_RULES``, ``_INPUT_SOURCES``,
``_OUTPUT_SOURCES``, ``_USAGE_FIELDS`` ... tables below, each in precedence
order, first match wins); the functions only apply them. Every row of the
service's documented mapping ("Supported OpenTelemetry attribute and event
mapping" in its OTel tracing guide) is a row here, with the doc's words as its
comment (``doc:``), so a span means the same run whether the service converts
it or we do. The four ``langsmith.*`` id attributes are the exception: they
place the run in its tree, which is ``_ids.given_run_ids``'s job. ``map_span`` runs once
per span on the exporter's worker thread, so it makes one pass over the
attributes (prefix checks, no regexes) and decodes JSON only for the attributes
a rule actually uses.

Whatever convention a conversation arrives in, it leaves in one shape::

    {"messages": [{"role": "user", "content": "hi"},
                  {"role": "assistant", "content": None,
                   "tool_calls": [{"id": "c1", "type": "function",
                                   "function": {"name": "f", "arguments": "{}"}}]},
                  {"role": "tool", "content": "42", "tool_call_id": "c1"}]}

``content`` is a string when the message is plain text (a single text part),
otherwise a list of content blocks (``{"type": "text", "text": ...}`` and the
non-text parts as they came).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import orjson

from ._ids import ID_ATTRIBUTES, LANGSMITH_SESSION_ID, LANGSMITH_SESSION_NAME
from ._parsed import ParsedJson

__all__ = ["SpanEvent", "Mapped", "map_span", "reads_nothing", "RUN_TYPES", "GENAI_EVENT_PREFIX"]


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
    ``_INPUT_SOURCES``); otherwise only its patch does.
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


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------

#: The run types the service knows; the one list (the converter and traceable use it too).
#: A ``langsmith.span.kind`` outside this set is ignored (the next rule decides)
#: rather than sent and rejected.
RUN_TYPES = frozenset({"llm", "chain", "tool", "retriever", "embedding", "prompt", "parser"})

#: ``(attribute, value map, default)`` in precedence order. The value is looked
#: up lower-cased; ``default`` (when not None) answers any other value, and when
#: it is None an unknown value falls through to the next rule.
_RUN_TYPE_RULES: tuple[tuple[str, Mapping[str, str], str | None], ...] = (
    # doc: langsmith.span.kind -> Run type. "Values: llm, chain, tool, retriever, embedding, prompt, parser"
    ("langsmith.span.kind", {k: k for k in RUN_TYPES}, None),
    # doc: openinference.span.kind -> Run type. "Maps various kinds to LangSmith run types"
    (
        "openinference.span.kind",
        {"llm": "llm", "embedding": "embedding", "retriever": "retriever", "reranker": "retriever",
         "tool": "tool", "prompt": "prompt"},
        "chain",
    ),
    # doc: gen_ai.operation.name -> Run type. 'Maps "chat"/"completion" to "llm", "embedding" to "embedding"'
    # (the service's words), and the GenAI semconv's own values.
    (
        "gen_ai.operation.name",
        {"chat": "llm", "completion": "llm", "text_completion": "llm", "generate_content": "llm",
         "embedding": "embedding", "embeddings": "embedding", "retrieval": "retriever", "execute_tool": "tool",
         "create_agent": "chain", "invoke_agent": "chain", "invoke_workflow": "chain", "workflow": "chain",
         "agent": "chain"},
        None,
    ),
    # Traceloop's own name for its request type (its semconv package writes this one).
    ("llm.request.type", {"chat": "llm", "completion": "llm", "embedding": "embedding", "rerank": "retriever"}, None),
    # doc: traceloop.llm.request.type -> Run type. '"embedding" maps to "embedding", others to "llm"'
    ("traceloop.llm.request.type", {"embedding": "embedding"}, "llm"),
    # doc: traceloop.span.kind -> Run type. "Maps to LangSmith run types"
    (
        "traceloop.span.kind",
        {"tool": "tool", "workflow": "chain", "task": "chain", "agent": "chain", "llm": "llm",
         "retriever": "retriever", "embedding": "embedding"},
        "chain",
    ),
)

#: ``(attribute, run type)``: the attribute's presence decides, when no rule
#: above did; its value is data, kept (by another table, or in metadata).
#: After the kind rules, so an explicit kind is never overridden: an
#: OpenInference LLM span that records its prompt template stays an llm run.
_RUN_TYPE_PRESENCE: tuple[tuple[str, str], ...] = (
    # doc: gen_ai.tool.name -> invocation_params.tool_name. 'Tool name, also sets run type to "tool"'
    ("gen_ai.tool.name", "tool"),
    # doc: llm.prompt_template.variables -> Run type. 'Sets run type to "prompt", used with input.value'
    ("llm.prompt_template.variables", "prompt"),
)

#: The run's name, first present wins: ``(attribute, run type it applies to or None for any)``.
_NAME_RULES: tuple[tuple[str, str | None], ...] = (
    # doc: langsmith.trace.name -> Run name. "Overrides the span name for the run"
    ("langsmith.trace.name", None),
    # doc: traceloop.entity.name -> Run name. "Entity name from TraceLoop"
    ("traceloop.entity.name", None),
    # GenAI execute_tool spans name their tool here.
    ("gen_ai.tool.name", "tool"),
    # doc: tool.name -> Run name. 'Tool name when span kind is "TOOL"'
    ("tool.name", "tool"),
)

#: Any of these makes an otherwise unclassified span an ``llm`` run.
_MODEL_KEYS = ("gen_ai.request.model", "gen_ai.provider.name", "gen_ai.system", "llm.model_name")

#: ``metadata["ls_model_name"]`` is the model the caller asked for, first present
#: wins: these attributes, then the ``model`` of a whole-object invocation
#: params (``_PARAM_OBJECT_KEYS``: OpenInference records the request there, so
#: a call that fails still names its model).
_REQUEST_MODEL_KEYS = ("gen_ai.request.model", "llm.request.model_name")
_REQUEST_MODEL_PARAMS = ("model", "model_name")
#: What the response (or the span) says ran, first present wins: the
#: ``ls_model_name`` when nothing says what was asked for, else kept as
#: ``metadata["response_model"]`` when it differs (``gpt-4o-mini`` answered by
#: ``gpt-4o-mini-2024-07-18``).
_RESPONSE_MODEL_KEYS = (
    "llm.response.model_name",
    "gen_ai.response.model",
    # doc: llm.model_name -> metadata.ls_model_name. "Model name from OpenInference"
    # (OpenInference's openai instrumentation writes the response's model here.)
    "llm.model_name",
    "embedding.model_name",
    "reranker.model_name",
)
#: ``outputs.finish_reason`` of a model run whose output messages carry none: the
#: first choice's, from the GenAI array of every choice's reason.
_FINISH_REASONS_ARRAY_KEYS = ("gen_ai.response.finish_reasons",)
#: Seconds from the request to its first streamed chunk (pydantic-ai writes the GenAI metric's
#: name as a span attribute): a ``new_token`` event that long after the span's start, when no
#: first-token event marks it.
_FIRST_CHUNK_AFTER_KEYS = ("gen_ai.client.operation.time_to_first_chunk",)
#: ``metadata["ls_provider"]``.
_PROVIDER_KEYS = (
    "gen_ai.provider.name",
    # doc: gen_ai.system -> metadata.ls_provider. 'The GenAI system (e.g., "openai", "anthropic")'
    "gen_ai.system",
    "llm.provider",
    # doc: llm.system -> metadata.ls_provider. "LLM system provider"
    "llm.system",
)

#: The attributes that place the run in its tree; read by ``_convert``/``_ids``,
#: consumed here so they are not repeated in metadata.
#: doc: langsmith.trace.id -> Trace ID. "The trace (root run) the span belongs to; set to attach to an existing trace"
#: doc: langsmith.span.id -> Run ID. "This span's run ID (a UUID); overrides the ID derived from the OTLP span ID"
#: doc: langsmith.span.parent_id -> Parent run ID. "Nests the span under an existing run by its run ID"
#: doc: langsmith.span.dotted_order -> Dotted order. "Position in the trace tree"
_ID_ATTRIBUTES = ID_ATTRIBUTES

#: doc: langsmith.trace.session_name -> Session name. "Name of the session"
#: (the project goes with the run's place: ``_convert.span_ids`` reads it where a tree starts).
_SESSION_NAME = LANGSMITH_SESSION_NAME
#: doc: langsmith.trace.session_id -> Session ID. "Session identifier for related traces"
#: (the name wins when both are given: the service takes exactly one).
_SESSION_ID = LANGSMITH_SESSION_ID

#: Attributes copied to metadata under the key the service groups threads by
#: (its thread keys are ``session_id``, ``thread_id`` and ``conversation_id``).
_METADATA_KEYS: tuple[tuple[str, str], ...] = (
    ("gen_ai.conversation.id", "thread_id"),
    ("session.id", "session_id"),
    ("user.id", "user_id"),
)
#: doc: metadata -> metadata.*. "JSON string of metadata to be merged" (OpenInference: one JSON object).
_METADATA_OBJECT_KEY = "metadata"
#: Prefixes whose remainder is a metadata key. ``langsmith.metadata.`` comes
#: last so explicit metadata wins over everything derived.
#: doc: traceloop.association.properties.{key} -> metadata.{key}. "Custom metadata with traceloop prefix"
#: doc: langsmith.metadata.{key} -> metadata.{key}. "Custom metadata with langsmith prefix"
_METADATA_PREFIXES = ("traceloop.association.properties.", "langsmith.metadata.")
#: Of those, the ones whose objects and arrays arrive JSON-encoded (the
#: service's SDK writes a dict or list value with ``json.dumps``): decoded back.
_JSON_METADATA_PREFIXES = frozenset({"langsmith.metadata."})

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
_PARAM_PREFIX = "gen_ai.request."
_PARAM_RENAMES = {"stop_sequences": "stop", "choice.count": "n"}
_LIST_PARAMS = frozenset({"stop_sequences", "encoding_formats"})  # arrays in the semconv
#: Whole-object invocation params (OpenInference), merged under the above.
#: doc: llm.invocation_parameters -> invocation_params.*. "JSON string of invocation parameters"
_PARAM_OBJECT_KEYS = ("llm.invocation_parameters", "embedding.invocation_parameters")
#: Traceloop writes the tools (or functions) offered to the model flattened
#: (``llm.request.functions.0.name``, ``.description``, ``.parameters``): they
#: become ``invocation_params.tools`` as OpenAI-style tool dicts (see ``_tool_definition``).
_FUNCTIONS_PREFIX = "llm.request.functions."
#: OpenInference's tool definitions: ``llm.tools.{n}.tool.json_schema``, one JSON
#: string per tool (OpenAI's tool shape, its spec recommends), become
#: ``invocation_params.tools`` when the invocation params carry none.
_TOOLS_PREFIX = "llm.tools."
#: ``(attribute, invocation_params key, shape)``: fill a key the above left
#: empty, first present wins. ``shape``: "list" (a JSON array, an attribute array
#: of JSON strings, or one item), "tools" (the same, each item a tool definition
#: made OpenAI-style), "json" (a JSON string decoded when it is JSON), "value".
_PARAM_FIELDS: tuple[tuple[str, str, str], ...] = (
    # doc: gen_ai.response.model -> invocation_params.model. "The model name returned in the response".
    # After gen_ai.request.model (doc: "The model name used for the request"): invocation params say
    # what was asked for; the response's model fills in when the request's is not recorded.
    ("gen_ai.response.model", "model", "value"),
    # doc: llm.presence_penalty -> invocation_params.presence_penalty. "Presence penalty"
    ("llm.presence_penalty", "presence_penalty", "value"),
    # doc: llm.frequency_penalty -> invocation_params.frequency_penalty. "Frequency penalty"
    ("llm.frequency_penalty", "frequency_penalty", "value"),
    # doc: llm.request.functions -> invocation_params.functions. "Function definitions"
    ("llm.request.functions", "functions", "list"),
    # The GenAI convention's tool definitions (a JSON array; OpenLLMetry writes it, in the OpenAI or the
    # Anthropic request's shape).
    ("gen_ai.tool.definitions", "tools", "tools"),
    # doc: tools -> invocation_params.tools. "Array of tool definitions"
    ("tools", "tools", "tools"),
    # doc: tool_arguments -> invocation_params.tool_arguments. "Tool arguments as JSON or key-value pairs"
    ("tool_arguments", "tool_arguments", "json"),
    # doc: gen_ai.tool.name -> invocation_params.tool_name. 'Tool name, also sets run type to "tool"'
    ("gen_ai.tool.name", "tool_name", "value"),
)

#: ``outputs.finish_reason`` when the output source gave none (its first
#: message's, as with ``gen_ai.choice``): first present wins.
_FINISH_REASON_KEYS = (
    # OpenInference: the first choice's finish reason, set with the response.
    "llm.finish_reason",
)

#: ``(path in usage_metadata, attributes in precedence order)``: the GenAI
#: names first, then traceloop's and OpenInference's.
_USAGE_FIELDS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    # doc: gen_ai.usage.input_tokens -> usage_metadata.input_tokens. "Number of input tokens used"
    # doc: gen_ai.usage.prompt_tokens -> usage_metadata.input_tokens. "Number of input tokens used (deprecated)"
    # doc: llm.token_count.prompt -> usage_metadata.input_tokens. "Prompt token count"
    (("input_tokens",), ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")),
    # doc: gen_ai.usage.output_tokens -> usage_metadata.output_tokens. "Number of output tokens used"
    # doc: gen_ai.usage.completion_tokens -> usage_metadata.output_tokens. "Number of output tokens used (deprecated)"
    # doc: llm.token_count.completion -> usage_metadata.output_tokens. "Completion token count"
    (("output_tokens",), ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")),
    # doc: gen_ai.usage.total_tokens -> usage_metadata.total_tokens. "Total number of tokens used"
    # doc: llm.usage.total_tokens -> usage_metadata.total_tokens. "Alternative total token count"
    # doc: llm.token_count.total -> usage_metadata.total_tokens. "Total token count"
    (("total_tokens",), ("gen_ai.usage.total_tokens", "llm.usage.total_tokens", "llm.token_count.total")),
    (
        ("input_token_details", "cache_read"),
        ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
         "llm.token_count.prompt_details.cache_read", "gen_ai.usage.details.cache_read_tokens"),
    ),
    (
        ("input_token_details", "cache_creation"),
        # (cache_write.input_tokens: the anthropic SDK's own spans, traced by default in anthropic 2.x)
        ("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens",
         "gen_ai.usage.cache_write.input_tokens", "llm.token_count.prompt_details.cache_write",
         "gen_ai.usage.details.cache_write_tokens"),
    ),
    # pydantic-ai repeats its counts under gen_ai.usage.details.<its usage field> (cache_*_tokens
    # above, "for backwards compat"), and names audio by side there.
    (("input_token_details", "audio"),
     ("llm.token_count.prompt_details.audio", "gen_ai.usage.details.input_audio_tokens")),
    (
        ("output_token_details", "reasoning"),
        ("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens",
         "gen_ai.usage.details.reasoning_tokens", "llm.token_count.completion_details.reasoning"),
    ),
    (("output_token_details", "audio"),
     ("llm.token_count.completion_details.audio", "gen_ai.usage.details.output_audio_tokens")),
    # doc: gen_ai.usage.details.reasoning_tokens -> usage_metadata.reasoning_tokens. "Number of reasoning
    # tokens used". Where the doc puts it, and (row above) where the SDK's usage shape and the rest of this
    # table put reasoning tokens, so both readers find it.
    (("reasoning_tokens",), ("gen_ai.usage.details.reasoning_tokens",)),
)

#: Whole usage objects that complete the rows above, lower in precedence, in
#: this order: ``(attribute or None, where its object is)``. The first row is the
#: ``usage_metadata`` of the outputs the mapping found (the langsmith SDK's OTel
#: exporter writes the run's whole outputs in ``gen_ai.completion``, usage
#: details included); the next two are that exporter's own token-detail
#: attributes (a Python ``str()`` of a dict, not JSON); the last is the usage its
#: ``@traceable`` also keeps in the run's metadata. They only add what the rows
#: above did not say (details merged from every source, never dropped); the
#: metadata copy only completes usage another source reported, as the SDK's own
#: runs carry usage in their outputs only where that was so.
_USAGE_OBJECTS: tuple[tuple[str | None, str], ...] = (
    (None, "outputs"),
    ("gen_ai.usage.input_token_details", "input_token_details"),
    ("gen_ai.usage.output_token_details", "output_token_details"),
    ("langsmith.metadata.usage_metadata", "usage_metadata"),
)

#: Span events that mark the first streamed token (ours emit ``new_token``;
#: OpenInference emits "First Token Stream Event"). The earliest one wins.
#: OpenLLMetry marks every streamed chunk with an attribute-less event: its first
#: one is the first token, and the rest say nothing a run keeps (one event per
#: chunk would make a long answer's run mostly events), so all are consumed.
_STREAM_CHUNK_EVENTS = frozenset({"gen_ai.content.completion.chunk", "llm.content.completion.chunk"})
_FIRST_TOKEN_EVENTS = (
    frozenset({"new_token", "gen_ai.first_token", "first_token", "First Token Stream Event"}) | _STREAM_CHUNK_EVENTS
)

#: Older GenAI per-message events and the role each one carries.
#: doc: gen_ai.system.message -> inputs.messages[]. "System message in conversation"
#: doc: gen_ai.user.message -> inputs.messages[]. "User message in conversation"
#: doc: gen_ai.assistant.message -> outputs.messages[]. "Assistant message in conversation"
#: doc: gen_ai.tool.message -> outputs.messages[]. "Tool response message"
#: (assistant and tool messages are the outputs when the span has no gen_ai.choice;
#: beside a choice they are the conversation so far, so they stay in the inputs, in order.)
_MESSAGE_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_REPLY_ROLES = frozenset({"assistant", "tool"})
#: Older GenAI whole-content events: event name -> (attribute, side).
#: doc: gen_ai.content.prompt -> inputs. "Extracts prompt content from event attributes"
#: doc: gen_ai.content.completion -> outputs. "Extracts completion content from event attributes"
_CONTENT_EVENTS = {"gen_ai.content.prompt": ("gen_ai.prompt", "in"), "gen_ai.content.completion": ("gen_ai.completion", "out")}
#: doc: gen_ai.choice -> outputs. "Model choice/response with finish reason" (the finish_reason of the
#: first choice is kept as outputs.finish_reason).
_CHOICE_EVENT = "gen_ai.choice"
#: The GenAI semconv's event for one inference call. It carries the span's own attributes, the
#: conversation included (``gen_ai.input.messages``, ``gen_ai.output.messages``,
#: ``gen_ai.system_instructions``, ``gen_ai.tool.definitions``, as objects rather than JSON text):
#: openai-v2 with ``event_only`` content writes the messages only there. Read as attributes of
#: the span, under its own: an attribute the span has wins.
_ATTRIBUTE_EVENTS = frozenset({"gen_ai.client.inference.operation.details"})
#: The name every GenAI event starts with, the ones above and any newer one: the OTel log
#: records ``_genai_events`` joins to their span's run (an event no row reads stays a run event).
GENAI_EVENT_PREFIX = "gen_ai."
#: doc: exception -> status, error. "Sets status to "error" and extracts exception message/stacktrace"
#: (applied by ``_convert``, which owns the run's error.)

#: Logfire's attributes: a JSON array of GenAI events as objects named by "event.name".
#: doc: prompt -> inputs. "Logfire prompt input"
_LOGFIRE_PROMPT = "prompt"
#: doc: all_messages_events -> outputs. "Logfire message events output"
_LOGFIRE_ALL_MESSAGES = "all_messages_events"
#: doc: events -> inputs/outputs. "Logfire events array, splits input/choice events"
_LOGFIRE_EVENTS = "events"
#: Logfire's LLM integrations (``instrument_openai``, ``instrument_anthropic``) in their legacy
#: format (``version=1``): the request body as one JSON object, and the response's message (or
#: text) with the provider's usage object. Format 2, the default, writes the GenAI attributes and
#: keeps ``request_data`` with the model alone. Names this generic are read only on spans Logfire
#: made, which always carry its message template.
_LOGFIRE_REQUEST = "request_data"
_LOGFIRE_RESPONSE = "response_data"
_LOGFIRE_MARK = "logfire.msg_template"
#: The request body's conversation keys (OpenAI chat, completions and embeddings, Anthropic's
#: system prompt, the Responses API's instructions): the inputs; every other key of the body is
#: an invocation parameter.
_LOGFIRE_CONVERSATION_KEYS = frozenset({"messages", "prompt", "input", "system", "instructions"})
#: Logfire keeps the provider's usage object whole (``gen_ai.usage.raw``; ``response_data.usage`` in
#: format 1) and writes only its input, output and cache counts as GenAI attributes: the other
#: details are read from the object. ``(path in the object, path in usage_metadata)``, OpenAI's
#: chat and Responses names and Anthropic's; they complete the ``_USAGE_FIELDS`` rows, never override.
_LOGFIRE_USAGE_RAW = "gen_ai.usage.raw"
_PROVIDER_USAGE_DETAILS: tuple[tuple[tuple[str, str], tuple[str, str]], ...] = (
    (("prompt_tokens_details", "cached_tokens"), ("input_token_details", "cache_read")),
    (("input_tokens_details", "cached_tokens"), ("input_token_details", "cache_read")),
    (("", "cache_read_input_tokens"), ("input_token_details", "cache_read")),
    (("", "cache_creation_input_tokens"), ("input_token_details", "cache_creation")),
    (("prompt_tokens_details", "audio_tokens"), ("input_token_details", "audio")),
    (("completion_tokens_details", "reasoning_tokens"), ("output_token_details", "reasoning")),
    (("output_tokens_details", "reasoning_tokens"), ("output_token_details", "reasoning")),
    (("completion_tokens_details", "audio_tokens"), ("output_token_details", "audio")),
)

#: pydantic-ai's agent run span (its ``Instrumentation`` capability, data formats 2 to 6): the
#: whole conversation as GenAI messages and the agent's answer, both set as the run ends, and
#: where this run's own messages start when it was given a history (absent when it was not).
_PYDANTIC_AI_MESSAGES = "pydantic_ai.all_messages"
_PYDANTIC_AI_NEW_MESSAGE_INDEX = "pydantic_ai.new_message_index"
_PYDANTIC_AI_FINAL_RESULT = "final_result"
#: Its tool span in data format 2 (later formats write ``gen_ai.tool.call.arguments``/``.result``).
#: ``tool_arguments`` is also a documented row (``_PARAM_FIELDS``), which this does not replace.
_PYDANTIC_AI_TOOL_ARGUMENTS = "tool_arguments"
_PYDANTIC_AI_TOOL_RESULT = "tool_response"

#: Flattened conventions, gathered in the single pass over the attributes.
_FLAT_PREFIXES = (
    "llm.input_messages.",
    "llm.output_messages.",
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "retrieval.documents.",
    "reranker.output_documents.",
    "tool.parameters.",
    "embedding.embeddings.",
    _FUNCTIONS_PREFIX,
    _TOOLS_PREFIX,
    _PARAM_PREFIX,
) + _METADATA_PREFIXES
#: doc: retrieval.documents.{n}.document.content -> outputs.documents[n].page_content. "Content of the nth
#: retrieved document"
#: doc: retrieval.documents.{n}.document.metadata -> outputs.documents[n].metadata. "Metadata of the nth retrieved
#: document (JSON)"
_DOCUMENT_PREFIXES = ("retrieval.documents.", "reranker.output_documents.")
#: Of those, the ones whose next segment must be an index (``gen_ai.prompt.name``
#: is not a prompt message).
_INDEXED_PREFIXES = frozenset(
    ("llm.input_messages.", "llm.output_messages.", "gen_ai.prompt.", "gen_ai.completion.", "embedding.embeddings.",
     _FUNCTIONS_PREFIX, _TOOLS_PREFIX)
    + _DOCUMENT_PREFIXES
)


# ---------------------------------------------------------------------------
# Value helpers
# ---------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    """Decode a JSON string attribute; anything else is returned as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _as_object(value: Any, key: str) -> dict[str, Any]:
    decoded = _json_value(value)
    if isinstance(decoded, dict):
        return decoded
    if isinstance(decoded, tuple):
        decoded = list(decoded)
    return {key: decoded}


def _as_list(value: Any) -> list[Any] | None:
    """A list of items from a JSON string, a list/tuple (of JSON strings) or one object."""
    decoded = _json_value(value)
    if isinstance(decoded, dict):
        return [decoded]
    if isinstance(decoded, (list, tuple)):
        return [_json_value(v) if isinstance(v, str) else v for v in decoded]  # (most items are objects already)
    return None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        if isinstance(value, float):
            return int(value)
        if isinstance(value, str):
            return int(float(value))
    except (ValueError, OverflowError):  # "n/a", inf, nan
        return None
    return None


def _plain(value: Any) -> Any:
    """Attribute sequences arrive as tuples (inside map values too); runs are JSON, so make them lists."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


#: What ``_param_value`` answers for a value that claims to be JSON and is not:
#: the attribute is left unconsumed, so the run keeps it as it came, in metadata.
_MALFORMED: Any = object()


def _param_value(value: Any, shape: str) -> Any:
    """An invocation parameter in the shape its ``_PARAM_FIELDS`` row names."""
    if shape == "tools":
        items = _as_list(value)
        if items is None:
            if not isinstance(value, str) or value[:1] in ("[", "{"):
                return _MALFORMED  # not JSON after all, or a number: no tool list
            items = [value]
        return [_tool_definition(i) for i in items]
    if shape == "list":
        items = _as_list(value)
        return _plain(items) if items is not None else [_plain(value)]
    if shape == "json":
        return _plain(_json_value(value))
    return _plain(value)


def _nested(obj: Any, key: str) -> Any:
    """OpenInference wraps items one level down (``{"document": {...}}``)."""
    inner = obj.get(key) if isinstance(obj, dict) else None
    return inner if inner is not None else obj


def _position(part: str) -> int | None:
    """A list position in a flattened key, or None when ``part`` is a name.

    ASCII digits only, and a few: ``str.isdigit()`` also accepts "²" and
    thousands of digits, which ``int()`` refuses, and a span carrying such a key
    was lost as a convert_error.
    """
    return int(part) if len(part) <= 9 and part.isascii() and part.isdigit() else None


def _unflatten(flat: Mapping[str, Any]) -> Any:
    """``{"0.message.role": "user"}`` -> ``[{"message": {"role": "user"}}]``.

    Numeric segments become list positions (sorted, gaps dropped), so the same
    helper reads OpenInference, traceloop and document attributes.
    """
    root: dict[Any, Any] = {}
    for path, value in flat.items():
        node = root
        parts = path.split(".")
        for part in parts[:-1]:
            position = _position(part)
            key: Any = part if position is None else position
            child = node.get(key)
            if not isinstance(child, dict):
                if child is not None:
                    break  # a value and a sub-tree under one name: keep the value
                child = node[key] = {}
            node = child
        else:
            last = parts[-1]
            position = _position(last)
            node.setdefault(last if position is None else position, value)
    return _listify(root)


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return _plain(node)
    if node and all(isinstance(k, int) for k in node):
        return [_listify(node[k]) for k in sorted(node)]
    return {str(k): _listify(v) for k, v in node.items()}


# ---------------------------------------------------------------------------
# Message normalization
# ---------------------------------------------------------------------------


def _tool_call(call: Any) -> dict[str, Any] | None:
    """One tool call in the OpenAI shape, from any of the conventions' shapes."""
    call = _json_value(call)
    if not isinstance(call, dict):
        return None
    call = _nested(call, "tool_call")  # OpenInference nests it one level down
    if not isinstance(call, dict):
        return None
    function = call.get("function")
    if isinstance(function, dict):
        name, arguments = function.get("name"), function.get("arguments")
    else:
        name, arguments = call.get("name"), call.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        arguments = _json_text(arguments)  # JSON text, whatever the value (an int past 64 bits too)
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments or ""}}
    if call.get("id") is not None:
        out = {"id": call["id"], **out}
    return out


def _content_block(part: Any) -> Any:
    """A content part as an OpenAI-style block (text), or as it came."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, dict):
        return part
    part = _nested(part, "message_content")  # OpenInference nesting
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "text":
        text = part.get("text", part.get("content"))
        return {"type": "text", "text": text if isinstance(text, str) else "" if text is None else str(text)}
    if kind in ("uri", "blob") and part.get("modality") == "image":
        # The GenAI semconv's parts: a uri, or base64 content with its mime type (a data URL, as OpenAI takes it).
        if kind == "uri" and isinstance(part.get("uri"), str):
            return {"type": "image_url", "image_url": {"url": part["uri"]}}
        if kind == "blob" and isinstance(part.get("content"), str):
            mime = part.get("mime_type") if isinstance(part.get("mime_type"), str) else "image/png"
            return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{part['content']}"}}
    if kind == "image" and isinstance(part.get("image"), dict):
        # OpenInference: message_content.image.image.url. As OpenAI's block, the one the service's chat
        # view shows (and the SDK records for the same LangChain call); other image shapes stay as they are.
        image = _nested(part["image"], "image")
        url = image.get("url") if isinstance(image, dict) else None
        if isinstance(url, str):
            return {"type": "image_url", "image_url": {"url": url}}
    return part


def _json_text(value: Any) -> Any:
    """Message content from a value that may not be text: text as it came, any other value as its JSON text.

    Tools return objects (pydantic-ai records a returned dict as one); a message's
    content is text or content blocks, and the model was sent the JSON text anyway.
    """
    if value is None or isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return str(value)


def _content(value: Any) -> Any:
    """Message content: a string when it is plain text, else a list of blocks."""
    if isinstance(value, str) and value[:1] == "[":
        # traceloop stores multi-part content as a JSON list of blocks; text that
        # merely starts with "[" stays text.
        decoded = _json_value(value)
        if isinstance(decoded, list) and decoded and all(isinstance(p, dict) and "type" in p for p in decoded):
            value = decoded
    if isinstance(value, (list, tuple)):
        blocks = [_content_block(p) for p in value]
        if len(blocks) == 1 and isinstance(blocks[0], dict) and blocks[0].get("type") == "text":
            return blocks[0]["text"]
        return blocks
    return value


#: LangChain's message types (``BaseMessage.type``, and the class a serialized
#: message names last in its ``id``) -> role. A ``ChatMessage`` carries its own role.
_LANGCHAIN_ROLES = {
    "system": "system", "SystemMessage": "system",
    "human": "user", "HumanMessage": "user",
    "ai": "assistant", "AIMessage": "assistant",
    "tool": "tool", "ToolMessage": "tool",
    "function": "function", "FunctionMessage": "function",
}
_LANGCHAIN_CHAT = frozenset({"chat", "ChatMessage"})


def _langchain_message(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    """A LangChain message, in any of the shapes it is serialized in, as an OpenAI-style message.

    LangChain messages have a ``type``, not a ``role``, and arrive as
    ``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``
    (``dumpd``/``to_json``), ``{"type": "ai", "data": {...}}`` (``message_to_dict``)
    or the message's own fields (``model_dump``: ``{"type": "ai", "content": ...}``).
    None when ``raw`` is none of these. Tool calls are LangChain's parsed ones
    (``{"name", "args", "id"}``), else the provider's raw ones in ``additional_kwargs``.
    """
    kind: Any
    body: Any
    if raw.get("lc") == 1 and raw.get("type") == "constructor":
        ident = raw.get("id")
        kind = ident[-1] if isinstance(ident, (list, tuple)) and ident else None
        body = raw.get("kwargs")
    elif len(raw) == 2 and isinstance(raw.get("data"), dict):
        kind, body = raw.get("type"), raw["data"]
    else:
        kind, body = raw.get("type"), raw
    if not isinstance(kind, str) or not isinstance(body, Mapping) or "content" not in body:
        return None
    if kind.endswith("Chunk"):  # a streamed message: AIMessageChunk
        kind = kind[: -len("Chunk")]
    role: Any = body.get("role") if kind in _LANGCHAIN_CHAT else _LANGCHAIN_ROLES.get(kind)
    if not isinstance(role, str) or not role:
        return None
    msg: dict[str, Any] = {"role": role, "content": body.get("content")}
    calls = body.get("tool_calls")
    if isinstance(calls, (list, tuple)) and calls:
        msg["tool_calls"] = [
            {"id": c.get("id"), "function": {"name": c.get("name"), "arguments": c.get("args")}}
            if "args" in c else c
            for c in calls if isinstance(c, dict)
        ]
    else:
        extra = body.get("additional_kwargs")
        if isinstance(extra, dict) and extra.get("tool_calls"):
            msg["tool_calls"] = extra["tool_calls"]
    for key in ("tool_call_id", "name"):
        if body.get(key) is not None:
            msg[key] = body[key]
    return msg


_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result"})


def _anthropic_content(content: Any, tool_calls: list[dict[str, Any]], results: list[dict[str, Any]]) -> Any:
    """Anthropic's content blocks, as a message's ``content`` arrives when a producer
    passes the request through: ``tool_use`` blocks become OpenAI-style tool calls
    (appended to ``tool_calls``), ``tool_result`` blocks tool messages (appended to
    ``results``); the other blocks are returned as the content. Content with
    neither kind of block is returned as it came.

    >>> calls, results = [], []
    >>> _anthropic_content([{"type": "text", "text": "Let me check."},
    ...     {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}], calls, results)
    [{'type': 'text', 'text': 'Let me check.'}]
    >>> calls
    [{'id': 't1', 'type': 'function', 'function': {'name': 'f', 'arguments': '{"x":1}'}}]
    """
    blocks = _json_value(content) if isinstance(content, str) and content[:1] == "[" else content
    if not isinstance(blocks, (list, tuple)) or not any(
        # (a type that is not a string, a list say, cannot be looked up in a set)
        isinstance(b, dict) and isinstance(b.get("type"), str) and b["type"] in _ANTHROPIC_BLOCKS for b in blocks
    ):
        return content
    rest: list[Any] = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_use":
            call = _tool_call({"id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")})
            if call:
                tool_calls.append(call)
        elif kind == "tool_result":
            result = block.get("content")
            results.append({
                "role": "tool",
                "content": _content(result) if isinstance(result, (list, tuple)) else _plain(result),
                "tool_call_id": block.get("tool_use_id"),
            })
        else:
            rest.append(block)
    return rest or None


def _plain_text_message(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The commonest GenAI message, ``{"role", "parts": [{"type": "text", "content"}]}`` with one text part (an
    output message also says its ``finish_reason``, which :func:`_message_list` reads), read in one step; None
    for any other shape, which :func:`_message` reads in full.

    The result is what the full reading (:func:`_read_message`) gives for it; a test compares the two.
    """
    if len(raw) != 2 and (len(raw) != 3 or "finish_reason" not in raw):
        return None
    speaker = raw.get("role")
    parts = raw.get("parts")
    if not isinstance(speaker, str) or not speaker or type(parts) is not list or len(parts) != 1:
        return None
    part = parts[0]
    if type(part) is not dict or len(part) != 2 or part.get("type") != "text":
        return None
    text = part.get("content")
    if type(text) is not str:
        return None
    return {"role": speaker, "content": text}


def _message(raw: Any, role: str | None = None) -> list[dict[str, Any]]:
    """Normalize one message of any convention; may yield several (tool results).

    Accepts OpenAI-style (``role``/``content``/``tool_calls``), GenAI
    (``role``/``parts``), OpenInference unflattened (``{"message": {...}}``),
    traceloop unflattened, and the bodies of the older message/choice events.
    """
    raw = _json_value(raw)
    if isinstance(raw, str):
        return [{"role": role or "user", "content": raw}]
    if not isinstance(raw, dict):
        return []
    simple = _plain_text_message(raw)
    if simple is not None:
        return [simple]
    return _read_message(raw, role)


def _read_message(raw: dict[str, Any], role: str | None) -> list[dict[str, Any]]:
    """:func:`_message`'s full reading of a message object, whatever its convention."""
    if "role" not in raw and "type" in raw:
        raw = _langchain_message(raw) or raw
    if isinstance(raw.get("message"), (dict, str)) and "role" not in raw and "content" not in raw:
        inner = _json_value(raw["message"])  # OpenInference, or a gen_ai.choice body
        outer, raw = raw, inner if isinstance(inner, dict) else {"content": inner}
        if "tool_calls" in outer and "tool_calls" not in raw:
            # A gen_ai.choice event documents its tool calls beside the message (tool_calls.{n}.*).
            raw = {**raw, "tool_calls": outer["tool_calls"]}
    # The message's own role wins, whatever its type (the compiled build checks a str-typed name).
    speaker: Any = raw.get("role") or role or "user"
    msg: dict[str, Any] = {"role": speaker, "content": None}
    tool_calls = [c for c in map(_tool_call, _as_list(raw.get("tool_calls")) or ()) if c]
    extra: list[dict[str, Any]] = []

    parts = _as_list(raw.get("parts"))
    if parts is not None:  # GenAI: split tool calls and tool results out of the parts
        content_parts = []
        for part in parts:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "tool_call":
                tc = _tool_call(part)
                if tc:
                    tool_calls.append(tc)
            elif kind == "tool_call_response":
                # The GenAI semconv names the tool's output "response"; pydantic-ai (and the semconv's
                # own examples since) write it as "result".
                response = part.get("response", part.get("result"))
                # Content blocks ([{"type": "text", ...}], as Anthropic's tool_result takes) read as content;
                # any other object is the JSON text the model was sent.
                blocks = isinstance(response, list) and bool(response) and all(isinstance(b, dict) and "type" in b for b in response)
                text = _content(response) if blocks else _json_text(response)
                extra.append({"role": "tool", "content": text, "tool_call_id": part.get("id")})
            else:
                content_parts.append(part)
        if content_parts:
            msg["content"] = _content(content_parts)
    elif "contents" in raw:  # OpenInference multi-part content
        msg["content"] = _content(raw["contents"])
    else:
        content = _anthropic_content(raw.get("content"), tool_calls, extra)
        msg["content"] = _content(content)

    if raw.get("function_call_name"):  # OpenInference legacy function call
        tool_calls.append(
            {"type": "function", "function": {"name": raw["function_call_name"],
                                              "arguments": raw.get("function_call_arguments_json") or ""}}
        )
    if tool_calls:
        msg["tool_calls"] = tool_calls
    if speaker == "tool" and isinstance(msg["content"], dict):
        msg["content"] = _json_text(msg["content"])  # a returned object (pydantic-ai's tool message events)
    tool_call_id = raw.get("tool_call_id", raw.get("id") if speaker == "tool" else None)
    if tool_call_id is not None:
        msg["tool_call_id"] = tool_call_id
    if raw.get("name"):
        msg["name"] = raw["name"]
    if msg["content"] is None and not tool_calls and extra:
        return extra  # a GenAI tool message is only its results
    # Tool results answer calls made before this message: they come first, as the OpenAI
    # shape has them (Anthropic puts them first in the user message too).
    return [*extra, msg]


def _messages(items: Iterable[Any], role: str | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items:
        if type(item) is not dict:
            out.extend(_message(item, role))
            continue
        # The commonest message straight away: most conversations are only these. Any other
        # object goes to the full reading directly, not through _message's same first look.
        simple = _plain_text_message(item)
        if simple is not None:
            out.append(simple)
        else:
            out.extend(_read_message(item, role))
    return out


def _system_message(value: Any) -> dict[str, Any] | None:
    """``gen_ai.system_instructions``: a list of parts, or a plain string."""
    decoded = _json_value(value)
    if isinstance(decoded, str):
        return {"role": "system", "content": decoded} if decoded else None
    parts = _as_list(decoded)
    if not parts:
        return None
    return {"role": "system", "content": _content(parts)}


def _looks_like_message(item: Any) -> bool:
    item = _json_value(item)
    if not isinstance(item, dict):
        return False
    if "role" in item:
        return "content" in item or "parts" in item or "tool_calls" in item
    return "type" in item and _langchain_message(item) is not None


def _payload(value: Any, key: str) -> dict[str, Any]:
    """A whole inputs/outputs value: messages are normalized, objects kept.

    A lone LangChain message (the input of a parser run, the output of a tool
    run) is shown as the message, in a list of one, as any conversation is.
    """
    decoded = _json_value(value)
    if isinstance(decoded, (list, tuple)) and decoded and all(_looks_like_message(m) for m in decoded):
        return {"messages": _messages(decoded)}
    if isinstance(decoded, dict) and "role" not in decoded and "type" in decoded:
        lone = _langchain_message(decoded)
        if lone is not None:
            return {"messages": _message(lone)}
    obj = _as_object(decoded, key)
    messages = obj.get("messages")
    if isinstance(messages, list):
        if len(messages) == 1 and isinstance(messages[0], list):
            messages = messages[0]  # LangChain's batch of conversations: [[...]]; one is the usual case
        obj = {**obj, "messages": _messages(messages)}
    # A chain's other inputs may hold a conversation too (a MessagesPlaceholder's "history"), serialized
    # by LangChain's message_to_dict: read as messages, as the SDK records them, not as wrappers.
    for name, value in obj.items():
        if name != "messages" and isinstance(value, list) and value and all(_wrapped_message(v) for v in value):
            obj = {**obj, name: _messages(value)}
    return obj


def _wrapped_message(item: Any) -> bool:
    """``{"type": "human", "data": {"content": ...}}``: LangChain's message_to_dict, and nothing else."""
    return (isinstance(item, dict) and len(item) == 2 and isinstance(item.get("data"), dict)
            and isinstance(item.get("type"), str) and _langchain_message(item) is not None)


# ---------------------------------------------------------------------------
# Input/output sources
# ---------------------------------------------------------------------------


class _Ctx:
    """What the single passes over attributes and events collected."""

    __slots__ = (
        "attributes", "flat", "consumed", "claim_only", "event_in", "event_out", "finish_reasons", "replies_used",
        "event_prompt", "event_completion", "logfire", "logfire_data", "malformed", "partial_inputs", "plan",
    )

    def __init__(
        self, attributes: Mapping[str, Any], consumed: set[str], flat: dict[str, dict[str, Any]], plan: _Plan
    ) -> None:
        self.attributes = attributes
        self.consumed = consumed
        #: The flattened families' members, by family (see _read_keys).
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
        self.event_prompt: Any = None
        self.event_completion: Any = None
        #: Logfire event arrays, parsed once: attribute -> event objects (None: not that shape).
        self.logfire: dict[str, list[dict[str, Any]] | None] = {}
        #: Logfire's request_data/response_data objects, decoded once (None: not Logfire's, or unreadable).
        self.logfire_data: dict[str, dict[str, Any] | None] = {}
        #: (attribute, expected shape) of values a rule could not read; see Mapped.malformed.
        self.malformed: list[tuple[str, str]] = []
        #: Set when the inputs found are only part of what their source will hold (not final).
        self.partial_inputs = False

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


#: Attributes that always hold JSON (traceloop encodes every input/output).
_JSON_VALUE_KEYS = frozenset({"traceloop.entity.input", "traceloop.entity.output"})

_Reader = Callable[[_Ctx, str], "dict[str, Any] | None"]


_MESSAGES_JSON = "a JSON array of messages"


def _message_items(ctx: _Ctx, key: str, raw: Any) -> list[Any]:
    """The items of a JSON array of messages; a value that is not one is refused (kept as text)."""
    items = _as_list(raw)
    if items is None:
        ctx.refuse(key, _MESSAGES_JSON)
        return []
    return items


def _read_genai_input(ctx: _Ctx, key: str) -> dict[str, Any] | None:
    raw = ctx.take(key)
    system = ctx.take("gen_ai.system_instructions")
    if ctx.claim_only:
        return None
    messages = _messages(_message_items(ctx, key, raw)) if raw is not None else []
    if raw is None and system is not None:
        # The system instructions alone are not the inputs yet: producers set them just
        # before the messages, and an early post must not show a conversation without them.
        ctx.partial_inputs = True
    sys_msg = _system_message(system) if system is not None else None
    if sys_msg:
        messages.insert(0, sys_msg)
    return {"messages": messages} if messages else None


def _read_genai_messages(ctx: _Ctx, key: str) -> dict[str, Any] | None:
    raw = ctx.take(key)
    if ctx.claim_only or raw is None:
        return None
    return _message_list(_message_items(ctx, key, raw), key)


def _read_flat_messages(ctx: _Ctx, prefix: str) -> dict[str, Any] | None:
    group = ctx.take_flat(prefix)
    if ctx.claim_only or not group:
        return None
    items = _unflatten(group)
    return _message_list(items if isinstance(items, list) else [], prefix)


#: The message sources whose items are the model's replies, each with its own
#: ``finish_reason`` (GenAI output messages, traceloop's ``gen_ai.completion.{n}.finish_reason``).
_REPLY_SOURCES = frozenset({"gen_ai.output.messages", "llm.output_messages.", "gen_ai.completion."})


def _message_list(items: list[Any], source: str) -> dict[str, Any] | None:
    """``{"messages": ...}``, with the replies' first finish reason as ``finish_reason``
    (as the ``gen_ai.choice`` events give theirs)."""
    messages = _messages(items)
    if source in _REPLY_SOURCES:
        # A failed call's reply with a role and nothing else (OpenInference writes one): not an empty
        # answer to show beside the error.
        messages = [m for m in messages if any(v not in (None, "", []) for k, v in m.items() if k != "role")]
    if not messages:
        return None
    out: dict[str, Any] = {"messages": messages}
    if source in _REPLY_SOURCES:
        for item in items:
            reason = item.get("finish_reason") if isinstance(item, dict) else None
            if reason not in (None, ""):
                out["finish_reason"] = _plain(reason)
                break
    return out


def _read_events(ctx: _Ctx, side: str) -> dict[str, Any] | None:
    if ctx.claim_only:
        ctx.take("gen_ai.prompt" if side == "in" else "gen_ai.completion")
        return None
    if side == "in":
        messages = [m for reply, msgs in ctx.event_in if not (reply and ctx.replies_used) for m in msgs]
        if messages:
            return {"messages": messages}
        whole, key = ctx.event_prompt, "gen_ai.prompt"
    else:
        if ctx.event_out:
            out: dict[str, Any] = {
                "messages": [m for _, msgs in sorted(ctx.event_out, key=lambda e: e[0]) for m in msgs]
            }
            if ctx.finish_reasons:
                out["finish_reason"] = min(ctx.finish_reasons, key=lambda e: e[0])[1]
            return out
        replies = [m for reply, msgs in ctx.event_in if reply for m in msgs]
        if replies:
            ctx.replies_used = True
            return {"messages": replies}
        whole, key = ctx.event_completion, "gen_ai.completion"
    if whole is None:
        # The same whole-content attribute set on the span itself (the langsmith
        # SDK's own OTel exporter writes the run's inputs/outputs this way).
        whole = ctx.take(key)
    return _payload(whole, "input" if side == "in" else "output") if whole is not None else None


def _logfire_events(ctx: _Ctx, key: str) -> list[dict[str, Any]] | None:
    """The event objects of a Logfire ``events``/``all_messages_events`` attribute, or None.

    These names are generic, so the attribute is claimed only when it has
    Logfire's shape: an array of objects, named by ``event.name`` (pydantic-ai's
    events). Logfire itself also writes ``all_messages_events`` as plain messages
    (``role`` and ``content`` or ``tool_calls``, no event names), which it builds
    for the spans of other instrumentations; for that name, that shape counts too.
    """
    if key in ctx.logfire:
        return ctx.logfire[key]
    value = ctx.attributes.get(key)
    items = _as_list(value) if value is not None else None
    if (
        not items
        or not all(isinstance(i, dict) for i in items)
        or not (
            any("event.name" in i for i in items)
            or (key == _LOGFIRE_ALL_MESSAGES and all(_looks_like_message(i) for i in items))
        )
    ):
        items = None
    else:
        ctx.consumed.add(key)
    ctx.logfire[key] = items
    return items


def _logfire_messages(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items:
        name = item.get("event.name")
        role = None if not isinstance(name, str) else "assistant" if name == _CHOICE_EVENT else _MESSAGE_EVENT_ROLES.get(name)
        out.extend(_message(item, role))
    return out


_ASSISTANT_EVENT = "gen_ai.assistant.message"


def _read_logfire_events(ctx: _Ctx, side: str) -> dict[str, Any] | None:
    # The choice events are the outputs; every other event is the conversation that led to them.
    items = _logfire_events(ctx, _LOGFIRE_EVENTS)
    if ctx.claim_only or not items:
        return None
    if any(i.get("event.name") == _CHOICE_EVENT for i in items):
        chosen = [i for i in items if (i.get("event.name") == _CHOICE_EVENT) == (side == "out")]
    else:
        # Logfire's Responses spans (instrument_openai version=1) give the reply as trailing
        # gen_ai.assistant.message events, not gen_ai.choice: those are the outputs once the call
        # answered (finish reasons written); else they are the conversation so far.
        replies = 0
        if ctx.attributes.get("gen_ai.response.finish_reasons"):
            while replies < len(items) and items[-1 - replies].get("event.name") == _ASSISTANT_EVENT:
                replies += 1
        split = len(items) - replies
        chosen = items[split:] if side == "out" else items[:split]
    messages = _logfire_messages(chosen)
    if not messages:
        return None
    out: dict[str, Any] = {"messages": messages}
    reasons = [i["finish_reason"] for i in chosen if i.get("finish_reason") is not None]
    if side == "out" and reasons:
        out["finish_reason"] = reasons[0]
    return out


def _read_logfire_prompt(ctx: _Ctx, key: str) -> dict[str, Any] | None:
    # A name this generic may be the app's own attribute, not another encoding of
    # the inputs: it is taken only when it is the inputs, else it stays in metadata.
    if ctx.claim_only or key not in ctx.attributes:
        return None
    return _read_value(ctx, key)


def _read_logfire_all_messages(ctx: _Ctx, key: str) -> dict[str, Any] | None:
    items = _logfire_events(ctx, key)
    if ctx.claim_only or not items:
        return None
    messages = _logfire_messages(items)
    return {"messages": messages} if messages else None


def _logfire_data(ctx: _Ctx, key: str) -> dict[str, Any] | None:
    """Logfire's ``request_data``/``response_data`` object on a span Logfire made, decoded once, else None.

    An unreadable one is reported once and left as it came (in metadata).
    """
    if key in ctx.logfire_data:
        return ctx.logfire_data[key]
    found: dict[str, Any] | None = None
    raw = ctx.attributes.get(key)
    if raw is not None and ctx.attributes.get(_LOGFIRE_MARK) is not None:
        value = _json_value(raw)
        if isinstance(value, dict):
            found = value
        else:
            ctx.malformed.append((key, "a JSON object"))
    ctx.logfire_data[key] = found
    return found


def _read_logfire_data(ctx: _Ctx, key: str) -> dict[str, Any] | None:
    """Logfire's format 1: the conversation in ``request_data`` (the request body) as the inputs,
    the message or text of ``response_data`` as the outputs.

    The rest of the request body is the invocation parameters (``_invocation_params``), which
    consume it; a response with neither message nor text (an embedding's usage alone, images)
    stays in metadata. Logfire writes Anthropic's tool calls with the arguments wrapped in
    ``{"input": ...}``: they are unwrapped.
    """
    data = _logfire_data(ctx, key)
    if data is None:
        return None
    if key == _LOGFIRE_REQUEST:
        if ctx.claim_only or not _LOGFIRE_CONVERSATION_KEYS.intersection(data):
            return None  # format 2's request_data names the model alone
        messages = _messages(data["messages"]) if isinstance(data.get("messages"), list) else []
        system = data.get("system", data.get("instructions"))
        sys_msg = _system_message(system) if system is not None else None
        if sys_msg:
            messages.insert(0, sys_msg)
        if messages:
            return {"messages": messages}
        if data.get("prompt") is not None:
            return {"prompt": _plain(data["prompt"])}
        return _payload(data["input"], "input") if data.get("input") is not None else None
    message = data.get("message")
    text = data.get("text", data.get("combined_chunk_content"))
    if not isinstance(message, dict) and not isinstance(text, str):
        return None
    ctx.consumed.add(key)
    if ctx.claim_only:
        return None
    if isinstance(message, dict):
        if message.get("content") is None and isinstance(message.get("refusal"), str):
            message = {**message, "content": message["refusal"]}
        replies = _message(message, "assistant")
    else:
        replies = [{"role": "assistant", "content": text}]
    if ctx.attributes.get("gen_ai.system") == "anthropic":
        for reply in replies:
            for call in reply.get("tool_calls") or ():
                function = call.get("function")
                arguments = _json_value(function.get("arguments")) if isinstance(function, dict) else None
                if isinstance(arguments, dict) and len(arguments) == 1 and "input" in arguments:
                    function["arguments"] = _json_text(arguments["input"])
    out: dict[str, Any] = {"messages": replies}
    if data.get("finish_reason") is not None:
        out["finish_reason"] = _plain(data["finish_reason"])
    return out


def _logfire_usage(attributes: Mapping[str, Any], consumed: set[str]) -> dict[str, Any] | None:
    """The token details of the provider's usage object Logfire keeps whole, as usage_metadata's.

    From ``gen_ai.usage.raw`` (consumed), else from format 1's ``response_data.usage``.
    """
    raw = _json_value(attributes.get(_LOGFIRE_USAGE_RAW))
    if isinstance(raw, dict):
        consumed.add(_LOGFIRE_USAGE_RAW)
    elif attributes.get(_LOGFIRE_MARK) is not None:
        response = _json_value(attributes.get(_LOGFIRE_RESPONSE))
        raw = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(raw, dict):
        return None
    details: dict[str, Any] = {}
    for (group, name), (where, detail) in _PROVIDER_USAGE_DETAILS:
        holder = raw.get(group) if group else raw
        count = holder.get(name) if isinstance(holder, dict) else None
        if isinstance(count, int) and not isinstance(count, bool):
            details.setdefault(where, {}).setdefault(detail, count)
    return details or None


def _read_pydantic_ai(ctx: _Ctx, side: str) -> dict[str, Any] | None:
    """pydantic-ai's agent run and its format-2 tool span.

    The agent run's inputs are the conversation it was given: the instructions,
    the history, and its prompt (every message before its first reply); its
    outputs are its final result as the assistant's answer, so the run reads as
    one chat turn, the way the service shows a chat (its thread view included).
    The whole exchange in between (tool calls, tool results) is in the child runs.
    A run that failed has no final result, hence no outputs: its error says why.
    """
    attributes = ctx.attributes
    if _PYDANTIC_AI_MESSAGES not in attributes:
        if not attributes.get("gen_ai.tool.name"):
            return None
        # The tool span's arguments are also the documented invocation_params.tool_arguments row.
        key = _PYDANTIC_AI_TOOL_ARGUMENTS if side == "in" else _PYDANTIC_AI_TOOL_RESULT
        value = ctx.take(key)
        if ctx.claim_only or value is None:
            return None
        return _payload(value, "input" if side == "in" else "output")
    if side == "out":
        final = ctx.take(_PYDANTIC_AI_FINAL_RESULT)
        if ctx.claim_only or final is None:
            return None
        return {"messages": [{"role": "assistant", "content": _json_text(_plain(final))}]}
    raw = ctx.take(_PYDANTIC_AI_MESSAGES)
    index = _as_int(ctx.take(_PYDANTIC_AI_NEW_MESSAGE_INDEX)) or 0
    system = ctx.take("gen_ai.system_instructions")
    if ctx.claim_only:
        return None
    items = _as_list(raw) or []
    # new_message_index counts pydantic-ai messages: a response is one GenAI message (the
    # assistant's), a request one or more consecutive others (system, user, tool parts).
    start = counted = 0
    while start < len(items) and counted < index:
        if _role_of(items[start]) == "assistant":
            start += 1
        else:
            while start < len(items) and _role_of(items[start]) != "assistant":
                start += 1
        counted += 1
    end = start
    while end < len(items) and _role_of(items[end]) != "assistant":
        end += 1
    messages = _messages(items[:end])
    sys_msg = _system_message(system) if system is not None else None
    if sys_msg:
        messages.insert(0, sys_msg)
    return {"messages": messages} if messages else None


def _role_of(item: Any) -> Any:
    return item.get("role") if isinstance(item, dict) else None


def _read_value(ctx: _Ctx, key: str) -> dict[str, Any] | None:
    value = ctx.take(key)
    mime = ctx.take(key[: -len(".value")] + ".mime_type") if key.endswith(".value") else None
    if ctx.claim_only or value is None:
        return None
    default = "output" if "output" in key or "result" in key else "input"
    if mime == "text/plain":
        return {default: value}
    if isinstance(value, str) and (mime == "application/json" or key in _JSON_VALUE_KEYS):
        # Declared JSON: decode scalars too (traceloop json.dumps a returned
        # string as '"text"'), keeping the raw text if it is not JSON after all.
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return _payload(value, default)
        payload = _payload(value, default)
        # Kept as decoded (not reshaped as messages): the encoder may skip its checks for non-JSON values.
        # (Typed here: the compiled build sees ParsedJson's module as untyped.)
        marked: dict[str, Any]
        if payload is value:
            marked = ParsedJson(payload)
        elif len(payload) == 1 and payload.get(default) is value:
            marked = ParsedJson({default: value})
        else:
            marked = payload
        return marked
    return _payload(value, default)


def _read_query(ctx: _Ctx, key: str) -> dict[str, Any] | None:
    value = ctx.take(key)
    return {"query": value} if value is not None and not ctx.claim_only else None


def _read_embedding_texts(ctx: _Ctx, prefix: str) -> dict[str, Any] | None:
    # OpenInference embedding spans: the texts, and one vector per text. The
    # vectors are consumed and dropped: output.value already carries the
    # response, and thousands of floats per text do not belong in metadata.
    group = ctx.take_flat(prefix)
    if ctx.claim_only or not group:
        return None
    items = _unflatten(group)
    texts = [] if not isinstance(items, list) else [
        e["text"] for e in (_nested(i, "embedding") for i in items) if isinstance(e, dict) and e.get("text") is not None
    ]
    return {"input": texts} if texts else None


def _read_tool_parameters(ctx: _Ctx, key: str) -> dict[str, Any] | None:
    # OpenInference documents tool.parameters as the tool's parameter schema,
    # but its own GenAI conversion treats it as the call's arguments; it is a
    # last resort after input.value, which carries the real arguments there.
    value = ctx.take(key)
    group = ctx.take_flat(key + ".")
    if ctx.claim_only:
        return None
    if value is not None:
        return _as_object(value, "input")
    if not group:
        return None
    params = _unflatten(group)
    # Indexed parameters (tool.parameters.0) unflatten to a list; inputs must be an object.
    return params if isinstance(params, dict) else {"input": params}


#: For which run types a value a source holds is final when a span starts: no
#: higher row of ``_INPUT_SOURCES`` can arrive later. OpenInference LLM spans set
#: ``input.value`` (the raw request) at start and their messages after it, so
#: ``input.value`` is final only outside model runs; events arrive over a span's
#: life, so what they make is never final. An early post carries inputs only
#: when final: where the service's merge rule is not shown, a patch cannot be
#: relied on to take back what a post guessed.
_FINAL = RUN_TYPES
_FINAL_UNLESS_MODEL = RUN_TYPES - {"llm", "embedding"}
_NOT_FINAL: frozenset[str] = frozenset()

#: Inputs, first present wins (the issue's order, then the retrieval query and
#: the tool-call arguments for spans that carry nothing else): ``(reader, its
#: argument, run types for which the value is final at start)``.
_INPUT_SOURCES: tuple[tuple[_Reader, str, frozenset[str]], ...] = (
    # pydantic-ai's agent run (set as it ends) and its format-2 tool span (set at its start). First,
    # because the row below would take the agent's instructions alone as its inputs.
    (_read_pydantic_ai, "in", frozenset({"tool"})),
    # doc: gen_ai.input.messages -> inputs.messages. "Array of input messages"
    (_read_genai_input, "gen_ai.input.messages", _FINAL),
    # doc: llm.input_messages -> inputs.messages. "Input messages"
    (_read_flat_messages, "llm.input_messages.", _FINAL),
    # doc: gen_ai.prompt.{n}.role -> inputs.messages[n].role. "Role for the nth input message"
    # doc: gen_ai.prompt.{n}.content -> inputs.messages[n].content. "Content for the nth input message"
    # doc: gen_ai.prompt.{n}.message.role -> inputs.messages[n].role. "Alternative format for role"
    # doc: gen_ai.prompt.{n}.message.content -> inputs.messages[n].content. "Alternative format for content"
    (_read_flat_messages, "gen_ai.prompt.", _FINAL),
    # Logfire's format 1: the request body, set as its span starts (its row is at _LOGFIRE_REQUEST).
    (_read_logfire_data, _LOGFIRE_REQUEST, _FINAL),
    # The message and content events (their rows are with _MESSAGE_EVENT_ROLES and _CONTENT_EVENTS), then
    # doc: gen_ai.prompt -> inputs. "The input prompt sent to the model" (the same attribute on the span).
    (_read_events, "in", _NOT_FINAL),
    # doc: input.value -> inputs. "Full input value, can be string or JSON"
    (_read_value, "input.value", _FINAL_UNLESS_MODEL),
    # doc: traceloop.entity.input -> inputs. "Full input value from TraceLoop"
    (_read_value, "traceloop.entity.input", _FINAL_UNLESS_MODEL),
    (_read_embedding_texts, "embedding.embeddings.", _FINAL),
    (_read_query, "gen_ai.retrieval.query.text", _FINAL),
    (_read_value, "gen_ai.tool.call.arguments", _FINAL),
    (_read_tool_parameters, "tool.parameters", _NOT_FINAL),
    (_read_logfire_prompt, _LOGFIRE_PROMPT, _NOT_FINAL),  # its row is at _LOGFIRE_PROMPT
    (_read_logfire_events, "in", _NOT_FINAL),
)
_INPUT_READERS: tuple[tuple[_Reader, str], ...] = tuple((reader, arg) for reader, arg, _ in _INPUT_SOURCES)
#: Outputs, first present wins.
_OUTPUT_SOURCES: tuple[tuple[_Reader, str], ...] = (
    # doc: gen_ai.output.messages -> outputs.messages. "Array of output messages"
    (_read_genai_messages, "gen_ai.output.messages"),
    # doc: llm.output_messages -> outputs.messages. "Output messages"
    (_read_flat_messages, "llm.output_messages."),
    # doc: gen_ai.completion.{n}.role -> outputs.messages[n].role. "Role for the nth output message"
    # doc: gen_ai.completion.{n}.content -> outputs.messages[n].content. "Content for the nth output message"
    # doc: gen_ai.completion.{n}.message.role -> outputs.messages[n].role. "Alternative format for role"
    # doc: gen_ai.completion.{n}.message.content -> outputs.messages[n].content. "Alternative format for content"
    (_read_flat_messages, "gen_ai.completion."),
    # Logfire's format 1: the response's message (its row is at _LOGFIRE_RESPONSE).
    (_read_logfire_data, _LOGFIRE_RESPONSE),
    # The choice and message events, then
    # doc: gen_ai.completion -> outputs. "The output generated by the model" (the same attribute on the span).
    (_read_events, "out"),
    # doc: output.value -> outputs. "Full output value, can be string or JSON"
    (_read_value, "output.value"),
    # doc: traceloop.entity.output -> outputs. "Full output value from TraceLoop"
    (_read_value, "traceloop.entity.output"),
    (_read_value, "gen_ai.tool.call.result"),
    (_read_pydantic_ai, "out"),
    (_read_logfire_all_messages, _LOGFIRE_ALL_MESSAGES),
    (_read_logfire_events, "out"),
)


#: Stands among a span's read keys (:func:`_read_keys`) when the span has events: the event readers' rows need it.
_SPAN_EVENTS = "(span events)"


def _source_reads(reader: _Reader, arg: str) -> tuple[str, ...]:
    """Every key (or flattened family, by its prefix) a source row may look up.

    A row none of whose keys a span has finds nothing and consumes nothing, so
    :class:`_Plan` leaves it out; :func:`reads_nothing` knows them all.
    """
    if reader is _read_events:
        return (_SPAN_EVENTS, "gen_ai.prompt" if arg == "in" else "gen_ai.completion")
    if reader is _read_pydantic_ai:
        return (_PYDANTIC_AI_MESSAGES, "gen_ai.tool.name", _PYDANTIC_AI_TOOL_ARGUMENTS, _PYDANTIC_AI_TOOL_RESULT,
                _PYDANTIC_AI_FINAL_RESULT, _PYDANTIC_AI_NEW_MESSAGE_INDEX, "gen_ai.system_instructions")
    if reader is _read_logfire_events:
        return (_LOGFIRE_EVENTS,)
    if reader is _read_logfire_data:
        return (arg, _LOGFIRE_MARK, "gen_ai.system")
    if reader is _read_genai_input:
        return (arg, "gen_ai.system_instructions")
    if reader is _read_tool_parameters:
        return (arg, arg + ".")  # the whole value, or its flattened family
    if arg.endswith(".value"):
        return (arg, arg[: -len(".value")] + ".mime_type")
    return (arg,)


def _first_source(ctx: _Ctx, sources: tuple[tuple[_Reader, str], ...]) -> tuple[dict[str, Any] | None, int]:
    """Apply a source table: the value found and the index of its row (-1: none).

    The sources a winner shadows are read too (and so consumed): they are other
    encodings of the same content, and repeating them in metadata would only
    double the run's size."""
    found = None
    row = -1
    ctx.claim_only = False
    for index, (reader, arg) in enumerate(sources):
        value = reader(ctx, arg)
        if found is None and value is not None:
            found = value
            row = index
            ctx.claim_only = True
    ctx.claim_only = False
    return found, row


# ---------------------------------------------------------------------------
# The other tables' appliers
# ---------------------------------------------------------------------------


def _run_type(attributes: Mapping[str, Any], consumed: set[str], plan: _Plan) -> str:
    for key, values, default in plan.run_type_rules:
        raw = attributes.get(key)
        if not isinstance(raw, str) or not raw:
            continue
        run_type = values.get(raw.lower(), default)
        if run_type is not None:
            consumed.add(key)
            return run_type
    for key, run_type in plan.run_type_presence:
        if attributes.get(key) not in (None, ""):
            return run_type
    for key in plan.model_keys:
        if key in attributes:
            return "llm"
    return "chain"


def _first_str(attributes: Mapping[str, Any], keys: Sequence[str]) -> tuple[str, str] | None:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return key, value
    return None


def _usage(
    attributes: Mapping[str, Any], consumed: set[str], malformed: list[tuple[str, str]], plan: _Plan, outputs: Any
) -> dict[str, Any] | None:
    usage: dict[str, Any] = {}
    for path, keys in plan.usage_fields:
        for key in keys:
            raw = attributes.get(key)
            count = None if raw is None else _as_int(raw)
            if count is None and raw is not None:
                malformed.append((key, "a whole number of tokens"))  # not consumed: kept in metadata
            if count is not None:
                consumed.update(k for k in keys if k in attributes)
                if len(path) == 1:
                    usage[path[0]] = count
                else:
                    usage.setdefault(path[0], {})[path[1]] = count
                break
    found = bool(usage)
    if found and plan.logfire_usage:
        provider_details = _logfire_usage(attributes, consumed)
        if provider_details is not None:
            _merge_usage(usage, provider_details)
    for object_key, where in plan.usage_objects:
        source: Any
        if object_key is None:
            source = outputs.get("usage_metadata") if isinstance(outputs, dict) else None
        elif object_key in attributes:
            source = _langsmith_sdk_usage_object(attributes[object_key])
            if source is None:
                continue  # unreadable: it stays in metadata as it came
            if where != "usage_metadata":
                consumed.add(object_key)
                source = {where: source}
            elif not found:
                continue
        else:
            continue
        if isinstance(source, dict) and _merge_usage(usage, source):
            found = True
    if not found:
        return None
    usage.setdefault("input_tokens", 0)
    usage.setdefault("output_tokens", 0)
    usage.setdefault("total_tokens", usage["input_tokens"] + usage["output_tokens"])
    return usage


def _merge_usage(usage: dict[str, Any], source: Mapping[str, Any]) -> bool:
    """Add what ``source`` says that ``usage`` does not, one level of details deep; True if it had a count.

    Values are kept as they came (a cost is a float), so a source never loses anything by being merged.
    """
    counted = False
    for key, value in source.items():
        if not isinstance(key, str) or value is None or isinstance(value, bool):
            continue
        if isinstance(value, dict):
            have = usage.setdefault(key, {})
            if not isinstance(have, dict):
                continue
            for detail, count in value.items():
                if isinstance(detail, str) and isinstance(count, (int, float)) and not isinstance(count, bool):
                    have.setdefault(detail, count)
                    counted = True
            if not have:
                del usage[key]
        elif isinstance(value, (int, float)):
            usage.setdefault(key, value)
            counted = True
    return counted


#: A Python ``str()`` of a dict is read only this long (a usage object is a few dozen characters).
_REPR_MAX_CHARS = 4096


def _langsmith_sdk_usage_object(value: Any) -> dict[str, Any] | None:
    """A usage object the langsmith SDK's OTel exporter wrote: JSON, or ``str()`` of a dict of counts.

    Its token details (``{'audio': 0, 'cache_read': 2}``) are Python literals; they
    are read with ``ast.literal_eval``, which evaluates literals only, so a
    hostile value cannot run anything. Anything else is None.
    """
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or value[:1] != "{" or len(value) > _REPR_MAX_CHARS:
        return None
    decoded = _json_value(value)
    if isinstance(decoded, dict):
        return decoded
    try:
        literal = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return literal if isinstance(literal, dict) else None


def _invocation_params(ctx: _Ctx) -> tuple[dict[str, Any] | None, str | None]:
    """The invocation params, and the model a whole-object params names (the requested one)."""
    params: dict[str, Any] = {}
    for key in ctx.plan.param_object_keys:
        raw = ctx.attributes.get(key)
        value = _json_value(raw)
        if isinstance(value, dict):
            params.update(value)
            ctx.consumed.add(key)
        elif raw is not None:
            ctx.malformed.append((key, "a JSON object of parameters"))
    requested = _first_str(params, _REQUEST_MODEL_PARAMS)
    for rest, value in (ctx.take_flat(_PARAM_PREFIX) or {}).items():
        if rest in _LIST_PARAMS and isinstance(value, str) and value[:1] == "[":
            decoded = _json_value(value)  # Logfire writes these lists as JSON text
            value = decoded if isinstance(decoded, list) else value
        params[_PARAM_RENAMES.get(rest, rest)] = _plain(value)
    functions = ctx.take_flat(_FUNCTIONS_PREFIX)
    if functions:
        unflat = _unflatten(functions)
        params["tools"] = [_tool_definition(f) for f in (unflat if isinstance(unflat, list) else [unflat])]
    if "tools" in params:
        ctx.take_flat(_TOOLS_PREFIX)  # the same definitions again (OpenInference langchain writes both)
    else:
        tools = _openinference_tools(ctx)
        if tools:
            params["tools"] = [_tool_definition(t) for t in tools]
    for key, param, shape in ctx.plan.param_fields:
        value = ctx.attributes.get(key)
        if value is not None and param not in params:
            found = _param_value(value, shape)
            if found is _MALFORMED:
                ctx.malformed.append((key, "a JSON array of tool definitions"))
            else:
                params[param] = found
                ctx.consumed.add(key)
    request = _logfire_data(ctx, _LOGFIRE_REQUEST) if ctx.plan.logfire_request else None
    if request is not None:
        # Logfire's request body: its conversation is the inputs, the rest parameters the above left unsaid.
        ctx.consumed.add(_LOGFIRE_REQUEST)
        for param, value in request.items():
            if param not in _LOGFIRE_CONVERSATION_KEYS and param not in params:
                params[param] = _param_value(value, "tools") if param == "tools" else _plain(value)
        if params.get("tools") is _MALFORMED:
            del params["tools"]
        if requested is None:
            requested = _first_str(request, _REQUEST_MODEL_PARAMS)
    return params or None, requested[1] if requested else None


def _openinference_tools(ctx: _Ctx) -> list[Any] | None:
    """``llm.tools.{n}.tool.json_schema`` (or ``tool.name``/``tool.description``) as a list of tools.

    A schema that is not a JSON object is not a tool: its attribute stays in metadata, as it came.
    """
    group = ctx.flat.get(_TOOLS_PREFIX)
    if not group:
        return None
    items: dict[int, dict[str, str]] = {}  # position -> field -> the key's remainder
    for rest in group:
        head, _, field_name = rest.partition(".")
        position = _position(head)
        if position is not None:
            items.setdefault(position, {})[field_name] = rest
    tools: list[Any] = []
    for position in sorted(items):
        fields = items[position]
        schema_key = fields.get("tool.json_schema", "")
        schema = _json_value(group[schema_key]) if schema_key else None
        if isinstance(schema, dict):
            tools.append(_plain(schema))
            ctx.consumed.add(_TOOLS_PREFIX + schema_key)
            continue
        name_key = fields.get("tool.name", "")
        tool_name: Any = group[name_key] if name_key else None
        if not isinstance(tool_name, str) or not tool_name:
            continue
        function: dict[str, Any] = {"name": tool_name}
        ctx.consumed.add(_TOOLS_PREFIX + name_key)
        description_key = fields.get("tool.description", "")
        if description_key:
            function["description"] = _plain(group[description_key])
            ctx.consumed.add(_TOOLS_PREFIX + description_key)
        tools.append({"type": "function", "function": function})
    return tools or None


def _models(
    attributes: Mapping[str, Any], plan: _Plan, requested: str | None, consumed: set[str], metadata: dict[str, Any]
) -> None:
    """``ls_model_name``: the requested model, else the one that answered; ``response_model`` when they differ."""
    request = _first_str(attributes, plan.request_model_keys)
    if request:
        consumed.add(request[0])
        requested = request[1]
    response = _first_str(attributes, plan.response_model_keys)
    if response:
        consumed.add(response[0])
        if requested is None:
            requested = response[1]
        elif response[1] != requested:
            metadata["response_model"] = response[1]
    if requested is not None:
        metadata["ls_model_name"] = requested


def _tool_definition(item: Any) -> Any:
    """A tool offered to the model, as the OpenAI-style dict the service shows:
    ``{"type": "function", "function": {"name", "description", "parameters"}}``.

    Read from the GenAI convention's flat shape (``type``/``name``/``parameters``),
    Anthropic's request shape (``input_schema``) and OpenLLMetry's flattened
    functions (``parameters`` as a JSON string). Already OpenAI-style, not a
    function (a provider's built-in tool) or not an object: kept as it came.
    """
    item = _plain(_json_value(item))
    if not isinstance(item, dict) or isinstance(item.get("function"), dict):
        return item
    kind = item.get("type") or "function"
    name = item.get("name")
    if kind != "function" or not isinstance(name, str):
        return item
    function: dict[str, Any] = {"name": name}
    if item.get("description") is not None:
        function["description"] = item["description"]
    for key in ("parameters", "input_schema", "json_schema"):
        if item.get(key) is not None:
            function["parameters"] = _json_value(item[key])
            break
    return {"type": "function", "function": function}


def _langsmith_sdk_request_tools(out: Mapped) -> None:
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


def _document(raw: Any) -> dict[str, Any] | None:
    """A retrieved document in the shape the service renders for retrievers."""
    raw = _json_value(raw)
    if isinstance(raw, str):
        return {"page_content": raw, "type": "Document", "metadata": {}}
    if not isinstance(raw, dict):
        return None
    raw = _nested(raw, "document")  # OpenInference nesting
    if not isinstance(raw, dict):
        return None
    metadata = _json_value(raw.get("metadata"))
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    if raw.get("score") is not None:
        metadata["score"] = raw["score"]
    content = raw.get("content", raw.get("page_content", raw.get("text")))
    doc: dict[str, Any] = {"page_content": "" if content is None else content, "type": "Document",
                           "metadata": metadata}
    if raw.get("id") is not None:
        doc["id"] = raw["id"]
    return doc


#: The GenAI retrieval span's documents, as one JSON attribute.
_DOCUMENT_KEYS = ("gen_ai.retrieval.documents",)


def _documents(ctx: _Ctx) -> list[dict[str, Any]] | None:
    for prefix in _DOCUMENT_PREFIXES:
        group = ctx.take_flat(prefix)
        if group:
            items = _unflatten(group)
            return [d for d in map(_document, items if isinstance(items, list) else ()) if d]
    raw = ctx.take(_DOCUMENT_KEYS[0])
    if raw is not None:
        return [d for d in map(_document, _as_list(raw) or ()) if d]
    return None


def _scan_events(ctx: _Ctx, events: Sequence[SpanEvent], out: Mapped) -> None:
    """One pass over the events: content events and first-token events."""
    for index, event in enumerate(events):
        name = event.name
        # Only an event with a whole-number time can be compared and placed: one with an odd
        # time (an app's own add_event) stays among the run's events as it came.
        time_ns = event.time_ns
        if name in _FIRST_TOKEN_EVENTS and isinstance(time_ns, int) and not isinstance(time_ns, bool):
            out.consumed_events.add(index)
            if out.first_token_time_ns is None or time_ns < out.first_token_time_ns:
                out.first_token_time_ns = time_ns
            continue
        attrs = event.attributes
        role = _MESSAGE_EVENT_ROLES.get(name)
        if role is not None:
            body = _event_body(attrs)
            ctx.event_in.append((role in _REPLY_ROLES, _message(body, role)))
            out.consumed_events.add(index)
        elif name == _CHOICE_EVENT:
            body = _event_body(attrs)
            position = (_as_int(body.get("index")) if isinstance(body, dict) else None) or 0
            ctx.event_out.append((position, _message(body, "assistant")))
            reason = body.get("finish_reason") if isinstance(body, dict) else None
            reason = reason if reason is not None else attrs.get("finish_reason")
            if reason is not None:
                ctx.finish_reasons.append((position, _plain(reason)))
            out.consumed_events.add(index)
        elif name in _CONTENT_EVENTS:
            key, side = _CONTENT_EVENTS[name]
            if key in attrs:
                if side == "in":
                    ctx.event_prompt = attrs[key]
                else:
                    ctx.event_completion = attrs[key]
                out.consumed_events.add(index)


def _event_body(attrs: Mapping[str, Any]) -> Any:
    """The message an older GenAI event carries: a JSON ``body``/``gen_ai.event.content``
    attribute (log events bridged to span events), or the attributes themselves,
    flattened (``message.content``) or not."""
    for key in ("body", "gen_ai.event.content"):
        if key in attrs:
            return _json_value(attrs[key])
    body = _unflatten({k: v for k, v in attrs.items() if not k.startswith("gen_ai.")})
    return body if isinstance(body, dict) else {}


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------


def map_span(attributes: Mapping[str, Any], events: Sequence[SpanEvent] = ()) -> Mapped:
    """Map a span's attributes and events to run fields.

    >>> m = map_span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
    ...               "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
    ...               "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 2})
    >>> (m.run_type, m.inputs, m.metadata["ls_model_name"])
    ('llm', {'messages': [{'role': 'user', 'content': 'hi'}]}, 'm')
    >>> m.outputs
    {'usage_metadata': {'input_tokens': 3, 'output_tokens': 2, 'total_tokens': 5}}
    """
    if not events and reads_nothing(attributes):
        return Mapped()  # most spans (HTTP, DB, app code) carry nothing these tables read
    return _map_span(attributes, events)


# Attribute keys seen on spans that no table reads. An app sets the same few
# keys on span after span, so one C-level subset test usually settles a span;
# the key facts (:func:`_key_facts`) are looked up only for keys not seen before.
# Bounded, so an app that puts ids in its keys cannot grow it forever (past the
# bound, new keys are checked every time, as before the cache).
_UNREAD_KEYS: set[str] = set()
_UNREAD_KEYS_MAX = 4096


def reads_nothing(attributes: Mapping[str, Any]) -> bool:
    """True when no table reads any of these attributes: dispatch by key would find none (:func:`_read_keys`).

    (No row applies to such a span, so its mapping is ``Mapped()``: a test compares the two.)
    """
    unread = _UNREAD_KEYS
    if unread.issuperset(attributes):
        return True
    facts = _KEY_FACTS
    for key in attributes:
        if key not in unread:
            exact, prefix, _ = facts.get(key) or _key_facts(key)
            if exact or prefix:
                return False
    if len(unread) < _UNREAD_KEYS_MAX:
        unread.update(attributes)
    return True


def _table_keys() -> list[str]:
    """Every attribute key (or flattened family's prefix) a table above reads, drawn from the
    tables themselves, so that dispatch by key (and :func:`reads_nothing`) can never skip a new row.

    The source readers' own companions (a ``.mime_type`` beside a ``.value``, the system
    instructions beside the GenAI input messages) are :func:`_source_reads`';
    ``test_semconv.py`` records every key ``_map_span`` looks up and checks it is covered.
    """
    keys: list[str] = []
    keys += [key for key, _, _ in _RUN_TYPE_RULES]
    keys += [key for key, _ in _RUN_TYPE_PRESENCE]
    keys += [key for key, _ in _NAME_RULES]
    keys += [*_MODEL_KEYS, *_REQUEST_MODEL_KEYS, *_RESPONSE_MODEL_KEYS, *_FINISH_REASON_KEYS, *_PROVIDER_KEYS]
    keys += [*_ID_ATTRIBUTES, _SESSION_NAME, _SESSION_ID, *_FINISH_REASONS_ARRAY_KEYS, *_FIRST_CHUNK_AFTER_KEYS]
    keys += [key for key, _ in _METADATA_KEYS]
    keys += [_METADATA_OBJECT_KEY, *_METADATA_PREFIXES, _PARAM_PREFIX, *_PARAM_OBJECT_KEYS, _FUNCTIONS_PREFIX]
    keys += [key for key, _, _ in _PARAM_FIELDS]
    keys += [key for _, names in _USAGE_FIELDS for key in names]
    keys += [key for key, _ in _USAGE_OBJECTS if key is not None]
    keys += [_LOGFIRE_USAGE_RAW, _LOGFIRE_MARK, _LOGFIRE_RESPONSE]  # the provider's usage object (_logfire_usage)
    keys += [*_FLAT_PREFIXES, *_DOCUMENT_PREFIXES, *_TAG_KEYS, *_DOCUMENT_KEYS]
    keys += [key for reader, arg in _INPUT_READERS + _OUTPUT_SOURCES for key in _source_reads(reader, arg)]
    return [key for key in keys if key != _SPAN_EVENTS]


# ---------------------------------------------------------------------------
# Dispatch by key
# ---------------------------------------------------------------------------
#
# A span carries a dozen attributes; the tables read some 100 keys and 13 key
# families. Rather than probe every row against the attributes, ``_map_span``
# walks the attributes once (:func:`_read_keys`) and applies only the rows of the
# keys it found (:class:`_Plan`), in each table's own order: a row whose keys are
# all absent does nothing, so skipping it changes nothing. A test maps spans with
# every row as well and wants the same result.


def _family(key: str) -> tuple[str, str]:
    """The flattened family a key belongs to and the rest of the key, or ``("", "")``.

    ``gen_ai.prompt.0.content`` is ``("gen_ai.prompt.", "0.content")``; ``gen_ai.prompt.name``
    belongs to none (an indexed family's next segment must be a position).
    """
    if key.startswith(_FLAT_PREFIXES):
        for prefix in _FLAT_PREFIXES:
            if key.startswith(prefix):
                rest = key[len(prefix) :]
                if prefix not in _INDEXED_PREFIXES or _position(rest.partition(".")[0]) is not None:
                    return prefix, rest
                break
    return "", ""


#: What :func:`_read_keys` learnt of each key it saw: whether a row reads it by its
#: whole name, and its flattened family (:func:`_family`). An app sets the same keys
#: on span after span, so a key costs one lookup; bounded as ``_UNREAD_KEYS`` is.
_KEY_FACTS: dict[str, tuple[bool, str, str]] = {}
_KEY_FACTS_MAX = 4096


def _key_facts(key: str) -> tuple[bool, str, str]:
    prefix, rest = _family(key)
    facts = (key in _EXACT_KEYS, prefix, rest)
    if len(_KEY_FACTS) < _KEY_FACTS_MAX:
        _KEY_FACTS[key] = facts
    return facts


def _read_keys(attributes: Mapping[str, Any], flat: dict[str, dict[str, Any]]) -> set[str]:
    """The one pass over a span's attributes: the keys a row reads by name, and the flattened
    families present (by prefix), whose members it groups into ``flat``."""
    found: set[str] = set()
    facts = _KEY_FACTS
    for key, value in attributes.items():
        exact, prefix, rest = facts.get(key) or _key_facts(key)
        if exact:
            found.add(key)
        if prefix:
            found.add(prefix)
            group = flat.get(prefix)
            if group is None:
                group = flat[prefix] = {}
            group[rest] = value
    return found


def _having(found: frozenset[str], keys: Sequence[str]) -> tuple[str, ...]:
    return tuple(key for key in keys if key in found)


class _Plan:
    """The rows of each table that a span's read keys can fire, each table's order kept.

    Computed once per set of read keys (:func:`_plan`): spans of one instrumentation share it.
    A flag (``documents``, ``session`` ...) gates a step that looks its keys up itself, so a
    plan that sets every flag maps as the tables did before dispatch.
    """

    __slots__ = (
        "outputs", "inputs", "inputs_final", "run_type_rules", "run_type_presence", "model_keys", "finish_reason_keys",
        "usage_fields", "usage_objects", "param_object_keys", "param_fields", "request_model_keys",
        "response_model_keys", "provider_keys", "metadata_keys", "name_rules", "tag_keys", "id_keys", "documents",
        "finish_reasons_array_keys", "first_chunk_after_keys", "metadata_object", "metadata_prefixes",
        "logfire_usage", "logfire_request", "session",
    )

    def __init__(self, found: frozenset[str]) -> None:
        self.outputs = tuple(row for row in _OUTPUT_SOURCES if not found.isdisjoint(_source_reads(*row)))
        inputs = [row for row in _INPUT_SOURCES if not found.isdisjoint(_source_reads(row[0], row[1]))]
        self.inputs: tuple[tuple[_Reader, str], ...] = tuple((reader, arg) for reader, arg, _ in inputs)
        self.inputs_final: tuple[frozenset[str], ...] = tuple(final for _, _, final in inputs)
        self.run_type_rules = tuple(row for row in _RUN_TYPE_RULES if row[0] in found)
        self.run_type_presence = tuple(row for row in _RUN_TYPE_PRESENCE if row[0] in found)
        self.model_keys = _having(found, _MODEL_KEYS)
        self.finish_reason_keys = _having(found, _FINISH_REASON_KEYS)
        self.usage_fields = tuple(
            (path, _having(found, keys)) for path, keys in _USAGE_FIELDS if not found.isdisjoint(keys)
        )
        self.usage_objects = tuple(row for row in _USAGE_OBJECTS if row[0] is None or row[0] in found)
        self.logfire_usage = _LOGFIRE_USAGE_RAW in found or _LOGFIRE_MARK in found
        self.logfire_request = _LOGFIRE_REQUEST in found
        self.param_object_keys = _having(found, _PARAM_OBJECT_KEYS)
        self.param_fields = tuple(row for row in _PARAM_FIELDS if row[0] in found)
        self.request_model_keys = _having(found, _REQUEST_MODEL_KEYS)
        self.response_model_keys = _having(found, _RESPONSE_MODEL_KEYS)
        self.provider_keys = _having(found, _PROVIDER_KEYS)
        self.metadata_keys = tuple(row for row in _METADATA_KEYS if row[0] in found)
        self.name_rules = tuple(row for row in _NAME_RULES if row[0] in found)
        self.tag_keys = _having(found, _TAG_KEYS)
        self.id_keys = _having(found, _ID_ATTRIBUTES)
        self.documents = not found.isdisjoint(_DOCUMENT_PREFIXES + _DOCUMENT_KEYS)
        self.finish_reasons_array_keys = _having(found, _FINISH_REASONS_ARRAY_KEYS)
        self.first_chunk_after_keys = _having(found, _FIRST_CHUNK_AFTER_KEYS)
        self.metadata_object = _METADATA_OBJECT_KEY in found
        self.metadata_prefixes = _having(found, _METADATA_PREFIXES)
        self.session = _SESSION_NAME in found or _SESSION_ID in found


_PLANS: dict[frozenset[str], _Plan] = {}
#: Distinct sets of read keys are few (one or two per instrumentation's span kind); starting over past this is cheap.
_PLANS_MAX = 512


def _plan(found: set[str]) -> _Plan:
    key = frozenset(found)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        plan = _PLANS[key] = _Plan(key)
    return plan


def _with_event_attributes(
    attributes: Mapping[str, Any], events: Sequence[SpanEvent], consumed_events: set[int]
) -> Mapping[str, Any]:
    """The span's attributes with those of its ``_ATTRIBUTE_EVENTS`` beneath them (the span's own win)."""
    merged: dict[str, Any] | None = None
    for index, event in enumerate(events):
        if event.name in _ATTRIBUTE_EVENTS:
            if merged is None:
                merged = dict(attributes)
            for key, value in event.attributes.items():
                if key not in merged:
                    merged[key] = value
            consumed_events.add(index)
    return attributes if merged is None else merged


def _map_span(attributes: Mapping[str, Any], events: Sequence[SpanEvent], plan: _Plan | None = None) -> Mapped:
    """:func:`map_span` past its shortcut; ``plan`` replaces the rows the span's keys select (the tests
    give every row, to check that the rows left out change nothing)."""
    out = Mapped()
    consumed = out.consumed
    if events:
        attributes = _with_event_attributes(attributes, events, out.consumed_events)
    flat: dict[str, dict[str, Any]] = {}
    found = _read_keys(attributes, flat)
    if events:
        found.add(_SPAN_EVENTS)
    if plan is None:
        plan = _plan(found)
    ctx = _Ctx(attributes, consumed, flat, plan)
    if events:
        _scan_events(ctx, events, out)

    out.run_type = _run_type(attributes, consumed, plan)
    # Outputs first: when assistant/tool message events become the outputs, the inputs leave them out.
    out.outputs = _first_source(ctx, plan.outputs)[0]
    out.inputs, row = _first_source(ctx, plan.inputs)
    out.inputs_final = row >= 0 and out.run_type in plan.inputs_final[row] and not ctx.partial_inputs
    reason = _first_str(attributes, plan.finish_reason_keys)
    if reason:
        consumed.add(reason[0])
        if out.outputs is None or "finish_reason" not in out.outputs:
            out.outputs = {**(out.outputs or {}), "finish_reason": reason[1]}

    documents = _documents(ctx) if plan.documents else None
    if documents is not None:
        given = (out.outputs or {}).get("documents")
        if isinstance(given, list) and len(given) == len(documents):
            # output.value's documents may carry the ids the flattened ones lack (OpenInference langchain)
            for doc, whole in zip(documents, given):
                if "id" not in doc and isinstance(whole, dict) and whole.get("id") is not None:
                    doc["id"] = whole["id"]
        out.outputs = {**(out.outputs or {}), "documents": documents}
    if out.run_type == "retriever" and out.inputs is not None and list(out.inputs) == ["input"] and isinstance(out.inputs["input"], str):
        out.inputs = {"query": out.inputs["input"]}  # a retriever's text input is its query, as the SDK names it
    usage = _usage(attributes, consumed, ctx.malformed, plan, out.outputs)
    if usage is not None:
        out.outputs = {**(out.outputs or {}), "usage_metadata": usage}
    out.invocation_params, requested_model = _invocation_params(ctx)
    outputs = out.outputs
    if outputs is not None and "messages" in outputs:  # our message shape; a producer's own payload stays as it is
        for key in plan.finish_reasons_array_keys:
            reasons = _as_list(attributes.get(key))
            if not reasons or not isinstance(reasons[0], str):
                continue
            if "finish_reason" not in outputs:
                out.outputs = outputs = {**outputs, "finish_reason": reasons[0]}
            if len(reasons) == 1 and outputs["finish_reason"] == reasons[0]:
                consumed.add(key)  # said already; several choices' reasons stay in metadata
            break
    if out.first_token_time_ns is None:
        for key in plan.first_chunk_after_keys:
            after = attributes.get(key)
            if isinstance(after, (int, float)) and not isinstance(after, bool) and 0 <= after < 86_400:
                out.first_token_after_s = float(after)
                consumed.add(key)
                break

    metadata = out.metadata
    _models(attributes, plan, requested_model, consumed, metadata)
    provider = _first_str(attributes, plan.provider_keys)
    if provider:
        metadata["ls_provider"] = provider[1]
        consumed.add(provider[0])
    for key, target in plan.metadata_keys:
        value = attributes.get(key)
        if value is not None:
            metadata[target] = value
            consumed.add(key)
    extra = _json_value(attributes.get(_METADATA_OBJECT_KEY)) if plan.metadata_object else None
    if isinstance(extra, dict):
        metadata.update(extra)
        consumed.add(_METADATA_OBJECT_KEY)
    for prefix in plan.metadata_prefixes:
        group = ctx.take_flat(prefix)
        if group:
            decode = prefix in _JSON_METADATA_PREFIXES
            metadata.update((k, _plain(_json_value(v) if decode else v)) for k, v in group.items())
    # After the metadata: explicit metadata (the langsmith SDK's ls_model_name) names the requested model.
    response_model = _first_str(attributes, plan.response_model_keys)
    if response_model is not None:
        if response_model[1] != metadata.get("ls_model_name"):
            metadata["response_model"] = response_model[1]
        else:
            metadata.pop("response_model", None)
        consumed.add(response_model[0])
    if out.run_type == "llm":
        _langsmith_sdk_request_tools(out)

    for key, run_type in plan.name_rules:
        if run_type is not None and out.run_type != run_type:
            continue
        name = attributes.get(key)
        if isinstance(name, str) and name:
            out.name = name
            consumed.add(key)
            break
    session = attributes.get(_SESSION_NAME) if plan.session else None
    if isinstance(session, str) and session:
        out.session_name = session
        consumed.add(_SESSION_NAME)
    elif plan.session:
        session_id = attributes.get(_SESSION_ID)
        if session_id not in (None, ""):
            out.session_id = session_id  # checked by _convert.span_ids, which can say when it is unusable
            consumed.add(_SESSION_ID)
    if plan.id_keys:
        consumed.update(k for k in plan.id_keys if k in attributes)
    out.tags = _tags(attributes, consumed, plan.tag_keys) if plan.tag_keys else None
    out.malformed = ctx.malformed
    return out


#: Tags, merged in this order, duplicates dropped.
_TAG_KEYS = (
    # doc: langsmith.span.tags -> Tags. "Custom tags attached to the span (comma-separated)"
    "langsmith.span.tags",
    # OpenInference's tags (an attribute array).
    "tag.tags",
    # Logfire's (an attribute array: its LLM integrations tag their spans "LLM").
    "logfire.tags",
)


def _tags(attributes: Mapping[str, Any], consumed: set[str], keys: Sequence[str]) -> list[str] | None:
    tags: list[str] = []
    for key in keys:
        raw = attributes.get(key)
        if not raw:
            continue
        consumed.add(key)
        if isinstance(raw, str):
            decoded = _json_value(raw)
            raw = decoded if isinstance(decoded, list) else [t.strip() for t in raw.split(",") if t.strip()]
        elif not isinstance(raw, (list, tuple)):
            raw = [raw]
        for t in raw:  # a loop, not extend(generator): that dedupes as it goes, which mypyc's list would not
            tag = str(t)
            if tag not in tags:
                tags.append(tag)
    return tags or None


#: Every key a row reads by its whole name; the flattened families are told by prefix (:func:`_family`).
_EXACT_KEYS = frozenset(_table_keys()) - frozenset(_FLAT_PREFIXES)
