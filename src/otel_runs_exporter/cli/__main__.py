"""``python -m otel_runs_exporter.cli``: the ``otel-runs`` command without the console script."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
