"""The version is written once (``_version.py``), and every place that shows it agrees."""

from __future__ import annotations

import ast
import sys
from importlib.metadata import version
from pathlib import Path

import otel_runs_exporter
from otel_runs_exporter import _http_client as client_http
from otel_runs_exporter import _version
from otel_runs_exporter.server import _http_server

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(otel_runs_exporter.__file__).parent

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = None


def test_every_place_shows_the_one_version():
    one = _version.__version__
    assert otel_runs_exporter.__version__ == one
    assert client_http.USER_AGENT == f"otel-runs-exporter/{one}"
    assert _http_server._Handler.server_version == f"otel-runs-local/{one}"
    # The installed metadata (what pip and `otel-runs --version` show) was built from it.
    assert version("otel-runs-exporter") == one


def test_pyproject_reads_the_version_from_the_one_source():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    if tomllib is None:  # pragma: no cover
        assert 'version = {attr = "otel_runs_exporter._version.__version__"}' in text
        return
    project = tomllib.loads(text)
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "otel_runs_exporter._version.__version__"}
    # setuptools reads the attribute without importing the package only when it is a plain literal.
    tree = ast.parse((PACKAGE / "_version.py").read_text(encoding="utf-8"))
    literal = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
        and isinstance(node.value, ast.Constant)
    ]
    assert literal == [_version.__version__]


def test_no_other_module_writes_the_version_down():
    """A version string literal anywhere else in the package would be a second place to bump."""
    one = _version.__version__
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_version.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value == one or node.value.endswith("/" + one):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []
