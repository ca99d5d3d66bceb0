"""The README's "Works with" table says what the producer matrix proves, and no more.

Every producer module names its row (``PRODUCER``) and the packages that row
lists (``PACKAGES``). The row must give each package's version as the test
extra pins it (or, for a module that says ``REQUIREMENTS``, as that file pins it:
the second environment's producers), and name in its known-limits cell every
field the module's table marks ``NA``; every row must be some module's.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from producers.matrix import known_limits

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in Path(__file__).parent.glob("test_*.py") if p.stem != "test_matrix_readme")


def _works_with_rows() -> dict[str, list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Works with", 1)[1].split("\n#", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith("| Producer") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        rows[cells[0]] = cells
    assert rows, "no Works with table in the README"
    return rows


def _pins(requirements: str | None = None) -> dict[str, str]:
    if requirements:
        lines = (ROOT / requirements).read_text(encoding="utf-8").splitlines()
        return {name.lower(): version for line in lines
                for name, version in re.findall(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==(\S+)$", line.strip())}
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    test_extra = pyproject.split("\ntest = [", 1)[1].split("\n]", 1)[0]
    return {name.lower(): version for name, version in re.findall(r'"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^"]+)"', test_extra)}


@pytest.mark.parametrize("name", MODULES)
def test_each_producer_module_has_its_row_with_pinned_versions_and_limits(name):
    module = importlib.import_module(f"producers.{name}")
    requirements = getattr(module, "REQUIREMENTS", None)
    rows, pins = _works_with_rows(), _pins(requirements)
    assert module.PRODUCER in rows, f"{name}: no README row named {module.PRODUCER!r}"
    _, tested_with, _, limits, _ = rows[module.PRODUCER]
    for package in module.PACKAGES:
        assert package in pins, f"{package} is not pinned (==) in {requirements or 'the test extra'}"
        assert f"`{package}` {pins[package]}" in tested_with, f"the README row does not give {package} {pins[package]}"
    for field in known_limits(module.ROWS):
        assert f"`{field}`" in limits, f"{name}: its table marks {field} NA; the README row does not say so"


def test_every_row_is_some_modules():
    claimed = {importlib.import_module(f"producers.{name}").PRODUCER for name in MODULES}
    assert set(_works_with_rows()) == claimed
