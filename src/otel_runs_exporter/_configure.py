"""``configure()``: one call from nothing to runs at the service."""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from ._processor import RunsSpanProcessor

__all__ = ["configure"]

logger = logging.getLogger(__name__)
_lock = threading.Lock()
# Providers configure() already gave a processor (weak: a provider that is gone is forgotten).
_installed: "weakref.WeakSet[TracerProvider]" = weakref.WeakSet()


def configure(**settings: Any) -> TracerProvider:
    """Install a :class:`RunsSpanProcessor` on the global tracer provider and return it.

    If the global provider is already an SDK ``TracerProvider`` the processor is
    added to it; otherwise a new provider is created and set as the global one.
    Calling it again returns the same provider without adding a second processor.
    Settings not given come from the environment (see the README)::

        from otel_runs_exporter import configure
        provider = configure(project="my-app")
    """
    with _lock:
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            provider = current
        else:
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
            if trace.get_tracer_provider() is not provider:  # someone set another one first
                found = trace.get_tracer_provider()
                if not isinstance(found, TracerProvider):
                    logger.warning("the global tracer provider is %r, not the SDK's; runs will not be exported", found)
                    return provider
                provider = found
        if provider not in _installed:
            provider.add_span_processor(RunsSpanProcessor(**settings))
            _installed.add(provider)
        return provider

