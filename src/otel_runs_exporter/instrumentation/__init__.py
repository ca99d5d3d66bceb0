"""Instrumentation that produces spans the exporter turns into runs.

* :func:`traceable` — decorator and context manager for your own functions and blocks; a decorated
  function keeps its type under a type checker (``mypy --strict``), async and generators included.
* :func:`get_current_run_tree` — a handle on the current run (metadata, tags, outputs), as the service's SDK has.
* :func:`copy_context_wrapper` / :class:`ContextThreadPoolExecutor` — carry the current run into threads.
* ``otel_runs_exporter.instrumentation.openai.RunsOpenAIInstrumentor`` and
  ``otel_runs_exporter.instrumentation.anthropic.RunsAnthropicInstrumentor`` — OTel instrumentors for
  the model clients, registered as ``runs_openai`` / ``runs_anthropic`` for ``opentelemetry-instrument``.
  They are not imported here, so importing this package never imports ``openai`` or ``anthropic``.

>>> from otel_runs_exporter.instrumentation import traceable
>>> @traceable(run_type="tool")
... def lookup(key: str) -> str:
...     return key.upper()
"""

from ._run_tree import RunHandle, get_current_run_tree
from ._traceable import ContextThreadPoolExecutor, RunType, Traceable, copy_context_wrapper, traceable

__all__ = [
    "traceable", "Traceable", "RunType", "RunHandle", "get_current_run_tree", "copy_context_wrapper",
    "ContextThreadPoolExecutor",
]
