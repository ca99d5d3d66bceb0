"""docs/settings.md is what ``python docs/make_settings.py`` writes from ``_settings.py``, and says what it should.

The tables are generated, so they cannot drift from the declarations; these tests
fail when someone edits a declaration without running the command, or edits the
table by hand, and check that what the generator writes is right on the points
users act on: which variable, which default, what a malformed value does.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

from otel_runs_exporter import _settings

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "settings.md"


def _generator():
    spec = importlib.util.spec_from_file_location("make_settings", ROOT / "docs" / "make_settings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_file_is_what_the_generator_writes():
    text = DOC.read_text(encoding="utf-8")
    assert _generator().render(text) == text, "run: python docs/make_settings.py"


def test_the_check_command_fails_on_a_table_edited_by_hand(tmp_path):
    make = _generator()
    edited = DOC.read_text(encoding="utf-8").replace("| `timeout_s` |", "| `timeout_secs` |")
    assert make.render(edited) != edited  # a hand edit is written over
    # The plain command, as a contributor runs it: exit 0 here (the file is current).
    proc = subprocess.run([sys.executable, "docs/make_settings.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _rows(text: str) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            rows[cells[0].strip("`")] = cells
    return rows


def test_each_setting_has_its_row_saying_what_a_malformed_variable_does():
    """``untraced`` for essential settings, ``default`` for tuning ones, ``—`` for argument-only settings."""
    rows = _rows(DOC.read_text(encoding="utf-8"))
    for table in (_settings._DECLS, _settings._INSTRUMENTATION_DECLS):
        for name, decl in table.items():
            _, environment, _, malformed, meaning = rows[name]
            expected = (
                "—" if not decl.env else "never refused" if decl.read is not None
                else "untraced" if decl.kind == _settings.ESSENTIAL else "default"
            )
            assert malformed == expected, name
            assert all(f"`{var}`" in environment for var in decl.env), name
            assert meaning, name
    assert rows["hide_inputs"][3] == rows["disabled"][3] == rows["endpoint"][3] == "untraced"
    assert rows["timeout_s"][3] == "default" and rows["mask"][3] == "—"


def test_defaults_are_spelled_as_the_variables_take_them():
    rows = _rows(DOC.read_text(encoding="utf-8"))
    assert rows["schedule_delay_s"][1:3] == ["`OTEL_BSP_SCHEDULE_DELAY` (ms)", "`200` ms"]
    assert rows["max_queue_bytes"][2] == "128 MiB" and rows["max_queue_size"][2] == "`100000`"
    assert rows["instrument"][2] == "`false`"  # prompts are never sent on upgrade
    for url in (_settings.US_ENDPOINT, _settings.EU_ENDPOINT, _settings.US_CONTROL_PLANE, _settings.EU_CONTROL_PLANE):
        assert f"`{url}`" in DOC.read_text(encoding="utf-8"), url


def test_the_doc_says_where_the_project_comes_from_and_that_the_service_name_is_not_it():
    text = DOC.read_text(encoding="utf-8")
    section = " ".join(text[text.index("## Project and service name") :].split())  # as read, not as wrapped
    assert "OTEL_EXPORTER_RUNS_PROJECT" in section and "LANGSMITH_PROJECT" in section
    assert "`OTEL_SERVICE_NAME` does not choose the project" in section
    # The two messages it quotes are the ones the code writes.
    for variable, value in (("OTEL_EXPORTER_RUNS_REGION", "asia"), ("OTEL_EXPORTER_RUNS_TIMEOUT", "ten")):
        quoted = re.search(rf"`({variable}='{value}' is not valid: [^`]*)`", text)  # quoted on one line
        assert quoted, variable
        _settings._bad_env_log.reset()
        import logging

        records: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
        logger = logging.getLogger(_settings.__name__)
        logger.addHandler(handler)
        try:
            _settings.resolve_for_app(env={variable: value})
        finally:
            logger.removeHandler(handler)
        assert records == [quoted.group(1)]
