"""Send OpenTelemetry traces to an LLM-observability service as runs.

::

    from opentelemetry import trace
    from otel_runs_exporter import configure

    configure(project="my-app")   # API key and endpoint from the environment
    tracer = trace.get_tracer(__name__)
    with tracer.start_as_current_span("answer"):
        ...

Data flow, one module per step: settings -> ids -> convert/semconv -> encode ->
transport -> delivery -> worker -> processor/exporter.
"""

# First, so the modules below (the local service's among them) can import it from here.
from ._version import __version__
from ._arguments import SettingsArguments
from ._build_info import build_info
from ._configure import configure, get_processor
from . import _errors
from ._errors import *  # noqa: F403 - the names _errors lists, added to __all__ below
from ._exporter import RunsSpanExporter
from ._genai_events import GenAIEventProcessor
from ._processor import RunsSpanProcessor
from ._select import is_genai_span
from ._settings import Settings, resolve as resolve_settings
from ._stats import ExporterStats
from .instrumentation import get_current_run_tree, traceable

__all__ = [
    "configure",
    "get_processor",
    "traceable",
    "get_current_run_tree",
    "RunsSpanProcessor",
    "RunsSpanExporter",
    "GenAIEventProcessor",
    "is_genai_span",
    "ExporterStats",
    "build_info",
    "Settings",
    "SettingsArguments",
    "resolve_settings",
    "__version__",
]
# The error hierarchy (drawn in _errors' docstring), as the module that owns it lists it.
__all__ += _errors.__all__
