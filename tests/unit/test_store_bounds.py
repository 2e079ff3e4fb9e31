"""The database edge takes its time from the command's Deadline: SQLite's
busy timeout, PostgreSQL's connect, statement and lock timeouts (a silent
server is tested end to end in tests/lab/test_silent_edges.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.fakes.clock import FakeClock
from bmaas.store import Store
from bmaas.store.engine import BUSY_TIMEOUT, GRACE, make_engine


def _busy_timeout_ms(store: Store) -> int:
    with store.db.read() as tx:  # the pragma the transaction started with
        return int(tx.conn.exec_driver_sql("PRAGMA busy_timeout").scalar() or 0)


def test_sqlite_waits_for_a_lock_only_as_long_as_the_deadline_has_left(db_path: Path) -> None:
    clock = FakeClock(start=0.0)
    store = Store.open(str(db_path), deadline=Deadline.after(12, clock=clock), create=True)
    try:
        assert _busy_timeout_ms(store) == 12_000
        clock.advance(9.5)
        assert _busy_timeout_ms(store) == 2_500  # what is left when the transaction starts
        clock.advance(60)
        # past the deadline: still GRACE, so the command can record what it found
        assert _busy_timeout_ms(store) == int(GRACE * 1000)
    finally:
        store.close()


def test_without_a_deadline_sqlite_keeps_its_30s_busy_timeout(db_path: Path) -> None:
    store = Store.open(str(db_path), create=True)
    try:
        assert _busy_timeout_ms(store) == int(BUSY_TIMEOUT * 1000)
    finally:
        store.close()


def _pg_connect_params(deadline: Deadline | None, host: str = "127.0.0.1") -> dict[str, Any]:
    """What the engine hands psycopg for a new connection (no server needed:
    the ``do_connect`` hooks run, the connect itself is not made)."""
    engine = make_engine("postgresql+psycopg://u@127.0.0.1:1/x", deadline=deadline)
    cparams: dict[str, Any] = {"host": host, "port": 1}
    engine.dialect.dispatch.do_connect(engine.dialect, None, [], cparams)
    engine.dispose()
    return cparams


@pytest.mark.parametrize(
    ("left", "connect_timeout", "statement_ms"),
    [
        (9.7, 9, 9_700),  # whole seconds, rounded down: gives up before the deadline
        (4.2, 4, 4_200),
        (1.5, 2, 1_500),  # libpq's minimum is 2 s
        (0.0, 2, int(GRACE * 1000)),  # past the deadline: GRACE for the statements
        (500.0, int(BUSY_TIMEOUT), int(BUSY_TIMEOUT * 1000)),  # never more than the cap
    ],
)
def test_postgresql_connect_and_statements_take_their_time_from_the_deadline(
    left: float, connect_timeout: int, statement_ms: int
) -> None:
    clock = FakeClock(start=0.0)
    params = _pg_connect_params(Deadline.after(left, clock=clock))
    assert params["connect_timeout"] == connect_timeout
    assert f"-c statement_timeout={statement_ms}" in params["options"]
    assert f"-c lock_timeout={statement_ms}" in params["options"]
    assert params["keepalives"] == 1  # a server host that vanished is noticed


def test_postgresql_without_a_deadline_is_bounded_by_the_store_timeout() -> None:
    params = _pg_connect_params(None)
    assert params["connect_timeout"] == int(BUSY_TIMEOUT)
    assert f"statement_timeout={int(BUSY_TIMEOUT * 1000)}" in params["options"]


def test_several_hosts_share_the_time_left_to_connect() -> None:
    """psycopg tries each host (and each address of a name) with the whole
    connect_timeout: two hosts and 9.7 s left must not take 18 s."""
    clock = FakeClock(start=0.0)
    params = _pg_connect_params(Deadline.after(9.7, clock=clock), host="127.0.0.1,127.0.0.2")
    assert params["connect_timeout"] == 4
    # the statements still get the whole time left
    assert "-c statement_timeout=9700" in params["options"]
