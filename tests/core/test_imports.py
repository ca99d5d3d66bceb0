"""The package's imports go one way: no circles, and the pipeline's modules in data-flow order.

Read from the source with ``ast`` (nothing is imported), so a circle is caught
even where Python would tolerate it at import time.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import otel_runs_exporter

PACKAGE = Path(otel_runs_exporter.__file__).parent
NAME = "otel_runs_exporter"

# The data flow (docs/architecture.md; the package docstring): a module may import
# from its own layer and the ones before it, never from a later one. ``_stats`` (the
# ledger and the Outcome it records) sits below everything that reports to it.
FLOW = [
    # _ids is the leaf: pure id math, importing nothing of ours. The settings read the
    # names of its one table of run-id schemes to check `id_scheme` against them.
    {"_ids"},
    {"_settings"},
    {"mapping", "_convert"},
    # Which spans become runs and which traces are sent (pure rules), then the traces held for it.
    {"_select"},
    {"_hold"},
    {"_encode"},
    {"_stats"},
    {"_http_client"},
    {"_transport"},
    {"_delivery"},
    # The exit sequence both paths run at shutdown, over the delivery and its ledger.
    {"_exit"},
    {"_worker"},
    {"_choice"},
    {"_processor", "_exporter"},
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@functools.cache
def import_graph() -> dict[str, set[tuple[str, bool]]]:
    """Each module of the package -> the package's modules it imports, each with
    whether that import is under ``if TYPE_CHECKING:`` only (read once: every test here reads it, none changes it)."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[tuple[str, bool]]] = {}
    for module, path in paths.items():
        is_package = path.name == "__init__.py"
        edges: set[tuple[str, bool]] = set()

        def add(target: str, type_checking: bool) -> None:
            if target in paths and target != module:
                edges.add((target, type_checking))

        def visit(node: ast.AST, type_checking: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child.test):
                    for inner in child.body:
                        visit_one(inner, True)
                    for inner in child.orelse:
                        visit_one(inner, type_checking)
                else:
                    visit_one(child, type_checking)

        def visit_one(node: ast.AST, type_checking: bool) -> None:
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    # `from . import x` imports the module x when there is one, else a name of the package.
                    sub = f"{target}.{alias.name}"
                    add(sub if sub in paths else target, type_checking)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, type_checking)
            else:
                visit(node, type_checking)

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
        graph[module] = edges
    return graph


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def test_the_graph_is_read_from_the_source():
    graph = import_graph()
    assert (f"{NAME}._transport", False) in graph[f"{NAME}._delivery"]
    assert (f"{NAME}._http_client", False) in graph[f"{NAME}.api._client"]
    assert len(graph) > 40


def test_no_import_circles():
    # TYPE_CHECKING-only imports are left out here: they never run. The pipeline's
    # modules are held to more below.
    graph = import_graph()
    runtime = {module: {t for t, type_checking in edges if not type_checking} for module, edges in graph.items()}
    assert _cycles(runtime) == []


def test_the_pipeline_imports_along_the_data_flow_only():
    # Here a TYPE_CHECKING import counts too: a type named from a later layer is a
    # circle in the design even when it is not one at run time (``_stats`` once named
    # ``_delivery.Outcome`` so, which made _delivery -> _transport -> _stats -> _delivery).
    graph = import_graph()
    layer = {f"{NAME}.{m}": i for i, modules in enumerate(FLOW) for m in modules}
    assert set(layer) <= set(graph), set(layer) - set(graph)
    backwards = sorted(
        (module.rpartition(".")[2], target.rpartition(".")[2])
        for module, edges in graph.items()
        if module in layer
        for target, _ in edges
        if target in layer and layer[target] > layer[module]
    )
    assert backwards == []
    core = {
        module: {t for t, _ in edges if t.count(".") == 1}
        for module, edges in graph.items()
        if module.count(".") == 1 or module == NAME
    }
    assert _cycles(core) == []


def test_each_server_module_reads_in_one_sitting():
    # The structure issue's bound: a module of the local service past 800 lines holds two concerns.
    long = {
        path.name: count
        for path in sorted((PACKAGE / "server").glob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > 800
    }
    assert long == {}


# What the local service may use of the package: the version, and the pure conversion modules it
# converts OTLP spans with as the exporter does (the mapping, _convert, _ids, _encode, _cost). Never
# the processor, worker, transport or the settings read from the environment: a service is configured
# by its own arguments, and must not start what an app's exporter starts.
SERVER_MAY_IMPORT = {"_version", "_convert", "_ids", "_encode", "_cost", "mapping"}


def test_the_local_service_imports_only_the_version_and_the_pure_conversion_modules():
    graph = import_graph()
    server = f"{NAME}.server"
    outside = sorted(
        (module.rpartition(".")[2], target)
        for module, edges in graph.items()
        if module == server or module.startswith(server + ".")
        for target, _ in edges
        if not (target == server or target.startswith(server + "."))
        and (target.split(".") + [""])[1] not in SERVER_MAY_IMPORT
    )
    assert outside == []
