"""The opt-in compiled build (mypyc): it installs as the README says, it is the one imported, core tests pass against it.

The default run tests the pure-Python modules. This module (its own CI step:
``python -m pytest -m compiled``) installs the package into a fresh venv exactly as
the README tells a user: ``OTEL_RUNS_EXPORTER_MYPYC=1 pip install .``, with pip's
build isolation, so the build backend must ask for everything mypyc needs to see
(the documented command once failed there, unable to find orjson or opentelemetry).
It then puts that installed package first on ``PYTHONPATH`` and runs in a
subprocess the tests that exercise the compiled modules: the rules of ids, mapping
and encoding, the processor end to end, values of odd types (``test_odd_values.py``),
and the comparison of both builds on odd inputs (``test_compiled_same_as_pure.py``,
which only runs here). ~20 s for the install on 2 cores, then the subset.

Skipped, saying why, where a C compiler is missing.
"""

from __future__ import annotations

import json
import os
import shutil
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
    pytest.mark.heavy(seconds=60),  # the install in a fresh venv (the compile), then the subset in one process
    pytest.mark.skipif(MISSING is not None, reason=f"the compiled build cannot be made here: {MISSING}"),
]

# The tests that run the compiled modules' code; each file is part of the default (pure) run too.
SUBSET = [
    "tests/core/test_ids.py",
    "tests/core/test_given_ids.py",
    "tests/core/test_encode.py",
    "tests/core/test_mapping.py",
    "tests/core/test_mapping_thirdparty.py",
    "tests/core/test_convert.py",
    "tests/core/test_processor.py",
    "tests/core/test_deep_trees.py",
    "tests/core/test_odd_values.py",
    "tests/core/test_compiled_same_as_pure.py",
]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The package as ``OTEL_RUNS_EXPORTER_MYPYC=1 pip install .`` installs it in a fresh venv, copied to a directory."""
    work = tmp_path_factory.mktemp("compiled")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_REQUIRE_VIRTUALENV"))}
    env[otel_runs_build.SWITCH] = "1"
    install = subprocess.run(
        [python, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", str(ROOT)],
        capture_output=True, text=True, env=env, timeout=900,
    )
    if install.returncode != 0:
        pytest.fail(f"OTEL_RUNS_EXPORTER_MYPYC=1 pip install . failed in a fresh venv:\n{install.stdout[-3000:]}\n"
                    f"{install.stderr[-6000:]}")
    where = subprocess.run(
        [python, "-c", "import os, otel_runs_exporter as o; print(os.path.dirname(o.__file__))"],
        capture_output=True, text=True, env=env, cwd=str(work), timeout=60, check=True,
    ).stdout.strip()
    dest = work / "tree"
    shutil.copytree(where, dest / "otel_runs_exporter", ignore=shutil.ignore_patterns("__pycache__"))
    # mypyc's shared runtime for the group sits beside the package, at the top of site-packages.
    for shared in Path(where).parent.glob(f"{otel_runs_build.GROUP}__mypyc*"):
        shutil.copy(shared, dest / shared.name)
    return str(dest)


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
