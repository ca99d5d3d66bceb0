"""What the benchmark traces: payloads, tree shapes, and the equivalent run dicts.

A workload is ``<payload>-<shape>-<threads>``, e.g. ``genai-deep-8``:

* payload ``small``: a few scalar attributes; ``genai``: a chat call with ~4 KB of
  messages in ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON strings,
  as the GenAI conventions record them), model and usage; ``64k``: a 64 KB JSON
  document in ``input.value`` (``input.mime_type=application/json``).
* shape ``shallow``: a root with 9 children (10 spans a trace); ``deep``: a chain
  20 levels deep (20 spans a trace, ended innermost first).
* threads: producer threads, each tracing its share of the traces.

Every payload has three faces of the same data: OTel attributes (set at start
and before end), the langsmith ``RunTree`` arguments a langsmith user would pass
(Python objects, not JSON strings), and the run dict our converter would build
(for the "limit" row). Text varies between spans (a deterministic pool of
variants) so that compression ratios are not flattered by identical payloads.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import Any

import orjson

PAYLOADS = ("small", "genai", "64k")
SHAPES = ("shallow", "deep")
THREADS = (1, 8)

SPANS_PER_TRACE = {"shallow": 10, "deep": 20}

_POOL = 256  # distinct payload variants; more than a zstd window of 4 KB runs at level 1 can see again cheaply


def _vocabulary(rng: random.Random, n: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(n)]


def _text(rng: random.Random, words: list[str], chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:chars]


@dataclass(frozen=True)
class Variant:
    """One span's data, in the three forms the contenders need."""

    name: str
    start_attrs: dict[str, Any]  # OTel attributes known at start
    end_attrs: dict[str, Any]  # OTel attributes recorded just before end
    run_type: str  # langsmith
    ls_inputs: dict[str, Any]
    ls_outputs: dict[str, Any]
    ls_metadata: dict[str, Any]
    run_inputs: dict[str, Any]  # what our converter puts in the run (for the limit row)
    run_outputs: dict[str, Any]
    run_metadata: dict[str, Any]


def _small(rng: random.Random, i: int, words: list[str]) -> Variant:
    start = {"app.route": "/api/items", "app.user_id": 10_000 + i, "app.cache_hit": bool(i % 2), "app.ratio": 0.25}
    end = {"app.items": i % 17}
    meta = {**start, **end}
    return Variant(
        name=f"handle_{rng.choice(words)}",
        start_attrs=start,
        end_attrs=end,
        run_type="chain",
        ls_inputs={},
        ls_outputs={},
        ls_metadata=meta,
        run_inputs={},
        run_outputs={},
        run_metadata=meta,
    )


def _genai(rng: random.Random, i: int, words: list[str]) -> Variant:
    system = _text(rng, words, 600)
    user = _text(rng, words, 2400)
    answer = _text(rng, words, 1000)
    # The GenAI conventions' message shape (role + parts), as instrumentations record it.
    in_msgs = [
        {"role": "system", "parts": [{"type": "text", "content": system}]},
        {"role": "user", "parts": [{"type": "text", "content": user}]},
    ]
    out_msgs = [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
    usage = {"input_tokens": 800 + i % 50, "output_tokens": 230 + i % 20}
    start = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.input.messages": orjson.dumps(in_msgs).decode(),
    }
    end = {
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": f"chatcmpl-{i:08d}",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": usage["input_tokens"],
        "gen_ai.usage.output_tokens": usage["output_tokens"],
        "gen_ai.output.messages": orjson.dumps(out_msgs).decode(),
    }
    # What a langsmith user passes: role/content messages and usage_metadata in the outputs.
    ls_in = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
    ls_out = {
        "messages": [{"role": "assistant", "content": answer}],
        "usage_metadata": {**usage, "total_tokens": usage["input_tokens"] + usage["output_tokens"]},
    }
    ls_meta = {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini", "ls_temperature": 0.2}
    return Variant(
        name="chat gpt-4o-mini",
        start_attrs=start,
        end_attrs=end,
        run_type="llm",
        ls_inputs=ls_in,
        ls_outputs=ls_out,
        ls_metadata=ls_meta,
        run_inputs=ls_in,
        run_outputs=ls_out,
        run_metadata={**ls_meta, "gen_ai.response.id": end["gen_ai.response.id"]},
    )


def _big(rng: random.Random, i: int, words: list[str]) -> Variant:
    docs = []
    size = 0
    k = 0
    while size < 64 * 1024 - 600:
        text = _text(rng, words, 500)
        docs.append({"id": f"doc-{i}-{k}", "score": round(rng.random(), 4), "text": text})
        size += len(text) + 50
        k += 1
    value = {"query": _text(rng, words, 80), "documents": docs}
    raw = orjson.dumps(value).decode()
    start = {"input.value": raw, "input.mime_type": "application/json", "openinference.span.kind": "CHAIN"}
    end = {"output.value": "ok", "output.mime_type": "text/plain"}
    return Variant(
        name="rerank",
        start_attrs=start,
        end_attrs=end,
        run_type="chain",
        ls_inputs=value,
        ls_outputs={"output": "ok"},
        ls_metadata={},
        run_inputs=value,
        run_outputs={"output": "ok"},
        run_metadata={},
    )


_BUILDERS = {"small": _small, "genai": _genai, "64k": _big}


def variants(payload: str, pool: int = _POOL) -> list[Variant]:
    """``pool`` deterministic variants of ``payload`` (same seed every run, every process)."""
    rng = random.Random(f"bench-{payload}")
    words = _vocabulary(rng)
    n = pool if payload != "64k" else pool // 4  # 64 x 64 KB is variety enough, and keeps startup quick
    return [_BUILDERS[payload](rng, i, words) for i in range(n)]


@dataclass(frozen=True)
class Workload:
    payload: str
    shape: str
    threads: int

    @property
    def name(self) -> str:
        return f"{self.payload}-{self.shape}-{self.threads}"

    @property
    def spans_per_trace(self) -> int:
        return SPANS_PER_TRACE[self.shape]

    @classmethod
    def parse(cls, name: str) -> "Workload":
        payload, shape, threads = name.split("-")
        if payload not in PAYLOADS or shape not in SHAPES:
            raise ValueError(f"unknown workload {name!r}")
        return cls(payload, shape, int(threads))


def all_workloads() -> list[Workload]:
    return [Workload(p, s, t) for p in PAYLOADS for s in SHAPES for t in THREADS]


def plan(shape: str) -> list[tuple[str, int]]:
    """The order of operations of one trace: ``("start", i)`` / ``("end", i)``, parents first.

    ``i`` indexes the trace's spans; span 0 is the root, a span's parent is the
    innermost span started and not yet ended.
    """
    n = SPANS_PER_TRACE[shape]
    if shape == "deep":
        return [("start", i) for i in range(n)] + [("end", i) for i in reversed(range(n))]
    ops = [("start", 0)]
    for i in range(1, n):
        ops += [("start", i), ("end", i)]
    return ops + [("end", 0)]


# --- the run dicts of the "limit" row ------------------------------------------------

_RESOURCE = {
    "telemetry.sdk.language": "python",
    "telemetry.sdk.name": "opentelemetry",
    "telemetry.sdk.version": "1.45.2",
    "service.name": "unknown_service",
}


def run_dicts(payload: str, n: int, shape: str = "shallow") -> list[dict[str, Any]]:
    """``n`` complete runs (one merged post each) shaped like the ones our converter sends.

    Built by hand rather than by our converter, so the limit row does not move
    when the converter changes: it is what any exporter must at least serialize.
    """
    pool = variants(payload)
    depth_of = [0] + [1] * 9 if shape == "shallow" else list(range(20))
    runs = []
    trace_id = ""
    for i in range(n):
        v = pool[i % len(pool)]
        depth = depth_of[i % len(depth_of)]
        run_id = str(uuid.UUID(int=(0x0190_0000_0000_7000_8000_0000_0000_0000 + i * 7919) % (1 << 128)))
        if depth == 0:
            trace_id = run_id
        # Only its length matters here: one "<stamp><id>" segment per level.
        dotted = ".".join([f"20250101T000000{i % 1_000_000:06d}Z{run_id}"] * (depth + 1))
        run = {
            "id": run_id,
            "trace_id": trace_id,
            "dotted_order": dotted,
            "name": v.name,
            "run_type": v.run_type,
            "start_time": "2025-01-01T00:00:00.000000+00:00",
            "session_name": "default",
            "extra": {
                "metadata": {
                    **v.run_metadata,
                    "otel_trace_id": "0123456789abcdef0123456789abcdef",
                    "otel_span_id": "0123456789abcdef",
                    "otel_span_kind": "INTERNAL",
                    "otel_scope_name": "bench",
                    "otel_resource": _RESOURCE,
                }
            },
            "inputs": v.run_inputs,
            "end_time": "2025-01-01T00:00:00.001000+00:00",
            "outputs": v.run_outputs,
        }
        if depth:
            run["parent_run_id"] = trace_id
        runs.append(run)
    return runs
