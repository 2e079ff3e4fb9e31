"""Every Python process hwlab starts keeps the current directory off its
path (issue 44: ``hwlab up`` beside a clone imported the clone's ``bmaas/``
folder in every worker). tests/lab/test_clean_import_path.py shows it end
to end; this holds the tree to the one way of building such a command."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from bmaas.hwlab.pyexec import SAFE_PATH, python_argv

ROOT = Path(__file__).resolve().parents[3]
#: the trees whose code runs as bmaas or hwlab (scripts/ and tests/ are ours to run)
TREES = ("bmaas", "drivers", "fakes", "hwlab")


def test_python_argv_starts_with_safe_path() -> None:
    assert python_argv("-m", "x", "a") == [sys.executable, "-P", "-m", "x", "a"]
    assert python_argv("-c", "pass", python="/venv/bin/python") == [
        "/venv/bin/python",
        SAFE_PATH,
        "-c",
        "pass",
    ]


def _python_commands(path: Path, root: Path = ROOT) -> list[str]:
    """Lists in ``path`` that start with ``sys.executable`` followed by
    ``-c`` or ``-m``: a Python command built by hand, not by python_argv."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.List) or len(node.elts) < 2:
            continue
        first, second = node.elts[0], node.elts[1]
        if (
            ast.unparse(first) == "sys.executable"
            and isinstance(second, ast.Constant)
            and second.value in ("-c", "-m")
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_python_command_is_built_by_hand() -> None:
    offenders = [
        hit
        for tree in TREES
        for path in sorted((ROOT / tree).rglob("*.py"))
        for hit in _python_commands(path)
    ]
    assert offenders == []


def test_the_scan_sees_a_hand_built_command(tmp_path: Path) -> None:
    # guards the scan itself (it would pass on any tree if it saw nothing):
    # how hwlab/cli/lab.py started the lab's daemon before issue 44
    sample = tmp_path / "sample.py"
    sample.write_text('import sys\nCMD = [sys.executable, "-m", "bmaas.hwlab.daemon", "dir"]\n')
    assert _python_commands(sample, tmp_path) == ["sample.py:2"]
