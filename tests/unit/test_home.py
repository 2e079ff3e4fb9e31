"""``BMAAS_HOME`` (issue 50): one variable roots every default path, so two
jobs on one account never share a store, a key or a lab."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas import sealed
from bmaas.cli import cli
from bmaas.cli.app import App
from bmaas.home import HOME_ENV, user_dir
from bmaas.hwlab.cli.common import default_state_dir
from bmaas.hwlab.cli.vm import _default_state_dir as vm_state_dir
from bmaas.store.location import default_db_path, resolve_url

INVENTORY = """\
nodes:
  - name: n1
    driver: fake
    driver_info: {fake_machine: n1, ipmi_password: job-secret-pw}
"""


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in (HOME_ENV, "BMAAS_DB", sealed.KEY_FILE_ENV, "HWLAB_STATE_DIR"):
        monkeypatch.delenv(var, raising=False)
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / "xdg" / var.lower()))
    return tmp_path


def test_without_it_the_defaults_are_per_user(clean: Path) -> None:
    xdg = clean / "xdg"
    assert default_db_path() == xdg / "xdg_data_home" / "bmaas" / "bmaas.db"
    assert sealed.default_key_path() == xdg / "xdg_config_home" / "bmaas" / "store.key"
    assert Path(default_state_dir()) == xdg / "xdg_state_home" / "hwlab" / "default"


def test_it_roots_the_store_the_key_and_the_labs(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = clean / "job-1"
    monkeypatch.setenv(HOME_ENV, str(home))
    assert default_db_path() == home / "bmaas.db"
    assert resolve_url() == f"sqlite:///{home / 'bmaas.db'}"
    assert sealed.key_path() == home / "store.key"
    assert Path(default_state_dir()) == home / "hwlab" / "default"
    assert user_dir("state", "hwlab") == home / "hwlab"
    assert Path(vm_state_dir()) == home / "hwlab" / "vm"


def test_explicit_paths_still_win(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_ENV, str(clean / "job"))
    monkeypatch.setenv("BMAAS_DB", str(clean / "elsewhere.db"))
    monkeypatch.setenv(sealed.KEY_FILE_ENV, str(clean / "k" / "store.key"))
    assert resolve_url() == f"sqlite:///{clean / 'elsewhere.db'}"
    assert sealed.key_path() == clean / "k" / "store.key"


def test_two_jobs_with_two_homes_never_meet(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inventory = clean / "inventory.yaml"
    inventory.write_text(INVENTORY)
    runner = CliRunner()
    for job in ("job-1", "job-2"):
        monkeypatch.setenv(HOME_ENV, str(clean / job))
        done = runner.invoke(cli, ["enroll", str(inventory)], obj=App())
        assert done.exit_code == 0, done.output
    keys = {job: sealed.read_keyring(clean / job / "store.key").ids for job in ("job-1", "job-2")}
    assert keys["job-1"] != keys["job-2"]
    monkeypatch.setenv(HOME_ENV, str(clean / "job-1"))
    done = runner.invoke(cli, ["db", "rotate-key"], obj=App())
    assert done.exit_code == 0, done.output
    assert sealed.read_keyring(clean / "job-2" / "store.key").ids == keys["job-2"]  # untouched
    assert sealed.read_keyring(clean / "job-1" / "store.key").ids != keys["job-1"]
    assert not (clean / "xdg").exists()  # nothing under the account's own directories
