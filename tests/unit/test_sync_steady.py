"""A steady sync pass costs what the reads cost (issue 37): counted on the
store (write transactions and statements per pass) and on the BMC (requests
and connectors per pass). What would break: a write per node per pass,
changed or not; the lease rows renewed every pass; a connector or login
per pass; a safety-net read paying for a new session."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from bmaas.driver import PowerState
from bmaas.drivers.redfish import connector as connector_mod
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.fleet import FakeFleet
from bmaas.faults import BMCTimeout
from bmaas.health import Change, HealthRule
from bmaas.ops import driver_factory
from bmaas.runtime import Runtime
from bmaas.share import FleetShare
from bmaas.store import Store
from bmaas.store.health import SEEN_EVERY
from bmaas.sync import SyncParts, SyncReport, SyncSettings, sync_loop
from tests.unit.test_redfish_lean_read import SYSTEM, Fake, driver, serving

WRITES = ("INSERT", "UPDATE", "DELETE")


class Statements:
    """Every statement the store's engine runs, by pass (the loop's on_pass
    moves to the next)."""

    def __init__(self, store: Store) -> None:
        self.by_pass: list[Counter[str]] = [Counter()]
        sa.event.listen(store.db.engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        words = statement.split()
        verb = words[0].upper()
        if verb == "BEGIN" and "IMMEDIATE" in statement.upper():
            verb = "BEGIN IMMEDIATE"  # SQLite: a write transaction
        self.by_pass[-1][verb] += 1
        if verb in WRITES:
            table = words[2] if verb != "UPDATE" else words[1]
            self.by_pass[-1][f"{verb} {table}"] += 1

    def next_pass(self, _report: SyncReport | None = None) -> None:
        self.by_pass.append(Counter())

    def writes(self, index: int) -> int:
        return sum(self.by_pass[index][verb] for verb in WRITES)


@pytest.fixture
def fleet_of(
    store: Store, enroll: Callable[..., list[str]]
) -> Callable[[int], tuple[FakeFleet, list[str]]]:
    def make(count: int) -> tuple[FakeFleet, list[str]]:
        names = enroll(count)
        fleet = FakeFleet(clock=FakeClock())
        for name in names:
            fleet.add(name, power=PowerState.ON)
        return fleet, names

    return make


def _loop(store: Store, fleet: FakeFleet, count: int, on_pass: Any, **kw: Any) -> None:
    sync_loop(
        store,
        SyncSettings(interval=30.0, count=count),
        SyncParts(driver_factory(fleet=fleet), clock=fleet.clock, **kw),
        wait=fleet.clock.advance,
        on_pass=on_pass,
        stop=threading.Event(),
    )


def test_a_steady_pass_writes_nothing_and_a_change_writes_only_its_node(
    store: Store, fleet_of: Any
) -> None:
    fleet, _names = fleet_of(20)
    counted = Statements(store)
    changed: list[SyncReport] = []

    def on_pass(report: SyncReport) -> None:
        counted.next_pass()
        changed.append(report)
        if len(changed) == 3:  # between passes 3 and 4: one node goes off
            fleet.machine("n07").force_power(PowerState.OFF)

    _loop(store, fleet, 5, on_pass)
    first, steady, after_change = counted.by_pass[0], counted.by_pass[1:3], counted.by_pass[3]
    assert first["UPDATE nodes"] == 20  # the first pass learns every node's state
    for passed in [*steady, counted.by_pass[4]]:
        assert sum(passed[v] for v in WRITES) == 0, passed
        assert passed["BEGIN IMMEDIATE"] == 0  # no write transaction at all
        assert passed["SELECT"] <= 6  # a handful of queries, not one per node
    assert after_change["UPDATE nodes"] == 1  # n07 alone
    assert after_change["INSERT node_events"] == 1  # its "power on -> off" line
    assert store.nodes.get("n07").power_state is PowerState.OFF
    assert all(len(r.results) == 20 for r in changed)  # every node was read every pass


def test_a_steady_nodes_seen_time_is_refreshed_in_one_batch_every_seen_every(
    store: Store, fleet_of: Any, wall: FakeClock
) -> None:
    fleet, _names = fleet_of(20)
    counted = Statements(store)
    _loop(store, fleet, 1, counted.next_pass)
    seen = store.nodes.get("n01").power_state_at
    assert seen is not None
    _loop(store, fleet, 1, counted.next_pass)
    assert counted.writes(1) == 0
    assert store.nodes.get("n01").power_state_at == seen
    wall.advance(SEEN_EVERY)
    _loop(store, fleet, 1, counted.next_pass)
    assert counted.by_pass[2]["UPDATE nodes"] == 1  # one statement for all 20
    assert counted.by_pass[2]["BEGIN IMMEDIATE"] == 1
    assert all(n.power_state_at == seen + SEEN_EVERY for n in store.nodes.find())


def test_a_good_read_after_a_fault_is_written_it_resets_the_streak(
    store: Store, enroll: Any
) -> None:
    """Not steady: a read that moves a streak is written as before."""
    enroll(1)
    rule = HealthRule(fault_after=3)
    fault = BMCTimeout("no answer", node="n01", driver="fake", operation="power.get")
    store.health.record_power_reads([("n01", PowerState.ON)], health_rule=rule)
    store.health.record_power_reads([("n01", fault)], health_rule=rule)
    assert store.nodes.get("n01").fault_count == 1
    [change] = store.health.record_power_reads([("n01", PowerState.UNKNOWN)], health_rule=rule)
    assert (change.change, change.fault_count) == (Change.NONE, 1)  # unknown: neither
    [change] = store.health.record_power_reads([("n01", PowerState.ON)], health_rule=rule)
    assert (change.change, change.fault_count) == (Change.NONE, 0)
    node = store.nodes.get("n01")
    assert (node.power_state, node.fault_count) == (PowerState.ON, 0)
    # and a steady read reports the node as it stands
    [change] = store.health.record_power_reads([("n01", PowerState.ON)], health_rule=rule)
    assert (change.node, change.change, change.power_state) == ("n01", Change.NONE, PowerState.ON)


def test_split_workers_renew_their_share_rows_at_most_every_third_of_the_ttl(
    store: Store, fleet_of: Any, wall: FakeClock
) -> None:
    fleet, _names = fleet_of(20)
    counted = Statements(store)
    with FleetShare(store, ttl=60.0) as share:
        _loop(store, fleet, 1, counted.next_pass, share=share)  # claims its share
        for _ in range(3):  # passes 5 s apart on the store's clock: rows are fresh
            wall.advance(5.0)
            _loop(store, fleet, 1, counted.next_pass, share=share)
        wall.advance(5.0)  # 20 s since the claim: ttl/3
        _loop(store, fleet, 1, counted.next_pass, share=share)
        held = store.shares.held()
    claims = [p["INSERT sync_shares"] for p in counted.by_pass[:5]]
    renewals = [p["UPDATE sync_shares"] for p in counted.by_pass[:5]]
    assert claims == [1, 0, 0, 0, 0]  # one batched upsert (20 rows), the first time
    assert renewals == [0, 0, 0, 0, 1]  # then one UPDATE renews the 20 rows
    assert all(counted.writes(i) == 0 for i in (1, 2))  # nothing at all in between
    assert len(held) == 20


@pytest.fixture
def connectors(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    made: list[object] = []
    real = connector_mod.BoundedConnector.__init__

    def counting(self: Any, *args: Any, **kw: Any) -> None:
        made.append(self)
        real(self, *args, **kw)

    monkeypatch.setattr(connector_mod.BoundedConnector, "__init__", counting)
    return made


def test_a_steady_redfish_pass_is_one_get_a_node_on_the_kept_connector(
    store: Store, enroll: Any, connectors: list[object]
) -> None:
    """Through the pool, as the sync reads: connector, root, login and the
    system's discovery once; every later pass one lean GET, nothing else."""
    enroll(1)
    fake = Fake()
    clock = FakeClock()
    with serving(fake) as url, Runtime(probe=False) as rt:
        built = driver(url)
        counts: list[tuple[int, int, int]] = []

        def on_pass(_report: SyncReport) -> None:
            gets = fake.requests
            counts.append((len(connectors), len(gets), len(fake.system_gets())))

        sync_loop(
            store,
            SyncSettings(interval=30.0, count=5),
            SyncParts(lambda _record: built, rt=rt, clock=clock),
            wait=clock.advance,
            on_pass=on_pass,
            stop=threading.Event(),
        )
    first = counts[0]
    assert first[0] == 1  # one connector, made by the first pass
    for before, after in itertools.pairwise(counts):
        assert after[0] == before[0]  # no connector built in a steady pass
        assert after[1] - before[1] == 1  # one request a pass: the node's read
        assert after[2] - before[2] == 1  # and it is the system's GET
    assert all(path.startswith(SYSTEM) for path, _ in fake.requests[first[1] :])
    assert rt.pool.stats.logins == 1


def test_a_pass_with_nothing_to_clean_asks_one_light_query_not_two_node_queries(
    store: Store, fleet_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pass cleans reclaimed nodes and a failed attempt's leftovers;
    nearly every pass has none, and two node queries to learn so were most
    of a quiet events pass's store CPU. One light query says so; a node
    marked is still cleaned at the next pass."""
    from bmaas.store import RECLAIMED

    fleet, _names = fleet_of(3)
    asked: list[dict[str, Any]] = []
    real_find = store.nodes.find

    def find(*args: Any, **kw: Any) -> Any:
        if "fault" in kw or "needs_cleaning" in kw:
            asked.append(kw)
        return real_find(*args, **kw)

    monkeypatch.setattr(store.nodes, "find", find)
    passes: list[int] = []

    def on_pass(report: SyncReport) -> None:
        passes.append(len(asked))
        if len(passes) == 2:  # between passes 2 and 3: n02 left with media in
            store.health.set_leftovers("n02", {"media": "http://x/i.iso"}, reason="test")

    _loop(store, fleet, 3, on_pass)
    assert passes[:2] == [0, 0]  # nothing to clean: no node query for it
    assert any(a.get("fault") == RECLAIMED for a in asked)
    assert any(a.get("needs_cleaning") for a in asked)  # pass 3 looked, and cleaned
    assert store.nodes.get("n02").leftovers in (None, {})


def test_with_events_the_fleet_is_loaded_again_only_when_it_changed(
    store: Store, fleet_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between safety reads a pass reads nobody: it must not build a record
    per node either. A node enrolled meanwhile is seen at the next pass."""
    from bmaas.events import EventWatch, _Node
    from tests.unit.conftest import node_spec

    fleet, names = fleet_of(5)
    watch = EventWatch(safety=600.0, liveness=0, streams_of=lambda driver: None, clock=fleet.clock)
    for name in names:
        watch._nodes[name] = _Node()
    watch._mark(names, up=True)
    loads: list[int] = []
    real_find = store.nodes.find

    def find(*args: Any, **kw: Any) -> Any:
        found = real_find(*args, **kw)
        if not args and not kw:  # the whole fleet
            loads.append(len(found))
        return found

    monkeypatch.setattr(store.nodes, "find", find)
    reports: list[SyncReport] = []
    loaded: list[list[int]] = []

    def on_pass(report: SyncReport) -> None:
        reports.append(report)
        loaded.append(list(loads))
        if len(reports) == 4:  # enrolled between passes 4 and 5
            store.nodes.enroll([node_spec("n06")], [])
            fleet.add("n06", power=PowerState.OFF)

    _loop(store, fleet, 6, on_pass, events=watch)
    assert loaded[3] == [5]  # once, for four passes
    assert loads == [5, 6]  # and once more when the fleet changed
    assert [len(r.results) for r in reports] == [5, 0, 0, 0, 1, 1]  # n06: no stream, polled
    assert store.nodes.get("n06").power_state is PowerState.OFF


def test_polling_builds_the_fleets_records_once_and_again_when_a_fault_changes(
    store: Store, fleet_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Who to read, how, and who is fenced: all a pass takes from the
    records. They are built again when one of those changes (a fault set
    between passes), not every pass."""
    fleet, _names = fleet_of(5)
    loads: list[int] = []
    real_find = store.nodes.find

    def find(*args: Any, **kw: Any) -> Any:
        found = real_find(*args, **kw)
        if not args and not kw:
            loads.append(len(found))
        return found

    monkeypatch.setattr(store.nodes, "find", find)
    seen: list[list[int]] = []

    def on_pass(_report: SyncReport) -> None:
        seen.append(list(loads))
        if len(seen) == 3:
            store.health.set_fault("n02", "power failure", reason="a person says so")

    _loop(store, fleet, 5, on_pass, fenced=None)
    assert seen[2] == [5]  # three passes, one build
    assert loads == [5, 5]  # and one more once n02's fault changed


def test_news_is_one_write_its_state_and_its_history_line_together(
    store: Store, enroll: Any
) -> None:
    """An event's power state and its ``power_event`` line go in one write
    transaction (a change costs the events sync what a changed read costs
    a poll, plus the line); two events for one node in one batch keep both
    lines and end in the second's state (the second was once judged against
    the row read before the first, taken as steady and dropped: the store
    said off while the machine was on until the safety read), and a line
    for a node whose state it repeats is still written."""
    from bmaas.events import Applied, record_news

    enroll(3)
    store.health.record_power_reads([(f"n{i:02d}", PowerState.ON) for i in range(1, 4)])
    counted = Statements(store)
    off, on = "ResourceEvent.1.3.0.ResourcePoweredOff", "ResourceEvent.1.3.0.ResourcePoweredOn"
    record_news(
        store,
        [
            Applied("n01", PowerState.OFF, off, 0.01),
            Applied("n01", PowerState.ON, on, 0.02),
            Applied("n02", PowerState.ON, on, None),  # what the store already has
        ],
        HealthRule(),
    )
    (done,) = counted.by_pass
    assert done["BEGIN IMMEDIATE"] == 1  # one write transaction for all of it
    lines = [e.message for e in store.nodes.events("n01") if e.kind == "power_event"]
    assert len(lines) == 2
    assert "ResourcePoweredOff, 0.010 s old" in lines[0]
    assert "ResourcePoweredOn, 0.020 s old" in lines[1]
    (line,) = [e.message for e in store.nodes.events("n02") if e.kind == "power_event"]
    assert "age unknown" in line
    assert store.nodes.get("n01").power_state is PowerState.ON
