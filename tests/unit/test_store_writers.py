"""One SQLite writer of a process at a time, first come first served
(:mod:`bmaas.store.writers`, issue 50: ``bmaas deploy --workers 96`` at load
29-37 failed requests with ``database is locked`` while other threads of
the same process wrote, turn after turn)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bmaas.store import Store
from bmaas.store.errors import StoreError
from bmaas.store.writers import WriterQueue

#: a bound on each wait below, never waited out when the code is right
BOUND = 10.0


def test_a_writer_that_waited_long_enough_gets_the_turn_not_the_one_that_ended() -> None:
    queue = WriterQueue(patience=0.0)  # every writer in line has waited long enough
    assert queue.acquire(0)
    order: list[str] = []
    waiting = threading.Event()

    def writer(name: str) -> None:
        assert queue.acquire(BOUND)
        order.append(name)
        queue.release()

    b = threading.Thread(target=writer, args=("b",))
    b.start()
    while not queue._waiting:  # b is in line
        waiting.wait(0.001)
    queue.release()
    assert not queue.acquire(0), "the writer that ended barged ahead of the one in line"
    b.join(BOUND)
    assert order == ["b"]
    assert queue.acquire(0)  # nobody in line: free again


def test_a_free_turn_goes_to_the_running_writer_while_nobody_waited_long() -> None:
    """No hand-over to a thread the CPU has yet to wake while nobody in
    line has waited the patience: on a loaded host that cost more than
    the writes."""
    queue = WriterQueue(patience=BOUND)
    assert queue.acquire(0)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(queue.acquire(BOUND)))
    waiter.start()
    while not queue._waiting:
        threading.Event().wait(0.001)
    queue.release()
    assert queue.acquire(0), "the running writer may take a free turn"
    queue.release()
    waiter.join(BOUND)
    assert got == [True]
    queue.release()
    assert queue.acquire(0)


def test_a_writer_whose_turn_does_not_come_leaves_the_line() -> None:
    queue = WriterQueue()
    assert queue.acquire(0)
    assert not queue.acquire(0.01)
    assert not queue._waiting
    queue.release()
    assert queue.acquire(0)


def test_a_store_s_writers_queue_in_the_process_before_sqlite_s_lock(db_path: Path) -> None:
    """A write while another thread of the process writes waits in the
    queue, and says so when its turn does not come within the busy
    timeout (SQLite's busy handler alone polled: under load one thread lost
    every draw for the whole 30 s while the others wrote, 5 ms a turn)."""
    store = Store.open(str(db_path), busy_timeout=0.2, create=True)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.db.write():
            holding.set()
            release.wait(BOUND)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(BOUND)
        held = r"this process's other writers held it for 0\.2s"
        with pytest.raises(StoreError, match=held), store.db.write():
            pass
        release.set()
        thread.join(BOUND)
        with store.db.write():  # the turn was handed back: free again
            pass
        with pytest.raises(RuntimeError), store.db.write():
            raise RuntimeError("a writer that fails part way")
        with store.db.write():  # its rollback handed the turn back too
            pass
    finally:
        release.set()
        thread.join(BOUND)
        store.close()
