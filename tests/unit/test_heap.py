"""bmaas.heap: a full collection and a freeze between passes, only after a
pass that opened or retired enough sessions; retired sessions frozen earlier
are collected by the next settle."""

from __future__ import annotations

import gc
import weakref

from bmaas.heap import HeapSettler
from bmaas.pool import PoolStats


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def collect(self) -> int:
        self.calls.append("collect")
        return 0

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")


def test_a_pass_that_opened_sessions_is_settled_and_steady_passes_are_not() -> None:
    gc_ = Recorder()
    settler = HeapSettler(min_changes=100, collector=gc_)
    stats = PoolStats(opened=99)
    assert not settler.after_pass(stats)  # too few to be worth a full walk
    assert gc_.calls == []
    stats.opened = 100
    assert settler.after_pass(stats)
    assert gc_.calls == ["collect", "freeze"]  # nothing retired: nothing to unfreeze
    for _ in range(5):  # steady passes: the same sessions, nothing new
        assert not settler.after_pass(stats)
    assert gc_.calls == ["collect", "freeze"]
    assert settler.settles == 1


def test_retired_sessions_unfreeze_first_and_changes_count_since_the_last_settle() -> None:
    gc_ = Recorder()
    settler = HeapSettler(min_changes=10, collector=gc_)
    stats = PoolStats(opened=10)
    settler.after_pass(stats)
    stats.dropped, stats.idled = 3, 3  # 6 retired since: not yet
    assert not settler.after_pass(stats)
    stats.opened += 4  # re-logins: 10 changes since the last settle
    assert settler.after_pass(stats)
    assert gc_.calls == ["collect", "freeze", "unfreeze", "collect", "freeze"]


class Session:
    """A pooled session's shape: a reference cycle (as sushy's and pyghmi's
    objects hold), which only the cyclic collector frees."""

    def __init__(self) -> None:
        self.me = self


def test_a_frozen_session_retired_later_is_collected_by_the_next_settle() -> None:
    settler = HeapSettler(min_changes=1)
    try:
        session = Session()
        gone = weakref.ref(session)
        assert settler.after_pass(PoolStats(opened=1))
        assert gc.get_freeze_count() > 0
        del session  # logged out: a frozen cycle nothing refers to
        gc.collect()
        assert gone() is not None  # frozen: no collection reaches it
        assert settler.after_pass(PoolStats(opened=1, dropped=1))
        assert gone() is None
    finally:
        gc.unfreeze()  # this test process's collector as it was
