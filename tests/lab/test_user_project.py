"""A user's project with its own ``drivers``, ``fakes`` and ``hwlab`` packages
deploys through bmaas and runs the pytest plugin, both from its own folder.

Before bmaas installed under one import root, such a project (lab-CI
repositories very often have a ``drivers/``) shadowed bmaas's: every deploy
failed with ``No module named 'drivers.redfish'`` and the plugin with
``No module named 'fakes.machine'``. Here the project's folder is first on
``PYTHONPATH``, as it is for a user's tests and tools.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent

#: the user's own packages, each importable and recognisably theirs
USER_PACKAGES = {
    "drivers/__init__.py": "OWNER = 'user'\n",
    "drivers/redfish.py": "OWNER = 'user'\n",
    "fakes/__init__.py": "OWNER = 'user'\n",
    "fakes/machine.py": "OWNER = 'user'\n",
    "hwlab/__init__.py": "OWNER = 'user'\n",
}

PLUGIN_TEST = """
import drivers.redfish
import fakes.machine
import hwlab
import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.registry import build_driver


@pytest.mark.lab
def test_the_plugin_and_the_users_packages_side_by_side(hwlab_lab):
    assert (drivers.redfish.OWNER, fakes.machine.OWNER, hwlab.OWNER) == ("user",) * 3
    lab = hwlab_lab(nodes=2, protocols="mixed", seed=3)
    for node in lab.inventory()["nodes"]:
        driver = build_driver(node["name"], node["driver"], node["driver_info"], bmc_timeout=5.0)
        try:
            assert driver.get_power_state(deadline=Deadline.after(10.0)) in set(PowerState)
        finally:
            driver.close()
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "userproject"
    for name, text in USER_PACKAGES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _env(project: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "HWLAB_", "BMAAS_"))}
    return env | {
        "HOME": str(home),
        "PYTHONPATH": str(project),
        "BMAAS_DB": str(home / "bmaas.db"),
        "PATH": str(BIN) + os.pathsep + env.get("PATH", ""),
    }


def _run(args: list[str], project: Path, env: dict[str, str], timeout: float = 180):
    return subprocess.run(
        args, cwd=project, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.lab
def test_a_project_with_its_own_drivers_and_fakes_deploys(project: Path, tmp_path: Path) -> None:
    env = _env(project, tmp_path / "home")
    state = tmp_path / "lab"
    # the user's packages are what `import drivers` finds from this project
    probe = _run(
        [sys.executable, "-c", "import drivers, fakes; print(drivers.OWNER)"], project, env
    )
    assert probe.stdout.strip() == "user", probe.stderr
    up = _run(
        ["hwlab", "up", "--nodes", "2", "--protocols", "mixed", "--state-dir", str(state)],
        project,
        env,
    )
    try:
        assert up.returncode == 0, up.stderr
        enroll = _run(["bmaas", "enroll", str(state / "inventory.yaml")], project, env)
        assert enroll.returncode == 0, enroll.stderr
        deploy = _run(
            ["bmaas", "deploy", "--count", "2", "--settle", "0", "--deadline", "120", "--json"],
            project,
            env,
        )
        assert deploy.returncode == 0, deploy.stdout + deploy.stderr
        report = json.loads(deploy.stdout)
        assert "No module named" not in deploy.stderr
        assert len(report["requests"]) == 2
    finally:
        _run(["hwlab", "down", "--state-dir", str(state), "--timeout", "5"], project, env, 60)


@pytest.mark.lab
def test_a_project_with_its_own_packages_runs_the_pytest_plugin(
    project: Path, tmp_path: Path
) -> None:
    (project / "test_user.py").write_text(PLUGIN_TEST)
    env = _env(project, tmp_path / "home") | {"PYTHONDONTWRITEBYTECODE": "1"}
    args = [sys.executable, "-m", "pytest", "-q", "--strict-markers", "-W", "error"]
    args += ["-p", "no:cacheprovider", "--rootdir", str(project), str(project)]
    result = _run(args, project, env, timeout=150)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
