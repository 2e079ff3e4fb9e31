"""What the write an event causes costs the store (issue 46), counted in
statements and commits: an event's CPU in the sync was mostly SQLAlchemy's,
per statement (3.9 ms a change; 0.3 ms once it was one prepared statement
each of these). What would break: a read-only look before the write, a
name-to-id lookup the row already answered, a history INSERT per line, a
commit per event of a batch."""

from __future__ import annotations

from collections import Counter
from typing import Any

import sqlalchemy as sa

from bmaas.driver import PowerState
from bmaas.events import Applied, record_news
from bmaas.health import HealthRule
from bmaas.store import Store
from tests.unit.test_sync_steady import Statements

OFF, ON = "ResourceEvent.1.3.0.ResourcePoweredOff", "ResourceEvent.1.3.0.ResourcePoweredOn"


def _counted(store: Store) -> Statements:
    counted = Statements(store)

    def committed(_conn: Any) -> None:
        counted.by_pass[-1]["COMMIT"] += 1

    sa.event.listen(store.db.engine, "commit", committed)
    return counted


def test_an_event_costs_one_select_one_update_one_history_insert_and_one_commit(
    store: Store, enroll: Any
) -> None:
    """An event is one write transaction: the node's row read under the
    write lock, one UPDATE, its two history lines ("power on -> off" and
    the event's ``power_event``) in one INSERT, one commit. Events that
    arrive together share the transaction, the SELECT and the INSERT."""
    enroll(4)
    store.health.record_power_reads([(f"n{i:02d}", PowerState.ON) for i in range(1, 5)])
    counted = _counted(store)
    record_news(store, [Applied("n01", PowerState.OFF, OFF, 0.01)], HealthRule())
    sqlite = store.db.engine.dialect.name == "sqlite"
    begin = {"BEGIN IMMEDIATE": 1} if sqlite else {}  # PostgreSQL's BEGIN is the driver's
    one = {"SELECT": 1, "UPDATE": 1, "UPDATE nodes": 1, "INSERT": 1, "INSERT node_events": 1}
    assert counted.by_pass[0] == Counter({**begin, **one, "COMMIT": 1})
    kinds = [e.kind for e in store.nodes.events("n01")][-2:]
    assert kinds == ["power", "power_event"]
    assert store.nodes.get("n01").power_state is PowerState.OFF

    counted.next_pass()
    news = [Applied(f"n{i:02d}", PowerState.OFF, OFF, None) for i in (2, 3, 4)]
    record_news(store, news, HealthRule())
    batch = {**one, "UPDATE": 3, "UPDATE nodes": 3}
    assert counted.by_pass[1] == Counter({**begin, **batch, "COMMIT": 1})
    assert all(store.nodes.get(f"n{i:02d}").power_state is PowerState.OFF for i in (2, 3, 4))


def test_a_batch_with_a_nodes_second_event_applies_both_in_order(store: Store, enroll: Any) -> None:
    """The row read under the lock answers a node's first event only: its
    second (off, then on) is judged against the first's outcome, so the
    store ends on, with both lines of each."""
    enroll(2)
    store.health.record_power_reads([("n01", PowerState.ON), ("n02", PowerState.ON)])
    news = [Applied("n01", PowerState.OFF, OFF, 0.01), Applied("n01", PowerState.ON, ON, 0.02)]
    record_news(store, news, HealthRule())
    assert store.nodes.get("n01").power_state is PowerState.ON
    lines = [(e.kind, e.message) for e in store.nodes.events("n01")][-4:]
    assert [kind for kind, _ in lines] == ["power", "power", "power_event", "power_event"]
    assert [message for _, message in lines[:2]] == ["power on -> off", "power off -> on"]
