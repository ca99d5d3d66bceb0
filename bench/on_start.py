"""Micro-benchmark of ``RunsSpanProcessor.on_start`` and ``on_end``: what the processor adds on the app thread.

Spans are started beforehand on a provider without our processor, so only
``on_start`` itself is timed; then each is given an end time (the SDK's ``end()``
would call our hook itself) and ``on_end`` is timed over them. The spans' memory
is cold by then, as it is not in an app, so these are upper bounds. For scale,
the SDK's own ``start_span`` is timed too. Best of several rounds: noise only
ever adds. The worker never wakes during the run (huge batch size and delay),
so it does not compete for the GIL, and nothing is sent. The garbage collector is off while timing (as
``timeit`` does): its passes over thousands of live spans would swamp a
difference of a few hundred nanoseconds.

    python bench/on_start.py            # best of 7 rounds of 20 000 spans per shape
    python bench/on_start.py --src DIR  # import otel_runs_exporter from DIR (say, an older checkout's src)
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import uuid


def _shapes() -> dict[str, dict[str, object]]:
    run_id, trace_id = uuid.uuid4(), uuid.uuid4()
    dotted = f"20260101T120000000000Z{trace_id}.20260101T120000000100Z{run_id}"
    plain = {"http.method": "GET", "http.route": "/x", "net.peer.name": "h", "user.id": "u", "input.value": "hi"}
    return {
        "no attributes": {},
        "5 attributes": plain,
        "5 attributes + langsmith.metadata": {**plain, "langsmith.metadata.k": "v"},
        "5 attributes + the 4 langsmith ids": {
            **plain,
            "langsmith.trace.id": str(trace_id),
            "langsmith.span.id": str(run_id),
            "langsmith.span.parent_id": str(trace_id),
            "langsmith.span.dotted_order": dotted,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", help="directory to import otel_runs_exporter from")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, args.src)

    from opentelemetry.sdk.trace import TracerProvider

    import otel_runs_exporter
    from otel_runs_exporter import RunsSpanProcessor

    processor = RunsSpanProcessor(
        endpoint="http://127.0.0.1:9",  # discard port: never reached, the worker never wakes
        api_key="x",
        schedule_delay_s=3600,
        max_export_batch_size=10_000_000,
        max_queue_size=10_000_000,
        max_queue_bytes=2**40,
    )
    tracer = TracerProvider().get_tracer("bench")

    def drain() -> None:
        # Bench only: drop what the round queued, so memory stays flat and shutdown has nothing to send.
        processor._open.clear()
        processor._worker._queue.clear()
        # In an app the worker has converted (and let go of) the spans of the ended runs on_end
        # forgets past 16,384; here it never runs, so forgetting would free whole spans inside
        # on_end's timing.
        processor._recent.clear()

    print(f"ns per span, best of {args.rounds} x {args.calls} ({otel_runs_exporter.__file__})")
    print(f"  {'':<38} {'on_start':>9} {'on_end':>7} {'SDK start_span':>15}")
    for label, attributes in _shapes().items():
        cold = ended = start = float("inf")
        for _ in range(args.rounds):
            gc.disable()
            t0 = time.perf_counter_ns()
            spans = [tracer.start_span("s", attributes=attributes) for _ in range(args.calls)]
            start = min(start, (time.perf_counter_ns() - t0) / args.calls)
            on_start, on_end = processor.on_start, processor.on_end
            t0 = time.perf_counter_ns()
            for span in spans:
                on_start(span)
            cold = min(cold, (time.perf_counter_ns() - t0) / args.calls)
            for span in spans:
                span._end_time = span.start_time + 1000  # ended as far as conversion reads, without end()
            t0 = time.perf_counter_ns()
            for span in spans:
                on_end(span)
            ended = min(ended, (time.perf_counter_ns() - t0) / args.calls)
            gc.enable()
            del spans
            drain()
        print(f"  {label:<38} {cold:9.0f} {ended:7.0f} {start:15.0f}")
    processor.shutdown(timeout_millis=0)


if __name__ == "__main__":
    main()
