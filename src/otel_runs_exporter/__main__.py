"""``python -m otel_runs_exporter``: the ``otel-runs`` command, where its console script is not on PATH
(a venv that is not activated, ``pipx run``, an IDE's run configuration)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
