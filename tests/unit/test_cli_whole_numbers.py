"""Every whole-number option of bmaas's own commands is ASCII digits
(issue 44): Python's ``int`` takes Arabic-Indic and fullwidth digits and
underscores, which no operator types on purpose."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from bmaas.cli import cli
from bmaas.cli.app import App


@pytest.mark.parametrize(
    "args",
    [
        ["power", "status", "--all", "--workers", "\u0662"],
        ["power", "status", "--all", "--workers", "1_0"],
        ["deploy", "--count", "\uff12", "--image", "http://127.0.0.1/i.iso"],
        ["sync", "--interval", "60", "--count", "\u0663"],
    ],
    ids=["arabic-indic", "underscore", "fullwidth", "sync-count"],
)
def test_a_count_not_in_ascii_digits_is_exit_2_with_one_line(args: list[str]) -> None:
    done = CliRunner().invoke(cli, args, obj=App())
    assert done.exit_code == 2, done.output
    assert "is not a whole number in ASCII digits" in done.output
    assert "Traceback" not in done.output
