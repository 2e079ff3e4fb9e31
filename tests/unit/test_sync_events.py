"""sync_loop with an EventWatch on a fake fleet: which nodes each pass reads,
news written between passes, and a split worker keeping the nodes it did
not read. No sleeps: the loop's waits advance a fake clock; reads counted."""

from __future__ import annotations

import threading
from collections.abc import Callable

from bmaas.driver import PowerState
from bmaas.events import EventWatch, _Node
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.fleet import FakeFleet
from bmaas.ops import driver_factory
from bmaas.share import FleetShare
from bmaas.store import Store
from bmaas.sync import SyncReport, sync_loop
from tests.unit.test_events import PowerNews


def test_streamed_nodes_are_read_at_reconnect_then_every_n_passes_and_news_lands_at_once(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    enroll(3)
    fleet = FakeFleet(clock=FakeClock())
    for name in ("n01", "n02", "n03"):
        fleet.add(name, power=PowerState.ON)
    watch = EventWatch(every=3, streams_of=lambda driver: None, clock=fleet.clock)
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
            interval=60.0,
            count=5,
            wait=wait,
            clock=fleet.clock,
            on_pass=reports.append,
            factory=driver_factory(fleet=fleet),
            events=watch,
            share=share,
        )
        held = set(store.shares.held())
    read = [sorted(r.node for r in report.results) for report in reports]
    assert read == [
        ["n01", "n02", "n03"],  # the first read after (re)connecting reconciles
        ["n03"],
        ["n03"],
        ["n01", "n02", "n03"],  # the safety net, every 3 passes
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
        interval=60.0,
        count=3,
        wait=fleet.clock.advance,
        clock=fleet.clock,
        on_pass=reports.append,
        factory=driver_factory(fleet=fleet),
        stop=threading.Event(),
    )
    assert [len(r.results) for r in reports] == [2, 2, 2]
