"""``configure()``: one call from nothing to runs at the service; ``get_processor()`` to reach it."""

from __future__ import annotations

import logging
import weakref
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from ._arguments import SettingsArguments, Unpack
from ._fork import ForkSafeLock
from ._genai_events import install_log_processor
from ._processor import RunsSpanProcessor

__all__ = ["configure", "get_processor"]

logger = logging.getLogger(__name__)
_lock = ForkSafeLock()

# Providers configure() already gave a processor, with the arguments it was given
# (weak: a provider that is gone is forgotten).
_installed: "weakref.WeakKeyDictionary[TracerProvider, dict[str, Any]]" = weakref.WeakKeyDictionary()
_current: RunsSpanProcessor | None = None


def configure(**settings: Unpack[SettingsArguments]) -> TracerProvider:
    """Install a :class:`RunsSpanProcessor` on the global tracer provider and return the provider.

    The keyword arguments are the exporter's settings (``SettingsArguments``: each with its
    type, so a type checker refuses a misspelt one; at run time an unknown name is a
    ``ConfigError`` listing the known ones, and each value is validated as from the environment).

    If the global provider is already an SDK ``TracerProvider`` the processor is
    added to it; otherwise a new provider is created and set as the global one.
    Settings not given come from the environment (see the README). Unless
    ``capture_log_events`` is off, it also adds a log record processor to the
    global ``LoggerProvider`` (creating an SDK one when none is set) that brings
    GenAI events written as log records to their span's run (``_genai_events``). As with
    OpenTelemetry's own global setters, only the first call configures: a
    later one returns the same provider, and if its arguments differ, logs one
    warning that they were ignored::

        from otel_runs_exporter import configure, get_processor
        provider = configure(project="my-app")
        ...
        get_processor().force_flush()
    """
    global _current
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
        if provider in _installed:
            if _installed[provider] != settings:
                logger.warning(
                    "configure() was already called; the arguments of this call (%s) were ignored",
                    ", ".join(sorted(settings)) or "none",
                )
            return provider
        processor = RunsSpanProcessor(**settings)
        provider.add_span_processor(processor)
        _installed[provider] = dict(settings)
        _current = processor
        if processor.settings.capture_log_events and not processor.settings.disabled:
            install_log_processor()
        return provider


def get_processor() -> RunsSpanProcessor | None:
    """The processor :func:`configure` (or ``opentelemetry-instrument`` with ``runs``) installed, or None.

    For ``stats()`` and ``force_flush()`` without reaching into the provider::

        >>> from otel_runs_exporter import get_processor
        >>> processor = get_processor()
        >>> processor is None or processor.stats().created >= 0
        True
    """
    return _current


def _installed_by_autoconfig(processor: RunsSpanProcessor) -> None:
    """The auto-configuration's processor is the one :func:`get_processor` returns."""
    global _current
    with _lock:
        _current = processor
