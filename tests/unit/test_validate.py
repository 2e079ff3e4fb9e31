"""The one set of rules for numbers, names and files (bmaas.validate,
bmaas.files) and the click types built on them."""

from __future__ import annotations

import math
import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bmaas import validate
from bmaas.cliutil import FiniteFloat, InputFile, Name, Seconds
from bmaas.files import MAX_SECRET_BYTES, FileRefused, read_limited


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, "1", None, [1]])
def test_number_refuses_what_is_not_a_finite_number(value: object) -> None:
    with pytest.raises(ValueError, match="must be"):
        validate.number(value)


def test_number_keeps_its_range_and_says_it() -> None:
    assert validate.number(3, low=0, high=5) == 3.0
    with pytest.raises(ValueError, match=r"must be a number from 0 to 5, not 6"):
        validate.number(6, low=0, high=5)
    with pytest.raises(ValueError, match=r"must be a number > 0, not 0"):
        validate.number(0, low=0, low_open=True)
    with pytest.raises(ValueError, match="-bit number"):
        validate.number(10**400, high=1)  # too large for a float: no OverflowError


@pytest.mark.parametrize("value", [623.5, 623.0, "623.5", True, 0, 65536, -1, "\u00b2", math.nan])
def test_port_refuses(value: object) -> None:
    with pytest.raises(ValueError, match="must be a port from 1 to 65535"):
        validate.port(value)


@pytest.mark.parametrize(("value", "port"), [(623, 623), ("623", 623), (" 8443 ", 8443)])
def test_port_accepts_whole_numbers_and_digit_text(value: object, port: int) -> None:
    assert validate.port(value) == port


def test_seconds_are_at_most_a_day() -> None:
    assert validate.seconds(86_400) == 86_400.0
    with pytest.raises(ValueError, match="from 0 to 86400"):
        validate.seconds(1e300)


@pytest.mark.parametrize("name", ["r1-n01", "a", "x86_64.node", "A" * 255])
def test_names_from_the_alphabet(name: str) -> None:
    assert validate.is_name(name)


@pytest.mark.parametrize(
    "name", ["", "../../bad name", "a/b", "n1\n", "-lead", ".hidden", "A" * 256, "n\x00", 5]
)
def test_names_outside_the_alphabet(name: object) -> None:
    assert not validate.is_name(name)
    with pytest.raises(ValueError, match="letters, digits"):
        validate.name(name)


# -- files -----------------------------------------------------------------------


def test_read_limited_reads_a_small_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_bytes(b"secret\n")
    assert read_limited(path, limit=MAX_SECRET_BYTES) == b"secret\n"


def test_read_limited_refuses_a_file_over_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 11)
    with pytest.raises(FileRefused, match="is 11 bytes; at most 10 are read"):
        read_limited(path, limit=10)


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_read_limited_refuses_what_is_not_a_regular_file(kind: str, tmp_path: Path) -> None:
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)  # no writer: a plain open() would block here forever
    elif kind == "directory":
        path.mkdir()
    else:
        path = Path("/dev/zero")
    with pytest.raises(FileRefused, match=r"regular file|directory"):
        read_limited(path, limit=MAX_SECRET_BYTES)


def test_read_limited_passes_on_a_missing_file_as_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_limited(tmp_path / "nope", limit=10)


# -- click types --------------------------------------------------------------------


@click.command()
@click.option("--wait", type=Seconds(min=0.1))
@click.option("--ratio", type=FiniteFloat(0, 1))
@click.option("--prefix", type=Name(max_length=8))
@click.option("--file", "path", type=InputFile())
def command(wait: float | None, ratio: float | None, prefix: str | None, path: str | None) -> None:
    click.echo(f"{wait} {ratio} {prefix} {path}")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--wait", "nan"], "must be a finite number, not nan"),
        (["--wait", "-inf"], "must be a finite number"),
        (["--wait", "86401"], "from 0.1 to 86400"),
        (["--wait", "soon"], "'soon' is not a number of seconds"),
        (["--ratio", "1.5"], "from 0 to 1"),
        (["--prefix", "a b"], "letters, digits"),
        (["--prefix", "abcdefghi"], "at most 8 characters"),
        (["--file", "/dev/zero"], "is not a regular file"),
    ],
)
def test_click_types_refuse(args: list[str], says: str) -> None:
    result = CliRunner().invoke(command, args)
    assert result.exit_code == 2
    assert says in result.output


def test_click_types_accept(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    args = ["--wait", "2.5", "--ratio", "1", "--prefix", "web", "--file", str(path)]
    result = CliRunner().invoke(command, args)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"2.5 1.0 web {path}"
