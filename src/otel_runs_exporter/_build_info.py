"""Which build of the per-span modules is loaded: compiled by mypyc, or pure Python.

``OTEL_RUNS_EXPORTER_MYPYC=1 pip install .`` compiles the modules the
worker runs for every span; a plain install does not. Both behave the same,
so only this (and ``otel-runs --version``) tells them apart.

    >>> info = build_info()
    >>> sorted(info["modules"])[:4]
    ['_convert', '_encode', '_ids', 'mapping._apply']
    >>> info["compiled"] in (True, False)
    True
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["build_info", "COMPILABLE"]

#: The modules the compiled build compiles: the worker's per-span conversion and encoding (the mapping package's
#: modules, not its ``__init__``, as the package's own ``__init__`` is not compiled either).
#: build_support/otel_runs_build.py reads this tuple from this file.
COMPILABLE = (
    "_ids", "_encode", "_convert",
    "mapping._values",
    "mapping._content",
    "mapping._msg_genai",
    "mapping._msg_anthropic",
    "mapping._msg_langchain",
    "mapping._msg_bedrock",
    "mapping._msg_llamaindex",
    "mapping._messages",
    "mapping._context",
    "mapping._model",
    "mapping._readers",
    "mapping._langsmith",
    "mapping._genai",
    "mapping._genai_events",
    "mapping._openinference",
    "mapping._openllmetry",
    "mapping._logfire",
    "mapping._strands",
    "mapping._tables",
    "mapping._plan",
    "mapping._apply",
    "mapping._events",
    "mapping._dispatch",
)


def build_info() -> dict[str, Any]:
    """``{"compiled": bool, "modules": {name: file}}``: compiled is True only when all are."""
    package = __name__.rpartition(".")[0]
    modules = {name: str(importlib.import_module(f"{package}.{name}").__file__) for name in COMPILABLE}
    return {"compiled": not any(path.endswith(".py") for path in modules.values()), "modules": modules}


def describe() -> str:
    """One line for ``--version``: which build, and for a partial one, which modules are compiled."""
    info = build_info()
    if info["compiled"]:
        return "compiled with mypyc"
    compiled = [name for name, path in info["modules"].items() if not path.endswith(".py")]
    return "pure Python" if not compiled else f"partly compiled ({', '.join(compiled)}; the rest pure Python)"
