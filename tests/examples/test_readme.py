"""The README's code, run as written, and its links, followed.

Every ```python block is run on its own in a fresh interpreter from the
repository root, with only OTEL_EXPORTER_RUNS_ENDPOINT / _API_KEY pointing it at
a local service that requires the key, and must deliver runs there at exit.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from otel_runs_exporter.server import LocalService

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
KEY = "sk-readme-test-81d2"
TIMEOUT_S = 60


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block."""
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        blocks.append((text.count("\n", 0, match.start()) + 1, match.group(1)))
    return blocks


BLOCKS = python_blocks(README.read_text())


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 2  # the parser found them; an empty parametrization would pass anything


@pytest.mark.parametrize("line, code", BLOCKS, ids=[f"README.md:{line}" for line, _ in BLOCKS])
def test_python_block_runs_as_written_and_delivers(line: int, code: str) -> None:
    ellipses = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.string == "..."]
    assert not ellipses, f"README.md:{line}: `...` stands in for code; write real code"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_"))}
    with LocalService(api_key=KEY, strict=True) as service:
        env.update(OTEL_EXPORTER_RUNS_ENDPOINT=service.url, OTEL_EXPORTER_RUNS_API_KEY=KEY)
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert proc.returncode == 0, f"README.md:{line}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr and KEY not in proc.stdout + proc.stderr
        # Nothing flushes in the snippets: what arrived was delivered by the exit hook.
        runs = service.wait_for_runs(1, timeout=10)
        assert service.violations() == []
        assert not any(service.check().values()), service.check()
        assert all(r["end_time"] for r in runs)


def test_links_stay_inside_the_repository_and_resolve() -> None:
    # Not the docs of the Node example's installed packages (examples/otlp_node/node_modules): ours only.
    documents = [README, *(ROOT / "docs").glob("*.md"),
                 *(p for p in (ROOT / "examples").rglob("*.md") if "node_modules" not in p.parts)]
    for doc in documents:
        text = doc.read_text()
        assert "../shared" not in text, f"{doc.name} points outside the repository"
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            path = (doc.parent / target).resolve()
            assert path.is_relative_to(ROOT) and path.exists(), f"{doc.relative_to(ROOT)}: broken link {target}"


def test_examples_section_lists_every_example_with_its_command() -> None:
    text = README.read_text()
    section = text[text.index("## Examples") : text.index("\n## ", text.index("## Examples") + 1)]
    for entry in sorted((ROOT / "examples").iterdir()):
        if entry.name.startswith((".", "__")):
            continue
        link = f"(examples/{entry.name}{'/' if entry.is_dir() else ''})"
        assert link in section, f"the Examples section does not list {entry.name}"
    for command in re.findall(r"`python (examples/[^`\s]+)`", section):
        assert (ROOT / command).is_file(), command


def test_settings_table_spells_out_the_default_addresses() -> None:
    from otel_runs_exporter import _settings

    text = README.read_text()
    table = text[text.index("## Settings") : text.index("\n## ", text.index("## Settings") + 1)]
    for url in (_settings.US_ENDPOINT, _settings.EU_ENDPOINT, _settings.US_CONTROL_PLANE, _settings.EU_CONTROL_PLANE):
        assert f"`{url}`" in table, url
    # Where the project comes from, and that OTEL_SERVICE_NAME is not it (test_examples' zero_code test
    # shows the same on real runs).
    assert "OTEL_EXPORTER_RUNS_PROJECT" in table and "LANGSMITH_PROJECT" in table
    assert "`OTEL_SERVICE_NAME` does not choose the project" in table


def test_the_license_file_is_the_one_pyproject_declares_and_ships() -> None:
    from importlib.metadata import metadata

    declared = re.search(r'^license = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert declared and declared.group(1) == "MIT"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Permission is hereby granted, free of charge" in text
    # What pip installed says so too, and names the file it carries.
    installed = metadata("otel-runs-exporter")
    assert installed["License-Expression"] == "MIT" and "LICENSE" in (installed.get_all("License-File") or [])


def test_the_compared_with_figures_are_the_benchmarks() -> None:
    """'Figures only where we measured them': every number in the comparison is one BENCHMARKS.md reports."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Compared with") :]
    table = section[: section.index("\n\n", section.index("| |"))]
    figures = set()
    for row in table.splitlines()[2:]:
        for cell in row.split("|")[2:]:
            cell = re.sub(r"`[^`]*`", "", cell)  # names such as /otel/v1/traces are not figures
            figures |= {f for f in re.findall(r"\d[\d,.]*\d|\d", cell) if f not in {"0", "100"}}
    assert len(figures) >= 10, figures  # the parse still finds the table (its figures change with each run)
    missing = sorted(f for f in figures if not re.search(rf"(?<![\d,.]){re.escape(f)}(?![\d,])", benchmarks))
    assert missing == [], f"figures in README's 'Compared with' that BENCHMARKS.md does not report: {missing}"
