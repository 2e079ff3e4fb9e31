"""The console scripts exist, answer --help and --version, and fail in one line."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from bmaas import __version__
from bmaas.cli import cli as bmaas_cli
from bmaas.store.migrate import head_revision


@pytest.mark.parametrize("script", ["bmaas", "hwlab"])
def test_console_script_help_and_version(script: str) -> None:
    exe = shutil.which(script) or pytest.fail(f"{script} is not installed on PATH")
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True, timeout=60)
    assert f"Usage: {script}" in out.stdout
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True, timeout=60)
    lines = out.stdout.splitlines()
    assert lines[0] == f"{script} {__version__}"
    # what a support question needs beside the version: the schema and the Python
    assert f"store schema: {head_revision()} " in out.stdout
    assert f"python: {platform.python_version()} " in out.stdout


def test_version_imports_nothing_heavy() -> None:
    """`--version` reads the schema head from the migration scripts' text:
    no SQLAlchemy, Alembic, rich or protocol library is loaded for it."""
    code = (
        "import sys\n"
        "from bmaas.cli import cli\n"
        "try:\n"
        "    cli.main(['--version'], standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = {'sqlalchemy', 'alembic', 'rich', 'pyghmi', 'sushy', 'sushy_tools'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines()[-1] == "[]"
    assert out.stdout.splitlines()[0] == f"bmaas {__version__}"


def test_packages_import() -> None:
    code = "import bmaas, drivers, fakes, hwlab; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok"


def test_drivers_lists_the_fake_driver_as_json() -> None:
    result = CliRunner().invoke(bmaas_cli, ["drivers", "--json"])
    assert result.exit_code == 0
    assert '"fake"' in result.output
