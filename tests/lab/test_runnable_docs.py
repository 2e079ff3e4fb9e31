"""The docs' runnable examples run, in order, against a real lab.

The pages are README.md and every Markdown page of the docs site
(``docs/**/*.md``) but docs/bench's reports, which are the output of the runs
they record (``hwlab bench --report``), and the changelog's fragments
(``docs/changes/``); ``docs/bench/history.md`` is a page.

A fenced ``sh`` or ``python`` block right after a ``<!-- runnable ... -->``
line is run: shell blocks with ``bash -euo pipefail``, Python blocks with this
interpreter. The blocks of one page run in page order in one temporary home
of their own (the lab's default state directory, ``BMAAS_DB``): each page is
self-contained, starting the lab its examples use in its first runnable block
and stopping it in its last, so the docs and the product cannot drift apart.
Every other fenced block says why it is not run (``<!-- not run: WHY -->``);
MyST directives (```` ```{toctree} ````, ```` ```{automodule} ````) are not
examples."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: folders of docs/ whose Markdown is not a page of examples
NOT_PAGES = ("_build", "changes")
#: docs/bench holds reports written by the runs they record; this one is a page
BENCH_PAGES = ("history.md",)

BLOCK = re.compile(r"^<!-- runnable[^\n]*-->\n```(sh|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)
FENCE = re.compile(r"^( *)```")
MARK = re.compile(r"<!-- (runnable\b.*|not run: \S.*) -->")


def pages() -> list[Path]:
    """README.md and the docs' pages, in a stable order."""
    found = [ROOT / "README.md"]
    for path in sorted(DOCS.rglob("*.md")):
        parts = path.relative_to(DOCS).parts
        if parts[0] in NOT_PAGES:
            continue
        if parts[0] == "bench" and path.name not in BENCH_PAGES:
            continue
        found.append(path)
    return found


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@dataclass(frozen=True)
class Block:
    where: str  # file:line of the opening fence
    language: str
    code: str


def runnable_blocks(text: str, where: str = "README.md") -> list[Block]:
    return [
        Block(f"{where}:{text.count(chr(10), 0, m.start()) + 2}", m.group(1), m.group(2))
        for m in BLOCK.finditer(text)
    ]


def unmarked_blocks(text: str, where: str = "README.md") -> list[str]:
    """Code blocks not preceded by ``<!-- runnable ... -->`` (run below) or
    ``<!-- not run: WHY -->``: each block is run, or says why not. A MyST
    directive (```` ```{name} ````) is not a code block."""
    lines = text.splitlines()
    found, inside = [], False
    for number, line in enumerate(lines, 1):
        if not FENCE.match(line):
            continue
        if not inside:
            if line.strip().startswith("```{"):
                inside = True
                continue
            before = lines[number - 2].strip() if number > 1 else ""
            if not MARK.fullmatch(before):
                found.append(f"{where}:{number}: {line.strip()}")
        inside = not inside
    return found


def test_the_checker_reads_blocks_and_places() -> None:
    assert unmarked_blocks("x\n```sh\nls\n```\n") == ["README.md:2: ```sh"]
    assert unmarked_blocks("<!-- not run: output -->\n```\nok\n```\n") == []
    assert unmarked_blocks("```{toctree}\noperator\n```\n", "docs/index.md") == []
    text = "# T\n\n<!-- runnable -->\n```sh\ntrue\n```\n"
    assert runnable_blocks(text, "docs/x.md") == [Block("docs/x.md:4", "sh", "true\n")]


def test_the_pages_are_found() -> None:
    found = {name(page) for page in pages()}
    assert {"README.md", "docs/operator.md", "docs/lab.md", "docs/library.md"} <= found
    assert "docs/bench/history.md" in found
    assert "docs/bench/overrun.md" not in found  # a report


def test_the_docs_mark_their_examples_runnable() -> None:
    blocks = [b for page in pages() for b in runnable_blocks(page.read_text(), name(page))]
    languages = [b.language for b in blocks]
    assert languages.count("sh") >= 2
    assert "python" in languages
    library = runnable_blocks((DOCS / "library.md").read_text(), "docs/library.md")
    assert [b.language for b in library].count("python") >= 1  # the library guide's example
    for page in pages():
        assert "--network provisioning" not in page.read_text()  # hwlab's network is `lab`


@pytest.mark.parametrize("page", pages(), ids=name)
def test_every_block_is_run_or_says_why_not(page: Path) -> None:
    assert unmarked_blocks(page.read_text(), name(page)) == []


def test_a_page_that_starts_a_lab_stops_it() -> None:
    """Self-contained pages: the lab a page's blocks start, its blocks stop."""
    for page in pages():
        code = "".join(b.code for b in runnable_blocks(page.read_text(), name(page)))
        ups, downs = len(re.findall(r"^hwlab up\b", code, re.M)), code.count("hwlab down")
        assert ups == downs, f"{name(page)}: {ups} x `hwlab up`, {downs} x `hwlab down`"


def run_page(page: Path, home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "HWLAB_", "BMAAS_"))}
    bindir = str(Path(sys.executable).parent)
    env |= {
        "HOME": str(home),
        "BMAAS_DB": str(home / "bmaas.db"),
        "PATH": bindir + os.pathsep + env.get("PATH", ""),
    }
    try:
        for block in runnable_blocks(page.read_text(), name(page)):
            if block.language == "sh":
                cmd = ["bash", "-euo", "pipefail", "-c", block.code]
            else:
                cmd = [sys.executable, "-c", block.code]
            done = subprocess.run(
                cmd, cwd=home, env=env, capture_output=True, text=True, timeout=600, check=False
            )
            assert done.returncode == 0, (
                f"{block.where}: the {block.language} block exited {done.returncode}:\n"
                f"{block.code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
            )
    finally:
        subprocess.run(["hwlab", "down"], env=env, capture_output=True, timeout=60, check=False)


RUNNABLE_PAGES = [p for p in pages() if runnable_blocks(p.read_text())]


@pytest.mark.lab
@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=name)
def test_every_runnable_block_of_a_page_runs_against_a_lab(page: Path, tmp_path: Path) -> None:
    run_page(page, tmp_path)
