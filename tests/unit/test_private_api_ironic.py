"""Ironic's private attributes the bmaas plugin relies on (the ``ironic``
rows of bmaas.drivers.private_api), checked in the Ironic venv the way
test_private_api.py checks the others in .venv: on the current release
here (scripts/test.sh) and on the previous SLURP in CI's side-by-side step
(scripts/test-ironic-release.sh)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bmaas.drivers.private_api import PRIVATE_API
from bmaas.hwlab.harness import ironic as harness

pytestmark = pytest.mark.ironic

ROOT = Path(__file__).resolve().parents[2]
ROWS = [u.name for u in PRIVATE_API if u.library == "ironic"]

_CHECK = """
import sys
from bmaas.drivers.private_api import PRIVATE_API
from tests.privatecheck import check
for use in PRIVATE_API:
    if use.name in sys.argv[1:]:
        check(use)
        print("ok", use.name)
"""


def test_the_ironic_rows_hold_on_the_installed_ironic() -> None:
    assert ROWS, "no ironic rows: the plugin's private uses are listed in private_api"
    python = harness.find_venv() / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", _CHECK, *ROWS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert [
        line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("ok ")
    ] == ROWS
