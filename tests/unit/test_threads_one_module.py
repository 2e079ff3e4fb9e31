"""Every thread bmaas starts is made in bmaas/threads.py (issue 45): no other
module of bmaas or drivers constructs a thread or a thread pool, so one
place says how a bmaas thread is made (named, daemon, started)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKES = re.compile(r"threading\.Thread\(|ThreadPoolExecutor\(|threading\.Timer\(")


def test_threads_are_made_in_one_module() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("bmaas", "drivers")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "threads.py" or path.parent.name != "bmaas"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if MAKES.search(line) and not line.lstrip().startswith("#")
    ]
    assert found == []
