"""Running a ``bench/`` script as a user would: a subprocess with a clean environment."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_bench(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """``python bench/<script> <args>`` from the repository root; fails the test with its output if it fails.

    Settings come from the script's arguments, never from a developer's shell.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc
