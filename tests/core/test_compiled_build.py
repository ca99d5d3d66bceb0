"""The opt-in compiled build (mypyc): it builds, it is the one imported, and core tests pass against it.

The default run tests the pure-Python modules. This module compiles the four
hot modules (``build_support/otel_runs_build.py``; cached by a hash of their
sources under the temp dir, so only a change to them compiles again: ~11 s on
2 cores, then nothing; at the C compiler's -O0, since these tests check what the
code does, not its speed, and mypyc writes the same C at every level), puts a copy of the package with them first on
``PYTHONPATH``, and runs in a subprocess the tests that exercise them: the rules
of ids, mapping and encoding, the processor end to end, values of odd types
(``test_odd_values.py``), and the comparison of both builds on odd inputs
(``test_compiled_same_as_pure.py``, which only runs here).

Skipped, saying why, where mypyc (the test extra installs it) or a C compiler is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "build_support"))
import otel_runs_build  # noqa: E402

sys.path.remove(str(ROOT / "build_support"))

MISSING = otel_runs_build.missing_toolchain()
pytestmark = [
    # Its own CI step (`python -m pytest -m compiled`), not the default run: see pyproject's addopts.
    pytest.mark.compiled,
    pytest.mark.heavy(seconds=35),  # cold: the compile, then the subset in one process
    pytest.mark.skipif(MISSING is not None, reason=f"the compiled build cannot be made here: {MISSING}"),
]

# The tests that run the compiled modules' code; each file is part of the default (pure) run too.
SUBSET = [
    "tests/core/test_ids.py",
    "tests/core/test_given_ids.py",
    "tests/core/test_encode.py",
    "tests/core/test_semconv.py",
    "tests/core/test_convert.py",
    "tests/core/test_processor.py",
    "tests/core/test_deep_trees.py",
    "tests/core/test_odd_values.py",
    "tests/core/test_compiled_same_as_pure.py",
]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> str:
    dest = tmp_path_factory.mktemp("compiled")
    try:
        return otel_runs_build.compiled_tree(str(ROOT / "src"), str(dest), opt_level=otel_runs_build.CHECK_OPT_LEVEL)
    except RuntimeError as exc:
        pytest.fail(str(exc)[-6000:])


def _env(compiled: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "LANGCHAIN_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [compiled, env.get("PYTHONPATH")]))
    return env


def test_the_compiled_build_is_imported_and_says_so(compiled):
    probe = "import json, otel_runs_exporter as o; print(json.dumps(o.build_info()))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(compiled), timeout=60)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["compiled"] is True, info
    assert all(path.startswith(compiled) and not path.endswith(".py") for path in info["modules"].values()), info

    proc = subprocess.run([sys.executable, "-m", "otel_runs_exporter.cli", "--version"], capture_output=True, text=True,
                          env=_env(compiled), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("(compiled with mypyc)\n"), proc.stdout


def test_core_tests_pass_against_the_compiled_build(compiled):
    # One process (-n0): the suite around this test already keeps every core busy.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n0", "-p", "no:cacheprovider", "-rs", *SUBSET],
        capture_output=True, text=True, env=_env(compiled), cwd=ROOT, timeout=600,
    )
    tail = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    # The comparison with the pure build skips unless the compiled build is the one imported.
    assert "SKIPPED" not in proc.stdout or "test_compiled_same_as_pure" not in proc.stdout, tail
    assert " passed" in proc.stdout, tail
