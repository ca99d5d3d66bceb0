"""The model clients one switch traces: ``configure(instrument=True)`` (or ``OTEL_EXPORTER_RUNS_INSTRUMENT=true``).

Phoenix's ``register(auto_instrument=True)`` habit, kept to the two clients this
package has instrumentors for (``runs_openai``, ``runs_anthropic``). A client is
instrumented when it is installed; its module is not imported for that (our
instrumentors wrap it when the app imports it). Where another instrumentation
already traces a call (OpenInference, OpenLLMetry, openai-v2, Logfire, or a
framework's llm span current around it: ``_genai.traced_elsewhere``), ours steps
aside, so no call is traced twice and no token counted twice.

Off by default, so an upgrade never starts sending prompts; :func:`not_instrumented`
names the clients a hint may mention when the switch was left off.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any, Iterator

__all__ = ["instrument_clients", "not_instrumented", "CLIENTS"]

logger = logging.getLogger("otel_runs_exporter.instrumentation")

CLIENTS = ("openai", "anthropic")
"""The client packages, each with its instrumentor in this package's module of the same name."""


def _instrumentor(client: str) -> Any:
    if client == "openai":
        from .openai import RunsOpenAIInstrumentor

        return RunsOpenAIInstrumentor()
    from .anthropic import RunsAnthropicInstrumentor

    return RunsAnthropicInstrumentor()  # BaseInstrumentor is a singleton: the one already instrumented, if any


def _installed(client: str) -> bool:
    try:
        return importlib.util.find_spec(client) is not None
    except (ImportError, ValueError):  # a broken or half-removed install
        return False


def _each_installed() -> Iterator[tuple[str, Any]]:
    """(client, our instrumentor of it) for each installed client; one that cannot be loaded is logged and left out."""
    for client in CLIENTS:
        if not _installed(client):
            continue
        try:
            instrumentor = _instrumentor(client)
        except Exception:  # noqa: BLE001 - configure() must not fail over an optional client
            logger.warning("could not load the instrumentor of the %s client; its calls are not traced", client,
                           exc_info=True)
            continue
        yield client, instrumentor


def instrument_clients(tracer_provider: Any = None) -> list[str]:
    """Instrument each installed client not instrumented by us yet; the clients now traced, by name.

    Never raises: a client that cannot be instrumented is logged and left out.
    """
    done = []
    for client, instrumentor in _each_installed():
        try:
            if not instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.instrument(tracer_provider=tracer_provider)
        except Exception:  # noqa: BLE001 - configure() must not fail over an optional client
            logger.warning("could not instrument the %s client; its calls are not traced", client, exc_info=True)
        if instrumentor.is_instrumented_by_opentelemetry:
            done.append(client)
    return done


def not_instrumented() -> list[str]:
    """Installed clients that neither our instrumentors nor a known tracing package's wrap."""
    return [
        client
        for client, instrumentor in _each_installed()
        if not instrumentor.is_instrumented_by_opentelemetry and not instrumentor.traced_by_another_package()
    ]
