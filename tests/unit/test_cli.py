"""The console scripts exist, answer --help and --version, and fail in one line."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from bmaas import __version__
from bmaas.cli import cli as bmaas_cli


@pytest.mark.parametrize("script", ["bmaas", "hwlab"])
def test_console_script_help_and_version(script: str) -> None:
    exe = shutil.which(script) or pytest.fail(f"{script} is not installed on PATH")
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True, timeout=60)
    assert f"Usage: {script}" in out.stdout
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True, timeout=60)
    assert __version__ in out.stdout


def test_packages_import() -> None:
    code = "import bmaas, drivers, fakes, hwlab; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok"


def test_drivers_lists_the_fake_driver_as_json() -> None:
    result = CliRunner().invoke(bmaas_cli, ["drivers", "--json"])
    assert result.exit_code == 0
    assert '"fake"' in result.output
