"""A fake OpenAI + Anthropic + Gemini HTTP API on loopback, for tests and examples that use the real client packages.

No network and no account: answers are canned and deterministic, so a test can
assert exact values and an example runs offline.

Start it as a context manager and point the clients at it (turn retries off so error tests stay fast)::

    with FakeLLMAPI() as api:
        oai = openai.OpenAI(base_url=api.openai_base_url, api_key="test", max_retries=0)
        ant = anthropic.Anthropic(base_url=api.anthropic_base_url, api_key="test", max_retries=0)
        oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        assert api.requests[-1].path == "/v1/chat/completions"
        gem = google.genai.Client(api_key="test", http_options={"base_url": api.gemini_base_url})

Endpoints (all POST, JSON bodies):

* ``/v1/chat/completions`` — JSON, or SSE with ``stream: true``; a final usage-only chunk is sent
  when ``stream_options.include_usage`` is true (as the real API does).
* ``/v1/embeddings`` — one 3-dimensional vector per input; honours ``encoding_format: base64``
  (the openai client asks for base64 by default and decodes it).
* ``/v1/responses`` — JSON, or SSE events (``response.created`` … ``response.completed``) with ``stream: true``.
* ``/v1/messages`` — Anthropic JSON, or SSE (``message_start``, ``content_block_start/delta/stop``,
  ``message_delta`` with usage, ``message_stop``) with ``stream: true``.
* ``/v1beta/models/{model}:generateContent`` — the Gemini API's JSON (``candidates`` with
  ``content.parts``, ``finishReason``, ``usageMetadata``, ``modelVersion``, ``responseId``);
  ``:streamGenerateContent?alt=sse`` sends the same as SSE, one chunk per word, the last one with
  ``finishReason`` and ``usageMetadata`` (without ``alt=sse``, a JSON array of the chunks). The
  model comes from the path; ``v1`` and ``v1alpha`` answer the same.

Deterministic behaviour, so tests can assert exact values:

* The reply text is :attr:`FakeLLMAPI.reply_text`; streams send it word by word (one chunk per
  word, spaces kept), so the number of content chunks is ``len(reply_text.split(" "))``.
* When the request carries ``tools``, the reply is a call to the first of them that the
  conversation has not called yet (id ``call_fake_<n>`` / ``toolu_fake_<n>``, ``n`` one more than
  the calls already in the history, so the first is ``call_fake_1``), whose arguments give
  every property of the tool's parameter schema the string ``"fake-<name>"``; once every offered
  tool was called, the reply is text. So a request with one tool gets a call, and the same
  request with the call and its result appended gets the text; an agent handed off to gets a call
  to its own tool; offered ``[get_weather, final_answer]`` (smolagents), the second turn calls
  ``final_answer``. A call counts in any API's shape (an assistant's ``tool_calls``, a
  ``function_call`` input item, a ``tool_use`` block, a Gemini ``functionCall`` part) and as
  smolagents writes it, an assistant text turn ``Calling tools: [{... 'name': '<tool>' ...}]``.
* Usage: :attr:`input_tokens` input tokens (of which :attr:`cached_tokens` cached),
  output tokens = number of words of the reply (a tool call counts as :attr:`tool_call_tokens`),
  :attr:`reasoning_tokens` reasoning tokens (OpenAI and Gemini; Gemini counts them apart from
  ``candidatesTokenCount``, in ``thoughtsTokenCount``, and in ``totalTokenCount``).
* A Gemini tool call is a ``functionCall`` part with ``id`` ``call_fake_<n>`` (as models that
  number their calls send it), ``name`` and ``args``; its ``finishReason`` is ``STOP``, as the API's.
* The response model is the request model with ``-fake-0001`` appended.
* Errors: a model named ``error-<status>`` (e.g. ``error-500``, ``error-429``) gets that HTTP
  status with the provider's error body (Gemini's ``{"error": {"code", "message", "status"}}``);
  unknown paths get 404. A streamed chat completion for
  the model ``fail-midstream`` sends its first word and then an error event, as the real API does
  when it fails during a stream (the client raises ``openai.APIError`` while iterating).

Every request is appended to :attr:`requests` as a :class:`RecordedRequest` (thread-safe);
:meth:`reset` clears the log.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

from otel_runs_exporter.testing._fake_tools import tool_call_for

__all__ = ["FakeLLMAPI", "RecordedRequest"]

EMBEDDING = [0.25, -0.5, 1.0]


@dataclass
class RecordedRequest:
    """One request the fake API received."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any = None
    raw: bytes = field(default=b"", repr=False)


class FakeLLMAPI:
    """The fake API server; see the module docstring for its behaviour."""

    reply_text = "Hello from the fake model."
    input_tokens = 12
    cached_tokens = 2
    reasoning_tokens = 1
    tool_call_tokens = 7
    #: Seconds to wait between streamed chunks (0: as fast as possible).
    chunk_delay = 0.0

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> "FakeLLMAPI":
        handler = type("_BoundHandler", (_Handler,), {"api": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-llm-api", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeLLMAPI":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- addresses

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, the server root."""
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        """The ``base_url`` for ``openai.OpenAI`` (it includes ``/v1``)."""
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The ``base_url`` for ``anthropic.Anthropic`` (the client adds ``/v1/...`` itself)."""
        return self.url

    @property
    def gemini_base_url(self) -> str:
        """The ``base_url`` for ``google.genai.Client(http_options=...)`` (the client adds ``/v1beta/...``)."""
        return self.url

    def reset(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self.requests.clear()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # -- response builders (public so tests can compute expected values)

    def words(self) -> list[str]:
        """The reply split the way streams send it: word by word, keeping the spaces."""
        parts = self.reply_text.split(" ")
        return [p if i == len(parts) - 1 else p + " " for i, p in enumerate(parts)]

    def output_tokens(self, tool_call: bool = False) -> int:
        return self.tool_call_tokens if tool_call else len(self.words())


# --------------------------------------------------------------------------- helpers


#: ``/v1beta/models/gemini-2.0-flash:generateContent`` and its streamed twin.
_GEMINI_PATH = re.compile(r"^/(?:v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$")
_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
                  500: "INTERNAL", 503: "UNAVAILABLE"}


def _error_status(model: Any) -> int | None:
    if isinstance(model, str) and model.startswith("error-"):
        try:
            return int(model[len("error-") :])
        except ValueError:
            return 500
    return None


class _Handler(BaseHTTPRequestHandler):
    api: FakeLLMAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    # -- plumbing

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", "req_fake")
        self.send_header("request-id", "req_fake")
        self.end_headers()
        self.wfile.write(data)

    def _send_sse(self, events: Iterator[tuple[str | None, Any]]) -> None:
        # No length and "Connection: close": the client reads the stream until EOF.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for event, data in events:
            chunk = ""
            if event is not None:
                chunk += f"event: {event}\n"
            chunk += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
            try:
                self.wfile.write(chunk.encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return  # the client closed the stream early, as tests of early close do
            if self.api.chunk_delay:
                time.sleep(self.api.chunk_delay)

    def do_GET(self) -> None:
        self._read_and_record()
        self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def _read_and_record(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.api._record(
            RecordedRequest(self.command, self.path.split("?")[0], {k.lower(): v for k, v in self.headers.items()}, body, raw)
        )
        return body

    def do_POST(self) -> None:
        body = self._read_and_record() or {}
        path, _, query = self.path.partition("?")
        gemini = _GEMINI_PATH.match(path)
        if gemini:
            self._gemini(body, gemini.group("model"), gemini.group("method"), "alt=sse" in query.split("&"))
            return
        status = _error_status(body.get("model"))
        if path == "/v1/messages":
            if status:
                self._send_json(status, {"type": "error", "error": {"type": "api_error", "message": f"fake {status}"}})
            elif body.get("stream"):
                self._send_sse(self._anthropic_stream(body))
            else:
                self._send_json(200, self._anthropic_message(body))
            return
        if path not in ("/v1/chat/completions", "/v1/embeddings", "/v1/responses"):
            self._send_json(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}})
            return
        if status:
            self._send_json(status, {"error": {"message": f"fake {status}", "type": "server_error", "code": None}})
        elif path == "/v1/embeddings":
            self._send_json(200, self._embeddings(body))
        elif path == "/v1/chat/completions":
            if body.get("stream"):
                self._send_sse(self._chat_stream(body))
            else:
                self._send_json(200, self._chat(body))
        elif body.get("stream"):
            self._send_sse(self._responses_stream(body))
        else:
            self._send_json(200, self._response(body, status="completed"))

    # -- OpenAI chat completions

    def _chat_usage(self, tool_call: bool) -> dict[str, Any]:
        api = self.api
        out = api.output_tokens(tool_call)
        return {
            "prompt_tokens": api.input_tokens,
            "completion_tokens": out,
            "total_tokens": api.input_tokens + out,
            "prompt_tokens_details": {"cached_tokens": api.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": api.reasoning_tokens, "audio_tokens": 0},
        }

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        call = tool_call_for(body, "openai")
        message: dict[str, Any] = {"role": "assistant", "content": None if call else self.api.reply_text}
        if call:
            message["tool_calls"] = [
                {"id": f"call_fake_{call.number}", "type": "function",
                 "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
            ]
        n = int(body.get("n") or 1)
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": f"{body.get('model')}-fake-0001",
            "system_fingerprint": "fp_fake",
            "choices": [
                {"index": i, "message": message, "finish_reason": "tool_calls" if call else "stop", "logprobs": None}
                for i in range(n)
            ],
            "usage": self._chat_usage(bool(call)),
        }

    def _chat_stream(self, body: dict[str, Any]) -> Iterator[tuple[str | None, Any]]:
        call = tool_call_for(body, "openai")
        base = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": f"{body.get('model')}-fake-0001",
            "system_fingerprint": "fp_fake",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

        yield None, chunk({"role": "assistant", "content": ""})
        if call:
            args = json.dumps(call.arguments)
            yield None, chunk({"tool_calls": [{"index": 0, "id": f"call_fake_{call.number}", "type": "function",
                                               "function": {"name": call.name, "arguments": ""}}]})
            half = len(args) // 2
            for piece in (args[:half], args[half:]):
                yield None, chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            yield None, chunk({}, "tool_calls")
        else:
            for word in self.api.words():
                yield None, chunk({"content": word})
                if body.get("model") == "fail-midstream":
                    yield None, {"error": {"message": "fake mid-stream failure", "type": "server_error"}}
                    return
            yield None, chunk({}, "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            yield None, {**base, "choices": [], "usage": self._chat_usage(bool(call))}
        yield None, "[DONE]"

    # -- OpenAI embeddings

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        inputs = body.get("input")
        items = inputs if isinstance(inputs, list) and inputs and not isinstance(inputs[0], int) else [inputs]
        if body.get("encoding_format") == "base64":
            vector: Any = base64.b64encode(struct.pack(f"<{len(EMBEDDING)}f", *EMBEDDING)).decode()
        else:
            vector = EMBEDDING
        return {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": vector} for i in range(len(items))],
            "model": f"{body.get('model')}-fake-0001",
            "usage": {"prompt_tokens": self.api.input_tokens, "total_tokens": self.api.input_tokens},
        }

    # -- OpenAI responses

    def _response_output(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        call = tool_call_for(body, "openai")
        if call:
            return [{"type": "function_call", "id": f"fc_fake_{call.number}", "call_id": f"call_fake_{call.number}",
                     "name": call.name, "arguments": json.dumps(call.arguments), "status": "completed"}]
        return [{"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant",
                 "content": [{"type": "output_text", "text": self.api.reply_text, "annotations": []}]}]

    def _response(self, body: dict[str, Any], status: str, output: list[Any] | None = None) -> dict[str, Any]:
        api = self.api
        out_tokens = api.output_tokens(bool(tool_call_for(body, "openai")))
        return {
            "id": "resp_fake",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": f"{body.get('model')}-fake-0001",
            "output": self._response_output(body) if output is None else output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools") or [],
            "instructions": body.get("instructions"),
            "temperature": body.get("temperature"),
            "top_p": body.get("top_p"),
            "error": None,
            "incomplete_details": None,
            "metadata": {},
            "usage": None if status != "completed" else {
                "input_tokens": api.input_tokens,
                "input_tokens_details": {"cached_tokens": api.cached_tokens},
                "output_tokens": out_tokens,
                "output_tokens_details": {"reasoning_tokens": api.reasoning_tokens},
                "total_tokens": api.input_tokens + out_tokens,
            },
        }

    def _responses_stream(self, body: dict[str, Any]) -> Iterator[tuple[str | None, Any]]:
        seq = iter(range(10_000))

        def event(kind: str, **data: Any) -> tuple[str, Any]:
            return kind, {"type": kind, "sequence_number": next(seq), **data}

        yield event("response.created", response=self._response(body, "in_progress", output=[]))
        final = self._response_output(body)
        item = final[0]
        if item["type"] == "function_call":
            yield event("response.output_item.added", output_index=0, item={**item, "arguments": "", "status": "in_progress"})
            yield event("response.function_call_arguments.delta", output_index=0, item_id=item["id"], delta=item["arguments"])
            yield event("response.function_call_arguments.done", output_index=0, item_id=item["id"], arguments=item["arguments"])
        else:
            yield event("response.output_item.added", output_index=0,
                        item={**item, "status": "in_progress", "content": []})
            yield event("response.content_part.added", output_index=0, item_id=item["id"], content_index=0,
                        part={"type": "output_text", "text": "", "annotations": []})
            for word in self.api.words():
                yield event("response.output_text.delta", output_index=0, item_id=item["id"], content_index=0,
                            delta=word, logprobs=[])
            yield event("response.output_text.done", output_index=0, item_id=item["id"], content_index=0,
                        text=self.api.reply_text, logprobs=[])
            yield event("response.content_part.done", output_index=0, item_id=item["id"], content_index=0,
                        part=item["content"][0])
        yield event("response.output_item.done", output_index=0, item=item)
        yield event("response.completed", response=self._response(body, "completed"))

    # -- Anthropic messages

    def _anthropic_usage(self, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": self.api.input_tokens - self.api.cached_tokens,
            "cache_read_input_tokens": self.api.cached_tokens,
            "cache_creation_input_tokens": 0,
            "output_tokens": output_tokens,
        }

    def _anthropic_message(self, body: dict[str, Any]) -> dict[str, Any]:
        call = tool_call_for(body, "anthropic")
        if call:
            content = [{"type": "text", "text": "Let me check."},
                       {"type": "tool_use", "id": f"toolu_fake_{call.number}", "name": call.name, "input": call.arguments}]
        else:
            content = [{"type": "text", "text": self.api.reply_text}]
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": f"{body.get('model')}-fake-0001",
            "content": content,
            "stop_reason": "tool_use" if call else "end_turn",
            "stop_sequence": None,
            "usage": self._anthropic_usage(self.api.output_tokens(bool(call))),
        }

    def _anthropic_stream(self, body: dict[str, Any]) -> Iterator[tuple[str | None, Any]]:
        final = self._anthropic_message(body)
        start = {**final, "content": [], "stop_reason": None, "usage": self._anthropic_usage(1)}
        yield "message_start", {"type": "message_start", "message": start}
        for index, block in enumerate(final["content"]):
            if block["type"] == "text":
                yield "content_block_start", {"type": "content_block_start", "index": index,
                                              "content_block": {"type": "text", "text": ""}}
                yield "ping", {"type": "ping"}
                pieces = self.api.words() if block["text"] == self.api.reply_text else [block["text"]]
                for piece in pieces:
                    yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                                  "delta": {"type": "text_delta", "text": piece}}
            else:
                yield "content_block_start", {"type": "content_block_start", "index": index,
                                              "content_block": {**block, "input": {}}}
                args = json.dumps(block["input"])
                half = len(args) // 2
                for piece in (args[:half], args[half:]):
                    yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                                  "delta": {"type": "input_json_delta", "partial_json": piece}}
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        yield "message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": final["stop_reason"], "stop_sequence": None},
                                "usage": {"output_tokens": final["usage"]["output_tokens"]}}
        yield "message_stop", {"type": "message_stop"}

    # -- Gemini generateContent

    def _gemini(self, body: dict[str, Any], model: str, method: str, sse: bool) -> None:
        status = _error_status(model)
        if status:
            self._send_json(status, {"error": {"code": status, "message": f"fake {status}",
                                               "status": _GEMINI_STATUS.get(status, "UNKNOWN")}})
        elif method == "generateContent":
            self._send_json(200, self._gemini_response(body, model))
        elif sse:
            self._send_sse((None, chunk) for chunk in self._gemini_chunks(body, model))
        else:
            self._send_json(200, list(self._gemini_chunks(body, model)))

    def _gemini_usage(self, tool_call: bool) -> dict[str, Any]:
        api = self.api
        out = api.output_tokens(tool_call)
        return {
            "promptTokenCount": api.input_tokens,
            "candidatesTokenCount": out,
            "cachedContentTokenCount": api.cached_tokens,
            "thoughtsTokenCount": api.reasoning_tokens,
            "totalTokenCount": api.input_tokens + out + api.reasoning_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": api.input_tokens}],
        }

    def _gemini_chunk(self, model: str, parts: list[dict[str, Any]], final: dict[str, Any] | None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": f"{model}-fake-0001",
                                 "responseId": "resp_fake"}
        if final is not None:
            candidate["finishReason"] = "STOP"
            chunk["usageMetadata"] = final
        return chunk

    def _gemini_response(self, body: dict[str, Any], model: str) -> dict[str, Any]:
        call = tool_call_for(body, "gemini")
        if call:
            part = {"functionCall": {"id": f"call_fake_{call.number}", "name": call.name, "args": call.arguments}}
            return self._gemini_chunk(model, [part], self._gemini_usage(True))
        return self._gemini_chunk(model, [{"text": self.api.reply_text}], self._gemini_usage(False))

    def _gemini_chunks(self, body: dict[str, Any], model: str) -> Iterator[dict[str, Any]]:
        if tool_call_for(body, "gemini"):
            yield self._gemini_response(body, model)
            return
        words = self.api.words()
        for index, word in enumerate(words):
            last = index == len(words) - 1
            yield self._gemini_chunk(model, [{"text": word}], self._gemini_usage(False) if last else None)
