"""The client instrumentors wrap a library when the app imports it, not before: startup pays for no client."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.heavy(seconds=7)

CODE = """
    import sys
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from otel_runs_exporter.instrumentation.openai import RunsOpenAIInstrumentor
    from otel_runs_exporter.instrumentation.anthropic import RunsAnthropicInstrumentor
    from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    openai_i, anthropic_i = RunsOpenAIInstrumentor(), RunsAnthropicInstrumentor()
    openai_i.instrument(tracer_provider=provider)
    anthropic_i.instrument(tracer_provider=provider)
    print("imported at instrument():", "openai" in sys.modules, "anthropic" in sys.modules)
    {uninstrument}
    import openai, anthropic  # the app's own imports, later
    with FakeLLMAPI() as api:
        openai.OpenAI(base_url=api.openai_base_url, api_key="x", max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        anthropic.Anthropic(base_url=api.anthropic_base_url, api_key="x", max_retries=0).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    print("spans:", sorted(s.attributes.get("gen_ai.provider.name", "?") for s in exporter.get_finished_spans()))
"""


def _start(uninstrument: str) -> subprocess.Popen[str]:
    code = textwrap.dedent(CODE).replace("{uninstrument}", uninstrument)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    env["ANTHROPIC_OPEN_TELEMETRY"] = "false"
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def outputs() -> dict[str, str]:
    """Both apps' output, run side by side: each spends ~4 s importing the two clients."""
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    procs = {"instrumented": _start(""), "uninstrumented": _start("openai_i.uninstrument(); anthropic_i.uninstrument()")}
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        out[name] = stdout
    return out


def test_instrument_imports_no_client_and_wraps_it_when_the_app_does(outputs):
    out = outputs["instrumented"]
    assert "imported at instrument(): False False" in out
    assert "spans: ['anthropic', 'openai']" in out


def test_uninstrument_before_the_import_leaves_the_clients_alone(outputs):
    out = outputs["uninstrumented"]
    assert "spans: []" in out
