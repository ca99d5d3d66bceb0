"""Fixtures shared by the instrumentation tests.

The global tracer provider can be set once per process, so one session-wide provider with an
in-memory exporter serves ``traceable`` (which uses the global provider); the instrumentors get the
same provider through ``tracer_provider=``. ``spans`` clears the exporter for each test.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

_EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))


@pytest.fixture(scope="session")
def tracer_provider() -> TracerProvider:
    """The session's provider, installed as the global one (once; it cannot be replaced)."""
    trace.set_tracer_provider(_PROVIDER)
    assert trace.get_tracer_provider() is _PROVIDER, "another global tracer provider was set first"
    return _PROVIDER


class Spans:
    """Finished spans of the current test."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def all_named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name == name]

    def named(self, name: str) -> ReadableSpan:
        found = self.all_named(name)
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.all()]}"
        return found[0]


@pytest.fixture
def spans(tracer_provider: TracerProvider) -> Iterator[Spans]:
    _EXPORTER.clear()
    yield Spans(_EXPORTER)
    _EXPORTER.clear()


@pytest.fixture
def instrumentor() -> BaseInstrumentor:
    """The instrumentor under test; each client's test module overrides this fixture."""
    raise NotImplementedError("override the instrumentor fixture in the test module")


@pytest.fixture
def instrument(tracer_provider: TracerProvider, instrumentor: BaseInstrumentor) -> Iterator[Callable[..., BaseInstrumentor]]:
    """Instrument (with optional kwargs) for one test; always uninstrumented afterwards."""

    def _instrument(**kwargs: Any) -> BaseInstrumentor:
        instrumentor.instrument(tracer_provider=tracer_provider, **kwargs)
        return instrumentor

    yield _instrument
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


@pytest.fixture
def instrumented(instrument: Callable[..., BaseInstrumentor]) -> BaseInstrumentor:
    return instrument()


@pytest.fixture(scope="session")
def fake_api() -> Iterator[FakeLLMAPI]:
    with FakeLLMAPI() as api:
        yield api


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests decide content capture themselves; a developer's shell must not.
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    for key in [k for k in os.environ if k.startswith("ANTHROPIC_OPEN_TELEMETRY")]:
        monkeypatch.delenv(key)
