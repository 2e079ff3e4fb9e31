"""drivers/ironic keeps no process state in module globals (issue 45): the
conductor's pool, keeper, silence book, gates, request deadlines, streams
and told quirks are its runtime's (:mod:`bmaas.runtime`, held by
:func:`bmaas.drivers.ironic.host.runtime`). Read from the source (no Ironic
needed): every module-level name is a constant (a literal, a tuple, a
frozenset, a type alias), a logger, a ``Final``-annotated value, or one of
the few below, each with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "drivers" / "ironic"

#: (module, name): why this module-level value is not process state
ALLOWED = {
    ("conf", "CONF"): "oslo.config's global object: Ironic's configuration, not bmaas's",
    ("boot", "PUBLISHES"): "a fact of the installed Ironic, read once at import",
    ("answers", "_SALT"): "random bytes made once per process for a keyed digest, never changed",
    ("listener", "_SALT"): "random bytes made once per process for a keyed digest, never changed",
}

_CONSTANT_CALLS = {"frozenset", "TypeVar", "getLogger", "logging.getLogger"}


def _called(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        return ast.unparse(node.func).split(".")[-1]
    return ""


def _constant(value: ast.expr | None) -> bool:
    """A literal, a tuple of literals, a frozenset, a logger, a TypeVar, a type alias."""
    if value is None or isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.Tuple):  # of literals or enum members
        return all(_constant(e) or isinstance(e, ast.Attribute) for e in value.elts)
    if isinstance(value, ast.Call):
        return _called(value) in _CONSTANT_CALLS
    return isinstance(value, ast.Subscript | ast.BinOp)  # a type alias: Callable[...], A | B


def _globals(path: Path) -> list[tuple[str, ast.stmt]]:
    found: list[tuple[str, ast.stmt]] = []
    for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(stmt, ast.Assign):
            found += [(t.id, stmt) for t in stmt.targets if isinstance(t, ast.Name)]
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            found.append((stmt.target.id, stmt))
    return found


def _mutable(path: Path) -> list[str]:
    out = []
    for name, stmt in _globals(path):
        if name == "__all__" or (path.stem, name) in ALLOWED:
            continue
        if isinstance(stmt, ast.AnnAssign) and "Final" in ast.unparse(stmt.annotation):
            continue
        if isinstance(stmt, ast.Assign) and _constant(stmt.value):
            continue
        out.append(f"{path.name}:{stmt.lineno} {name}")
    return out


def test_no_module_of_drivers_ironic_holds_mutable_state() -> None:
    found = [line for path in sorted(ROOT.glob("*.py")) for line in _mutable(path)]
    assert found == []


def test_no_module_says_global() -> None:
    for path in sorted(ROOT.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.Global)], path.name


@pytest.mark.parametrize(
    "source",
    [
        "POOL = DriverPool()",
        "_TOLD: set[tuple[str, str]] = set()",
        "_HOLDER = None\n_BUILT = False\n_CACHE = {}",
        "REQUESTS = []",
    ],
)
def test_the_scan_finds_what_issue_45_removed(tmp_path: Path, source: str) -> None:
    path = tmp_path / "calls.py"
    path.write_text(source + "\n", encoding="utf-8")
    expected = {"POOL", "_TOLD", "_CACHE", "REQUESTS"}
    assert {line.split()[-1] for line in _mutable(path)} & expected
