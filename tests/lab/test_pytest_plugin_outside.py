"""The lab guide's plugin example in a project outside the repo, as a user runs it.

Copied from docs/lab.md's pytest plugin section (not from this repo's tests) into a temporary
directory with no pytest configuration of its own, and run there with
``--strict-markers -W error``: the ``lab`` marker must come from the plugin.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

LAB_PAGE = Path(__file__).resolve().parents[2] / "docs" / "lab.md"


def _readme_example() -> str:
    section = LAB_PAGE.read_text().split("\n## The pytest plugin\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "docs/lab.md's pytest plugin section has no python example"
    return found.group(1)


@pytest.mark.lab
def test_readme_plugin_example_passes_strictly_outside_the_repo(tmp_path: Path) -> None:
    project = tmp_path / "someproject"
    project.mkdir()
    (project / "test_example.py").write_text(_readme_example())
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--strict-markers",
            "-W",
            "error",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(project),
            str(project),
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
