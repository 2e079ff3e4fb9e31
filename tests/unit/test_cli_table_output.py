"""A table on stdout is never cut by a log line on stderr (issue 50: "WARNING
lines land between a table's rows" on a terminal, where both streams meet):
rows are rendered first and written in one piece, while no log record is
written."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import click
import pytest
from click.testing import CliRunner

from bmaas.cli import App, cli
from bmaas.cli.app import print_results, table
from bmaas.cli.status import print_table
from bmaas.cliutil import echo_rows
from bmaas.ops import NodeResult
from bmaas.status.result import CheckResult, Result
from bmaas.store import Store

LOG = logging.getLogger("bmaas.tests.table")


@pytest.fixture
def to_stderr() -> Iterator[logging.Handler]:
    """What `bmaas` logs through on a terminal (bmaas.cliutil.setup_logging):
    a root handler on stderr, set to CliRunner's stderr when the command runs."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    yield handler
    logging.getLogger().removeHandler(handler)


def _invoke(handler: logging.Handler, body: Any) -> str:
    @click.command()
    def command() -> None:
        handler.setStream(sys.stderr)
        logging.getLogger().addHandler(handler)
        body()

    result = CliRunner().invoke(command, [], catch_exceptions=False)
    return result.output  # stdout and stderr, in the order written


def _rows_together(output: str, rows: list[str]) -> None:
    lines = output.splitlines()
    first = lines.index(rows[0])
    assert lines[first : first + len(rows)] == rows, output


def test_a_fleet_table_s_rows_stay_together(to_stderr: logging.Handler) -> None:
    def describe(value: Any) -> str:
        LOG.warning("rendering %s", value)  # logged while the table is made
        return str(value)

    results = [NodeResult(f"node-{i}", "fake", value=f"v{i}") for i in range(3)]
    output = _invoke(
        to_stderr, lambda: print_results(results, as_json=False, elapsed=1.0, describe=describe)
    )
    _rows_together(output, [f"node-{i}  ok    v{i}" for i in range(3)])
    assert output.count("WARNING rendering") == 3


def test_no_log_record_is_written_while_a_table_is(to_stderr: logging.Handler) -> None:
    """Another thread's WARNING waits for the table: the handler's lock is
    held while the rows are written."""
    held: list[bool] = []

    def body() -> None:
        def try_to_log() -> None:
            free = to_stderr.lock is not None and to_stderr.lock.acquire(blocking=False)
            if free:
                assert to_stderr.lock is not None
                to_stderr.lock.release()
            held.append(not free)

        stdout = sys.stdout
        write = stdout.write

        def probing(text: str) -> int:
            thread = threading.Thread(target=try_to_log)
            thread.start()
            thread.join()
            return write(text)

        stdout.write = probing  # type: ignore[method-assign]
        try:
            echo_rows(["a  1", "b  2"])
        finally:
            stdout.write = write  # type: ignore[method-assign]

    assert "a  1\nb  2" in _invoke(to_stderr, body)
    assert held
    assert all(held)


def _tables(handler: logging.Handler, body: Callable[[], None]) -> list[str]:
    """What ``body`` wrote to stdout, one entry a write (blank ones left out)."""
    writes: list[str] = []

    def counted() -> None:
        stdout = sys.stdout
        write = stdout.write

        def counting(text: str) -> int:
            writes.append(text)
            return write(text)

        stdout.write = counting  # type: ignore[method-assign]
        try:
            body()
        finally:
            stdout.write = write  # type: ignore[method-assign]

    _invoke(handler, counted)
    return [w for w in writes if isinstance(w, str) and w.strip()]


def test_every_table_printer_writes_its_rows_at_once(to_stderr: logging.Handler) -> None:
    def body() -> None:
        table([("n1", "on"), ("n2", None)], ["name", "power"])
        print_table(
            [CheckResult("db", Result.SUCCESS, ("ok",)), CheckResult("bmc", Result.WARNING, ())]
        )

    tables = _tables(to_stderr, body)
    assert len(tables) == 2, tables
    assert tables[0].splitlines() == ["NAME  POWER", "n1    on", "n2    -"]
    assert tables[1].splitlines()[0].startswith("CHECK")


def test_maintenance_status_writes_its_table_at_once(
    to_stderr: logging.Handler, store: Store, db_url: str, enroll: Callable[..., list[str]]
) -> None:
    nodes = enroll(3)
    store.nodes.set_maintenance(nodes[0], reason="swap PSU", by="alice")
    args = ["--db", db_url, "maintenance", "status", *nodes]
    tables = _tables(to_stderr, lambda: cli.main(args, obj=App(), standalone_mode=False))
    assert len(tables) == 1, tables
    assert [line.split()[0] for line in tables[0].splitlines()] == nodes
