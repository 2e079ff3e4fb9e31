"""The README is the front page and the docs site holds the rest.

The README stays short (at most 250 lines) and its table of where to read on
points at files that exist; every page a toctree names exists; the Ironic
guide's fault-code table says what the policy table derives. The docs'
examples are run by tests/lab/test_runnable_docs.py, and the site is built
with warnings as errors by scripts/docs.sh (CI)."""

from __future__ import annotations

import re
from pathlib import Path

from bmaas.faults import FAULT_CLASSES
from bmaas.policy import policy_for

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
TOCTREE = re.compile(r"^```\{toctree\}\n(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def toctree_entries(page: Path) -> list[str]:
    """The documents a page's toctrees name (globs left out)."""
    entries = []
    for block in TOCTREE.findall(page.read_text()):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith(":") and "*" not in line:
                entries.append(line)
    return entries


def section(text: str, heading: str) -> str:
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_is_a_front_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"
    text = README.read_text()
    quickstart = section(text, "## Quickstart")
    commands = re.search(r"```sh\n(.*?)```", quickstart, re.S)
    assert commands is not None
    assert [line.split("#")[0].strip() for line in commands.group(1).splitlines()] == [
        "bash scripts/demo.sh",
        "bash scripts/test.sh",
    ]
    assert "Apache-2.0" in text
    assert "(LICENSE)" in text


def test_every_toctree_entry_is_a_page() -> None:
    entries = toctree_entries(DOCS / "index.md")
    for needed in (
        "install",
        "operator",
        "faults",
        "lab",
        "library",
        "ironic",
        "benchmarks",
        "api",
        "development",
        "releases",
        "glossary",
        "bench/history",
    ):
        assert needed in entries, f"docs/index.md's toctree lacks {needed}"
    for entry in entries:
        assert (DOCS / f"{entry}.md").is_file(), f"docs/index.md names {entry}: no {entry}.md"


def test_the_readmes_read_on_table_links_resolve() -> None:
    table = section(README.read_text(), "## Read on")
    targets = LINK.findall(table)
    assert len(targets) >= 10, targets
    for target in targets:
        assert not target.startswith(("http:", "https:", "/")), target
        assert (ROOT / target).is_file(), f"README's read-on table links {target}: no such file"
    for page in ("operator", "faults", "lab", "library", "ironic", "benchmarks", "api"):
        assert f"docs/{page}.md" in targets


def test_every_relative_link_of_the_readme_resolves() -> None:
    for target in LINK.findall(README.read_text()):
        if target.startswith(("http:", "https:", "mailto:")):
            continue
        assert (ROOT / target).exists(), f"README.md links {target}: no such file"


def test_the_ironic_guides_fault_codes_say_what_the_policy_derives() -> None:
    table = section((DOCS / "ironic.md").read_text(), "### What each fault code means")
    rows = re.findall(r"^\| `\[bmaas (\w+) retry=(\w+)\]` \|", table, re.M)
    assert len(rows) >= 10, rows
    by_code = {cls.code: cls for cls in FAULT_CLASSES.values()}
    for code, scope in rows:
        assert code in by_code, f"docs/ironic.md: no fault has the code {code}"
        derived = str(policy_for(by_code[code]).retry)
        assert scope == derived, f"docs/ironic.md: {code} retry={scope}, the policy says {derived}"
