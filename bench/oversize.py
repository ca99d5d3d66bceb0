"""Spans too big for one request: what arrives when a batch is larger than a request may be.

    python bench/oversize.py                        # 400 spans of 256 KB, no receiver limit
    python bench/oversize.py --spans 40 --kb 64 --limit-mib 1   # seconds: a receiver limiting requests to 1 MiB

Each contender runs in a fresh process, traces ``--spans`` spans carrying
``--kb`` KB of text in ``input.value`` as fast as it can, flushes, shuts down,
and the sink says how many arrived. OTel's ``BatchSpanProcessor`` puts up to 512
spans in one export whatever their size; the OTLP/HTTP exporter then drops, on
the client, any batch whose serialized request is over its ``max_request_size``
(64 MiB by default in opentelemetry-exporter-otlp-proto-http 1.45: "Dropping
span batch: serialized size ... exceeds max_request_size"), and a receiver's
413 is not retried either: the whole batch is lost. Ours sizes each multipart
body by the ``size_limit_bytes`` the service's ``GET /info`` gives (the sink
says 20 MiB, or its ``--limit-mib`` when lower) and splits before sending.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CONTENDERS = ("otlp", "ours-processor", "ours-exporter")


def _sink(url: str, path: str) -> dict:
    method = "POST" if path.startswith("/_bench/reset") else "GET"
    req = urllib.request.Request(url + path, data=b"" if method == "POST" else None, method=method)
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.loads(resp.read() or b"{}")


def child(contender: str, sink: str, spans: int, kb: int) -> None:
    """Trace in this process, then exit: the parent reads the sink."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from workloads import _text, _vocabulary

    rng = random.Random(7)
    words = _vocabulary(rng)
    # A few distinct payloads: compression must not make one span's worth of bytes vanish.
    payloads = [_text(rng, words, kb * 1024) for _ in range(8)]
    provider = TracerProvider()
    if contender == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=sink + "/otel/v1/traces"), max_queue_size=max(2048, spans + 64)))
    elif contender == "ours-processor":
        from otel_runs_exporter import RunsSpanProcessor

        provider.add_span_processor(RunsSpanProcessor(endpoint=sink, api_key="x"))
    elif contender == "ours-exporter":
        from otel_runs_exporter import RunsSpanExporter

        provider.add_span_processor(BatchSpanProcessor(RunsSpanExporter(endpoint=sink, api_key="x"), max_queue_size=max(2048, spans + 64)))
    else:
        raise SystemExit(f"unknown contender {contender!r}")
    tracer = provider.get_tracer("bench-oversize")
    for i in range(spans):
        with tracer.start_as_current_span("retrieve", attributes={"input.value": payloads[i % len(payloads)], "input.mime_type": "text/plain"}):
            pass
    provider.force_flush(120_000)
    provider.shutdown()


def measure(contender: str, sink: str, spans: int, kb: int) -> dict:
    _sink(sink, "/_bench/reset")
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--child", contender, "--sink", sink, "--spans", str(spans), "--kb", str(kb)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    took = time.perf_counter() - started
    stats = _sink(sink, "/_bench/stats")
    return {
        "contender": contender,
        "spans": spans,
        "delivered": stats["delivered"],
        "requests": stats["requests"],
        "refused_413": stats["too_large"],
        "seconds": round(took, 1),
        "exit": proc.returncode,
        "stderr_tail": proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else [],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=400)
    parser.add_argument("--kb", type=int, default=256, help="KB of text per span")
    parser.add_argument("--limit-mib", type=float, default=0.0, help="the receiver's request size limit (0: none)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--sink", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.sink, args.spans, args.kb)
        return 0
    limit = int(args.limit_mib * 1024 * 1024)
    sink = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "sink.py"), "--port", "0", "--max-body-bytes", str(limit)],  # 0: none
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = sink.stdout.readline().split()[-1]  # type: ignore[union-attr]
        rows = [measure(c, url, args.spans, args.kb) for c in args.contenders.split(",")]
    finally:
        sink.terminate()
        sink.wait(10)
    where = f"a receiver limiting requests to {args.limit_mib:g} MiB" if limit else "no receiver limit"
    print(f"{args.spans} spans of {args.kb} KB, {where}:")
    for r in rows:
        print(
            f"  {r['contender']:<15} delivered {r['delivered']:>5}/{r['spans']}  requests {r['requests']:>3}"
            f"  refused 413 {r['refused_413']:>3}  {r['seconds']:>6.1f} s  exit {r['exit']}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"spans": args.spans, "kb": args.kb, "limit_mib": args.limit_mib, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
