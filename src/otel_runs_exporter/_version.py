"""The package's version: the one place it is written.

``pyproject.toml`` reads it for the distribution's metadata
(``[tool.setuptools.dynamic]``, which reads the literal below without importing
the package, so keep it a plain string); ``otel_runs_exporter.__version__``,
the exporter's ``User-Agent`` and the local service's ``Server`` header import
it, and ``otel-runs --version`` shows the installed metadata. A release changes
this line only; ``tests/core/test_version.py`` checks that every place agrees.
"""

__version__ = "0.1.0"

USER_AGENT = "otel-runs-exporter/" + __version__
"""What the exporter and the API clients send as ``User-Agent``."""
