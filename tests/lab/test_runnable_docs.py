"""The README's runnable examples run, in order, against a real lab.

A fenced ``sh`` or ``python`` block right after a ``<!-- runnable ... -->``
line is run: shell blocks with ``bash -euo pipefail``, Python blocks with this
interpreter, all in one temporary home (the lab's default state directory,
``BMAAS_DB``), so the README and the product cannot drift apart."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^<!-- runnable[^\n]*-->\n```(sh|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def runnable_blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def test_the_readme_marks_its_examples_runnable() -> None:
    blocks = runnable_blocks(README.read_text())
    languages = [lang for lang, _ in blocks]
    assert languages.count("sh") >= 2
    assert "python" in languages
    assert "--network provisioning" not in README.read_text()  # hwlab's network is `lab`


FENCE = re.compile(r"^( *)```")


def unmarked_blocks(text: str) -> list[str]:
    """Code blocks not preceded by ``<!-- runnable ... -->`` (run below) or
    ``<!-- not run: WHY -->``: each block is run, or says why not."""
    lines = text.splitlines()
    found, inside = [], False
    for number, line in enumerate(lines, 1):
        if not FENCE.match(line):
            continue
        if not inside:
            before = lines[number - 2].strip() if number > 1 else ""
            if not re.fullmatch(r"<!-- (runnable\b.*|not run: \S.*) -->", before):
                found.append(f"README.md:{number}: {line.strip()}")
        inside = not inside
    return found


def test_every_readme_block_is_run_or_says_why_not() -> None:
    assert unmarked_blocks(README.read_text()) == []
    assert unmarked_blocks("x\n```sh\nls\n```\n") == ["README.md:2: ```sh"]
    assert unmarked_blocks("<!-- not run: output -->\n```\nok\n```\n") == []


@pytest.mark.lab
@pytest.mark.timeout(900)
def test_every_runnable_readme_block_runs_against_a_lab(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "HWLAB_", "BMAAS_"))}
    bindir = str(Path(sys.executable).parent)
    env |= {
        "HOME": str(tmp_path),
        "BMAAS_DB": str(tmp_path / "bmaas.db"),
        "PATH": bindir + os.pathsep + env.get("PATH", ""),
    }
    try:
        for index, (language, code) in enumerate(runnable_blocks(README.read_text())):
            cmd = (
                ["bash", "-euo", "pipefail", "-c", code]
                if language == "sh"
                else [
                    sys.executable,
                    "-c",
                    code,
                ]
            )
            done = subprocess.run(
                cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
            )
            assert done.returncode == 0, (
                f"README block {index} ({language}) exited {done.returncode}:\n{code}\n"
                f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
            )
    finally:
        subprocess.run(["hwlab", "down"], env=env, capture_output=True, timeout=60, check=False)
