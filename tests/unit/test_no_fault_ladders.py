"""No fault decision beside the policy table.

What a layer does with a fault class lives in :data:`bmaas.policy.POLICY`
(and what a protocol's answer *is* lives in the drivers' mapping tables). A
function that tests a value against two or more fault classes with
``isinstance`` (an ``if``/``elif`` ladder, or ``isinstance(x, A | B)``) is
deciding beside the table; this test reads every module's syntax tree and
fails on one.

Not a ladder: one ``isinstance`` on a fault class (reading a subclass's own
attribute, ``isinstance(fault, BMCFault)`` before ``fault.operation``), a
test against ``BmaasError`` alone (ours, or a bug?), and ``assert``s.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bmaas.faults import FAULT_CLASSES, BmaasError

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("bmaas", "drivers", "fakes", "hwlab")
#: where deciding by fault class is the point: the table, the mapping tables
ALLOWED = {
    "bmaas/policy.py",
    "drivers/ipmi/classify.py",
    "drivers/redfish/faults.py",
    "drivers/ironic_backend/classify.py",
}
FAULT_NAMES = {cls.__name__ for cls in FAULT_CLASSES.values()} - {BmaasError.__name__}


def _classes(node: ast.expr) -> set[str]:
    """Fault class names in an isinstance's second argument (``A``, ``(A, B)``, ``A | B``)."""
    if isinstance(node, ast.Name):
        return {node.id} & FAULT_NAMES
    if isinstance(node, ast.Attribute):
        return {node.attr} & FAULT_NAMES
    if isinstance(node, ast.Tuple):
        return set().union(*(_classes(e) for e in node.elts)) if node.elts else set()
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _classes(node.left) | _classes(node.right)
    return set()


def ladders(source: str) -> list[tuple[int, str, set[str]]]:
    """(line, function, classes) for each function testing >= 2 fault classes."""
    tree = ast.parse(source)
    asserted = {
        id(sub) for node in ast.walk(tree) if isinstance(node, ast.Assert) for sub in ast.walk(node)
    }
    found = []
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        tested: set[str] = set()
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance"
                and len(node.args) == 2
                and id(node) not in asserted
            ):
                tested |= _classes(node.args[1])
        if len(tested) >= 2:
            found.append((func.lineno, func.name, tested))
    return found


def test_the_checker_finds_a_ladder_and_spares_single_checks() -> None:
    ladder = (
        "def classify(e):\n"
        "    if isinstance(e, BMCTimeout):\n        return 1\n"
        "    if isinstance(e, BMCBusy | BMCAuthError):\n        return 2\n"
    )
    assert [(name, cls) for _, name, cls in ladders(ladder)] == [
        ("classify", {"BMCTimeout", "BMCBusy", "BMCAuthError"})
    ]
    single = (
        "def op(e):\n"
        "    assert isinstance(e, BMCTimeout)\n"
        "    return e.operation if isinstance(e, BMCFault) else isinstance(e, BmaasError)\n"
    )
    assert ladders(single) == []


def _modules() -> list[Path]:
    return sorted(p for top in SCANNED for p in (ROOT / top).rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_isinstance_ladder_over_fault_classes_outside_the_tables(path: Path) -> None:
    rel = path.relative_to(ROOT).as_posix()
    if rel in ALLOWED:
        return
    found = ladders(path.read_text(encoding="utf-8"))
    assert not found, (
        f"{rel}: decides by fault class beside bmaas/policy.py's table "
        f"(add a column there and read it): {found}"
    )
