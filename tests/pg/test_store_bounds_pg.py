"""On a real PostgreSQL: every transaction of a store opened with a command's
Deadline runs under a statement timeout of what the deadline has left, and a
statement that outlives it is a StoreError, not a wait."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from bmaas.deadline import Deadline
from bmaas.fakes.clock import FakeClock
from bmaas.store import Store, StoreError

pytestmark = pytest.mark.pg


def test_statements_run_under_what_the_deadline_has_left(pg_url: str) -> None:
    clock = FakeClock(start=0.0)
    store = Store.open(pg_url, deadline=Deadline.after(8, clock=clock))
    try:
        with store.db.read() as tx:
            assert tx.conn.exec_driver_sql("SHOW statement_timeout").scalar() == "8s"
        clock.advance(6.5)
        with store.db.read() as tx:
            assert tx.conn.exec_driver_sql("SHOW statement_timeout").scalar() == "1500ms"
            assert tx.conn.exec_driver_sql("SHOW lock_timeout").scalar() == "8s"  # set at connect
        clock.advance(1.5)  # at the deadline: a statement still gets the 1 s grace
        with pytest.raises(StoreError, match="statement timeout"), store.db.read() as tx:
            tx.conn.execute(sa.text("SELECT pg_sleep(3)"))
    finally:
        store.close()
