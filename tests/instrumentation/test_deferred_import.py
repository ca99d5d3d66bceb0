"""The client instrumentors wrap a library when the app imports it, not before: startup pays for no client."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.heavy(seconds=12)

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


def _run(uninstrument: str) -> str:
    code = textwrap.dedent(CODE).replace("{uninstrument}", uninstrument)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    env["ANTHROPIC_OPEN_TELEMETRY"] = "false"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_instrument_imports_no_client_and_wraps_it_when_the_app_does():
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    out = _run("")
    assert "imported at instrument(): False False" in out
    assert "spans: ['anthropic', 'openai']" in out


def test_uninstrument_before_the_import_leaves_the_clients_alone():
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    out = _run("openai_i.uninstrument(); anthropic_i.uninstrument()")
    assert "spans: []" in out
