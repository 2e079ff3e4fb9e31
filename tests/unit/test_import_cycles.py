"""No import cycles in bmaas/, drivers/, fakes/ or hwlab/.

The graph is built from the source (``ast``), not by importing: every
``import`` counts wherever it stands, at module level, inside a function, or
under ``if TYPE_CHECKING:``. A function-local or type-only import hides a
cycle from the interpreter but not from the reader: the two modules still
cannot be understood, or moved, one without the other. An edge goes to the
most specific module named (``from bmaas.store import schema`` is an edge to
``bmaas.store.schema``); a package's ``__init__`` importing its own modules
is the ordinary package shape, not a cycle, so a submodule is not taken to
import its parent package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.layout import FOLDERS, ROOT, module_name

PACKAGES = tuple(FOLDERS)


def _module_name(path: Path) -> str:
    return module_name(path)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Every module of ours that ``name`` imports, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _ours(alias.name, modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    yield f"{base}.{alias.name}"
                else:
                    yield from _ours(base, modules)


def _ours(dotted: str, modules: dict[str, Path]) -> Iterator[str]:
    """The most specific module of ours that ``dotted`` names."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            yield candidate
            return


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {dep for dep in _imported(name, path, modules) if dep != name}
        for name, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components with more than one module (Tarjan,
    iterative: the graph has hundreds of modules), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component)))
    return sorted(found)


def _describe(component: tuple[str, ...], graph: dict[str, set[str]]) -> str:
    members = set(component)
    edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
    return " | ".join(component) + "\n    " + "\n    ".join(edges)


def test_the_graph_sees_every_kind_of_import() -> None:
    graph = import_graph()
    assert "bmaas.store.schema" in graph["bmaas.store.nodes"]  # from bmaas.store import schema
    assert "bmaas.faults" in graph["bmaas.store.base"]  # module level
    assert "bmaas.store.errors" in graph["bmaas.store.engine"]


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [("a", "b", "c")]


def test_no_import_cycles() -> None:
    graph = import_graph()
    problems = [f"import cycle: {_describe(c, graph)}" for c in cycles(graph)]
    assert not problems, "\n".join(problems)
