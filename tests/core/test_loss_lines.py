"""What a user is told about lost runs: an endpoint that is a route, and loss lines that count runs.

An endpoint such as ``http://host:port/runs`` sends to ``/runs/runs/multipart``
and ``/runs/runs``; the local service answers 405. The user is told at startup
that the address looks like a route (and which base was likely meant), and
each loss line counts the runs lost, in the right number.
"""

from __future__ import annotations

import doctest
import logging

import pytest

from core.helpers import processor_provider
from otel_runs_exporter import _logging, _settings, _transport
from otel_runs_exporter._settings import check_usable, resolve


def test_doctests():
    for module in (_logging, _settings, _transport):
        assert doctest.testmod(module).failed == 0, module.__name__


def _route_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "looks like a route" in r.getMessage()]


@pytest.mark.parametrize(
    "endpoint, base",
    [
        ("http://127.0.0.1:1984/runs", "http://127.0.0.1:1984"),
        ("http://127.0.0.1:1984/runs/", "http://127.0.0.1:1984"),
        ("http://127.0.0.1:1984/runs/multipart", "http://127.0.0.1:1984"),
        ("http://127.0.0.1:1984/runs/batch", "http://127.0.0.1:1984"),
        ("https://api.smith.langchain.com/otel/v1/traces", "https://api.smith.langchain.com"),
        ("http://127.0.0.1:1984/info", "http://127.0.0.1:1984"),
        ("https://tracing.example.com/api/v1/runs/multipart", "https://tracing.example.com/api/v1"),
        ("https://user:hunter2@tracing.example.com/RUNS", "https://tracing.example.com"),
    ],
)
def test_an_endpoint_ending_in_a_route_gets_one_warning_naming_the_base(endpoint, base, caplog):
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        check_usable(resolve({"endpoint": endpoint, "api_key": "k"}))
    (line,) = _route_warnings(caplog)
    assert "this looks like a route, not the base URL" in line and f"did you mean {base}?" in line, line
    assert "hunter2" not in caplog.text


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:1984",
        "https://tracing.example.com/api/v1",  # a self-hosted service's base
        "https://api.smith.langchain.com",
        "http://127.0.0.1:1984/my-runs",
        "http://127.0.0.1:1984/runsinfo",
    ],
)
def test_a_base_address_gets_no_route_warning(endpoint, caplog):
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        check_usable(resolve({"endpoint": endpoint, "api_key": "k"}))
    assert _route_warnings(caplog) == []


@pytest.mark.parametrize("spans, lost", [(1, "1 run"), (4, "4 runs")])
def test_a_route_endpoint_is_named_at_startup_and_every_run_lost_is_counted(service, caplog, spans, lost):
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        # One flush, when asked: every span has ended by then, so one send carries them all.
        provider, processor = processor_provider(service.url + "/runs", schedule_delay_s=60.0)
        tracer = provider.get_tracer("t")
        with tracer.start_as_current_span("root"):
            for i in range(spans - 1):
                with tracer.start_as_current_span(f"child-{i}"):
                    pass
        assert not processor.force_flush(5_000)  # runs were lost
    (route,) = _route_warnings(caplog)
    assert f"did you mean {service.url}?" in route, route
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    # Said once, with the request that went wrong (the route twice over) and every run it lost.
    assert len(dropped) == 1, dropped
    assert f"POST {service.url}/runs/runs:" in dropped[0] and f"; {lost} dropped (http_405)" in dropped[0], dropped
    assert dict(processor.stats().dropped) == {"http_405": spans}
