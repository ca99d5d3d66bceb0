"""The fake model API (``otel_runs_exporter.testing.fake_llm``): the tool-call rule and the Gemini endpoints.

Agent frameworks hold a conversation over several requests, so the fake answers each
request from its history: the first offered tool not called yet, text once all were
called, ids unique within a conversation. The Gemini endpoints answer as the Gemini API
does (what google-genai parses; the google-genai producer runs the real client against them).
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import openai
import pytest
import requests

from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}},
    {"type": "function", "function": {"name": "final_answer",
                                      "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}}}},
]


@pytest.fixture(scope="module")
def api() -> Iterator[FakeLLMAPI]:
    with FakeLLMAPI() as fake:
        yield fake


def _chat(api: FakeLLMAPI, messages: list[dict[str, Any]]) -> Any:
    client = openai.OpenAI(base_url=api.openai_base_url, api_key="test", max_retries=0)
    return client.chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS).choices[0].message


def test_offered_tools_are_called_in_order_with_ids_unique_in_the_conversation(api: FakeLLMAPI) -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": "weather?"}]
    first = _chat(api, history)
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in first.tool_calls] == [
        ("call_fake_1", "get_weather", {"city": "fake-city"})]
    history += [first.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": "call_fake_1", "content": "sunny"}]
    second = _chat(api, history)
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in second.tool_calls] == [
        ("call_fake_2", "final_answer", {"answer": "fake-answer"})]
    history += [second.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": "call_fake_2", "content": "ok"}]
    third = _chat(api, history)
    assert (third.content, third.tool_calls) == (api.reply_text, None)


def test_a_call_written_as_smolagents_text_counts_as_made(api: FakeLLMAPI) -> None:
    # smolagents sends its calls and observations as text turns, not structured calls.
    said = "\nCalling tools:\n[{'id': 'call_fake_1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': {}}}]"
    history = [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": said}]},
        {"role": "user", "content": [{"type": "text", "text": "Observation:\nsunny"}]},
    ]
    assert [c.function.name for c in _chat(api, history).tool_calls] == ["final_answer"]


def test_responses_input_items_count_as_calls(api: FakeLLMAPI) -> None:
    client = openai.OpenAI(base_url=api.openai_base_url, api_key="test", max_retries=0)
    tools = [{"type": "function", "name": "transfer_to_weather", "parameters": {"type": "object", "properties": {}}},
             {"type": "function", "name": "get_weather", "parameters": SCHEMA}]
    items: list[Any] = [{"role": "user", "content": "weather?"},
                        {"type": "function_call", "call_id": "call_fake_1", "name": "transfer_to_weather",
                         "arguments": "{}"},
                        {"type": "function_call_output", "call_id": "call_fake_1", "output": "{}"}]
    out = client.responses.create(model="m", input=items, tools=tools).output  # type: ignore[arg-type]
    assert [(o.type, o.id, o.call_id, o.name) for o in out] == [("function_call", "fc_fake_2", "call_fake_2", "get_weather")]


def _gemini(api: FakeLLMAPI, model: str, body: dict[str, Any], method: str = "generateContent",
            query: str = "") -> requests.Response:
    return requests.post(f"{api.gemini_base_url}/v1beta/models/{model}:{method}{query}", json=body, timeout=5)


GEMINI_TOOL = {"functionDeclarations": [{"name": "get_weather", "description": "Weather for a city",
                                         "parametersJsonSchema": SCHEMA}]}
QUESTION = {"role": "user", "parts": [{"text": "weather?"}]}


def test_gemini_text_reply_usage_and_model(api: FakeLLMAPI) -> None:
    reply = _gemini(api, "gemini-x", {"contents": [QUESTION], "systemInstruction": {"parts": [{"text": "Be brief."}]}})
    assert reply.status_code == 200
    data = reply.json()
    assert data["candidates"] == [{"content": {"role": "model", "parts": [{"text": api.reply_text}]},
                                   "index": 0, "finishReason": "STOP"}]
    words = len(api.words())
    assert data["usageMetadata"] == {
        "promptTokenCount": api.input_tokens, "candidatesTokenCount": words,
        "cachedContentTokenCount": api.cached_tokens, "thoughtsTokenCount": api.reasoning_tokens,
        "totalTokenCount": api.input_tokens + words + api.reasoning_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": api.input_tokens}],
    }
    assert (data["modelVersion"], data["responseId"]) == ("gemini-x-fake-0001", "resp_fake")
    assert api.requests[-1].path == "/v1beta/models/gemini-x:generateContent"


@pytest.mark.parametrize("schema_key", ["parameters", "parametersJsonSchema", "parameters_json_schema"])
def test_gemini_function_call_then_text_once_answered(api: FakeLLMAPI, schema_key: str) -> None:
    # The API takes proto JSON in either case; google-genai sends parameters_json_schema.
    tool = {"functionDeclarations": [{"name": "get_weather", schema_key: SCHEMA}]}
    data = _gemini(api, "g", {"contents": [QUESTION], "tools": [tool]}).json()
    call = {"id": "call_fake_1", "name": "get_weather", "args": {"city": "fake-city"}}
    assert data["candidates"][0]["content"]["parts"] == [{"functionCall": call}]
    assert data["usageMetadata"]["candidatesTokenCount"] == api.tool_call_tokens
    history = [QUESTION, {"role": "model", "parts": [{"functionCall": call}]},
               {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"result": "sunny"}}}]}]
    answered = _gemini(api, "g", {"contents": history, "tools": [tool]}).json()
    assert answered["candidates"][0]["content"]["parts"] == [{"text": api.reply_text}]


def test_gemini_stream_sends_a_chunk_per_word_and_usage_last(api: FakeLLMAPI) -> None:
    reply = _gemini(api, "g", {"contents": [QUESTION]}, "streamGenerateContent", "?alt=sse")
    assert reply.headers["Content-Type"] == "text/event-stream"
    chunks = [json.loads(line[len("data: "):]) for line in reply.text.splitlines() if line.startswith("data: ")]
    assert "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks) == api.reply_text
    assert len(chunks) == len(api.words())
    assert ["usageMetadata" in c for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    # Without alt=sse the API answers with the chunks as one JSON array.
    array = _gemini(api, "g", {"contents": [QUESTION]}, "streamGenerateContent").json()
    assert array == chunks


def test_gemini_stream_of_a_function_call_is_one_chunk(api: FakeLLMAPI) -> None:
    reply = _gemini(api, "g", {"contents": [QUESTION], "tools": [GEMINI_TOOL]}, "streamGenerateContent", "?alt=sse")
    chunks = [json.loads(line[len("data: "):]) for line in reply.text.splitlines() if line.startswith("data: ")]
    assert [c["candidates"][0]["content"]["parts"] for c in chunks] == [
        [{"functionCall": {"id": "call_fake_1", "name": "get_weather", "args": {"city": "fake-city"}}}]]


@pytest.mark.parametrize(("model", "status", "name"), [("error-500", 500, "INTERNAL"), ("error-429", 429, "RESOURCE_EXHAUSTED")])
def test_gemini_error_models_get_googles_error_body(api: FakeLLMAPI, model: str, status: int, name: str) -> None:
    for method in ("generateContent", "streamGenerateContent"):
        reply = _gemini(api, model, {"contents": [QUESTION]}, method, "?alt=sse")
        assert reply.status_code == status
        assert reply.json() == {"error": {"code": status, "message": f"fake {status}", "status": name}}


def test_an_unknown_gemini_method_is_404(api: FakeLLMAPI) -> None:
    assert _gemini(api, "g", {"contents": [QUESTION]}, "countTokens").status_code == 404
