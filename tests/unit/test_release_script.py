"""scripts/release.sh on a HEAD between releases (issue 50, finding 3).

A newcomer's ``bash scripts/release.sh`` on ``main`` (``0.5.0.dev0``) spent
320 s installing the release extra and then refused; the version is now
checked first, and ``--dev`` builds a development snapshot whose version
names its commit (``0.5.0.dev0+gCOMMIT``), never tagged.

The script runs as written in a throwaway git repository; ``PYTHON`` is a
stand-in that records what it is asked and "builds" by naming the artifacts
after the version it finds in the tree it is given: no pip, no setuptools.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >>"$CALLS"
if [ "${1:-}" = -m ] && [ "${2:-}" = build ]; then
    out=$4 src=$5
    version=$(sed -n -E 's/^__version__ = "([^"]*)"$/\\1/p' "$src/bmaas/__init__.py")
    mkdir -p "$out"
    touch "$out/bmaas-$version.tar.gz" "$out/bmaas-$version-py3-none-any.whl"
fi
exit 0
"""


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _repo(tmp_path: Path, version: str) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    (root / "bmaas").mkdir()
    (root / "docs").mkdir()
    shutil.copy(REPO / "scripts" / "release.sh", root / "scripts" / "release.sh")
    # setup.sh must not run: a stand-in that says so if it does
    (root / "scripts" / "setup.sh").write_text('echo "SETUP RAN" >&2\nexit 0\n')
    (root / "bmaas" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (root / "docs" / "releases.md").write_text("# Releases\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "start")
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "CALLS": str(tmp_path / "calls.log")}
    return root, env


def _release(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/release.sh", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_development_head_is_refused_before_anything_is_installed(tmp_path: Path) -> None:
    root, env = _repo(tmp_path, "0.5.0.dev0")
    env["PYTHON"] = str(tmp_path / "no-such-python")  # a set-up would be needed
    started = time.monotonic()
    done = _release(root, env)
    assert done.returncode == 1
    assert "HEAD is at 0.5.0.dev0, not a release" in done.stderr
    assert "scripts/release.sh --dev" in done.stderr
    assert "SETUP RAN" not in done.stderr
    assert "installing" not in done.stderr
    assert time.monotonic() - started < 30


def test_dev_builds_a_snapshot_named_by_its_commit_and_never_tags(tmp_path: Path) -> None:
    root, env = _repo(tmp_path, "0.5.0.dev0")
    commit = _git(root, "rev-parse", "--short", "HEAD")
    done = _release(root, env, "--dev")
    assert done.returncode == 0, done.stderr
    version = f"0.5.0.dev0+g{commit}"
    assert (root / "dist" / f"bmaas-{version}.tar.gz").exists()
    assert (root / "dist" / f"bmaas-{version}-py3-none-any.whl").exists()
    assert "SETUP RAN" not in done.stderr
    assert _git(root, "tag") == ""
    assert "not tagged" in done.stderr
    # the repository's own version is left as it is
    assert (root / "bmaas" / "__init__.py").read_text() == '__version__ = "0.5.0.dev0"\n'
    calls = (tmp_path / "calls.log").read_text()
    assert "-m build --outdir" in calls
    assert "scripts/check_dist.py" in calls


def test_dev_is_not_for_tagging_or_notes(tmp_path: Path) -> None:
    root, env = _repo(tmp_path, "0.5.0.dev0")
    for args in (("--dev", "--tag"), ("--dev", "--notes", "0.5.0")):
        done = _release(root, env, *args)
        assert done.returncode == 1, args
        assert "--dev" in done.stderr
    assert not (tmp_path / "calls.log").exists()
