"""setuptools' build script, for the opt-in compiled build only (the metadata is in pyproject.toml).

``OTEL_RUNS_EXPORTER_MYPYC=1 pip install .`` compiles four modules with mypyc;
without the variable nothing is compiled. See build_support/otel_runs_build.py.
"""

import os
import sys

from setuptools import setup

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "build_support"))

import otel_runs_build  # noqa: E402

setup(ext_modules=otel_runs_build.ext_modules(), cmdclass={"build_ext": otel_runs_build.build_ext_class()})
