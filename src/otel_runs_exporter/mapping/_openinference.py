"""OpenInference (Arize Phoenix's conventions): ``openinference.span.kind``, ``llm.*``, ``input.value`` ...

Written by every ``openinference-instrumentation-*`` package (openai, anthropic,
langchain, llama-index, openai-agents, smolagents ...). Its generic names
(``input.value``, ``metadata``, ``session.id``, ``tool.name``) are read wherever
they appear, but only its own names mark a span as GenAI.
"""

from __future__ import annotations

from typing import Any, Mapping

from ._context import Ctx
from ._model import (
    FINAL, FINAL_UNLESS_MODEL, NOT_FINAL, EventRow, Fixup, Key, Mapped, Namespace, RunTypeRule, Source, attr, generic,
)
from ._readers import read_flat_messages, read_value
from ._values import as_object, json_value, list_position, nested, plain, unflatten

__all__ = ["ROWS", "SCOPES", "TOOLS_PREFIX", "openinference_tools"]

SCOPES = (
    ("openinference.instrumentation.", "OpenInference: openai, anthropic, langchain, llama-index, openai-agents, "
                                       "smolagents and every other framework of theirs"),
)

#: OpenInference's tool definitions: ``llm.tools.{n}.tool.json_schema``, one JSON
#: string per tool (OpenAI's tool shape, its spec recommends), become
#: ``invocation_params.tools`` when the invocation params carry none.
TOOLS_PREFIX = "llm.tools."
_TOOLS_PREFIX = TOOLS_PREFIX


def _read_embedding_texts(ctx: Ctx, prefix: str) -> dict[str, Any] | None:
    # OpenInference embedding spans: the texts, and one vector per text. The
    # vectors are consumed and dropped: output.value already carries the
    # response, and thousands of floats per text do not belong in metadata.
    group = ctx.take_flat(prefix)
    if ctx.claim_only or not group:
        return None
    items = unflatten(group)
    texts = [] if not isinstance(items, list) else [
        e["text"] for e in (nested(i, "embedding") for i in items) if isinstance(e, dict) and e.get("text") is not None
    ]
    return {"input": texts} if texts else None


def _read_tool_parameters(ctx: Ctx, key: str) -> dict[str, Any] | None:
    # OpenInference documents tool.parameters as the tool's parameter schema,
    # but its own GenAI conversion treats it as the call's arguments; it is a
    # last resort after input.value, which carries the real arguments there.
    value = ctx.take(key)
    group = ctx.take_flat(key + ".")
    if ctx.claim_only:
        return None
    if value is not None:
        return as_object(value, "input")
    if not group:
        return None
    params = unflatten(group)
    # Indexed parameters (tool.parameters.0) unflatten to a list; inputs must be an object.
    return params if isinstance(params, dict) else {"input": params}


def openinference_tools(ctx: Ctx) -> list[Any] | None:
    """``llm.tools.{n}.tool.json_schema`` (or ``tool.name``/``tool.description``) as a list of tools.

    A schema that is not a JSON object is not a tool: its attribute stays in metadata, as it came.
    """
    group = ctx.flat.get(_TOOLS_PREFIX)
    if not group:
        return None
    items: dict[int, dict[str, str]] = {}  # position -> field -> the key's remainder
    for rest in group:
        head, _, field_name = rest.partition(".")
        position = list_position(head)
        if position is not None:
            items.setdefault(position, {})[field_name] = rest
    tools: list[Any] = []
    for position in sorted(items):
        fields = items[position]
        schema_key = fields.get("tool.json_schema", "")
        schema = json_value(group[schema_key]) if schema_key else None
        if isinstance(schema, dict):
            tools.append(plain(schema))
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
            function["description"] = plain(group[description_key])
            ctx.consumed.add(_TOOLS_PREFIX + description_key)
        tools.append({"type": "function", "function": function})
    return tools or None


#: A tool call's bound arguments as OpenInference records some frameworks' (LlamaIndex's ``FunctionTool``,
#: smolagents' ``Tool.__call__``): ``{"args": [], "kwargs": {...}}``, beside the framework's own call
#: options. The tool's arguments are the keyword ones.
_CALL_KEYS = frozenset({"args", "kwargs"})
_CALL_OPTIONS = frozenset({"sanitize_inputs_outputs"})  # smolagents'
#: LlamaIndex's ``ToolOutput`` (its tool run's output.value): the tool's own return is its ``raw_output``.
_TOOL_OUTPUT_KEYS = frozenset({"tool_name", "raw_input", "raw_output"})


def _tool_call(out: Mapped, attributes: Mapping[str, Any]) -> None:
    """A tool run's inputs are its arguments and its outputs what it returned, as every other producer's are,
    not the framework's wrappers around them."""
    if out.run_type != "tool":
        return
    inputs = out.inputs
    if (isinstance(inputs, dict) and isinstance(inputs.get("kwargs"), dict) and inputs.get("args", []) == []
            and set(inputs) <= _CALL_KEYS | _CALL_OPTIONS):
        out.inputs = dict(inputs["kwargs"])
    outputs = out.outputs
    if isinstance(outputs, dict) and _TOOL_OUTPUT_KEYS <= outputs.keys():
        returned = outputs["raw_output"]
        out.outputs = dict(returned) if isinstance(returned, dict) else {"output": returned}


_DETAILS_IN, _DETAILS_OUT = "input_token_details", "output_token_details"

ROWS = (
    Namespace(Key("llm.")),
    # doc: openinference.span.kind -> Run type. "Maps various kinds to LangSmith run types"
    RunTypeRule(
        Key("openinference.span.kind"),
        {"llm": "llm", "embedding": "embedding", "retriever": "retriever", "reranker": "retriever",
         "tool": "tool", "prompt": "prompt"},
        "chain", order=20,
    ),
    # doc: llm.prompt_template.variables -> Run type. 'Sets run type to "prompt", used with input.value'
    # (after the kind rules, so an explicit kind is never overridden: an LLM span that records its
    # prompt template stays an llm run)
    attr("llm.prompt_template.variables", presence=("prompt", 20)),
    # doc: tool.name -> Run name. 'Tool name when span kind is "TOOL"'
    attr("tool.name", marks=False, name=("tool", 40)),
    # doc: llm.model_name -> metadata.ls_model_name. "Model name from OpenInference"
    # (OpenInference's openai instrumentation writes the response's model here.)
    attr("llm.model_name", model=40, response_model=30),
    attr("embedding.model_name", response_model=40),
    attr("reranker.model_name", response_model=50),
    attr("llm.provider", provider=30),
    # doc: llm.system -> metadata.ls_provider. "LLM system provider"
    attr("llm.system", provider=40),
    # The first choice's finish reason, set with the response (``outputs.finish_reason`` when the
    # output messages gave none).
    attr("llm.finish_reason", finish_reason=10),
    # doc: llm.invocation_parameters -> invocation_params.*. "JSON string of invocation parameters"
    attr("llm.invocation_parameters", param_object=10),
    attr("embedding.invocation_parameters", param_object=20),
    attr("session.id", marks=False, metadata=("session_id", 20)),
    attr("user.id", marks=False, metadata=("user_id", 30)),
    # doc: metadata -> metadata.*. "JSON string of metadata to be merged" (one JSON object).
    attr("metadata", marks=False, metadata_object=10),
    # OpenInference's tags (an attribute array).
    attr("tag.tags", marks=False, tags=20),
    # doc: retrieval.documents.{n}.document.content -> outputs.documents[n].page_content. "Content of the nth
    # retrieved document"
    # doc: retrieval.documents.{n}.document.metadata -> outputs.documents[n].metadata. "Metadata of the nth
    # retrieved document (JSON)"
    attr("retrieval.documents.", family=True, documents=10),
    attr("reranker.output_documents.", family=True, documents=20),
    attr("llm.input_messages.", family=True),
    attr("llm.output_messages.", family=True),
    attr("tool.parameters.", marks=False, family=False),
    attr("embedding.embeddings.", family=True),
    attr(TOOLS_PREFIX, family=True),
    # doc: llm.token_count.prompt -> usage_metadata.input_tokens. "Prompt token count"
    attr("llm.token_count.prompt", usage=(("input_tokens",), 30)),
    # doc: llm.token_count.completion -> usage_metadata.output_tokens. "Completion token count"
    attr("llm.token_count.completion", usage=(("output_tokens",), 30)),
    # doc: llm.token_count.total -> usage_metadata.total_tokens. "Total token count"
    attr("llm.token_count.total", usage=(("total_tokens",), 30)),
    attr("llm.token_count.prompt_details.cache_read", usage=((_DETAILS_IN, "cache_read"), 30)),
    attr("llm.token_count.prompt_details.cache_write", usage=((_DETAILS_IN, "cache_creation"), 40)),
    attr("llm.token_count.prompt_details.audio", usage=((_DETAILS_IN, "audio"), 10)),
    attr("llm.token_count.completion_details.reasoning", usage=((_DETAILS_OUT, "reasoning"), 40)),
    attr("llm.token_count.completion_details.audio", usage=((_DETAILS_OUT, "audio"), 10)),
    EventRow("first_token", "First Token Stream Event"),
    # doc: llm.input_messages -> inputs.messages. "Input messages"
    Source("in", read_flat_messages, "llm.input_messages.", (Key("llm.input_messages."),), order=30, final=FINAL),
    # doc: input.value -> inputs. "Full input value, can be string or JSON" (set at an LLM span's start,
    # before its messages: final only outside model runs)
    Source("in", read_value, "input.value", (generic("input.value"), generic("input.mime_type")), order=70,
           final=FINAL_UNLESS_MODEL),
    Source("in", _read_embedding_texts, "embedding.embeddings.", (Key("embedding.embeddings."),), order=90,
           final=FINAL),
    Source("in", _read_tool_parameters, "tool.parameters", (generic("tool.parameters"), generic("tool.parameters.")),
           order=120, final=NOT_FINAL),
    # doc: llm.output_messages -> outputs.messages. "Output messages"
    Source("out", read_flat_messages, "llm.output_messages.", (Key("llm.output_messages."),), order=20),
    Fixup(_tool_call, (generic("input.value"), generic("output.value")), order=20),
    # doc: output.value -> outputs. "Full output value, can be string or JSON"
    Source("out", read_value, "output.value", (generic("output.value"), generic("output.mime_type")), order=60),
)
