"""hwlab's layout holds: only ``hwlab/harness`` drives bmaas's drivers.

The lab (servers, manager, control API, profiles, pytest plugin) must run
without ``bmaas.drivers`` and without client libraries; the matrix, demo and
benchmarks in ``hwlab/harness`` are the one place that imports them.
"""

from __future__ import annotations

import ast
from pathlib import Path

HWLAB = Path(__file__).resolve().parents[3] / "hwlab"
#: the client side: bmaas's drivers, sushy's client (not sushy_tools) and requests
FORBIDDEN = ("bmaas.drivers", "sushy", "requests")


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def _forbidden(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in FORBIDDEN)


def test_only_the_harness_imports_drivers_or_client_libraries() -> None:
    offenders = [
        f"{path.relative_to(HWLAB.parent)}:{line}: imports {module}"
        for path in sorted(HWLAB.rglob("*.py"))
        if "harness" not in path.relative_to(HWLAB).parts
        for line, module in _imports(path)
        if _forbidden(module)
    ]
    assert offenders == []


def test_the_scan_sees_the_harness_imports() -> None:
    # Guards the scan itself: the harness does import the client side.
    harness = [m for p in (HWLAB / "harness").rglob("*.py") for _, m in _imports(p)]
    assert any(_forbidden(m) for m in harness)
