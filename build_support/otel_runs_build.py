"""The opt-in compiled build: setuptools with the hot modules compiled by mypyc.

    pip install .                                   # pure Python: no compiler, no mypy
    OTEL_RUNS_EXPORTER_MYPYC=1 pip install .        # _ids, _encode, _convert, mapping/ compiled

This module is the project's PEP 517 build backend (``pyproject.toml`` names it,
with ``backend-path``): setuptools' own backend, except that with the switch on
it asks the build front end for mypy too, so mypy is a build requirement only
then. ``setup.py`` asks :func:`ext_modules` what to compile.

With the switch on, a build that cannot compile **fails**, naming the cause and
the way out (unset the switch): the switch asks for the compiled modules, and
pip shows a successful build's output to nobody, so a warning on a fallback to
pure Python would go unseen. An editable install with the switch on is refused:
it would put ``.so`` files beside the sources, and they, not later edits to the
``.py`` files, would be imported.

The tests and the benchmark need the compiled modules without installing them:

    python build_support/otel_runs_build.py --src src --out DIR

writes a copy of the package with the compiled modules to ``DIR`` (put it on
``PYTHONPATH``). The compiled files are cached by a hash of the compiled sources,
this file, Python and mypy versions, so only a change to those compiles again.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from typing import Any, Iterator

try:
    from setuptools import build_meta as _setuptools
    from setuptools.build_meta import *  # noqa: F401,F403 - the rest of the backend is setuptools' own
except ImportError:  # imported by the tests or the benchmark where setuptools is absent (Python 3.12+ venvs)
    _setuptools = None  # type: ignore[assignment]

SWITCH = "OTEL_RUNS_EXPORTER_MYPYC"
#: The mypy the compiled build was written and tested against; a major release may change mypyc.
MYPY_REQUIREMENT = "mypy>=2.4,<3"
PACKAGE = "otel_runs_exporter"
#: Where the package names the modules the compiled build compiles (``COMPILABLE``), read from the
#: source (the backend runs before the package is importable): one list, which ``otel-runs --version``
#: reads too.
BUILD_INFO = os.path.join(PACKAGE, "_build_info.py")


def compiled_modules(src_root: str = "src") -> tuple[str, ...]:
    """The worker's per-span conversion and encoding modules, as ``_build_info.COMPILABLE`` names them."""
    import ast

    with open(os.path.join(src_root, BUILD_INFO), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "COMPILABLE" for t in node.targets):
            names = ast.literal_eval(node.value)
            if isinstance(names, tuple) and all(isinstance(n, str) for n in names):
                return names
    raise CompiledBuildError(f"{BUILD_INFO} names no COMPILABLE tuple of module names")
#: Other modules of the package are read as untyped: mypyc needs types only of
#: what it compiles, and following every import (the OTel SDK, requests) took
#: ~70 s of the build instead of ~2 s.
MYPY_OPTIONS = ("--follow-imports=skip",)
#: The one shared library that holds the compiled modules' code.
GROUP = PACKAGE


def switch_on(env: Any = None) -> bool:
    """True when the environment asks for the compiled build."""
    value = (os.environ if env is None else env).get(SWITCH, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


class CompiledBuildError(SystemExit):
    """The compiled build was asked for and cannot be made; the message says why and what to do."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"\nerror: {SWITCH}=1 asks for the compiled build, and it cannot be made: {reason}\n"
            f"Unset {SWITCH} for the pure-Python build, which needs no compiler and no mypy.\n"
        )


# --- PEP 517 hooks: setuptools', plus mypy when the switch is on ---------------------------


def runtime_requirements(pyproject: str = "pyproject.toml") -> list[str]:
    """The project's own ``dependencies``, read from its pyproject.toml.

    mypyc must find every module the compiled ones import (``orjson``,
    ``opentelemetry``), even those it reads as untyped; under pip's build
    isolation only what the backend asks for is there, so with the switch on it
    asks for these too. Read from the file rather than listed again here, so the
    two cannot disagree (a plain ``[project]`` table: no TOML parser needed,
    which Python 3.10 lacks).
    """
    with open(pyproject, encoding="utf-8") as f:
        text = f.read()
    project = text.split("\n[project]", 1)[1].split("\n[", 1)[0]
    block = project.split("\ndependencies = [", 1)[1].split("\n]", 1)[0]
    return [line.strip().strip(",").strip('"') for line in block.splitlines() if line.strip().startswith('"')]


def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    extra = [MYPY_REQUIREMENT, *runtime_requirements()] if switch_on() else []
    return list(_setuptools.get_requires_for_build_wheel(config_settings)) + extra


def _refuse_editable() -> None:
    if switch_on():
        raise CompiledBuildError(
            "an editable install would put compiled modules beside the sources, where they would shadow "
            "later edits; build a wheel instead (pip install .), or use "
            "'python build_support/otel_runs_build.py --out DIR' and put DIR on PYTHONPATH"
        )


def get_requires_for_build_editable(config_settings: Any = None) -> list[str]:
    _refuse_editable()
    return list(_setuptools.get_requires_for_build_editable(config_settings))


def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: Any = None) -> str:
    _refuse_editable()
    return _setuptools.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_editable(wheel_directory: str, config_settings: Any = None, metadata_directory: str | None = None) -> str:
    _refuse_editable()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)


# --- what setup.py compiles ------------------------------------------------------------------


def module_paths(src_root: str) -> list[str]:
    return [os.path.join(src_root, PACKAGE, *name.split(".")) + ".py" for name in compiled_modules(src_root)]


_METADATA_COMMANDS = frozenset({"egg_info", "dist_info", "sdist"})


def _metadata_only(argv: list[str]) -> bool:
    # The backend runs setup.py for metadata (and to ask for requirements, before
    # mypy is there): nothing is compiled for those, nor put in an sdist.
    commands = [a for a in argv[1:] if not a.startswith("-")]
    return bool(commands) and commands[0] in _METADATA_COMMANDS


def ext_modules(src_root: str = "src", opt_level: str = "3") -> list[Any]:
    """The extensions for ``setup(ext_modules=...)``: none unless the switch is on.

    ``opt_level`` is the C compiler's ``-O``; mypyc generates the same C at every level.
    """
    if not switch_on() or _metadata_only(sys.argv):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        raise CompiledBuildError(
            f"mypyc is not importable. pip installs it ({MYPY_REQUIREMENT}) for the build by itself; "
            "with --no-build-isolation, install it first"
        ) from None
    try:
        return mypycify([*MYPY_OPTIONS, *module_paths(src_root)], opt_level=opt_level, group_name=GROUP)
    except SystemExit as exc:  # mypyc exits after printing type errors
        raise CompiledBuildError(f"mypyc refused the sources (its errors are above; exit status {exc.code})") from None


def build_ext_class() -> Any:
    """setuptools' ``build_ext``, failing with the switch's message when the C compiler fails."""
    from setuptools.command.build_ext import build_ext

    class BuildExt(build_ext):  # type: ignore[misc,valid-type]
        def run(self) -> None:
            try:
                super().run()
            except Exception as exc:  # noqa: BLE001 - CompileError, a missing compiler, a missing Python.h
                raise CompiledBuildError(f"compiling the C that mypyc generated failed ({exc})") from exc

    return BuildExt


# --- a compiled copy of the package for tests and benchmarks, cached ----------------------


def missing_toolchain() -> str | None:
    """Why the compiled modules cannot be built here, or None when they can."""
    if _setuptools is None:
        return "setuptools is not installed (pip install setuptools)"
    try:
        import mypyc  # noqa: F401
    except ImportError:
        return f"mypyc is not installed ({MYPY_REQUIREMENT}, in the test and bench extras)"
    include = sysconfig.get_paths().get("include", "")
    if not os.path.exists(os.path.join(include, "Python.h")):
        return f"Python.h is not in {include} (the Python development headers)"
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc}) on PATH"
    return None


def source_key(src_root: str, opt_level: str = "3") -> str:
    """What the compiled files depend on: the compiled sources, this file, the interpreter, mypy, ``-O``."""
    from importlib.metadata import version

    digest = hashlib.sha256()
    for path in [*module_paths(src_root), os.path.abspath(__file__)]:
        with open(path, "rb") as f:
            digest.update(f.read())
    digest.update(sys.version.encode())
    digest.update(str(sysconfig.get_config_var("EXT_SUFFIX")).encode())
    digest.update(version("mypy").encode())
    digest.update(opt_level.encode())
    return digest.hexdigest()[:20]


def default_cache() -> str:
    return os.path.join(tempfile.gettempdir(), "otel-runs-exporter-mypyc")


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """One builder at a time per key (test workers and a benchmark may ask at once)."""
    import fcntl

    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# What the tests and the benchmark's smoke run build: they check what the compiled modules do,
# never how fast, and the C compiler takes ~1 s at -O0 against ~12 s at -O3 (measured, 2 cores).
CHECK_OPT_LEVEL = "0"


def compiled_files(src_root: str, cache: str | None = None, log: Any = None, opt_level: str = "3") -> str:
    """A directory holding the compiled modules of ``src_root``'s sources, built if not cached.

    Raises RuntimeError with the compiler's output when the build fails.
    """
    cache = cache or default_cache()
    os.makedirs(cache, exist_ok=True)
    key = source_key(src_root, opt_level)
    done = os.path.join(cache, key)
    with _locked(done + ".lock"):
        if os.path.isdir(done):
            return done
        work = tempfile.mkdtemp(prefix=key + ".", dir=cache)
        try:
            shutil.copytree(os.path.join(src_root, PACKAGE), os.path.join(work, "src", PACKAGE),
                            ignore=shutil.ignore_patterns("__pycache__", "*.so"))
            out = os.path.join(work, "out")
            script = (
                "import sys\n"
                f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
                f"import os; os.environ[{SWITCH!r}] = '1'\n"
                "from setuptools import setup\n"
                "import otel_runs_build as b\n"
                f"setup(name='compiled', ext_modules=b.ext_modules('src', {opt_level!r}),"
                " cmdclass={'build_ext': b.build_ext_class()},"
                f" script_args=['build_ext', '--build-lib', {out!r}])\n"
            )
            proc = subprocess.run([sys.executable, "-c", script], cwd=work, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"the compiled build failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
            os.rename(out, done)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if log is not None:
            log(f"compiled {', '.join(compiled_modules(src_root))} into {done}")
        return done


def compiled_tree(src_root: str, dest: str, cache: str | None = None, log: Any = None, opt_level: str = "3") -> str:
    """``dest`` made a copy of the package from ``src_root`` with its compiled modules; returns ``dest``.

    The ``.py`` files are copied afresh each time (only the compiled files are
    cached), so the rest of the package is always the tree's current code.
    """
    files = compiled_files(src_root, cache, log, opt_level)
    if os.path.exists(os.path.join(dest, PACKAGE)):
        shutil.rmtree(os.path.join(dest, PACKAGE))
    shutil.copytree(os.path.join(src_root, PACKAGE), os.path.join(dest, PACKAGE),
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copytree(files, dest, dirs_exist_ok=True)
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Write a copy of the package with its compiled modules (cached).")
    p.add_argument("--src", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
    p.add_argument("--out", required=True, help="directory to put on PYTHONPATH")
    p.add_argument("--cache", default=None, help=f"where compiled files are kept (default: {default_cache()})")
    p.add_argument("--opt-level", default="3", choices="0123", help="the C compiler's -O (default: 3, as installed)")
    a = p.parse_args(argv)
    why = missing_toolchain()
    if why:
        print(f"cannot build the compiled modules: {why}", file=sys.stderr)
        return 2
    print(compiled_tree(os.path.abspath(a.src), os.path.abspath(a.out), a.cache, log=lambda m: print(m, file=sys.stderr),
                        opt_level=a.opt_level))
    return 0


if __name__ == "__main__":
    sys.exit(main())
