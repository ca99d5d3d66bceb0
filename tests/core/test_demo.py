"""The README's first command, as a user runs it."""

from __future__ import annotations

import subprocess
import sys


def test_otel_runs_demo_delivers_the_tree():
    proc = subprocess.run(
        [sys.executable, "-m", "otel_runs_exporter.cli", "demo"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "chain  answer_question" in out and "  llm  chat demo-model" in out
    assert "error: TimeoutError" in out and "tokens in=42 out=17" in out
    assert "dropped 0; violations 0" in out
