"""sync_loop with an EventWatch on a fake fleet: which nodes each pass reads,
news written between passes, and a split worker keeping the nodes it did
not read (the liveness read is off here: test_liveness.py has it).
No sleeps: the loop's waits advance a fake clock; reads counted."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

from bmaas.driver import BMCDriver, PowerState
from bmaas.events import EventWatch, _Node
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.fleet import FakeFleet
from bmaas.health import HealthRule
from bmaas.ops import DriverFactory, driver_factory
from bmaas.runtime import Runtime
from bmaas.share import FleetShare
from bmaas.store import Store
from bmaas.store.records import NodeRecord
from bmaas.sync import SyncParts, SyncReport, SyncSettings, sync_loop
from tests.unit.test_events import PowerNews


def test_streamed_nodes_are_read_at_reconnect_then_every_safety_s_and_news_lands_at_once(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    enroll(3)
    fleet = FakeFleet(clock=FakeClock())
    for name in ("n01", "n02", "n03"):
        fleet.add(name, power=PowerState.ON)
    watch = EventWatch(liveness=0, safety=180.0, streams_of=lambda driver: None, clock=fleet.clock)
    for name in ("n01", "n02"):  # their streams are up (n03 has none: polled)
        watch._nodes[name] = _Node()
    watch._mark(["n01", "n02"], up=True)
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 1:  # the BMC tells, between passes 1 and 2
            fleet.machine("n01").force_power(PowerState.OFF)
            watch._offer(PowerNews("n01", "x.ResourcePoweredOff", PowerState.OFF, at=None))
        fleet.clock.advance(seconds)

    reports: list[SyncReport] = []
    with FleetShare(store, ttl=60.0) as share:
        sync_loop(
            store,
            SyncSettings(interval=60.0, count=5),
            SyncParts(driver_factory(fleet=fleet), share=share, events=watch, clock=fleet.clock),
            wait=wait,
            on_pass=reports.append,
        )
        held = set(store.shares.held())
    read = [sorted(r.node for r in report.results) for report in reports]
    assert read == [
        ["n01", "n02", "n03"],  # the first read after (re)connecting reconciles
        ["n03"],
        ["n03"],
        ["n01", "n02", "n03"],  # the safety net: their last read is 180 s old
        ["n03"],
    ]
    assert held == {"n01", "n02", "n03"}  # a split worker keeps what it did not read
    assert store.nodes.get("n01").power_state is PowerState.OFF  # by the news, before pass 2
    history = store.nodes.events("n01")
    assert any(e.kind == "power_event" and "source: event" in e.message for e in history)
    assert watch.applied_total == 1


def test_without_events_every_node_is_read_every_pass(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    enroll(2)
    fleet = FakeFleet(clock=FakeClock())
    reports: list[SyncReport] = []
    sync_loop(
        store,
        SyncSettings(interval=60.0, count=3),
        SyncParts(driver_factory(fleet=fleet), clock=fleet.clock),
        wait=fleet.clock.advance,
        on_pass=reports.append,
        stop=threading.Event(),
    )
    assert [len(r.results) for r in reports] == [2, 2, 2]


def test_a_streamed_nodes_pooled_session_is_kept_until_its_next_safety_read(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    """Read every 600 s by the safety net, past the driver's own session_idle
    (60 s; passes every 30 s): the pool holds its driver meanwhile, so the safety read is one
    read on the kept session, not a logout now and a login then. The node
    without a stream keeps the usual idle rule (read every 30 s: kept)."""
    enroll(2)
    fleet = FakeFleet(clock=FakeClock())
    for name in ("n01", "n02"):
        fleet.add(name, power=PowerState.ON)
    watch = EventWatch(liveness=0, safety=600.0, streams_of=lambda driver: None, clock=fleet.clock)
    watch._nodes["n01"] = _Node()
    watch._mark(["n01"], up=True)
    reports: list[SyncReport] = []
    with Runtime(clock=fleet.clock, probe=False) as rt:
        sync_loop(
            store,
            SyncSettings(interval=30.0, count=45),
            SyncParts(driver_factory(fleet=fleet), rt=rt, events=watch, clock=fleet.clock),
            wait=fleet.clock.advance,
            on_pass=reports.append,
            stop=threading.Event(),
        )
        stats = rt.pool.stats
    streamed = [i for i, r in enumerate(reports) if "n01" in {x.node for x in r.results}]
    assert streamed == [0, 20, 40]  # at 0 s, 600 s, 1200 s
    assert (stats.opened, stats.idled, stats.logins) == (2, 0, 2)  # one session each, kept


def test_a_node_whose_stream_went_down_gets_the_usual_idle_rule_again(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    """Held only while its stream is up: once down, the node is read every
    pass (its session used every minute: kept under the normal rule)."""
    enroll(1)
    fleet = FakeFleet(clock=FakeClock())
    fleet.add("n01", power=PowerState.ON)
    watch = EventWatch(liveness=0, safety=600.0, streams_of=lambda driver: None, clock=fleet.clock)
    watch._nodes["n01"] = _Node()
    watch._mark(["n01"], up=True)
    with Runtime(clock=fleet.clock, probe=False) as rt:
        sync_loop(
            store,
            SyncSettings(interval=60.0, count=2),
            SyncParts(driver_factory(fleet=fleet), rt=rt, events=watch, clock=fleet.clock),
            wait=fleet.clock.advance,
            stop=threading.Event(),
        )
        assert rt.pool._limit(next(iter(rt.pool._slots.values()))) == 600.0 + 2 * 60.0
        watch._mark(["n01"], up=False)
        sync_loop(
            store,
            SyncSettings(interval=60.0, count=1),
            SyncParts(driver_factory(fleet=fleet), rt=rt, events=watch, clock=fleet.clock),
            wait=fleet.clock.advance,
            stop=threading.Event(),
        )
        assert rt.pool._limit(next(iter(rt.pool._slots.values()))) == 60.0


def test_a_streamed_node_whose_read_fails_is_read_every_pass_until_fenced(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    """Its stream is up (the event path answers) but its reads fail: once a
    safety read meets the failure, it is read every pass, so it goes into
    power failure after fault_after (3) reads, as without events."""
    enroll(1)
    fleet = FakeFleet(clock=FakeClock())
    fleet.add("n01", power=PowerState.ON)
    watch = EventWatch(liveness=0, safety=180.0, streams_of=lambda driver: None, clock=fleet.clock)
    watch._nodes["n01"] = _Node()
    watch._mark(["n01"], up=True)
    reports: list[SyncReport] = []

    def on_pass(report: SyncReport) -> None:
        reports.append(report)
        if len(reports) == 2:  # its BMC starts failing every read after pass 2
            rule = {"effect": "internal_error", "operation": "*"}
            fleet.machine("n01").plan.add(FaultRule.from_dict(rule))

    sync_loop(
        store,
        SyncSettings(interval=60.0, count=6),
        SyncParts(driver_factory(fleet=fleet), events=watch, clock=fleet.clock),
        wait=fleet.clock.advance,
        on_pass=on_pass,
        stop=threading.Event(),
    )
    # passes at 0, 60, ... 300 s: the reconciling read, the safety read at
    # 180 s meets the failure, then every pass until the third fault
    assert [len(r.results) for r in reports] == [1, 0, 0, 1, 1, 1]
    assert store.nodes.get("n01").fault == "power failure"


# -- pushed news says when to look, the read says what is (issue 46, finding 5) --


def _counting(factory: DriverFactory, reads: collections.Counter[str]) -> DriverFactory:
    """``factory``'s drivers, each power read counted by node."""

    def build(record: NodeRecord) -> BMCDriver:
        driver = factory(record)
        read = driver.get_power_state

        def get_power_state(**kw: Any) -> PowerState:
            reads[record.name] += 1
            return read(**kw)

        driver.get_power_state = get_power_state  # type: ignore[method-assign]
        return driver

    return build


def _pushed(node: str, power: PowerState | None = PowerState.OFF) -> PowerNews:
    message = "ResourceEvent.1.3.0.ResourcePoweredOff" if power else "ResourceChanged"
    return PowerNews(node, message, power, pushed=True)


def _streamed(store: Store, enroll: Callable[..., list[str]], safety: float = 600.0) -> Any:
    """n01 streamed (up), n02 polled; both on; reads counted."""
    enroll(2)
    fleet = FakeFleet(clock=FakeClock())
    for name in ("n01", "n02"):
        fleet.add(name, power=PowerState.ON)
    watch = EventWatch(liveness=0, safety=safety, streams_of=lambda driver: None, clock=fleet.clock)
    watch._nodes["n01"] = _Node()
    watch._mark(["n01"], up=True)
    reads: collections.Counter[str] = collections.Counter()
    return fleet, watch, reads, _counting(driver_factory(fleet=fleet), reads)


def test_a_forged_pushed_event_costs_one_read_and_changes_nothing(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    """A POST carrying a valid Context says n01 (running) is off: n01 is read
    once, at once (before the next pass), its read says on, and the store
    says on; nothing counts toward a fence; the polled n02 is not read for it."""
    fleet, watch, reads, factory = _streamed(store, enroll)
    passes: list[SyncReport] = []
    seen: list[tuple[int, int]] = []

    def wait(seconds: float) -> None:
        if len(passes) == 1 and not seen:
            seen.append((reads["n01"], reads["n02"]))
            watch.news(None, [_pushed("n01")], [])  # type: ignore[arg-type]
        fleet.clock.advance(seconds)

    sync_loop(
        store,
        SyncSettings(interval=60.0, count=3, health_rule=HealthRule(fault_after=1)),
        SyncParts(factory, events=watch, clock=fleet.clock),
        wait=wait,
        on_pass=passes.append,
        stop=threading.Event(),
    )
    assert seen == [(1, 1)]  # the first pass reconciled n01 and polled n02
    assert reads == {"n01": 2, "n02": 3}  # n01: one read for the forged event, no more
    assert [sorted(r.node for r in p.results) for p in passes] == [["n01", "n02"], ["n02"], ["n02"]]
    record = store.nodes.get("n01")
    assert record.power_state is PowerState.ON
    assert (record.fault, record.fault_count) == (None, 0)
    assert not any(e.kind == "power_event" for e in store.nodes.events("n01"))
    assert (watch.applied_total, watch.pushed, watch.looked) == (0, 1, 1)


def test_ten_pushed_events_before_the_read_make_one_read(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    fleet, watch, reads, factory = _streamed(store, enroll)

    def wait(seconds: float) -> None:
        if seconds > 0:  # not the wait for what is left after the read (0 s here)
            for _ in range(10):
                watch.news(None, [_pushed("n01")], [])  # type: ignore[arg-type]
            watch.news(None, [_pushed("n01", None), _pushed("n01")], [])  # type: ignore[arg-type]
        fleet.clock.advance(seconds)

    sync_loop(
        store,
        SyncSettings(interval=60.0, count=2),
        SyncParts(factory, events=watch, clock=fleet.clock),
        wait=wait,
        stop=threading.Event(),
    )
    # the reconciling read, then one read for the wait's twelve pieces of news
    assert reads["n01"] == 1 + 1
    assert (watch.pushed, watch.looked) == (12, 1)
    assert store.nodes.get("n01").power_state is PowerState.ON


def test_a_pushed_power_off_that_is_true_is_in_the_store_by_its_read(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    fleet, watch, reads, factory = _streamed(store, enroll)

    def wait(seconds: float) -> None:
        if reads["n01"] == 1:
            fleet.machine("n01").force_power(PowerState.OFF)
            watch.news(None, [_pushed("n01")], [])  # type: ignore[arg-type]
        fleet.clock.advance(seconds)

    sync_loop(
        store, SyncSettings(interval=60.0, count=2),
        SyncParts(factory, events=watch, clock=fleet.clock), wait=wait, stop=threading.Event(),
    )  # fmt: skip
    assert reads["n01"] == 2
    assert store.nodes.get("n01").power_state is PowerState.OFF


def test_failed_reads_for_pushed_news_count_toward_no_fence(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    """Its BMC fails every read after the first pass, and five pushed events
    come one by one between passes, each past the last's window (five
    reads): none counts (fault_after 2 would fence at the second); the next
    pass's read counts, as without events."""
    fleet, watch, reads, factory = _streamed(store, enroll)
    left = [5]

    def wait(seconds: float) -> None:
        if reads["n01"] == 1 and left == [5]:
            fleet.machine("n01").plan.add(FaultRule.from_dict(FAILING))
        if left[0]:
            left[0] -= 1
            fleet.clock.advance(watch.pacing.look_every)  # spaced: each asks a read at once
            watch.news(None, [_pushed("n01")], [])  # type: ignore[arg-type]
        fleet.clock.advance(seconds)

    sync_loop(
        store, SyncSettings(interval=60.0, count=2, health_rule=HealthRule(fault_after=2)),
        SyncParts(factory, events=watch, clock=fleet.clock), wait=wait, stop=threading.Event(),
    )  # fmt: skip
    record = store.nodes.get("n01")
    assert (reads["n01"], watch.looked) == (1 + 5 + 1, 5)
    assert (record.fault, record.fault_count) == (None, 1)  # the second pass's read alone


#: every call to the node's BMC fails (a BMC fault the sync counts)
FAILING = {"effect": "internal_error", "operation": "*"}


def test_sse_news_is_still_written_at_once_with_no_read(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    """News on a stream bmaas opened (not pushed) is the BMC's word, as before."""
    fleet, watch, reads, factory = _streamed(store, enroll)

    def wait(seconds: float) -> None:
        if reads["n01"] == 1:
            fleet.machine("n01").force_power(PowerState.OFF)
            sse = PowerNews("n01", "x.ResourcePoweredOff", PowerState.OFF)
            watch.news(None, [sse], [])  # type: ignore[arg-type]
        fleet.clock.advance(seconds)

    sync_loop(
        store, SyncSettings(interval=60.0, count=2),
        SyncParts(factory, events=watch, clock=fleet.clock), wait=wait, stop=threading.Event(),
    )  # fmt: skip
    assert reads["n01"] == 1
    assert store.nodes.get("n01").power_state is PowerState.OFF
    assert (watch.applied_total, watch.pushed, watch.looked) == (1, 0, 0)
