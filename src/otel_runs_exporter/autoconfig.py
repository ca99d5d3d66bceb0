"""Auto-configuration for ``opentelemetry-instrument``.

``opentelemetry-instrument python app.py`` loads a *distro*, then one
*configurator*, then every instrumentor (entry-point groups
``opentelemetry_distro``, ``opentelemetry_configurator``,
``opentelemetry_instrumentor``). This package registers:

* ``opentelemetry_traces_exporter: runs`` → :class:`RunsSpanExporter`, so the
  SDK's own configurator (``opentelemetry-distro``) can use it under a
  ``BatchSpanProcessor``;
* ``opentelemetry_configurator: runs`` → :class:`RunsConfigurator`, which does
  what the SDK's configurator does, except that ``runs`` in
  ``OTEL_TRACES_EXPORTER`` installs a :class:`RunsSpanProcessor` (the preferred
  path, one queue) instead of an exporter under a second queue;
* ``opentelemetry_distro: runs`` → :class:`RunsDistro`, which defaults
  ``OTEL_TRACES_EXPORTER`` to ``runs`` and, when ``runs`` is selected, picks
  our configurator.

Next to ``opentelemetry-distro``: Python lists the two packages' entry points in
no promised order, and ``opentelemetry-instrument`` takes the first distro and
the first configurator it finds. Set ``OTEL_PYTHON_CONFIGURATOR=runs`` (or
``OTEL_PYTHON_DISTRO=runs``) to be sure of the processor path. If the SDK's
configurator is the one chosen, ``runs`` still works, as the exporter path.

This module sets OTel's own ``OTEL_TRACES_EXPORTER`` and ``OTEL_PYTHON_CONFIGURATOR``:
that is its job, since OTel's configurator and ``opentelemetry-instrument`` read
them from the environment themselves. It reads them, as every variable is read,
through the settings module (``_settings.resolve_instrumentation``).
"""

from __future__ import annotations

import logging
import os

from opentelemetry import trace
from opentelemetry.instrumentation.distro import BaseDistro
from opentelemetry.sdk._configuration import _OTelSDKConfigurator
from opentelemetry.sdk.trace import TracerProvider

from . import environment_variables as ev
from ._configure import installed_elsewhere
from ._errors import ConfigError
from ._genai_events import install_log_processor
from ._processor import RunsSpanProcessor
from ._settings import resolve_instrumentation

__all__ = ["RunsConfigurator", "RunsDistro"]

logger = logging.getLogger(__name__)

_TRACES_EXPORTER = ev.OTEL_TRACES_EXPORTER
_CONFIGURATOR = ev.OTEL_PYTHON_CONFIGURATOR
_NAME = "runs"


class RunsConfigurator(_OTelSDKConfigurator):
    """The SDK's configurator, with ``runs`` installed as a span processor.

    The SDK builds the provider (resource, sampler, id generator, other
    exporters, metrics and logs) from the environment as usual; ``runs`` is
    taken out of ``OTEL_TRACES_EXPORTER`` for that step and added afterwards as
    a :class:`RunsSpanProcessor` on the provider the SDK set, with (unless
    ``capture_log_events`` is off) the log record processor that brings GenAI
    log events to their runs on the ``LoggerProvider`` the SDK set.
    """

    def _configure(self, **kwargs: object) -> None:
        exporters = resolve_instrumentation().traces_exporter
        if _NAME not in exporters:
            super()._configure(**kwargs)
            return
        others = [name for name in exporters if name != _NAME]
        # Set for the SDK's configurator, which reads the variable itself: without ``runs``, which we
        # install below as a processor; then put back exactly as it was.
        original = os.environ.pop(_TRACES_EXPORTER)
        os.environ[_TRACES_EXPORTER] = ",".join(others) or "none"
        try:
            super()._configure(**kwargs)
        finally:
            os.environ[_TRACES_EXPORTER] = original
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            logger.error("no SDK tracer provider after configuration (%r); runs will not be exported", provider)
            return
        try:
            processor = RunsSpanProcessor()
            provider.add_span_processor(processor)
            installed_elsewhere(processor)
            if processor.settings.capture_log_events and not processor.settings.disabled:
                install_log_processor()
        except ConfigError as exc:
            # A bad variable must not take the application down: say what is wrong and run untraced.
            logger.error("runs exporter not installed: %s", exc)


class RunsDistro(BaseDistro):
    """Defaults for ``opentelemetry-instrument`` when this package is the distro."""

    def _configure(self, **kwargs: object) -> None:
        # OTel's own variables, set where the user left them unset, for opentelemetry-instrument and the
        # configurator it picks, which read them from the environment: setting them is a distro's job.
        os.environ.setdefault(_TRACES_EXPORTER, _NAME)
        if _NAME in resolve_instrumentation().traces_exporter:
            os.environ.setdefault(_CONFIGURATOR, _NAME)
