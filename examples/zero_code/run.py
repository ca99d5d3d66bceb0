"""Run app.py under `opentelemetry-instrument`, configured by environment variables only.

    python examples/zero_code/run.py

Starts the embedded local service (unless OTEL_EXPORTER_RUNS_ENDPOINT is set:
then the app sends there), prints the exact command line, runs it, and prints
the tree the service received. app.py is not changed in any way; its docstring
shows the same command to type by hand next to `otel-runs serve`.
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from otel_runs_exporter.testing import local_service_unless_configured, show_runs

APP = Path(__file__).with_name("app.py")


def instrument_command() -> list[str]:
    # The console script pip installed next to this interpreter (the venv's bin), else the one on PATH.
    name = "opentelemetry-instrument"
    exe = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if exe is None:
        sys.exit(f"{name} not found; it comes with `pip install otel-runs-exporter` (opentelemetry-instrumentation)")
    return [exe, sys.executable, str(APP)]


if __name__ == "__main__":
    with local_service_unless_configured() as service:
        settings = {
            "OTEL_TRACES_EXPORTER": "runs",
            "OTEL_EXPORTER_RUNS_ENDPOINT": os.environ["OTEL_EXPORTER_RUNS_ENDPOINT"],
            # The local service does not check the key unless started with --api-key; the hosted one does.
            "OTEL_EXPORTER_RUNS_API_KEY": os.environ.get("OTEL_EXPORTER_RUNS_API_KEY", "local-example-key"),
            "OTEL_EXPORTER_RUNS_PROJECT": os.environ.get("OTEL_EXPORTER_RUNS_PROJECT", "zero-code"),
            "OTEL_SERVICE_NAME": os.environ.get("OTEL_SERVICE_NAME", "checkout"),
        }
        command = instrument_command()
        # A key is a secret even in an example's output: shown masked.
        shown = {k: "***" if k == "OTEL_EXPORTER_RUNS_API_KEY" else shlex.quote(v) for k, v in settings.items()}
        print("$", " ".join(f"{k}={v}" for k, v in shown.items()), shlex.join(command), flush=True)
        result = subprocess.run(command, env={**os.environ, **settings}, timeout=120)
        if result.returncode != 0:
            sys.exit(f"the app exited with {result.returncode}")
        show_runs(service, expected=3)
