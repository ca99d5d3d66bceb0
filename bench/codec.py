"""Bytes and compressing CPU per run of one batch body, by zstd configuration.

What ``_codec`` chooses (a 2^17 hash table, or 2^15 for runs averaging 16 KiB or
more) against each fixed choice, on the benchmark's workloads and on large runs
that repeat an agent's growing history (where a small hash table could lose the
long matches). Rounds are interleaved: every configuration compresses every
body once per round, so load on the machine spreads over all of them.

    python bench/codec.py                 # ~5 s; --rounds N, --src DIR for another checkout

CPU is ``time.process_time`` of the compression alone; the figures to compare are
the ratios between rows of one invocation, not the absolute microseconds.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# OTLP/HTTP protobuf bytes per span on the same workloads (bench/results.json, the full run).
OTLP_BYTES = {"small": 192, "genai": 4704, "64k": 65000}


def _history_runs(turn_chars: int, n: int) -> list[dict[str, Any]]:
    from workloads import _text, _vocabulary

    rng = random.Random(1)
    words = _vocabulary(rng)
    history: list[dict[str, str]] = []
    runs = []
    for i in range(n):
        history.append({"role": "user" if i % 2 == 0 else "assistant", "content": _text(rng, words, turn_chars)})
        runs.append({
            "id": f"{i:032x}", "trace_id": "0" * 32, "dotted_order": f"d{i}", "name": "chat", "run_type": "llm",
            "inputs": {"messages": history[-40:]},
            "outputs": {"choices": [{"message": {"role": "assistant", "content": _text(rng, words, 400)}}]},
        })
    return runs


def bodies() -> dict[str, tuple[bytes, int]]:
    from workloads import run_dicts

    from otel_runs_exporter._encode import encode_run, multipart_body, new_boundary

    sources = {
        "small": run_dicts("small", 512),
        "genai": run_dicts("genai", 512),
        "64k": run_dicts("64k", 64),
        "history": _history_runs(4000, 32),
    }
    out = {}
    for name, runs in sources.items():
        encoded = [encode_run("post", r, completes=True) for r in runs]
        out[name] = (multipart_body(encoded, new_boundary())[1], len(encoded))
    return out


def configurations() -> dict[str, Callable[[bytes, int], bytes]]:
    import zstandard

    from otel_runs_exporter import _codec

    def fixed(hash_log: int) -> Callable[[bytes, int], bytes]:
        params = zstandard.ZstdCompressionParameters.from_level(
            _codec._ZSTD_LEVEL, window_log=_codec._ZSTD_WINDOW_LOG, hash_log=hash_log
        )
        compress = zstandard.ZstdCompressor(compression_params=params).compress
        return lambda body, runs: compress(body)

    chosen = _codec.codec("zstd")
    assert chosen is not None
    configs = {f"level 2, hash 2^{h}": fixed(h) for h in (14, 15, 17)}
    if hasattr(chosen, "compress_runs"):
        configs["ours (by run size)"] = chosen.compress_runs
    return configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--src", help="import otel_runs_exporter from this checkout's src/")
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, os.path.join(args.src, "src"))
    data, configs = bodies(), configurations()
    times: dict[tuple[str, str], list[float]] = {(b, c): [] for b in data for c in configs}
    sizes: dict[tuple[str, str], int] = {}
    for _ in range(args.rounds):
        for body_name, (body, runs) in data.items():
            for config_name, compress in configs.items():
                compress(body, runs)  # each timed call finds its own tables in the cache, as a worker's would
                began = time.process_time()
                out = compress(body, runs)
                times[(body_name, config_name)].append((time.process_time() - began) / runs * 1e6)
                sizes[(body_name, config_name)] = len(out)
    load = os.getloadavg()[0]
    print(f"{args.rounds} interleaved rounds, load average {load:.2f}")
    for body_name, (body, runs) in data.items():
        otlp = OTLP_BYTES.get(body_name)
        print(f"\n{body_name}: {runs} runs, {len(body) / runs:,.0f} B a run uncompressed")
        for config_name in configs:
            per_run = sizes[(body_name, config_name)] / runs
            ts = sorted(times[(body_name, config_name)])
            vs = f" ({per_run / otlp:.3f}x OTLP)" if otlp else ""
            print(
                f"  {config_name:20s} {per_run:9,.0f} B{vs:16s} µs a run: median {statistics.median(ts):7.1f}"
                f"  (min {ts[0]:.1f}, max {ts[-1]:.1f})"
            )


if __name__ == "__main__":
    main()
