"""A SQLite store serves as many threads at once as a command has workers
(`bmaas deploy --workers 64`): no connection pool cap to wait on. With
SQLAlchemy's default (5 + 10 connections, 30 s to wait for one) the 16th
worker of a loaded run waited 30 s and failed with an untyped TimeoutError
(seen in CI: tests/lab/test_vendor_matrix.py)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa

from bmaas.store import Store
from bmaas.store.errors import StoreError

THREADS = 40


def test_forty_threads_each_hold_a_transaction_at_once(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "s.db"), create=True)
    together = threading.Barrier(THREADS, timeout=10)  # fails fast where a pool caps them

    def one(_: int) -> int:
        with store.db.read() as tx:
            together.wait()
            return int(tx.scalar(sa.select(sa.literal(1))))

    with ThreadPoolExecutor(THREADS) as pool:
        assert sum(pool.map(one, range(THREADS))) == THREADS


def test_a_pool_with_no_connection_free_is_a_typed_store_error(tmp_path: Path) -> None:
    """A server's pool (PostgreSQL keeps SQLAlchemy's cap) that has no free
    connection: StoreError, not SQLAlchemy's TimeoutError."""
    store = Store.open(str(tmp_path / "s.db"), create=True)
    store.db.engine = sa.create_engine(
        f"sqlite:///{tmp_path / 's.db'}", pool_size=1, max_overflow=0, pool_timeout=0.1
    )
    with (
        store.db.read(),
        pytest.raises(StoreError, match="no free database connection"),
        store.db.read(),
    ):
        pass
