"""The package's modules import each other as a DAG (settings/policy/guards -> export -> compiled ->
export_cache -> fallback -> backend -> explain): no cycle, not even through an import inside a
function or under TYPE_CHECKING, which would only hide it."""

from __future__ import annotations

import ast
from pathlib import Path

import luminal

PACKAGE = Path(luminal.__file__).parent


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module name -> the package's modules it imports (anywhere in its source)."""
    modules = {path.stem for path in package.glob("*.py")} - {"__init__"}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name in modules:
        tree = ast.parse((package / f"{name}.py").read_text())
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            for target in targets:
                parts = target.split(".")
                if len(parts) == 2 and parts[0] == "luminal" and parts[1] in modules and parts[1] != name:
                    graph[name].add(parts[1])
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as the list of modules along it (first repeated at the end), or None."""
    state: dict[str, str] = {}  # "open" while on the stack, "done" after
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        stack.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                return stack[stack.index(imported) :] + [imported]
            if imported not in state and (cycle := visit(imported)) is not None:
                return cycle
        stack.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)) is not None:
            return cycle
    return None


def test_find_cycle_reports_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_package_imports_form_a_dag() -> None:
    graph = import_graph(PACKAGE)
    assert {"backend", "fallback", "export_cache", "export"} <= graph.keys()
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_backend_layers() -> None:
    """The layers the issue names: nothing below imports what is above it."""
    graph = import_graph(PACKAGE)
    layers = ["export", "compiled", "export_cache", "fallback", "backend", "explain"]
    for k, lower in enumerate(layers):
        above = set(layers[k + 1 :])
        assert not (graph[lower] & above), f"{lower} imports {sorted(graph[lower] & above)}"
