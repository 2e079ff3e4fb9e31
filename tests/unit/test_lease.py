"""LeaseKeeper renews what it is given, reports what it lost, and stops cleanly."""

from __future__ import annotations

import pytest

from bmaas.fakes.clock import FakeClock
from bmaas.lease import LeaseKeeper
from bmaas.store import LeaseLost, OwnerKind, Store, StoreError


def test_renews_every_owner_and_drops_the_lost_ones(store: Store, wall: FakeClock) -> None:
    lost: list[LeaseLost] = []
    keeper = LeaseKeeper(store, ttl=30, on_lost=lost.append)
    assert keeper.interval == 10
    alive = store.owners.create(OwnerKind.REQUEST, ttl=30)
    doomed = store.owners.create(OwnerKind.ATTEMPT, ttl=5)
    keeper.add(alive.id)
    keeper.add(doomed.id)
    for _ in range(4):  # 40s of work, renewed every 10s: the request never expires
        wall.advance(10)
        keeper.renew_now()
    assert store.owners.get(alive.id).lease_expires_at == wall.monotonic() + 30
    assert [e.owner for e in lost] == [doomed.id]
    assert [e.owner for e in keeper.lost] == [doomed.id]
    assert keeper.renew_now() == []  # a lost lease is not retried
    keeper.discard(alive.id)
    assert keeper.renew_now() == []


def test_a_database_hiccup_is_logged_not_fatal(
    store: Store, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    keeper = LeaseKeeper(store, ttl=30)
    owner = store.owners.create(OwnerKind.REQUEST)
    keeper.add(owner.id)

    def locked(*_a: object, **_kw: object) -> None:
        raise StoreError("sqlite:///x.db: database is locked")

    monkeypatch.setattr(store.owners, "renew_leases", locked)
    assert keeper.renew_now() == []
    assert "could not renew 1 lease(s)" in caplog.text
    monkeypatch.undo()
    assert keeper.renew_now() == []  # still renewing it
    assert keeper.lost == []


def test_the_thread_starts_and_stops_with_the_context(store: Store) -> None:
    with LeaseKeeper(store, ttl=3600) as keeper:
        thread = keeper._thread
        assert thread is not None
        assert thread.is_alive()
    assert not thread.is_alive()
    keeper.close()  # twice is fine
    with pytest.raises(ValueError, match="positive"):
        LeaseKeeper(store, ttl=0)
