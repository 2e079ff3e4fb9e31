"""Bad input is exit 2 with its own line at any budget (issue 44, finding 6).

A fleet command's ``--deadline`` counts from ``exec``; a start-up that spent
it ends the command ("... spent by start-up; nothing was asked", exit 1).
That rule once spoke before click had read the command line, so
``--deadline 0`` (below the 0.1 s floor), an unknown subcommand or option,
``--bmc-timeout nan`` or a bad ``--db`` URL exited 1 and the real error was
never shown. Here start-up is made to take 100 s (``process_started``,
where ``main()`` reads the exec time), so every budget is spent before the
command begins: the command line must still be judged first."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import bmaas.clock
from bmaas.cli import main
from bmaas.cli.dburl import problem

FLEET = [
    ["power", "status", "--all"],
    ["power", "on", "--all", "--no-wait"],
    ["boot-device", "get", "--all"],
    ["boot-device", "set", "--all", "--device", "pxe"],
    ["vmedia", "eject", "--all"],
    ["vmedia", "insert", "--all", "--url", "http://images.example/a.iso"],
    ["sync"],
]
IDS = [" ".join(c[:2]) for c in FLEET]


@pytest.fixture
def spent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Start-up took 100 s: every ``--deadline`` is spent before parsing.
    The database's path (never made)."""
    monkeypatch.setattr(bmaas.clock, "process_started", lambda **_: time.monotonic() - 100.0)
    monkeypatch.delenv("BMAAS_DB", raising=False)
    return tmp_path / "bmaas.db"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    code = info.value.code
    return (0 if code is None else int(code)), capsys.readouterr().err


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.lower().startswith("error")]


@pytest.mark.parametrize("seconds", ["0", "0.01", "0.09", "-0.0", "1e-9"])
@pytest.mark.parametrize("command", FLEET, ids=IDS)
def test_a_deadline_below_the_range_is_exit_2_however_long_start_up_took(
    spent: Path, capsys: pytest.CaptureFixture[str], command: list[str], seconds: str
) -> None:
    code, err = run(capsys, "--db", str(spent), *command, "--deadline", seconds)
    assert code == 2, err
    assert "spent by start-up" not in err
    [line] = error_lines(err)
    assert "'--deadline'" in line, line
    assert "from 0.1 to 86400" in line, line
    assert not spent.exists()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--bogus"], "--bogus"),  # "No such option: --bogus" (click 8.1) or "'--bogus'" (8.2+)
        (["--bmc-timeout", "nan"], "'--bmc-timeout'"),
        (["--workers", "0"], "'--workers'"),
    ],
    ids=["unknown option", "bmc-timeout nan", "workers 0"],
)
@pytest.mark.parametrize("command", FLEET, ids=IDS)
def test_a_bad_option_is_exit_2_with_its_own_line_when_the_budget_is_spent(
    spent: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    extra: list[str],
    said: str,
) -> None:
    code, err = run(capsys, "--db", str(spent), *command, "--deadline", "0.1", *extra)
    assert code == 2, err
    assert "spent by start-up" not in err
    [line] = error_lines(err)
    assert said in line, line
    if extra == ["--bogus"]:
        assert "No such option" in line, line


@pytest.mark.parametrize(
    "args",
    [
        ["power", "stat", "--all"],
        ["boot-device", "put", "--all"],
        ["vmedia", "mount", "--all"],
        ["powr", "status", "--all"],
    ],
)
def test_an_unknown_subcommand_is_exit_2_when_the_budget_is_spent(
    spent: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    code, err = run(capsys, "--db", str(spent), *args, "--deadline", "0.1")
    assert code == 2, err
    assert "spent by start-up" not in err
    [line] = error_lines(err)
    assert "No such command" in line, line


@pytest.mark.parametrize(
    ("db", "said"),
    [
        ("foo://x", "--db: unknown database type 'foo'"),
        ("postgresql+psycopg://bmaas:hunter2@db:99999/bmaas", "--db: not a database URL"),
        ("postgresql://db:port/bmaas", "--db: not a database URL"),
        ("-bad-://x", "--db: not a database URL"),
    ],
)
@pytest.mark.parametrize("command", FLEET, ids=IDS)
def test_a_bad_db_url_is_exit_2_when_the_budget_is_spent(
    spent: Path, capsys: pytest.CaptureFixture[str], command: list[str], db: str, said: str
) -> None:
    code, err = run(capsys, "--db", db, *command, "--deadline", "0.1")
    assert code == 2, err
    [line] = error_lines(err)
    assert line.startswith(f"error: {said}"), line
    assert "hunter2" not in err  # the URL is never echoed: it may hold a password


def test_a_bad_bmaas_db_is_named_as_such(
    spent: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BMAAS_DB", "foo://x")
    code, err = run(capsys, "power", "status", "--all", "--deadline", "0.1")
    assert code == 2, err
    [line] = error_lines(err)
    assert line.startswith("error: BMAAS_DB: unknown database type 'foo': give a SQLite path")


@pytest.mark.parametrize(
    ("selection", "said"),
    [([], "name at least one node, or give --all"), (["n1", "--all"], "not both")],
)
@pytest.mark.parametrize("command", FLEET[:-1], ids=IDS[:-1])
def test_nodes_or_all_is_checked_before_the_deadline(
    spent: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    selection: list[str],
    said: str,
) -> None:
    args = [a for a in command if a != "--all"] + selection
    code, err = run(capsys, "--db", str(spent), *args, "--deadline", "0.1")
    assert code == 2, err
    [line] = error_lines(err)
    assert said in line, line


@pytest.mark.parametrize("command", FLEET, ids=IDS)
def test_a_good_command_line_whose_budget_start_up_spent_still_ends_at_once(
    spent: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """The start-up rule itself, once the command line is known good."""
    code, err = run(capsys, "--db", str(spent), *command, "--deadline", "0.1")
    assert code == 1, err
    [line] = error_lines(err)
    assert "the 0.1 s --deadline was spent by start-up" in line
    assert "nothing was asked" in line
    assert not spent.exists()


# -- --db's shape, as the store judges it ----------------------------------------------

#: URLs and what the store says of them when it opens them (None: it reads them)
CORPUS = [
    "foo://x",
    "postgresql+psycopg://u:p@h:5432/db",
    "postgresql://h:x/db",
    "-bad-://x",
    "sqlite:///tmp/x.db",
    "sqlite://",
    "mysql+pymysql://u@h/db",
    "postgresql+psycopg://u@[::1]:5432/db",
    "nosuchdialect+psycopg://u@h/db",
    "postgresql+psycopg://u@h:/db",
    "postgresql+nosuchdriver://u@h/db",
]
#: refused by the store, left to it here (knowing a type's drivers takes SQLAlchemy)
LEFT_TO_THE_STORE = {"postgresql+nosuchdriver://u@h/db"}


@pytest.mark.parametrize("url", CORPUS)
def test_the_shape_check_refuses_only_what_the_store_refuses(url: str) -> None:
    """What :func:`bmaas.cli.dburl.problem` refuses, the store refuses too
    (``make_url`` or its dialect lookup); it may leave more to the store."""
    import sqlalchemy as sa

    try:
        parsed = sa.make_url(url)
        parsed.get_dialect()
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ValueError):
        store_refuses = True
    except ImportError:  # a known type whose DBAPI is missing: not a shape
        store_refuses = False
    else:
        store_refuses = False
    if problem(url) is not None:
        assert store_refuses, f"{url}: refused here, read by the store"
    else:
        assert not store_refuses or url in LEFT_TO_THE_STORE, f"{url}: the store refuses it"


def test_a_port_sqlalchemy_would_take_is_refused_when_it_is_no_port() -> None:
    """The one deliberate difference: ``validate.port``'s range (SQLAlchemy
    reads 99999 and the connect fails later)."""
    found = problem("postgresql+psycopg://u@h:99999/db")
    assert found is not None
    assert "from 1 to 65535" in str(found)


def test_the_environment_variable_is_the_stores() -> None:
    from bmaas.cli import dburl
    from bmaas.store.location import ENV_VAR

    assert dburl.ENV_VAR == ENV_VAR
