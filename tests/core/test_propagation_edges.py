"""The ``runs`` propagator at its edges: what comes from outside never costs the app its runs, nor raises.

Each case as an audit found it, on a real SDK provider delivering to the local service.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from otel_runs_exporter._ids import GivenIds, given_run_ids, root_ids
from otel_runs_exporter.propagation import RunsPropagator

from core.helpers import processor_provider

A = "018bcfe5-68e3-7000-8000-000000000001"
B = "018bcfe5-68e3-7000-8000-000000000002"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_langsmith_trace_header_no_service_would_take_is_ignored_not_inherited(service: Any) -> None:
    """Before: an incoming header whose entries go back in time, or repeat an id, was taken as the
    remote parent; the server span and every run under it repeated the fault, and the service
    refused them all (4 of 4 runs `rejected`). Now the header is ignored: the request's runs arrive."""
    propagator = CompositePropagator([TraceContextTextMapPropagator(), RunsPropagator()])
    provider, processor = processor_provider(service.url)
    tracer = provider.get_tracer("server")
    incoming = {
        "out of order": f"20231114T221320123456Z{A}.20001114T221320123456Z{B}",
        "repeated id": f"20231114T221320123456Z{A}.20231114T221320123457Z{A}",
    }
    for label, value in incoming.items():
        context = propagator.extract({"traceparent": TRACEPARENT, "langsmith-trace": value})
        with tracer.start_as_current_span(f"{label}: GET /", context=context, kind=trace.SpanKind.SERVER):
            with tracer.start_as_current_span(f"{label}: handler"):
                pass
    assert processor.force_flush(10_000)
    stats = processor.stats()
    assert (stats.delivered, dict(stats.dropped)) == (4, {})
    assert not any(service.check().values()), service.check()
    provider.shutdown()


def test_extract_reads_only_text_and_inject_never_raises_into_the_app(service: Any) -> None:
    propagator = RunsPropagator()
    for carrier in ({"langsmith-trace": [None]}, {"langsmith-trace": b"20231114T221320123456Z" + A.encode()}):
        propagator.extract(carrier)  # before: AttributeError from .strip() into the app's request handler
    provider, processor = processor_provider(service.url)
    # A start time in year 10000 (nanoseconds taken for microseconds, say): its ids cannot be computed.
    span = provider.get_tracer("t").start_span("job", start_time=253_402_300_800 * 10**9)
    with trace.use_span(span, end_on_exit=True):
        headers: dict[str, str] = {}
        propagator.inject(headers)  # before: ValueError "year 10000 is out of range" into the app
        assert headers == {}
    assert not processor.force_flush(5_000)  # the run itself could not be converted: counted, not lost
    assert dict(processor.stats().dropped) == {"convert_error": 1}
    provider.shutdown()


def test_given_dotted_orders_keep_four_digit_years() -> None:
    """strftime("%Y") writes year 999 as "999": the run's dotted_order then broke the format rule."""
    dotted = f"09991231T235959000001Z{A}"
    computed = root_ids(B, 1_700_000_000_000_000_000)
    assert given_run_ids(GivenIds(dotted_order=dotted), computed).dotted_order == dotted
