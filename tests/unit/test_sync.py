"""sync_pass / sync_loop on a fake fleet (no sleeps), and the metrics it exports."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.faults import BMCTimeout
from bmaas.fenced import FencedBackoff, FencedReads
from bmaas.health import Change, HealthRule
from bmaas.heap import HeapSettler
from bmaas.inventory import NodeSpec
from bmaas.metrics import SyncMetrics
from bmaas.ops import driver_factory
from bmaas.pool import DEFAULT_IDLE, idle_for_interval
from bmaas.runtime import Runtime
from bmaas.store import POWER_FAILURE, OwnerKind, Store
from bmaas.sync import SyncParts, SyncSettings, sync_loop, sync_pass
from tests.budgets import unbounded
from tests.unit.test_heap import Recorder

Enroll = Callable[..., list[str]]


@pytest.fixture
def fleet() -> FakeFleet:
    return FakeFleet(clock=FakeClock())


def samples(metrics: SyncMetrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
        if s.name == name
    }


def test_a_pass_reads_every_node_and_metrics_count_faults_by_class(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(3)
    fleet.add("n02", rules=[{"effect": "hang", "operation": "power.get"}])
    fleet.add("n03", power=PowerState.ON)
    metrics = SyncMetrics()
    factory = driver_factory(fleet=fleet, bmc_timeout=2.0)
    for _ in range(3):
        report = sync_pass(
            store,
            SyncSettings(),
            SyncParts(factory, metrics=metrics, clock=fleet.clock),
            deadline=unbounded(fleet.clock),
        )
    assert report.nodes_with(Change.FAULTED) == ["n02"]
    assert [r.node for r in report.failed] == ["n02"]
    assert fleet.clock.sleeps == [2.0, 2.0, 2.0]  # each hang cost one deadline, fake time

    faults = samples(metrics, "bmaas_faults_total")
    key = (
        ("class", "BMCTimeout"),
        ("code", "bmc_timeout"),
        ("driver", "fake"),
        ("operation", "power.get"),
    )
    assert faults == {key: 3.0}
    nodes = samples(metrics, "bmaas_nodes")
    assert nodes[(("fault", ""), ("maintenance", "false"), ("power_state", "off"))] == 1
    assert nodes[(("fault", ""), ("maintenance", "false"), ("power_state", "on"))] == 1
    assert (
        nodes[(("fault", POWER_FAILURE), ("maintenance", "true"), ("power_state", "unknown"))] == 1
    )
    assert samples(metrics, "bmaas_sync_transitions_total") == {(("change", "faulted"),): 1.0}
    assert samples(metrics, "bmaas_sync_pass_duration_seconds_count") == {(): 3.0}
    assert samples(metrics, "bmaas_sync_last_pass_timestamp_seconds")[()] == store.clock()

    fleet.machine("n02").plan.clear()
    for _ in range(2):
        report = sync_pass(
            store,
            SyncSettings(),
            SyncParts(factory, metrics=metrics, clock=fleet.clock),
            deadline=unbounded(fleet.clock),
        )
    assert report.nodes_with(Change.RECOVERED) == ["n02"]
    nodes = samples(metrics, "bmaas_nodes")
    assert all(labels[0] == ("fault", "") for labels in nodes)  # stale combinations dropped


class UnknownDriver(FakeDriver):
    """A BMC that answers without a usable power state."""

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        return PowerState.UNKNOWN


def test_unknown_is_recorded_as_unknown_and_never_faults(store: Store, enroll: Enroll) -> None:
    enroll(1)
    store.health.note_power(states={"n01": PowerState.OFF})
    fleet = FakeFleet(clock=FakeClock())
    for _ in range(5):
        report = sync_pass(
            store,
            SyncSettings(),
            SyncParts(lambda r: UnknownDriver(r.name, fleet=fleet)),
            deadline=unbounded(fleet.clock),
        )
    assert report.results[0].value is PowerState.UNKNOWN
    node = store.nodes.get("n01")
    assert node.power_state is PowerState.UNKNOWN
    assert (node.fault, node.maintenance, node.fault_count) == (None, False, 0)


def test_a_node_that_cannot_be_asked_is_not_a_power_failure(
    store: Store, monkeypatch: pytest.MonkeyPatch, stub_drivers: None
) -> None:
    monkeypatch.delenv("NOT_SET_PW", raising=False)
    info = {"ipmi_address": "h", "ipmi_username": "u", "ipmi_password": "${NOT_SET_PW}"}
    store.nodes.enroll([NodeSpec("c1", "ipmi", info)])
    fleet = FakeFleet(clock=FakeClock())
    for _ in range(4):
        report = sync_pass(
            store,
            SyncSettings(),
            SyncParts(driver_factory(fleet=fleet)),
            deadline=unbounded(fleet.clock),
        )
    assert "NOT_SET_PW is not set" in str(report.failed[0].error)
    node = store.nodes.get("c1")
    assert (node.fault, node.fault_count) == (None, 0)
    assert node.last_error is not None
    assert "NOT_SET_PW" in node.last_error


def test_the_sync_reclaims_what_dead_processes_held(
    store: Store, enroll: Enroll, fleet: FakeFleet, wall: FakeClock
) -> None:
    enroll(2)
    owner = store.owners.create(OwnerKind.ATTEMPT, ttl=10)
    store.owners.claim("n01", owner.id)
    wall.advance(11)
    report = sync_pass(
        store,
        SyncSettings(),
        SyncParts(driver_factory(fleet=fleet)),
        deadline=unbounded(fleet.clock),
    )
    assert [r.owner.id for r in report.reclaimed] == [owner.id]
    assert store.owners.allocations() == []


def test_custom_thresholds(store: Store, enroll: Enroll, fleet: FakeFleet) -> None:
    enroll(1)
    fleet.add("n01", rules=[{"effect": "internal_error", "operation": "power.get", "times": 1}])
    report = sync_pass(
        store,
        SyncSettings(health_rule=HealthRule(1, 1)),
        SyncParts(driver_factory(fleet=fleet)),
        deadline=unbounded(fleet.clock),
    )
    assert report.nodes_with(Change.FAULTED) == ["n01"]
    report = sync_pass(
        store,
        SyncSettings(health_rule=HealthRule(1, 1)),
        SyncParts(driver_factory(fleet=fleet)),
        deadline=unbounded(fleet.clock),
    )
    assert report.nodes_with(Change.RECOVERED) == ["n01"]


def test_the_loop_keeps_its_interval_and_stops(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(2)
    fleet.add("n02", rules=[{"effect": "hang", "operation": "power.get"}])  # each pass takes 3s
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        fleet.clock.advance(seconds)

    reports: list[Any] = []
    passes = sync_loop(
        store,
        SyncSettings(interval=10.0, count=3),
        SyncParts(driver_factory(fleet=fleet, bmc_timeout=3.0), clock=fleet.clock),
        wait=wait,
        on_pass=reports.append,
    )
    assert passes == 3
    assert waits == [7.0, 7.0]  # start to start, no wait after the last pass
    assert reports[-1].nodes_with(Change.FAULTED) == ["n02"]

    stop = threading.Event()
    stop.set()
    assert (
        sync_loop(
            store, SyncSettings(interval=1.0), SyncParts(driver_factory(fleet=fleet)), stop=stop
        )
        == 0
    )
    with pytest.raises(ValueError, match="positive"):
        sync_loop(
            store,
            SyncSettings(interval=0),
            SyncParts(driver_factory(fleet=fleet)),
        )


@pytest.mark.lab
def test_metrics_are_served_on_loopback_and_the_server_stops(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(1)
    metrics = SyncMetrics()
    sync_pass(
        store,
        SyncSettings(),
        SyncParts(driver_factory(fleet=fleet), metrics=metrics),
        deadline=unbounded(fleet.clock),
    )
    server = metrics.serve(0)
    try:
        assert server.server.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as resp:
            body = resp.read().decode()
        assert "bmaas_sync_pass_duration_seconds_count 1.0" in body
        assert 'bmaas_nodes{fault="",maintenance="false",power_state="off"} 1.0' in body
    finally:
        server.close()
    assert not server.thread.is_alive()
    server.close()  # twice is fine


def test_busy_and_rejected_credentials_never_count_toward_a_power_failure(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    """Issue 14: three busy answers in a row fenced healthy nodes. Busy says
    "later", auth says "fix the password": neither says the node is broken."""
    enroll(3)
    fleet.add("n01", rules=[{"effect": "busy", "operation": "power.get"}])
    fleet.add("n02", rules=[{"effect": "auth_fail", "operation": "power.get"}])
    metrics = SyncMetrics()
    factory = driver_factory(fleet=fleet)
    for _ in range(5):
        report = sync_pass(
            store,
            SyncSettings(health_rule=HealthRule(1, 1)),
            SyncParts(factory, metrics=metrics),
            deadline=unbounded(fleet.clock),
        )
        assert not report.nodes_with(Change.FAULTED)
    assert report.auth_failed == ["n02"]
    for name, summary in (("n01", "BMC busy"), ("n02", "BMC rejected credentials")):
        record = store.nodes.get(name)
        assert (record.maintenance, record.fault, record.fault_count) == (False, None, 0)
        assert summary in (record.last_error or "")
    assert samples(metrics, "bmaas_sync_uncounted_reads") == {
        (("reason", "auth"),): 1.0,
        (("reason", "busy"),): 1.0,
    }
    assert report.to_dict()["auth_failed"] == ["n02"]


def test_a_pass_retries_reads_through_the_operation_retry(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    from bmaas.retry import RetryLimits

    enroll(2)
    fleet.add("n01", rules=[{"effect": "busy", "operation": "power.get", "times": 2}])
    fleet.add("n02", rules=[{"effect": "hang", "operation": "power.get", "times": 1}])
    retry = RetryLimits(sleep=fleet.clock.sleep, clock=fleet.clock, jitter=0.0, total=30)
    factory = driver_factory(fleet=fleet, bmc_timeout=2.0)
    report = sync_pass(
        store,
        SyncSettings(retry=retry, workers=1),
        SyncParts(factory, clock=fleet.clock),
        deadline=unbounded(fleet.clock),
    )
    assert report.failed == []
    # n01: two busy answers (0.5 s, 1.0 s backoff); n02: one hang (2 s), 0.5 s wait
    assert fleet.clock.sleeps == [0.5, 1.0, 2.0, 0.5]


def test_a_loop_with_a_pool_logs_in_once_per_node_and_reports_reads_per_login(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(4)
    fleet.add("n02", rules=[{"effect": "hang", "operation": "power.get", "times": 1}])
    built: list[FakeDriver] = []
    base = driver_factory(fleet=fleet, bmc_timeout=2.0)

    def factory(record: Any) -> Any:
        built.append(base(record))
        return built[-1]

    reports: list[Any] = []
    with Runtime(clock=fleet.clock, idle=30, probe=False) as rt:
        passes = sync_loop(
            store,
            SyncSettings(interval=5, count=10),
            SyncParts(factory, rt=rt, clock=fleet.clock),
            wait=fleet.clock.sleep,
            on_pass=reports.append,
        )
    assert passes == 10
    # four first logins, and one more for n02 whose session missed an answer
    assert len(built) == 5
    last = reports[-1].to_dict()["sessions"]
    assert (last["logins"], last["reads"], last["dropped"]) == (5, 40, 1)
    assert last["reads_per_login"] == 8.0
    assert reports[0].to_dict()["sessions"]["logins"] == 4
    assert all(not d.session_alive() for d in built)  # all logged out at the end


def test_a_loop_settles_its_heap_once_after_the_pass_that_logged_in(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(4)
    gc_ = Recorder()
    with Runtime(clock=fleet.clock, idle=30, probe=False) as rt:
        sync_loop(
            store,
            SyncSettings(interval=5, count=3),
            SyncParts(driver_factory(fleet=fleet, bmc_timeout=2.0), rt=rt, clock=fleet.clock),
            heap=HeapSettler(min_changes=4, collector=gc_),
            wait=fleet.clock.sleep,
        )
    assert gc_.calls == ["collect", "freeze"]  # pass 1 opened 4 sessions; 2 and 3 reused them


class HungDriver(FakeDriver):
    """A BMC that answers nothing until the test lets it go (a real block on
    an Event: the fake clock does not move while it hangs), then times out.
    Records the fake-clock time of every read."""

    entered = threading.Semaphore(0)
    release = threading.Semaphore(0)
    reads: list[float] = []
    clock: Callable[[], float] = FakeClock()

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        HungDriver.reads.append(HungDriver.clock())
        HungDriver.entered.release()
        HungDriver.release.acquire(timeout=30)  # bounded; the test lets it go
        raise BMCTimeout("no answer", node=self.node)


def test_a_fenced_hung_bmc_is_read_on_its_back_off_and_never_holds_a_pass(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    """n01 is fenced (power failure) and hangs. Passes every 10 s (fake) for
    20 minutes read it 30, 90, 210, 450 and 930 s after the fence (the
    back-off); each pass that starts that read ends with the read still
    hanging (the pass never waits for it), and records it the pass after."""
    names = enroll(3)
    rule = HealthRule()
    for _ in range(rule.fault_after):  # the sync fenced it earlier
        store.health.record_power_reads([("n01", BMCTimeout("x", node="n01"))], health_rule=rule)
    assert store.nodes.get("n01").fault == POWER_FAILURE
    healthy = driver_factory(fleet=fleet)
    HungDriver.reads, HungDriver.clock = [], fleet.clock
    HungDriver.entered, HungDriver.release = threading.Semaphore(0), threading.Semaphore(0)
    backoff = FencedBackoff(first=30, factor=2, cap=600, timeout=60)
    fenced: FencedReads[Any] = FencedReads(backoff, fault=rule.fault, clock=fleet.clock)
    t0 = fleet.clock()
    reports: list[Any] = []
    hung_during: list[float] = []

    def on_pass(report: Any) -> None:
        reports.append(report)
        if fenced.in_flight():  # started by this pass, still hanging after it
            assert HungDriver.entered.acquire(timeout=10)
            assert "n01" not in [r.node for r in report.results]
            hung_during.append(fleet.clock() - t0)
            HungDriver.release.release()
            assert fenced.wait(timeout=10)

    try:
        sync_loop(
            store,
            SyncSettings(interval=10.0, count=121),  # 0 .. 1200 s
            SyncParts(
                lambda r: HungDriver(r.name, fleet=fleet) if r.name == "n01" else healthy(r),
                fenced=fenced,
                clock=fleet.clock,
            ),
            wait=fleet.clock.advance,
            on_pass=on_pass,
        )
    finally:
        for _ in range(5):
            HungDriver.release.release()
        fenced.close()
    schedule = [30.0, 90.0, 210.0, 450.0, 930.0]
    assert [at - t0 for at in HungDriver.reads] == schedule
    assert [at - t0 for _, at in fenced.started] == schedule
    assert hung_during == schedule  # each pass that started it ended while it hung
    assert backoff.schedule(6) == [*schedule, 1530.0]
    assert all(r.duration == 0.0 for r in reports)  # no pass waited for the hung read
    assert all(sorted(x.node for x in r.results if x.ok) == names[1:] for r in reports)
    collected = [i for i, r in enumerate(reports) if "n01" in [x.node for x in r.results]]
    assert collected == [4, 10, 22, 46, 94]  # the pass after each read started
    assert reports[0].backed_off == ["n01"]
    assert store.nodes.get("n01").fault == POWER_FAILURE


class KeptAliveDriver(FakeDriver):
    """A fake session the BMC forgets after 20 s idle, kept alive every 10 s
    (IPMI's shape); records when each keepalive went out."""

    session_idle = 20.0
    session_keepalive: float | None = 10.0
    sent: list[tuple[str, float]] = []

    def keepalive(self, *, deadline: Deadline) -> bool:
        KeptAliveDriver.sent.append((self.node, self._clock()))
        return self.session_alive()


@pytest.mark.parametrize("keepalive", [10.0, None])
def test_keepalives_between_passes_keep_one_login_per_bmc_at_a_long_interval(
    store: Store, enroll: Enroll, fleet: FakeFleet, keepalive: float | None
) -> None:
    """Passes 60 s apart, sessions trusted for 20 s idle: with keepalives every
    10 s of idleness (sent by the runtime's keeper, whose rounds the wait
    between passes runs here on the fake clock, as its thread does) each BMC
    logs in once over 5 passes (and gets 5 keepalives between each two
    passes, none after the last); without, every pass logs in again."""
    enroll(2)
    base = driver_factory(fleet=fleet)
    KeptAliveDriver.sent = []

    class Driver(KeptAliveDriver):
        session_keepalive = keepalive

    def factory(record: Any) -> Any:
        plain = base(record)
        return Driver(record.name, plain.info, fleet=fleet)

    reports: list[Any] = []
    t0 = fleet.clock()
    with Runtime(clock=fleet.clock, probe=False) as rt:

        def wait(seconds: float) -> None:  # the keeper's thread, on the fake clock
            end = fleet.clock() + seconds
            while fleet.clock() < end:
                fleet.clock.advance(min(rt.keeper.step(), end - fleet.clock()))

        sync_loop(
            store,
            SyncSettings(interval=60.0, count=5),
            SyncParts(factory, rt=rt, clock=fleet.clock),
            wait=wait,
            on_pass=reports.append,
        )
    sessions = reports[-1].sessions
    assert sessions.reads == 10
    if keepalive is None:
        assert sessions.logins == 10  # one login per BMC per pass
        assert KeptAliveDriver.sent == []
        return
    assert sessions.logins == 2  # one per BMC
    assert sessions.reads_per_login == 5.0
    assert sessions.keepalives == 2 * 5 * 4
    schedule = [60.0 * k + 10.0 * j for k in range(4) for j in range(1, 6)]
    assert [at - t0 for node, at in KeptAliveDriver.sent if node == "n01"] == schedule


@pytest.mark.parametrize(("session_idle", "logins"), [(300.0, 2), (100.0, 10)])
def test_sessions_without_keepalives_last_an_interval_past_the_pool_default(
    store: Store, enroll: Enroll, fleet: FakeFleet, session_idle: float, logins: int
) -> None:
    """Passes 120 s apart (Ironic's default), a pool made with the default
    60 s idle, sessions with no keepalive (Redfish's shape): the loop raises
    the pool's idle past the interval, so a session its BMC keeps for 300 s
    logs in once per BMC over 5 passes; one its driver trusts for only 100 s
    still logs in every pass (the driver's limit wins)."""
    enroll(2)
    base = driver_factory(fleet=fleet)

    class Driver(FakeDriver):
        session_keepalive = None

    Driver.session_idle = session_idle

    def factory(record: Any) -> Any:
        return Driver(record.name, base(record).info, fleet=fleet)

    reports: list[Any] = []
    with Runtime(clock=fleet.clock, probe=False) as rt:
        assert rt.pool.idle == DEFAULT_IDLE
        sync_loop(
            store,
            SyncSettings(interval=120.0, count=5),
            SyncParts(factory, rt=rt, clock=fleet.clock),
            wait=fleet.clock.advance,
            on_pass=reports.append,
        )
        assert rt.pool.idle == idle_for_interval(120.0) == 240.0
    sessions = reports[-1].sessions
    assert sessions.reads == 10
    assert sessions.logins == logins
    assert sessions.idled == (0 if logins == 2 else 8)
