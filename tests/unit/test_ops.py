"""run_on_nodes: bounded parallelism, one result per node, in order, and a
node's failure (even a driver breaking its contract) never sinks the run."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.faults import BMCAuthError, BMCTimeout, InputError, SlotTimeout, UnclassifiedFault
from bmaas.ops import NodeResult, driver_factory, run_on_nodes
from bmaas.policy import policy_for
from bmaas.store import NodeRecord, Store
from tests.budgets import per_call

Enroll = Callable[..., list[str]]


@pytest.fixture
def fleet() -> FakeFleet:
    return FakeFleet(clock=FakeClock())


def test_results_come_back_in_order_with_values_and_faults(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(6)
    fleet.add("n03", rules=[{"effect": "auth_fail", "operation": "power.get"}], power=PowerState.ON)
    seen: list[str] = []
    results = run_on_nodes(
        store.nodes.find(),
        lambda d: d.get_power_state(deadline=per_call(d)),
        factory=driver_factory(fleet=fleet),
        workers=3,
        on_result=lambda r: seen.append(r.node),
    )
    assert [r.node for r in results] == ["n01", "n02", "n03", "n04", "n05", "n06"]
    assert sorted(seen) == [r.node for r in results]
    assert [r.value for r in results if r.ok] == [PowerState.OFF] * 5
    bad = results[2]
    assert isinstance(bad.error, BMCAuthError)
    assert bad.to_dict()["fault"]["code"] == "bmc_auth_error"
    assert results[0].to_dict()["result"] == "off"


def test_a_node_that_cannot_be_built_is_a_result_not_a_crash(store: Store, enroll: Enroll) -> None:
    enroll(2)

    def factory(record: NodeRecord) -> BMCDriver:
        if record.name == "n01":
            raise InputError("environment variable X is not set", node="n01")
        return FakeDriver(record.name, fleet=FakeFleet(clock=FakeClock()))

    results = run_on_nodes(
        store.nodes.find(), lambda d: d.get_power_state(deadline=per_call(d)), factory=factory
    )
    assert isinstance(results[0].error, InputError)
    assert results[1].ok


def test_a_driver_breaking_its_contract_becomes_an_unclassified_fault(
    store: Store, enroll: Enroll, fleet: FakeFleet, caplog: pytest.LogCaptureFixture
) -> None:
    enroll(1)
    closed: list[str] = []

    class Broken:
        node = "n01"

        def get_power_state(self) -> PowerState:
            raise KeyError("PowerState")

        def close(self) -> None:
            closed.append("n01")

    [result] = run_on_nodes(
        store.nodes.find(),
        lambda d: d.get_power_state(),  # type: ignore[call-arg]
        factory=lambda r: Broken(),  # type: ignore[arg-type,return-value]
    )
    assert isinstance(result.error, UnclassifiedFault)
    assert "KeyError" in str(result.error)
    assert closed == ["n01"]  # closed even when it failed
    assert "non-bmaas exception" in caplog.text


def test_no_more_than_workers_nodes_at_once(store: Store, enroll: Enroll, fleet: FakeFleet) -> None:
    enroll(12)
    lock = threading.Lock()
    active = 0
    peak = 0
    # The first four calls wait for each other: proves four really run at once.
    barrier = threading.Barrier(4, timeout=10)
    calls = 0

    def operation(driver: BMCDriver) -> int:
        nonlocal active, peak, calls
        with lock:
            active += 1
            calls += 1
            first_wave = calls <= 4
            peak = max(peak, active)
        if first_wave:
            barrier.wait()
        with lock:
            active -= 1
        return 1

    results: list[NodeResult[int]] = run_on_nodes(
        store.nodes.find(), operation, factory=driver_factory(fleet=fleet), workers=4
    )
    assert all(r.ok for r in results)
    assert peak == 4


def test_workers_must_be_positive(store: Store) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        run_on_nodes([], lambda d: None, factory=driver_factory(), workers=0)
    assert run_on_nodes([], lambda d: None, factory=driver_factory()) == []


class Blocking:
    """A driver whose call never returns until released: a BMC that swallowed
    the request, with no deadline of its own. It moves the caller's clock
    first, as the world does while a call hangs."""

    def __init__(self, node: str, clock: FakeClock, release: threading.Event) -> None:
        self.node = node
        self.bmc_timeout = 10.0
        self.clock = clock.monotonic
        self._clock = clock
        self._release = release

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        self._clock.advance(60)
        self._release.wait(timeout=10)
        return PowerState.ON

    def close(self) -> None:
        pass


def test_the_deadline_returns_on_time_and_says_which_nodes_never_finished(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(3)
    clock = fleet.clock
    release = threading.Event()

    def factory(record: NodeRecord) -> BMCDriver:
        if record.name == "n01":
            return Blocking("n01", clock, release)  # type: ignore[return-value]
        return FakeDriver(record.name, fleet=fleet)

    seen: list[NodeResult[PowerState]] = []
    try:
        results = run_on_nodes(
            store.nodes.find(),
            lambda d: d.get_power_state(deadline=per_call(d)),
            factory=factory,
            workers=1,
            clock=clock.monotonic,
            deadline=Deadline.after(30, clock=clock.monotonic),
            on_result=seen.append,
        )
    finally:
        release.set()
    # on_result hears every node once, the cut-off ones too (a sweep worker
    # streams its results through it: without them its caller had none)
    assert seen == results
    hung, queued, last = results
    assert isinstance(hung.error, BMCTimeout)
    assert hung.started
    assert "did not finish before the overall deadline" in str(hung.error)
    # One worker, stuck on n01: the others were never started -- their BMCs
    # never asked, bmaas's own shortage of workers (issue 36): SlotTimeout,
    # never counted against the nodes.
    for result in (queued, last):
        assert isinstance(result.error, SlotTimeout)
        assert not policy_for(result.error).counts_for_health
        assert not result.started
        assert "not started before the overall deadline" in str(result.error)
    assert hung.elapsed == pytest.approx(60)


def test_the_deadline_waits_for_nothing_when_everything_finishes_in_time(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    enroll(4)
    results = run_on_nodes(
        store.nodes.find(),
        lambda d: d.get_power_state(deadline=per_call(d)),
        factory=driver_factory(fleet=fleet),
        workers=2,
        clock=fleet.clock.monotonic,
        deadline=Deadline.after(5, clock=fleet.clock.monotonic),
    )
    assert [r.value for r in results] == [PowerState.OFF] * 4
    assert all(r.started for r in results)


def test_a_node_that_finished_as_the_deadline_passed_keeps_its_own_result(
    store: Store, enroll: Enroll, fleet: FakeFleet
) -> None:
    """The loop sees the deadline passed only after the first node's call
    came back (the fake clock moved past it inside the call): that result is
    the node's, not "did not finish before the overall deadline" (a
    BMCTimeout counted against a node that answered)."""
    enroll(2)
    second_began = threading.Event()

    class SeenLate(Deadline):
        @property
        def expired(self) -> bool:
            # one worker: the second node's turn comes only once the first
            # one's result is handed back (its future done, its callback run)
            second_began.wait(10)
            return super().expired

        def left(self) -> float:
            # the worker's look at the budget before it starts the second
            # node: spent by then (the first call moved the clock past it),
            # so that node is never started
            left = super().left()
            if left <= 0 and threading.current_thread() is not threading.main_thread():
                second_began.set()
            return left

    clock = fleet.clock
    deadline = SeenLate(clock.monotonic() + 5.0, clock.monotonic)

    def call(driver: BMCDriver) -> PowerState:
        if driver.node == "n02":
            second_began.set()
            return PowerState.OFF
        state = driver.get_power_state(deadline=per_call(driver))
        clock.advance(6.0)  # the deadline passes as the answer lands
        return state

    first, _ = run_on_nodes(
        store.nodes.find(),
        call,
        factory=driver_factory(fleet=fleet),
        workers=1,
        deadline=deadline,
        clock=clock.monotonic,
    )
    assert first.node == "n01"
    assert first.ok, first.error
    assert first.value is PowerState.OFF


@pytest.mark.parametrize("pooled", [False, True], ids=["built", "pooled"])
def test_a_budget_gone_before_the_run_builds_no_driver(
    store: Store, enroll: Enroll, fleet: FakeFleet, pooled: bool
) -> None:
    """Start-up and the store's opening spent the command's deadline: no node
    is started and no driver built (building one first imports pyghmi or
    sushy, which no deadline can interrupt); each node is a SlotTimeout,
    never counted against it (issue 36)."""
    from bmaas.pool import DriverPool

    enroll(3)
    clock = fleet.clock
    built: list[str] = []

    def factory(record: NodeRecord) -> BMCDriver:
        built.append(record.name)
        return FakeDriver(record.name, fleet=fleet)

    spent = Deadline.after(1.0, clock=clock.monotonic)
    clock.advance(2.0)
    with DriverPool() as pool:
        results = run_on_nodes(
            store.nodes.find(),
            lambda d: d.get_power_state(deadline=per_call(d)),
            factory=factory,
            workers=2,
            clock=clock.monotonic,
            deadline=spent,
            pool=pool if pooled else None,
        )
    assert built == []
    assert [r.node for r in results] == ["n01", "n02", "n03"]
    for result in results:
        assert isinstance(result.error, SlotTimeout)
        assert not result.started
        assert not policy_for(result.error).counts_for_health
