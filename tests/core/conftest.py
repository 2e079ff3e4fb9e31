"""``fleet`` (one per backend) and ``bmaas``: run the CLI against it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bmaas.cli import App, cli
from tests.core.backends import BACKENDS, CoreFleet


@pytest.fixture(params=BACKENDS)
def fleet(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[CoreFleet]:
    with request.param(tmp_path, monkeypatch) as built:
        yield built


@dataclasses.dataclass
class Run:
    """Every CLI run of a test, to check all of its output at the end."""

    results: list[Result] = dataclasses.field(default_factory=list)

    @property
    def output(self) -> str:
        return "\n".join(r.stdout + r.stderr for r in self.results)


@pytest.fixture
def runs() -> Run:
    return Run()


@pytest.fixture
def db(tmp_path: Path) -> str:
    """The state database the CLI runs on (a temp SQLite file)."""
    return str(tmp_path / "bmaas.db")


@pytest.fixture
def bmaas(fleet: CoreFleet, db: str, runs: Run) -> Callable[..., Result]:
    """``bmaas("power", "status", "--all")``: the CLI in-process, on a temp DB,
    with drivers from the fleet."""

    def run(*args: str, expect: int | None = 0) -> Result:
        app = App(db=db, make_factory=fleet.make_factory, retry=fleet.retry)
        result = CliRunner().invoke(cli, list(args), obj=app, catch_exceptions=False)
        runs.results.append(result)
        if expect is not None:
            assert result.exit_code == expect, result.stdout + result.stderr
        return result

    return run
