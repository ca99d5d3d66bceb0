"""OpenTelemetry instrumentor for the ``openai`` client, emitting the OTel GenAI conventions.

Traced methods (sync and async): ``chat.completions.create`` (incl. ``stream=True``),
``embeddings.create`` and ``responses.create`` (incl. ``stream=True``). Each call is one CLIENT span
named ``"{operation} {model}"`` (``chat gpt-4o``, ``embeddings text-embedding-3-small``). A streamed
call's span lasts until the stream is exhausted or closed, gets a ``new_token`` event at the
first content chunk, and carries the aggregated output and usage.

Message content is captured unless ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=false``
(this package's default is ON; see :mod:`otel_runs_exporter.instrumentation._genai`). A call that
another instrumentation (``opentelemetry-instrumentation-openai-v2``, openinference, ...) already
traces is left to it, so it is traced once.

Registered as the ``runs_openai`` entry point, so ``opentelemetry-instrument`` loads it and
``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=runs_openai`` turns it off.

>>> from otel_runs_exporter.instrumentation.openai import RunsOpenAIInstrumentor
>>> RunsOpenAIInstrumentor().instrument(tracer_provider=provider)  # doctest: +SKIP
>>> openai.OpenAI().chat.completions.create(model="gpt-4o-mini", messages=[...])  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from typing import Any, Collection, Mapping

from . import _genai
from ._genai import (
    REQUEST_MODEL,
    RESPONSE_MODEL,
    SAMPLING,
    STREAM,
    TOOLS,
    Attr,
    GenAICall,
    GenAIInstrumentor,
    Operation,
    StreamAccumulator,
    as_list,
    get,
    image_url_part,
    json_attr,
    json_of,
    message,
    read_attributes,
    response_rows,
    text_part,
    tool_call_part,
    tool_response_part,
    usage_rows,
)

__all__ = ["RunsOpenAIInstrumentor"]

logger = logging.getLogger("otel_runs_exporter.instrumentation")

_PROVIDER = "openai"


# --------------------------------------------------------------------------- message conversion


def _content_parts(content: Any) -> list[dict[str, Any]]:
    """Chat ``content`` (a string or a list of typed parts) as GenAI parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [text_part(content)]
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = get(part, "type")
        if kind in ("text", "input_text", "output_text"):
            parts.append(text_part(get(part, "text", "")))
        elif kind == "refusal":
            parts.append(text_part(get(part, "refusal", "")))
        elif kind == "image_url":
            parts.append(image_url_part(get(get(part, "image_url"), "url")))
        elif kind == "input_image":
            url = get(part, "image_url")
            parts.append(image_url_part(url) if url else _genai.generic_part(part))
        elif kind == "input_audio":
            audio = get(part, "input_audio")
            parts.append({"type": "blob", "modality": "audio", "mime_type": f"audio/{get(audio, 'format', 'wav')}",
                          "content": get(audio, "data")})
        else:
            parts.append(_genai.generic_part(part))
    return parts


def chat_input_messages(messages: Any) -> list[dict[str, Any]]:
    """Chat-completions ``messages`` in the GenAI input-messages shape."""
    out: list[dict[str, Any]] = []
    for msg in messages or []:
        role = get(msg, "role", "user")
        if role in ("tool", "function"):
            out.append(message("tool", [tool_response_part(get(msg, "tool_call_id"), get(msg, "content"))]))
            continue
        parts = _content_parts(get(msg, "content"))
        for call in get(msg, "tool_calls", []) or []:
            fn = get(call, "function")
            parts.append(tool_call_part(get(call, "id"), get(fn, "name"), get(fn, "arguments")))
        legacy = get(msg, "function_call")
        if legacy is not None:
            parts.append(tool_call_part(None, get(legacy, "name"), get(legacy, "arguments")))
        out.append(message(role, parts, name=get(msg, "name")))
    return out


def chat_output_messages(choices: Any) -> list[dict[str, Any]]:
    """Chat-completions ``choices`` in the GenAI output-messages shape."""
    out = []
    for choice in choices or []:
        msg = get(choice, "message")
        parts = _content_parts(get(msg, "content"))
        if get(msg, "refusal"):
            parts.append(text_part(get(msg, "refusal")))
        for call in get(msg, "tool_calls", []) or []:
            fn = get(call, "function")
            parts.append(tool_call_part(get(call, "id"), get(fn, "name"), get(fn, "arguments")))
        out.append(message(get(msg, "role", "assistant"), parts, finish_reason=get(choice, "finish_reason", "stop")))
    return out


def responses_input_messages(input_: Any) -> list[dict[str, Any]]:
    """Responses-API ``input`` (a string or a list of items) in the GenAI input-messages shape."""
    if isinstance(input_, str):
        return [message("user", [text_part(input_)])]
    out: list[dict[str, Any]] = []
    for item in input_ or []:
        kind = get(item, "type", "message")
        if kind == "message" or (kind is None and get(item, "role")):
            out.append(message(get(item, "role", "user"), _content_parts(get(item, "content"))))
        elif kind == "function_call":
            out.append(message("assistant", [tool_call_part(get(item, "call_id"), get(item, "name"), get(item, "arguments"))]))
        elif kind == "function_call_output":
            out.append(message("tool", [tool_response_part(get(item, "call_id"), get(item, "output"))]))
        elif kind == "reasoning":
            summary = " ".join(get(s, "text", "") for s in get(item, "summary", []) or [])
            out.append(message("assistant", [{"type": "reasoning", "content": summary}]))
        else:
            out.append(message(get(item, "role", "user"), [_genai.generic_part(item)]))
    return out


def _responses_finish_reason(response: Any) -> str:
    status = get(response, "status")
    if status == "incomplete":
        reason = get(get(response, "incomplete_details"), "reason")
        return "length" if reason == "max_output_tokens" else (reason or "incomplete")
    if status == "failed":
        return "error"
    calls_tool = any(get(item, "type") == "function_call" for item in get(response, "output", []) or [])
    return "tool_call" if calls_tool else "stop"


def responses_output_messages(response: Any) -> list[dict[str, Any]]:
    """A Responses-API response's ``output`` as one assistant output message."""
    parts: list[dict[str, Any]] = []
    for item in get(response, "output", []) or []:
        kind = get(item, "type")
        if kind == "message":
            parts.extend(_content_parts(get(item, "content")))
        elif kind == "function_call":
            parts.append(tool_call_part(get(item, "call_id"), get(item, "name"), get(item, "arguments")))
        elif kind == "reasoning":
            summary = " ".join(get(s, "text", "") for s in get(item, "summary", []) or [])
            if summary:
                parts.append({"type": "reasoning", "content": summary})
        else:
            parts.append(_genai.generic_part(item))
    return [message("assistant", parts, finish_reason=_responses_finish_reason(response))]


# --------------------------------------------------------------------------- operations


def _is_openai_stream(result: Any) -> bool:
    import openai

    return isinstance(result, (openai.Stream, openai.AsyncStream))


def _output_type(response_format: Any) -> str | None:
    kind = get(response_format, "type")
    if kind in ("json_object", "json_schema"):
        return "json"
    return kind if isinstance(kind, str) else None


def _choice_count(n: Any) -> Any:
    # One choice is the default; the conventions record the count only when it is not.
    return n if isinstance(n, int) and n != 1 else None


def _conversation_id(conversation: Any) -> Any:
    # ``conversation`` is an id or an object with one.
    return get(conversation, "id") or (conversation if isinstance(conversation, str) else None)


def _instruction_parts(instructions: Any) -> list[dict[str, Any]] | None:
    return [text_part(instructions)] if isinstance(instructions, str) else None


def _one_format(encoding_format: Any) -> list[str] | None:
    return [encoding_format] if isinstance(encoding_format, str) else None


def _finish_reasons(choices: Any) -> list[Any]:
    return [get(choice, "finish_reason", "") for choice in choices or []]


def _responses_finish_reasons(response: Any) -> list[str]:
    return [_responses_finish_reason(response)]


def _dimension_count(data: Any) -> int | None:
    embedding = get(data[0], "embedding") if data else None
    return len(embedding) if isinstance(embedding, list) else None


_CHAT_REQUEST = (
    REQUEST_MODEL,
    *SAMPLING,
    Attr("max_completion_tokens", "gen_ai.request.max_tokens"),  # the newer name wins over ...
    Attr("max_tokens", "gen_ai.request.max_tokens"),  # ... the one it deprecates
    Attr("frequency_penalty", "gen_ai.request.frequency_penalty"),
    Attr("presence_penalty", "gen_ai.request.presence_penalty"),
    Attr("seed", "gen_ai.request.seed"),
    Attr("stop", "gen_ai.request.stop_sequences", as_list),
    Attr("n", "gen_ai.request.choice.count", _choice_count),
    Attr("response_format", "gen_ai.output.type", _output_type),
    STREAM,
    # Written even when empty: the run's inputs are the messages.
    Attr("messages", "gen_ai.input.messages", json_of(chat_input_messages), content=True),
    TOOLS,
)

_CHAT_RESPONSE = response_rows(
    Attr("choices", "gen_ai.response.finish_reasons", _finish_reasons),
    input="usage.prompt_tokens",
    output="usage.completion_tokens",
    cache_read="usage.prompt_tokens_details.cached_tokens",
    reasoning="usage.completion_tokens_details.reasoning_tokens",
)

_EMBEDDINGS_REQUEST = (
    REQUEST_MODEL,
    Attr("dimensions", "gen_ai.embeddings.dimension.count"),
    Attr("encoding_format", "gen_ai.request.encoding_formats", _one_format),
    # The conventions name no attribute for embedding inputs; ``input.value`` is what the
    # converter reads for a run's inputs.
    Attr("input", "input.value", json_of(lambda value: {"input": value}), content=True),
)

_EMBEDDINGS_RESPONSE = (
    RESPONSE_MODEL,
    Attr("data", "gen_ai.embeddings.dimension.count", _dimension_count),
    *usage_rows(input="usage.prompt_tokens"),
)

_RESPONSES_REQUEST = (
    REQUEST_MODEL,
    *SAMPLING,
    Attr("max_output_tokens", "gen_ai.request.max_tokens"),
    Attr("conversation", "gen_ai.conversation.id", _conversation_id),
    Attr("text.format", "gen_ai.output.type", _output_type),
    STREAM,
    Attr("instructions", "gen_ai.system_instructions", json_of(_instruction_parts), content=True),
    Attr("input", "gen_ai.input.messages", json_of(responses_input_messages), content=True),
    TOOLS,
)

_RESPONSES_RESPONSE = response_rows(
    # Drawn from the status and the output items together, so the row reads the whole response.
    Attr("", "gen_ai.response.finish_reasons", _responses_finish_reasons),
    input="usage.input_tokens",
    output="usage.output_tokens",
    cache_read="usage.input_tokens_details.cached_tokens",
    reasoning="usage.output_tokens_details.reasoning_tokens",
)


class ChatCompletions(Operation):
    operation_name = "chat"
    provider = _PROVIDER
    request_table = _CHAT_REQUEST
    response_table = _CHAT_RESPONSE
    response_field = "choices"

    def output_messages(self, result: Any) -> list[dict[str, Any]]:
        return chat_output_messages(result.choices)

    def is_stream(self, kwargs: Mapping[str, Any], result: Any) -> bool:
        return _is_openai_stream(result)

    def accumulator(self, kwargs: Mapping[str, Any], capture: bool) -> StreamAccumulator:
        return _ChatStream(capture)


class _ChatStream(StreamAccumulator):
    """Rebuilds choices from chat-completion chunks: text, tool calls by index, finish reasons, usage."""

    def __init__(self, capture: bool) -> None:
        self.capture = capture
        self.model: str | None = None
        self.response_id: str | None = None
        self.usage: Any = None
        self.choices: dict[int, dict[str, Any]] = {}

    def add(self, chunk: Any, call: GenAICall) -> None:
        self.model = get(chunk, "model", self.model)
        self.response_id = get(chunk, "id", self.response_id)
        if get(chunk, "usage") is not None:
            self.usage = chunk.usage
        for choice in get(chunk, "choices", []) or []:
            state = self.choices.setdefault(
                get(choice, "index", 0), {"role": "assistant", "text": [], "tools": {}, "finish_reason": None}
            )
            delta = get(choice, "delta")
            content = get(delta, "content")
            if content:
                call.first_token()
                state["text"].append(content)
            if get(delta, "refusal"):
                call.first_token()
                state["text"].append(delta.refusal)
            for tool in get(delta, "tool_calls", []) or []:
                call.first_token()
                slot = state["tools"].setdefault(get(tool, "index", 0), {"id": None, "name": None, "args": []})
                slot["id"] = get(tool, "id", slot["id"])
                fn = get(tool, "function")
                slot["name"] = get(fn, "name", slot["name"])
                if get(fn, "arguments"):
                    slot["args"].append(fn.arguments)
            state["role"] = get(delta, "role", state["role"])
            state["finish_reason"] = get(choice, "finish_reason", state["finish_reason"])

    def attributes(self) -> dict[str, Any]:
        ordered = [self.choices[i] for i in sorted(self.choices)]
        # The chunks add up to a response: read it with the same table as a complete one.
        summed = {"model": self.model, "id": self.response_id, "choices": ordered, "usage": self.usage}
        attrs = read_attributes(_CHAT_RESPONSE, summed)
        if self.capture:
            messages = []
            for state in ordered:
                parts = [text_part("".join(state["text"]))] if state["text"] else []
                for index in sorted(state["tools"]):
                    slot = state["tools"][index]
                    parts.append(tool_call_part(slot["id"], slot["name"], "".join(slot["args"])))
                messages.append(message(state["role"], parts, finish_reason=state["finish_reason"] or "stop"))
            attrs["gen_ai.output.messages"] = json_attr(messages)
        return attrs


class Embeddings(Operation):
    operation_name = "embeddings"
    provider = _PROVIDER
    request_table = _EMBEDDINGS_REQUEST
    response_table = _EMBEDDINGS_RESPONSE


class Responses(Operation):
    operation_name = "chat"
    provider = _PROVIDER
    request_table = _RESPONSES_REQUEST
    response_table = _RESPONSES_RESPONSE
    response_field = "output"

    def output_messages(self, result: Any) -> list[dict[str, Any]]:
        return responses_output_messages(result)

    def is_stream(self, kwargs: Mapping[str, Any], result: Any) -> bool:
        return _is_openai_stream(result)

    def accumulator(self, kwargs: Mapping[str, Any], capture: bool) -> StreamAccumulator:
        return _ResponsesStream(self, capture)


class _ResponsesStream(StreamAccumulator):
    """Responses-API events: deltas mark the first token; the final event carries the whole response."""

    _FINAL = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self, op: Responses, capture: bool) -> None:
        self.op = op
        self.capture = capture
        self.final: Any = None
        self.latest: Any = None

    def add(self, event: Any, call: GenAICall) -> None:
        kind = get(event, "type", "")
        if kind.endswith(".delta"):
            call.first_token()
        response = get(event, "response")
        if response is not None:
            self.latest = response
            if kind in self._FINAL:
                self.final = response

    def attributes(self) -> dict[str, Any]:
        response = self.final if self.final is not None else self.latest
        return self.op.response_attributes(response, self.capture) if response is not None else {}


# --------------------------------------------------------------------------- the instrumentor

# (module, class, method, operation, is_async)
_TARGETS = (
    ("openai.resources.chat.completions.completions", "Completions", "create", ChatCompletions, False),
    ("openai.resources.chat.completions.completions", "AsyncCompletions", "create", ChatCompletions, True),
    ("openai.resources.embeddings", "Embeddings", "create", Embeddings, False),
    ("openai.resources.embeddings", "AsyncEmbeddings", "create", Embeddings, True),
    ("openai.resources.responses.responses", "Responses", "create", Responses, False),
    ("openai.resources.responses.responses", "AsyncResponses", "create", Responses, True),
)


class RunsOpenAIInstrumentor(GenAIInstrumentor):
    """Traces ``openai`` chat completions, embeddings and responses as GenAI client spans.

    ``instrument()`` accepts ``tracer_provider=`` and ``capture_content=`` (overriding
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).

    >>> RunsOpenAIInstrumentor().instrument(tracer_provider=provider)  # doctest: +SKIP
    >>> RunsOpenAIInstrumentor().uninstrument()  # doctest: +SKIP
    """

    # Chat completions, and the client's request method, which OpenInference wraps.
    probes = (_TARGETS[0][:3], ("openai", "OpenAI", "request"))

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("openai >= 1.0",)

    def _instrument(self, **kwargs: Any) -> None:
        from importlib import import_module

        tracer, capture = self._begin(kwargs, __name__)
        switch = self._switch

        def wrap_all() -> None:
            for module_name, class_name, method, op_class, is_async in _TARGETS:
                try:
                    owner = getattr(import_module(module_name), class_name)
                except (ImportError, AttributeError):
                    logger.debug("openai has no %s.%s; not traced", class_name, method)
                    continue
                make = _genai.async_wrapper if is_async else _genai.sync_wrapper
                self._wrap(owner, method, make(op_class(), tracer, capture, switch))

        self._when_imported("openai", wrap_all)
