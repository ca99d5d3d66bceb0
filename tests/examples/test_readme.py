"""The README's code, run as written, its links, followed, and its shape: a newcomer's page.

Every ```python block of the README, and of the docs its longer sections moved to, is
run on its own in a fresh interpreter from the repository root, with only
OTEL_EXPORTER_RUNS_ENDPOINT / _API_KEY pointing it at a local service that requires
the key (and OPENAI_BASE_URL / OPENAI_API_KEY at the fake model API, for a block that
calls a model), and must deliver runs there at exit. The quickstart's block is the file
examples/quickstart.py, which test_examples runs.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Iterator

import pytest

from otel_runs_exporter.server import LocalService
from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

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


# The README, and the docs that took its longer sections with their code. The quickstart's block is
# examples/quickstart.py, which test_examples runs and holds the block to: it is not run twice.
DOCUMENTS = [README, ROOT / "docs" / "instrumentation.md", ROOT / "docs" / "delivery.md"]
QUICKSTART = (ROOT / "examples" / "quickstart.py").read_text()
BLOCKS = [
    (f"{doc.relative_to(ROOT)}:{line}", code)
    for doc in DOCUMENTS
    for line, code in python_blocks(doc.read_text())
    if not QUICKSTART.endswith(code)
]


def test_the_readme_and_its_docs_have_python_blocks() -> None:
    # The parser found them; an empty parametrization would pass anything.
    assert len([where for where, _ in BLOCKS if where.startswith("README.md:")]) >= 1 and len(BLOCKS) >= 4
    assert len(python_blocks(README.read_text())) == len([w for w, _ in BLOCKS if w.startswith("README.md:")]) + 1


@pytest.fixture(scope="module")
def fake_api() -> Iterator[FakeLLMAPI]:
    with FakeLLMAPI() as api:
        yield api


@pytest.mark.parametrize("where, code", BLOCKS, ids=[where for where, _ in BLOCKS])
def test_python_block_runs_as_written_and_delivers(where: str, code: str, fake_api: FakeLLMAPI) -> None:
    ellipses = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.string == "..."]
    assert not ellipses, f"{where}: `...` stands in for code; write real code"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGSMITH_", "OPENAI_"))}
    env.update(OPENAI_BASE_URL=fake_api.openai_base_url, OPENAI_API_KEY="the-fake-api-ignores-it")
    with LocalService(api_key=KEY, strict=True) as service:
        env.update(OTEL_EXPORTER_RUNS_ENDPOINT=service.url, OTEL_EXPORTER_RUNS_API_KEY=KEY)
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert proc.returncode == 0, f"{where}\n{proc.stdout}\n{proc.stderr}"
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


def _anchor(heading: str) -> str:
    """The id a Markdown renderer (GitHub's) gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_to_a_section_name_one_that_exists() -> None:
    """A section moved to docs/ takes its anchor along: a link to it must follow."""
    documents = [README, *(ROOT / "docs").glob("*.md")]
    anchors = {doc.resolve(): {_anchor(h) for h in re.findall(r"^#+ (.+)$", doc.read_text(), re.M)} for doc in documents}
    for doc in documents:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)]+)\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path = (doc.parent / target).resolve() if target else doc.resolve()
            if path in anchors:
                assert anchor in anchors[path], f"{doc.relative_to(ROOT)}: no section #{anchor} in {path.name}"


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


def test_the_readme_is_a_page_a_newcomer_reads() -> None:
    """At most 450 lines; what it is, install and the quickstart first (the quickstart's code is
    examples/quickstart.py: test_examples checks it is that file, within the first 60 lines), then a
    contents list naming every section and the docs the longer topics moved to."""
    text = README.read_text()
    assert text.count("\n") <= 450
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[:3] == ["Install", "Quickstart", "Contents"], headings
    for needed in ("Coming from the langsmith SDK", "Coming from Phoenix / OTLP", "The settings most users need",
                   "Examples", "For contributors"):
        assert needed in headings, needed
    assert "\n### Works with\n" in text
    contents = text[text.index("## Contents") : text.index("\n## ", text.index("## Contents") + 1)]
    for heading in headings[3:]:
        assert f"(#{_anchor(heading)})" in contents, heading
    for doc in ("docs/settings.md", "docs/mapping.md", "docs/delivery.md", "docs/local-service.md", "BENCHMARKS.md"):
        assert f"]({doc})" in contents, doc
    # The two commands for contributors, as test_demo and a fresh clone run them.
    assert "pip install . && otel-runs demo" in text and "pip install -e '.[test]' && python -m pytest" in text


def test_the_license_file_is_the_one_pyproject_declares_and_ships() -> None:
    from importlib.metadata import metadata

    declared = re.search(r'^license = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert declared and declared.group(1) == "MIT"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Permission is hereby granted, free of charge" in text
    # What pip installed says so too, and names the file it carries.
    installed = metadata("otel-runs-exporter")
    assert installed["License-Expression"] == "MIT" and "LICENSE" in (installed.get_all("License-File") or [])


def _figures(text: str) -> set[str]:
    text = re.sub(r"`[^`]*`|\([^)]*\.md[^)]*\)", "", text)  # names (/otel/v1/traces) and links are not figures
    return {f for f in re.findall(r"\d[\d,.]*\d|\d", text) if f not in {"0", "100"}}


def test_the_readmes_figures_are_the_benchmarks() -> None:
    """'Figures only where we measured them': every number in the comparison, and in the performance
    summary under it, is one BENCHMARKS.md reports."""
    readme = README.read_text(encoding="utf-8")
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Compared with") :]
    table = section[: section.index("\n\n", section.index("| |"))]
    figures = set()
    for row in table.splitlines()[2:]:
        for cell in row.split("|")[2:]:
            figures |= _figures(cell)
    assert len(figures) >= 10, figures  # the parse still finds the table (its figures change with each run)
    start = section.index("Performance, in one line")
    summary = _figures(section[start : section.index("\n\n", start)])
    assert {"203.3", "0.36", "0.99", "2,048"} <= summary, summary  # the parse still finds the summary
    missing = sorted(f for f in figures | summary if not re.search(rf"(?<![\d,.]){re.escape(f)}(?![\d,])", benchmarks))
    assert missing == [], f"figures in the README that BENCHMARKS.md does not report: {missing}"
