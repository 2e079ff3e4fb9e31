"""scripts/setup.sh compiles bytecode at install: with PYTHONDONTWRITEBYTECODE=1
(many container images) Python never caches any, and every command compiled
what it imported (``bmaas enroll``: 2.2 s CPU without bytecode, 0.7 s with).
An editable install compiles nothing in the tree, so setup compiles the four
source folders itself, on every run (the no-op included)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "setup.sh"
FOLDERS = ("bmaas", "drivers", "fakes", "hwlab")


def _fresh(source: Path) -> bool:
    """Whether ``source`` has bytecode matching its mtime and size (the
    header Python checks before it uses a ``.pyc``)."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if not cached.exists():
        return False
    header = cached.read_bytes()[:16]
    stat = source.stat()
    mtime = int.from_bytes(header[8:12], "little")
    size = int.from_bytes(header[12:16], "little")
    return (mtime, size) == (int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size & 0xFFFFFFFF)


def test_pip_compiles_what_it_installs() -> None:
    text = SETUP.read_text()
    install = [line for line in text.splitlines() if "pip install" in line and "-e" in line]
    assert install, "setup.sh installs bmaas with pip"
    assert all("--no-compile" not in line for line in install), install


def test_setup_compiles_the_source_folders_even_without_bytecode_writes() -> None:
    """The function setup.sh runs on install and on every no-op re-run, run
    as setup runs it, under PYTHONDONTWRITEBYTECODE=1."""
    text = SETUP.read_text()
    function = re.search(r"^compile_sources\(\) \{\n.*?^\}\n", text, re.M | re.S)
    assert function is not None, "setup.sh defines compile_sources"
    for folder in FOLDERS:
        assert f" {folder}" in function.group(0), folder
    noop = text[text.index("if [ $covered = yes ]") : text.index("exit 0")]
    assert "compile_sources" in noop, "the no-op re-run keeps bytecode current"
    assert text.count("compile_sources") >= 3  # defined, no-op, install

    started = time.time()
    script = f'cd {REPO}\nsay() {{ echo "$*" >&2; }}\n{function.group(0)}compile_sources\n'
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    sources = [p for folder in FOLDERS for p in (REPO / folder).rglob("*.py")]
    assert len(sources) > 150
    # a file another process edits while this runs is newer than its bytecode: skip it
    stale = [p for p in sources if p.stat().st_mtime < started and not _fresh(p)]
    assert stale == []


def test_the_test_run_keeps_the_bytecode_pytest_writes() -> None:
    """pytest caches its rewritten test modules only where bytecode may be
    written; under PYTHONDONTWRITEBYTECODE=1 each worker compiled the whole
    test tree on every run (collection: 205 s on 6 workers at load 25, 52 s
    with the cache; issue 50). scripts/test.sh lifts it before pytest."""
    text = (REPO / "scripts" / "test.sh").read_text()
    assert re.search(r"^unset PYTHONDONTWRITEBYTECODE$", text, re.M)
    assert text.index("unset PYTHONDONTWRITEBYTECODE") < text.index("-m pytest")
