"""Liveness apart from events (issue 48): a live stream proves the stream,
not the API. A streamed node's API is read every ``liveness`` seconds at its
own phase, in ``bmaas sync`` (EventWatch) and in Ironic's conductor
(Streams), through one rule (bmaas.liveness); a hung API is faulted and
fenced as a polled one. No sleeps: fake clocks; reads counted."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

import pytest

from bmaas.driver import PowerState
from bmaas.drivers.ironic.answers import Miss
from bmaas.drivers.ironic.streams import Streams
from bmaas.events import EventWatch, _Node
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.fleet import FakeFleet
from bmaas.health import HealthRule
from bmaas.liveness import LIVENESS_INTERVAL, Liveness
from bmaas.ops import driver_factory
from bmaas.pool import DriverPool, idle_for_interval
from bmaas.store import Store
from bmaas.sync import SyncParts, SyncReport, SyncSettings, sync_loop
from tests.unit.stepped import reactor
from tests.unit.test_ironic_streams import INTERVAL, FakeStream, ref
from tests.unit.test_pool import SessionDriver, key, read
from tests.unit.test_sync_events import _counting

HOUR = 3600.0


def test_each_node_is_due_once_a_slot_at_its_own_phase_spread_over_the_interval() -> None:
    live = Liveness(300.0)
    names = [f"node-{i:04d}" for i in range(1000)]
    # spread: every 30 s tenth of the interval holds some of the fleet's phases
    tenths = collections.Counter(int(live.phase(n) // 30.0) for n in names)
    assert sorted(tenths) == list(range(10))
    assert min(tenths.values()) > 50
    # from a read just after its phase: not due until its next slot begins
    node = names[0]
    start = live.phase(node) + 1.0
    assert not live.due(node, start, start + 298.0)
    assert live.due(node, start, start + 299.0)
    assert live.due(node, None, 0.0)  # never read: due
    assert live.next(node, start) == live.phase(node) + 300.0
    assert Liveness(0.0).next(node, start) == float("inf")
    assert live.per_hour() == 12.0 == HOUR / LIVENESS_INTERVAL


def test_zero_is_off_and_a_bad_interval_is_refused() -> None:
    off = Liveness(0.0)
    assert not off.due("n01", 0.0, 1e9)
    assert off.per_hour() == 0.0
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="liveness interval"):
            Liveness(bad)


def _streamed_fleet(
    enroll: Callable[..., list[str]], count: int
) -> tuple[FakeFleet, EventWatch, list[str]]:
    """``count`` nodes, all on, all streamed (their streams up)."""
    names = enroll(count)
    fleet = FakeFleet(clock=FakeClock())
    for name in names:
        fleet.add(name, power=PowerState.ON)
    watch = EventWatch(liveness=300.0, streams_of=lambda driver: None, clock=fleet.clock)
    for name in names:
        watch._nodes[name] = _Node()
    watch._mark(names, up=True)
    return fleet, watch, names


def test_a_healthy_streamed_node_costs_exactly_its_liveness_reads_an_hour(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    fleet, watch, names = _streamed_fleet(enroll, 3)
    reads: collections.Counter[str] = collections.Counter()
    interval = 10.0
    sync_loop(
        store,
        SyncSettings(interval=interval, count=int(2 * HOUR / interval) + 1),
        SyncParts(_counting(driver_factory(fleet=fleet), reads), events=watch, clock=fleet.clock),
        wait=fleet.clock.advance,
        stop=threading.Event(),
    )
    # two hours after the reconciling read: 2 x 12 liveness reads each, no more
    assert reads == dict.fromkeys(names, 1 + 2 * 12)


def test_a_streamed_node_whose_api_hangs_is_read_faulted_and_fenced_within_the_bound(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    """n02's API hangs (its stream lives: news could still come); its next
    liveness read times out, and from then on it is read every pass, so it
    is fenced fault_after passes later: within liveness + (fault_after + 1)
    passes of the hang. The others keep their liveness reads only."""
    fleet, watch, _ = _streamed_fleet(enroll, 3)
    interval, rule = 10.0, HealthRule(fault_after=3)
    reports: list[SyncReport] = []
    hung_at: list[float] = []
    fenced_at: list[float] = []

    def on_pass(report: SyncReport) -> None:
        reports.append(report)
        if len(reports) == 2:
            fleet.machine("n02").plan.add(
                FaultRule.from_dict({"effect": "hang", "operation": "power.get", "scope": "api"})
            )
            hung_at.append(fleet.clock())
        if not fenced_at and store.nodes.get("n02").fault == "power failure":
            fenced_at.append(fleet.clock())

    sync_loop(
        store,
        SyncSettings(interval=interval, count=60, health_rule=rule, bmc_timeout=2.0),
        SyncParts(driver_factory(fleet=fleet), events=watch, clock=fleet.clock),
        wait=fleet.clock.advance,
        on_pass=on_pass,
        stop=threading.Event(),
    )
    assert fenced_at, "the hung API was never fenced"
    bound = 300.0 + (rule.fault_after + 1) * (interval + 2.0)
    assert fenced_at[0] - hung_at[0] <= bound
    # it took its liveness read to find it: not at the next pass
    failed = [i for i, r in enumerate(reports) if any(x.node == "n02" for x in r.failed)]
    assert failed[:3] == list(range(failed[0], failed[0] + 3))  # every pass once found
    assert store.nodes.get("n01").fault is None
    assert store.nodes.get("n03").fault is None


# -- inside Ironic's conductor: the same rule, through Streams ----------------------


def _ironic(clock: FakeClock, liveness: float) -> Streams:
    return Streams(
        liveness=liveness,
        interval=INTERVAL,
        stream_of=lambda service, nodes: FakeStream(nodes),
        clock=clock,
        reactor=reactor(clock),  # never stepped: the streams are told by hand
    )


def test_ironic_reads_a_streamed_api_every_liveness_interval_and_every_pass_once_failed() -> None:
    clock = FakeClock(start=0.0)
    streams = _ironic(clock, 300.0)
    node = ref("a")
    assert isinstance(streams.answer(node), Miss)  # registered
    streams.opened(next(iter(streams._listeners.values())))
    assert isinstance(streams.answer(node), Miss)  # the reconciling read
    streams.learned(node.uuid, streams.reading(node.uuid), PowerState.ON)
    why: list[str] = []
    for _ in range(int(HOUR / INTERVAL)):  # an hour of Ironic's passes, each read good
        clock.advance(INTERVAL)
        found = streams.answer(node)
        if isinstance(found, Miss):
            why.append(found.why)
            streams.learned(node.uuid, streams.reading(node.uuid), PowerState.ON)
        else:  # its log line says when the BMC is read next: the liveness read
            assert 0 < found.safety_in <= 300.0
    assert why == ["liveness read (its API, every 300 s)"] * 12  # 12 a node-hour
    # the API hangs: the read fails (nothing learned), so every pass reads it
    # until Ironic's power_state_sync_max_retries fences the node
    clock.advance(300.0)
    for _ in range(4):
        assert isinstance(streams.answer(node), Miss)
        clock.advance(INTERVAL)
    streams.close(timeout=0.0)


def test_ironic_without_the_liveness_read_answers_until_the_safety_read() -> None:
    clock = FakeClock(start=0.0)
    streams = _ironic(clock, 0.0)
    node = ref("a")
    streams.answer(node)
    streams.opened(next(iter(streams._listeners.values())))
    streams.answer(node)
    streams.learned(node.uuid, streams.reading(node.uuid), PowerState.ON)
    why: list[str] = []
    for _ in range(int(HOUR / INTERVAL)):
        clock.advance(INTERVAL)
        found = streams.answer(node)
        if isinstance(found, Miss):
            why.append(found.why)
            streams.learned(node.uuid, streams.reading(node.uuid), PowerState.ON)
    assert why == ["safety read (last read 2400 s ago)"]  # as before issue 48
    streams.close(timeout=0.0)


def test_ironic_holds_a_streamed_nodes_session_from_one_liveness_read_to_the_next() -> None:
    """The conductor's pool drops a session idle 2x the sync interval (120 s);
    a streamed node is read only every 300 s, so each liveness read logged in
    afresh (and logged the old session out): 3 requests, not one. The
    streams hold their streamed nodes in the pool (:meth:`DriverPool.hold`),
    as ``bmaas sync`` does: the second liveness read logs in no more."""
    clock = FakeClock(start=0.0)
    pool = DriverPool(idle=idle_for_interval(INTERVAL), clock=clock, start=lambda job: job())
    streams = Streams(
        liveness=300.0,
        interval=INTERVAL,
        stream_of=lambda service, nodes: FakeStream(nodes),
        hold=pool.hold,
        clock=clock,
        reactor=reactor(clock),
    )
    node = ref("a")
    built: list[SessionDriver] = []

    def bmc_read() -> None:
        def build(name: str) -> SessionDriver:
            built.append(SessionDriver(name))
            built[-1].session_idle = 300.0  # a Redfish BMC's
            return built[-1]

        read(pool, build, key(node.label))
        streams.learned(node.uuid, streams.reading(node.uuid), PowerState.ON)

    assert isinstance(streams.answer(node), Miss)  # registered
    streams.opened(next(iter(streams._listeners.values())))
    assert isinstance(streams.answer(node), Miss)  # the reconciling read
    bmc_read()
    liveness: list[float] = []
    while len(liveness) < 3:
        clock.advance(INTERVAL)
        pool.expire_idle()  # the keeper's round, between passes
        found = streams.answer(node)
        if isinstance(found, Miss):
            assert found.why.startswith("liveness read")
            liveness.append(clock())
            bmc_read()
    assert liveness[2] - liveness[1] == 300.0
    assert (len(built), sum(d.logins for d in built), pool.stats.idled) == (1, 1, 0)
    streams.close(timeout=0.0)
    pool.close()
