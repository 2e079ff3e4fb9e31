"""Nothing in the current directory shadows bmaas (issue 44, finding 3).

``hwlab up`` run from the directory that holds a clone failed in every
worker: the daemon started as ``python -m`` and its workers as ``python -c``
(multiprocessing's spawn), both with the current directory first on the
path, so the clone's ``bmaas/`` folder was imported instead of the installed
package (``cannot import name '__version__' from 'bmaas' (unknown
location)``). hwlab now starts every Python of its own with ``-P``
(:mod:`bmaas.hwlab.pyexec`); these run a lab, and a stock sushy-emulator,
from a directory holding decoys."""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from bmaas.hwlab.proxy.stock import StockSushy

pytestmark = pytest.mark.lab

HWLAB = shutil.which("hwlab") or str(Path(sys.executable).with_name("hwlab"))
#: a decoy package that stops any process that imports it, saying so
DECOY = "raise SystemExit('imported the decoy {name}/ of the current directory')\n"


def _hwlab(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HWLAB, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    "decoy",
    [
        pytest.param("folder", id="a-clone's-parent"),  # bmaas/ without __init__.py: the finding
        pytest.param("package", id="a-bmaas-package"),  # bmaas/__init__.py that exits
    ],
)
def test_hwlab_up_beside_a_bmaas_folder_imports_the_installed_bmaas(
    tmp_path: Path, decoy: str
) -> None:
    here = tmp_path / "here"
    (here / "bmaas").mkdir(parents=True)
    if decoy == "package":
        (here / "bmaas" / "__init__.py").write_text(DECOY.format(name="bmaas"))
    else:
        (here / "bmaas" / "README").write_text("a clone's bmaas/ folder, say\n")
    state = tmp_path / "state"
    # mixed: an IPMI and a Redfish worker (the Redfish one reads bmaas.__version__)
    up = _hwlab(here, "up", "--nodes", "2", "--protocols", "both", "--state-dir", str(state))
    try:
        assert up.returncode == 0, up.stderr + (state / "hwlab.log").read_text()
        status = _hwlab(here, "status", "--state-dir", str(state))
        assert status.returncode == 0, status.stderr
        assert "decoy" not in (state / "hwlab.log").read_text()
    finally:
        down = _hwlab(here, "down", "--state-dir", str(state))
    assert down.returncode == 0, down.stderr


def test_stock_sushy_started_beside_a_sushy_tools_package_is_the_installed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "here"
    (here / "sushy_tools").mkdir(parents=True)
    (here / "sushy_tools" / "__init__.py").write_text(DECOY.format(name="sushy_tools"))
    monkeypatch.chdir(here)  # the emulator's process starts here
    server = StockSushy(tmp_path / "sushy", ["node1"])
    server.start()
    try:
        with urllib.request.urlopen(f"{server.url}/redfish/v1/", timeout=10) as answer:  # noqa: S310
            assert answer.status == 200
    finally:
        server.stop()
    assert "decoy" not in server.log_path.read_text()
