"""``hwlab proxy`` takes the BMC's password and key from a file or the
environment, never from argv, where every user reads them (``ps``; issue 36)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.faults import InputError
from bmaas.hwlab.cli import cli as hwlab_cli
from bmaas.hwlab.cli.proxy import KG_ENV, PASSWORD_ENV, read_secret

SECRET = "Sup3r-s3cret-BMC"


@pytest.mark.parametrize(
    ("option", "instead", "env"),
    [("--password", "--password-file", PASSWORD_ENV), ("--kg", "--kg-file", KG_ENV)],
)
def test_a_secret_on_the_command_line_is_refused_with_one_line(
    option: str, instead: str, env: str, tmp_path: Path
) -> None:
    args = [
        *("proxy", "--protocol", "ipmi", "--upstream", "127.0.0.1:9", option, SECRET),
        *("--state-dir", str(tmp_path / "state")),
    ]
    result = CliRunner().invoke(hwlab_cli, args, catch_exceptions=False)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        f"error: {option} is not accepted: a secret on the command line is visible to "
        f"every user (ps); use {instead} PATH or set {env}"
    ]
    assert SECRET not in result.output
    assert not (tmp_path / "state").exists()  # refused before anything started


def test_the_options_help_names_the_file_and_the_variable() -> None:
    result = CliRunner().invoke(hwlab_cli, ["proxy", "--help"])
    assert result.exit_code == 0
    assert "--password-file" in result.output
    assert PASSWORD_ENV in result.output
    assert "--kg-file" in result.output
    assert "--password " not in result.output  # hidden: it only refuses


def test_a_secret_from_a_file_loses_its_trailing_newline(tmp_path: Path) -> None:
    path = tmp_path / "bmc.pass"
    path.write_text(SECRET + "\n")
    secret = read_secret(str(path), PASSWORD_ENV, option="--password-file", environ={})
    assert secret.reveal() == SECRET
    assert SECRET not in repr(secret)


def test_a_secret_from_the_environment() -> None:
    secret = read_secret(None, PASSWORD_ENV, option="--password-file", environ={PASSWORD_ENV: "x"})
    assert secret.reveal() == "x"
    assert read_secret(None, PASSWORD_ENV, option="--password-file", environ={}).reveal() == ""


def test_a_file_and_the_variable_together_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "bmc.pass"
    path.write_text("a\n")
    with pytest.raises(InputError, match=f"give --password-file or set {PASSWORD_ENV}, not both"):
        read_secret(str(path), PASSWORD_ENV, option="--password-file", environ={PASSWORD_ENV: "b"})


@pytest.mark.parametrize("what", ["missing", "empty", "fifo"])
def test_a_bad_password_file_is_one_line_naming_it(what: str, tmp_path: Path) -> None:
    path = tmp_path / "bmc.pass"
    if what == "empty":
        path.write_text("\n")
    elif what == "fifo":
        os.mkfifo(path)
    args = [
        *("proxy", "--protocol", "ipmi", "--upstream", "127.0.0.1:9", "--username", "admin"),
        *("--password-file", str(path), "--state-dir", str(tmp_path / "state")),
    ]
    result = CliRunner().invoke(hwlab_cli, args, catch_exceptions=False)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: --password-file: ")
    assert str(path) in lines[0]
