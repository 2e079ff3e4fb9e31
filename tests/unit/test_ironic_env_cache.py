"""scripts/ironic-env.sh installs Ironic once per constraints file (issue 50,
finding 2): a stamp in the venv records the release, the constraints' hash
and the Python; a re-run with all three unchanged installs nothing, an edited
constraints file installs again.

The script runs as written, in a copy of the repository's layout, against a
stand-in venv whose ``python`` records what it was asked: no pip, no Ironic.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "ironic-env.sh"

# what the stand-in python answers: pip "installs" (an Ironic install leaves
# its version), a metadata read prints it, every import succeeds
FAKE_PYTHON = """#!/usr/bin/env bash
here=$(cd "$(dirname "$0")/.." && pwd)
args="$*"
echo "$args" >>"$here/calls.log"
case "$args" in
*"-m pip install"*"ironic=="*) echo "${args##*ironic==}" | cut -d' ' -f1 >"$here/ironic-version" ;;
*"-m pip"*) ;;
*importlib.metadata*) cat "$here/ironic-version" 2>/dev/null || exit 1 ;;
*sys.version*) echo 3.11.7 ;;
esac
exit 0
"""


def _release() -> str:
    found = re.search(r"^DEFAULT_RELEASE=(\S+)$", SCRIPT.read_text(), re.M)
    assert found is not None
    return found.group(1)


def _layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "repo"
    (root / "scripts" / "ironic-constraints").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "scripts" / "ironic-env.sh")
    (root / "pyproject.toml").write_text('[project]\nname = "bmaas"\n')
    constraints = root / "scripts" / "ironic-constraints" / f"{_release()}.txt"
    constraints.write_text("oslo.config===10.0.0\n")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return root, constraints, venv


def _run(root: Path, venv: Path) -> tuple[list[str], str]:
    log = venv / "calls.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "BMAAS_IRONIC_VENV": str(venv), "PYTHON": str(venv / "bin" / "python")}
    done = subprocess.run(
        ["bash", str(root / "scripts" / "ironic-env.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines() if log.exists() else []
    return [c for c in calls if "pip install" in c and "ironic==" in c], done.stderr


def test_ironic_is_installed_once_per_constraints_file(tmp_path: Path) -> None:
    root, constraints, venv = _layout(tmp_path)

    installs, _ = _run(root, venv)
    assert len(installs) == 1
    assert f"ironic=={_release()}" in installs[0]
    assert f"-c scripts/ironic-constraints/{_release()}.txt" in installs[0]

    installs, err = _run(root, venv)
    assert installs == [], "a re-run with the same constraints installs nothing"
    assert "already in" in err

    constraints.write_text("oslo.config===10.1.0\n")
    installs, err = _run(root, venv)
    assert len(installs) == 1, "an edited constraints file installs again"
    assert "installed with another" in err

    installs, _ = _run(root, venv)
    assert installs == []


def test_a_venv_from_before_the_stamp_is_installed_with_its_constraints(tmp_path: Path) -> None:
    # Ironic present at the release, but nothing says with which constraints
    root, _, venv = _layout(tmp_path)
    (venv / "ironic-version").write_text(_release() + "\n")
    installs, _ = _run(root, venv)
    assert len(installs) == 1
    assert (venv / ".ironic-stamp").read_text().split()[0] == _release()
