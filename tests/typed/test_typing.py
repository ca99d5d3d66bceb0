"""The public API keeps its types: ``mypy --strict`` accepts the examples and a typed app, and refuses its mistakes.

``usage_ok.py`` uses every public entry point as a strictly typed app would (``@traceable``
in all its forms, ``configure``, the processor and the exporter, ``get_processor().stats()``)
and says with ``assert_type`` that decorated functions kept their types; ``usage_rejected.py``
holds mistakes, each marked ``# E: <mypy error code>``. One mypy run (the configuration in
pyproject.toml, ``[tool.mypy]``) checks both files and ``examples/``: no error anywhere but
on the marked lines, and there exactly the marked ones.

The settings' keyword arguments are typed by ``SettingsArguments``; the table of settings
(``_settings._DECLS``) stays the one declaration, and the tests below keep the two naming
the same settings and the same choices.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from otel_runs_exporter import ConfigError, RunsSpanExporter, RunsSpanProcessor, SettingsArguments, configure
from otel_runs_exporter import _settings
from otel_runs_exporter._arguments import Unpack
from otel_runs_exporter.mapping import RUN_TYPES
from otel_runs_exporter.instrumentation import RunType

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
OK = HERE / "usage_ok.py"
REJECTED = HERE / "usage_rejected.py"

_LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*?)  \[(?P<code>[a-z-]+)\]$")


def _expected_errors() -> set[tuple[int, str]]:
    marked = set()
    for number, line in enumerate(REJECTED.read_text().splitlines(), start=1):
        if "# E: " in line:
            marked.add((number, line.rsplit("# E: ", 1)[1].strip()))
    return marked


def test_mypy_strict_accepts_the_examples_and_a_typed_app_and_refuses_its_mistakes():
    # The cache is of no use to a run that starts cold each time, and writing it cost a
    # second of the ~3 s; mypy reads os.devnull as "no cache".
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", os.devnull, "--no-error-summary", "--hide-error-context",
         "--no-pretty", "--show-error-codes", "examples", str(OK.relative_to(ROOT)), str(REJECTED.relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [m for m in map(_LINE.match, proc.stdout.splitlines()) if m]
    unexpected = [m.group(0) for m in errors if Path(ROOT, m["path"]).resolve() != REJECTED]
    assert not unexpected, "mypy --strict refused what a typed app may write:\n" + "\n".join(unexpected)
    found = {(int(m["line"]), m["code"]) for m in errors if Path(ROOT, m["path"]).resolve() == REJECTED}
    assert found == _expected_errors(), proc.stdout + proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr  # errors found, and nothing else went wrong


def test_configure_and_the_constructors_take_exactly_the_settings_table():
    hints = typing.get_type_hints(SettingsArguments)
    assert set(hints) == set(_settings._DECLS)
    for fn, param in ((configure, "settings"), (RunsSpanProcessor.__init__, "overrides"), (RunsSpanExporter.__init__, "overrides")):
        assert inspect.signature(fn).parameters[param].kind is inspect.Parameter.VAR_KEYWORD
        assert typing.get_type_hints(fn, include_extras=True)[param] == Unpack[SettingsArguments], fn


def _literals(hint: object) -> set[str]:
    found: set[str] = set()
    for arg in typing.get_args(hint):
        if typing.get_origin(arg) is typing.Literal:
            found.update(typing.get_args(arg))
    return found


def test_the_typed_choices_are_the_settings_choices():
    hints = typing.get_type_hints(SettingsArguments)
    with_choices = {name: _literals(hint) for name, hint in hints.items() if _literals(hint)}
    assert set(with_choices) == {"region", "mode", "compression", "id_scheme", "spans"}
    for name, typed in with_choices.items():
        # A choice parser's message lists its choices: "one of auto, multipart, basic".
        with pytest.raises(ValueError) as refused:
            _settings._DECLS[name].parse("\x00not a choice")
        listed = set(str(refused.value).removeprefix("one of ").split(", "))
        assert typed == listed, name


def test_the_typed_run_types_are_the_services():
    assert set(typing.get_args(RunType)) == RUN_TYPES


def test_at_run_time_a_misspelt_setting_is_still_a_config_error_saying_which_was_meant():
    with pytest.raises(ConfigError, match=r"^unknown setting 'projcet': did you mean 'project'\? The settings are: \[.*'timeout_s'"):
        RunsSpanProcessor(projcet="x")  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"^unknown settings 'tiemout_s': did you mean 'timeout_s'\?; 'zzz' The settings"):
        RunsSpanExporter(tiemout_s=3, zzz=1)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="timeout_s"):
        RunsSpanProcessor(timeout_s="ten")  # type: ignore[typeddict-item]
