"""Where ``traceable``'s spans go: the app's tracer provider, or one set up from the service SDK's variables.

Decided at the first traced call, and again whenever the global provider changes
(an app that calls ``configure()`` after its first traced call):

* The global provider is the OTel SDK's: its tracer. ``configure()`` or
  ``opentelemetry-instrument`` put a processor of ours there; when none of ours
  exists in the process while ``LANGSMITH_TRACING`` is on, one WARNING says to
  call ``configure()``.
* Otherwise, with tracing switched on the way the service's SDK switches it
  (``LANGSMITH_TRACING=true``, read by its rules) and ``OTEL_SDK_DISABLED`` not
  true: a private ``TracerProvider`` carrying a ``RunsSpanProcessor``, set up once
  from the environment with one INFO line. Nothing global is installed: the app's
  HTTP and database spans are not sent because of a variable meant for the SDK.
  With ``OTEL_EXPORTER_RUNS_INSTRUMENT=true`` the model clients are instrumented
  onto it too (:mod:`._clients`).
* Otherwise one WARNING per process says how to switch tracing on, and the API's
  proxy tracer is used: the app is untouched, and a provider installed later is
  followed.

A traced call costs one look at the global provider when nothing changed.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from .. import _configure, _registry
from .._processor import RunsSpanProcessor
from .._settings import resolve_instrumentation, sdk_disabled, where_runs_go
from ._clients import instrument_clients

__all__ = ["tracer", "private_provider"]

logger = logging.getLogger("otel_runs_exporter.instrumentation")

SCOPE = "otel_runs_exporter"

_lock = threading.Lock()
# (the global provider the decision was made for, the tracer decided on)
_decided: tuple[Any, trace.Tracer] | None = None
_private: TracerProvider | None = None
_warned: set[str] = set()


def tracer() -> trace.Tracer:
    """The tracer ``traceable`` starts its spans with (see the module's doc)."""
    current = trace.get_tracer_provider()
    decided = _decided
    if decided is not None and decided[0] is current:
        return decided[1]
    return _decide(current)


def private_provider() -> TracerProvider | None:
    """The provider set up from the service SDK's variables, if one was."""
    return _private


def _decide(current: Any) -> trace.Tracer:
    global _decided
    with _lock:
        if _decided is not None and _decided[0] is current:
            return _decided[1]
        settings = resolve_instrumentation()
        if isinstance(current, TracerProvider):
            chosen = current.get_tracer(SCOPE)
            if settings.langsmith_tracing and not _registry.any_sender():
                _once(
                    "no_processor",
                    "LANGSMITH_TRACING is on and the app has its own OpenTelemetry tracer provider, with no "
                    "processor of otel_runs_exporter on it: traceable's runs go only where that provider sends "
                    "them. Call otel_runs_exporter.configure() at startup to send them as runs",
                )
        elif settings.langsmith_tracing and not sdk_disabled():
            chosen = _set_up_privately(settings.instrument).get_tracer(SCOPE)
        else:
            if not sdk_disabled():
                _once(
                    "not_enabled",
                    "traceable: tracing is not enabled, so no run is recorded. Call "
                    "otel_runs_exporter.configure() at startup, or set LANGSMITH_TRACING=true (with "
                    "LANGSMITH_ENDPOINT and LANGSMITH_API_KEY, or the OTEL_EXPORTER_RUNS_* variables) to trace "
                    "from the environment",
                )
            # The API's proxy tracer forwards to a provider installed later.
            chosen = trace.get_tracer(SCOPE)
        _decided = (current, chosen)
        return chosen


def _set_up_privately(instrument: bool) -> TracerProvider:
    """A provider of our own, from the environment, never installed globally (under the lock, once)."""
    global _private
    if _private is not None:
        return _private
    processor = RunsSpanProcessor()
    provider = TracerProvider()  # shut down at exit by the SDK (its atexit hook), which flushes the processor
    provider.add_span_processor(processor)
    _private = provider
    _configure.installed_elsewhere(processor)
    if processor.settings.disabled:
        return provider  # a variable it cannot use was logged; the app runs untraced
    clients = instrument_clients(provider) if instrument else []
    logger.info(
        "LANGSMITH_TRACING is on and no tracer provider is installed: sending the runs of traceable%s to %s, "
        "through a provider of this package's own (nothing global was installed; configure() sends every span "
        "of the app)",
        f" and the {' and '.join(clients)} client{'s' if len(clients) > 1 else ''}" if clients else "",
        where_runs_go(processor.settings),
    )
    return provider


def _once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message)
