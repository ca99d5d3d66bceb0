"""The service's own SDK in its OTel mode, through our processor: the same runs as the SDK sends itself.

With ``LANGSMITH_OTEL_ENABLED=true`` and ``LANGSMITH_OTEL_ONLY=true`` the real
``langsmith`` client turns each run into an OTel span on the tracer provider it
is given (its ``OTELExporter``), and sends nothing over HTTP. Given a real SDK
``TracerProvider`` with our ``RunsSpanProcessor``, those spans reach the local
service through us. The same ``@traceable`` workload, sent by the SDK itself
(its default mode) to the same local service, is the reference: every run
field the SDK's span carries must come out the same.
"""

from __future__ import annotations

from typing import Any

import pytest
from langsmith import Client, traceable, tracing_context
from langsmith import utils as ls_utils

from core.helpers import processor_provider

USER_METADATA = {"user": "u1", "cfg": {"a": [1, 2]}, "ids": ["x"]}
# With token details, which the SDK's OTel exporter writes apart from the counts.
USAGE = {
    "input_tokens": 3,
    "output_tokens": 2,
    "total_tokens": 5,
    "input_token_details": {"cache_read": 1, "audio": 0},
    "output_token_details": {"reasoning": 1},
}


@traceable(run_type="tool", name="lookup")
def lookup(q: str) -> dict[str, Any]:
    return {"hits": [q]}


@traceable(run_type="llm", name="chat-model", metadata={"ls_provider": "openai", "ls_model_name": "gpt-x"})
def chat(messages: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "choices": [{"message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
        "usage_metadata": USAGE,
    }


@traceable(name="failing")
def failing() -> None:
    raise ValueError("boom")


@traceable(name="agent", tags=["t1", "t2"], metadata=USER_METADATA)
def agent(question: str) -> dict[str, Any]:
    lookup(question)
    chat([{"role": "user", "content": question}])
    try:
        failing()
    except ValueError:
        pass
    return {"answer": 42}


def _run_workload(client: Client, project: str) -> None:
    with tracing_context(enabled=True, client=client, project_name=project):
        agent("why")
    client.flush()


def _fields(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """By run name: the fields both senders must agree on."""
    by_id = {r["id"]: r for r in runs}
    out = {}
    for run in runs:
        metadata = run.get("extra", {}).get("metadata", {})
        out[run["name"]] = {
            "run_type": run["run_type"],
            "parent": by_id[run["parent_run_id"]]["name"] if run.get("parent_run_id") else None,
            "inputs": run["inputs"],
            "outputs": run["outputs"],
            "error": run.get("error"),
            "tags": sorted(run.get("tags") or []),
            "metadata": {k: metadata.get(k) for k in (*USER_METADATA, "ls_provider", "ls_model_name")},
            "session_name": run["session_name"],
        }
    return out


@pytest.fixture
def sdk_otel_only(monkeypatch):
    """``LANGSMITH_OTEL_ENABLED`` and ``LANGSMITH_OTEL_ONLY`` set, as a user sets them.

    The SDK caches what it read from the environment for the whole process, so
    the cache is cleared before (an earlier Client read these unset) and after
    (no later test may inherit OTel mode).
    """
    monkeypatch.setenv("LANGSMITH_OTEL_ENABLED", "true")
    monkeypatch.setenv("LANGSMITH_OTEL_ONLY", "true")
    ls_utils.get_env_var.cache_clear()
    yield
    monkeypatch.undo()
    ls_utils.get_env_var.cache_clear()


@pytest.fixture
def native_runs(service) -> dict[str, dict[str, Any]]:
    """The workload as the SDK sends it itself, to the local service."""
    client = Client(api_url=service.url, api_key="test-key", tracing_mode="langsmith")
    try:
        _run_workload(client, "sdk-mode")
        runs = service.wait_for_runs(4)
    finally:
        client.cleanup(timeout=5)  # its background threads must not outlive the test
    assert service.violations() == []
    service.reset()
    return _fields(runs)


@pytest.mark.usefixtures("sdk_otel_only")
def test_sdk_otel_mode_through_our_processor_gives_the_sdks_own_runs(service, native_runs):
    provider, processor = processor_provider(service.url, project="not-this-one")
    # The discard port: were the SDK to send anything itself, it could not reach the local service.
    client = Client(api_url="http://127.0.0.1:9", api_key="unused", otel_tracer_provider=provider)
    try:
        assert client.otel_exporter is not None and client._tracing_mode == "otel"
        _run_workload(client, "sdk-mode")
    finally:
        client.cleanup(timeout=5)
    assert processor.force_flush(5000)
    ours = _fields(service.wait_for_runs(4))
    assert service.violations() == [] and service.check()["missing_parents"] == []

    assert set(ours) == set(native_runs) == {"agent", "lookup", "chat-model", "failing"}
    for name, native in native_runs.items():
        if native["run_type"] != "llm":
            # The one difference, made by the SDK itself: in OTel mode it writes gen_ai.system
            # "langchain" on every run that names no provider, and the documented mapping makes
            # gen_ai.system the run's ls_provider (as the service does for the same span).
            assert (native["metadata"]["ls_provider"], ours[name]["metadata"]["ls_provider"]) == (None, "langchain")
            ours[name]["metadata"]["ls_provider"] = None
        assert ours[name] == native, name
    # Spelled out, so a change on both sides at once still shows here.
    assert ours["agent"]["metadata"]["cfg"] == {"a": [1, 2]} and ours["agent"]["tags"] == ["t1", "t2"]
    assert ours["failing"]["error"].startswith("ValueError('boom')\n\nTraceback (most recent call last):")
    assert ours["chat-model"]["outputs"]["usage_metadata"] == USAGE
    assert ours["lookup"]["run_type"] == "tool" and ours["lookup"]["parent"] == "agent"
