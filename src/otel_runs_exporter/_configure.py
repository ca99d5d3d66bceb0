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
from ._settings import resolve_for_app, resolve_instrumentation, where_runs_go

__all__ = ["configure", "get_processor"]

logger = logging.getLogger(__name__)
_lock = ForkSafeLock()

# Providers configure() already gave a processor, with the arguments it was given
# (weak: a provider that is gone is forgotten).
_installed: "weakref.WeakKeyDictionary[TracerProvider, dict[str, Any]]" = weakref.WeakKeyDictionary()
_current: RunsSpanProcessor | None = None


def configure(*, instrument: bool | None = None, **settings: Unpack[SettingsArguments]) -> TracerProvider:
    """Install a :class:`RunsSpanProcessor` on the global tracer provider and return the provider.

    The keyword arguments are the exporter's settings (``SettingsArguments``: each with its
    type, so a type checker refuses a misspelt one; at run time an unknown name is a
    ``ConfigError`` saying which setting was likely meant, and each value is validated as
    from the environment). A malformed variable of the environment never stops the app:
    it is logged, and an essential one leaves the app running untraced.

    ``instrument=True`` (or ``OTEL_EXPORTER_RUNS_INSTRUMENT=true``; the argument wins)
    also traces the OpenAI and Anthropic clients that are installed, stepping aside where
    another instrumentation already traces a call; message content is then captured
    unless ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=false``. Off by default.

    If the global provider is already an SDK ``TracerProvider`` the processor is
    added to it; otherwise a new provider is created and set as the global one.
    Settings not given come from the environment (docs/settings.md). One INFO line
    says where the runs go: endpoint, project, whether a key is set (never the key).
    Unless ``capture_log_events`` is off, it also adds a log record processor to the
    global ``LoggerProvider`` (creating an SDK one when none is set) that brings
    GenAI events written as log records to their span's run (``_genai_events``). As with
    OpenTelemetry's own global setters, only the first call configures: a
    later one returns the same provider, and if its arguments differ, logs one
    warning that they were ignored::

        from otel_runs_exporter import configure, get_processor
        provider = configure(project="my-app", instrument=True)
        ...
        get_processor().force_flush()
    """
    global _current
    given = dict(settings, **({} if instrument is None else {"instrument": instrument}))
    # Read first: a mistake in the arguments raises here, before anything global is changed.
    resolved = resolve_for_app(settings)
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
            if _installed[provider] != given:
                logger.warning(
                    "configure() was already called; the arguments of this call (%s) were ignored",
                    ", ".join(sorted(given)) or "none",
                )
            return provider
        processor = RunsSpanProcessor(resolved)
        provider.add_span_processor(processor)
        _installed[provider] = given
        _current = processor
        if processor.settings.disabled:
            logger.info("configure(): tracing is off; the app runs untraced")
            return provider
        if processor.settings.capture_log_events:
            install_log_processor()
        _trace_clients(provider, resolve_instrumentation().instrument if instrument is None else instrument)
        logger.info("configure(): sending runs to %s", where_runs_go(processor.settings))
        return provider


def _trace_clients(provider: TracerProvider, instrument: bool) -> None:
    """The model clients: instrumented when asked; otherwise one INFO line names the switch, when it would help."""
    from .instrumentation import _clients  # the instrumentors are read only when a client is in play

    if instrument:
        traced = _clients.instrument_clients(provider)
        if traced:
            logger.info("configure(): tracing the %s client%s", " and ".join(traced), "s" if len(traced) > 1 else "")
        return
    missing = _clients.not_instrumented()
    if missing:
        logger.info(
            "configure(): the %s client%s installed and not instrumented, so model calls are not traced; "
            "configure(instrument=True) or OTEL_EXPORTER_RUNS_INSTRUMENT=true traces %s",
            " and ".join(missing),
            "s are" if len(missing) > 1 else " is",
            "them" if len(missing) > 1 else "it",
        )


def get_processor() -> RunsSpanProcessor | None:
    """The processor :func:`configure` (or ``opentelemetry-instrument`` with ``runs``) installed, or None.

    For ``stats()`` and ``force_flush()`` without reaching into the provider::

        >>> from otel_runs_exporter import get_processor
        >>> processor = get_processor()
        >>> processor is None or processor.stats().created >= 0
        True
    """
    return _current


def installed_elsewhere(processor: RunsSpanProcessor) -> None:
    """A processor installed without :func:`configure` (by ``opentelemetry-instrument``, or set up from the
    service SDK's variables at the first ``traceable`` call) is the one :func:`get_processor` returns."""
    global _current
    with _lock:
        _current = processor
