"""The driver pool: a node's session reused, one user per node at a time
(waiting is SlotTimeout, never BMCBusy), nodes behind one BMC never wait for
each other here, a session that missed an answer never reused, idle-out on
an injected clock, close-all."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from bmaas import policy
from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, BMCInfo, BootDevice, BootSetting, PowerAction, PowerState
from bmaas.driver_info import DriverInfo
from bmaas.fakes.clock import FakeClock
from bmaas.faults import (
    BMCFault,
    BMCInternalError,
    BMCProtocolError,
    BMCTimeout,
    InputError,
    SlotTimeout,
)
from bmaas.ops import run_on_nodes
from bmaas.pool import DEFAULT_IDLE, KEEPALIVE_EARLY, DriverPool, PoolKey, idle_for_interval
from bmaas.secrets import Secret
from bmaas.store import Store
from tests.budgets import per_call


class SessionDriver(BMCDriver):
    """A driver with a session: logs in on first use, logs out on close."""

    name = "stub"
    session_idle = 30.0
    instances: list[SessionDriver]

    def __init__(self, node: str, *, fail: BaseException | None = None) -> None:
        super().__init__(node, DriverInfo())
        self.open = False
        self.closed = 0
        self.calls = 0
        self.fail = fail

    @property
    def address(self) -> str:
        return f"{self.node}:623"

    def session_alive(self) -> bool:
        return self.open

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        if not self.open:
            self.open = True
            self.logins += 1
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return PowerState.ON

    def close(self) -> None:
        self.open = False
        self.closed += 1

    def probe(self, *, deadline: Deadline) -> BMCInfo:
        raise NotImplementedError

    def request_power(self, action: PowerAction, *, deadline: Deadline) -> None:
        raise NotImplementedError

    def get_boot_device(self, *, deadline: Deadline) -> BootSetting:
        raise NotImplementedError

    def set_boot_device(
        self, device: BootDevice, *, persistent: bool = False, deadline: Deadline
    ) -> None:
        raise NotImplementedError


class SilentLogout(SessionDriver):
    """A session whose BMC has since hung: its logout waits 2 s (its timeout)."""

    def __init__(self, node: str, clock: FakeClock) -> None:
        super().__init__(node)
        self.fake_clock = clock

    def close(self) -> None:
        self.fake_clock.advance(2.0)
        super().close()


class Jobs:
    """Collects what a pool starts in the background (logouts); the test runs them."""

    def __init__(self) -> None:
        self.jobs: list[Callable[[], None]] = []

    def __call__(self, job: Callable[[], None]) -> None:
        self.jobs.append(job)

    def run_all(self) -> int:
        ran, self.jobs = self.jobs, []
        for job in ran:
            job()
        return len(ran)


class Builder:
    def __init__(self, **kw: Any) -> None:
        self.built: list[SessionDriver] = []
        self.kw = kw

    def __call__(self, node: str = "n1") -> SessionDriver:
        driver = SessionDriver(node, **self.kw)
        self.built.append(driver)
        return driver


def key(node: str = "n1", password: str = "pw", address: str = "10.0.0.1") -> PoolKey:  # noqa: S107
    info = {"ipmi_address": address, "ipmi_password": Secret(password)}
    return PoolKey.of("ipmi", node, info)


def read(
    pool: DriverPool, build: Callable[[str], BMCDriver], k: PoolKey | None = None
) -> PowerState:
    k = k or key()
    return pool.run(
        k,
        lambda: build(k.node),
        lambda d: d.get_power_state(deadline=per_call(d)),
        deadline=budget(),
    )


def budget() -> Deadline:
    """A caller's budget: the pool waits for a held slot at most this long."""
    return Deadline.after(30.0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_a_session_is_reused_across_operations(clock: FakeClock) -> None:
    pool, build = DriverPool(clock=clock), Builder()
    for _ in range(5):
        assert read(pool, build) is PowerState.ON
        clock.advance(1)
    assert len(build.built) == 1
    assert build.built[0].calls == 5
    assert pool.stats.logins == 1
    assert pool.stats.reads == 5
    assert pool.stats.reads_per_login == 5.0
    assert build.built[0].closed == 0


def test_a_second_user_of_a_node_gets_a_slot_timeout_at_its_deadline(clock: FakeClock) -> None:
    pool, build = DriverPool(clock=clock), Builder()
    k = key()
    with pool.session(k, lambda: build(), deadline=budget()):
        now = Deadline(clock(), clock)
        with (
            pytest.raises(SlotTimeout, match="holds its pooled driver") as info,
            pool.session(key(password="pw"), lambda: build(), deadline=now),
        ):
            pass
        assert info.value.node == "n1"
        assert not isinstance(info.value, BMCFault)  # bmaas's contention, not the BMC's
        assert "busy" not in str(info.value).lower()
        assert "pw" not in str(info.value)
    assert len(build.built) == 1
    assert pool.stats.busy == 1
    assert pool.open_sessions() == 1


def test_nodes_behind_one_bmc_never_wait_for_each_other_here(clock: FakeClock) -> None:
    """Systems of one Redfish service (or nodes sharing an address) are used
    at once: the BMC's gate caps their requests, not the pool."""
    pool, build = DriverPool(clock=clock), Builder()
    now = Deadline(clock(), clock)
    with (
        pool.session(key("n1"), lambda: build("n1"), deadline=now) as one,
        pool.session(key("n2"), lambda: build("n2"), deadline=now) as two,
    ):
        assert one is not two
        assert key("n1").bmc == key("n2").bmc
    assert pool.stats.busy == 0
    assert pool.open_sessions() == 2


def test_a_waiting_user_gets_the_session_when_the_holder_is_done(clock: FakeClock) -> None:
    pool, build = DriverPool(clock=clock), Builder()
    k = key()
    held = threading.Event()
    release = threading.Event()
    seen: list[SessionDriver] = []

    def holder() -> None:
        with pool.session(k, lambda: build(), deadline=budget()) as driver:
            seen.append(driver)  # type: ignore[arg-type]
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(10)
    waiter_done = threading.Event()

    def waiter() -> None:
        with pool.session(k, lambda: build(), deadline=budget()) as driver:
            seen.append(driver)  # type: ignore[arg-type]
        waiter_done.set()

    other = threading.Thread(target=waiter)
    other.start()
    assert not waiter_done.wait(0.3)  # still waiting: the node's driver is held
    release.set()
    thread.join(10)
    other.join(10)
    assert waiter_done.is_set()
    assert seen[0] is seen[1]  # the same driver, one after the other
    assert len(build.built) == 1


@pytest.mark.parametrize(
    "fault",
    [
        BMCTimeout("no answer", node="n1"),
        BMCProtocolError("garbled", node="n1"),
        RuntimeError("a driver broke its contract"),
    ],
)
def test_a_session_that_missed_an_answer_is_never_reused(
    clock: FakeClock, fault: BaseException
) -> None:
    logouts = Jobs()
    pool = DriverPool(clock=clock, start=logouts)
    failing = Builder(fail=fault)
    with pytest.raises(type(fault)):
        read(pool, failing)
    first = failing.built[0]
    if isinstance(fault, BMCTimeout):  # no answer: logged out in the background
        assert (first.closed, len(logouts.jobs)) == (0, 1)
        assert logouts.run_all() == 1
    assert first.closed == 1
    assert not logouts.jobs  # an answer (garbled) or a broken contract: logged out at once
    healthy = Builder()
    assert read(pool, healthy) is PowerState.ON
    assert len(healthy.built) == 1  # a fresh driver, a fresh login
    assert first.calls == 1  # the dropped one was never asked again
    assert pool.stats.dropped == 1
    assert pool.stats.logins == 2


@pytest.mark.parametrize(
    "fault", [BMCInternalError("0xff", node="n1"), InputError("bad", field="x")]
)
def test_a_fault_that_proves_the_session_answers_keeps_it(
    clock: FakeClock, fault: BaseException
) -> None:
    pool, build = DriverPool(clock=clock), Builder()
    with pytest.raises(type(fault)), pool.session(key(), lambda: build(), deadline=budget()):
        raise fault
    read(pool, build)
    assert len(build.built) == 1
    assert pool.stats.dropped == 0


@pytest.mark.parametrize(
    "row",
    [r for r in policy.POLICY if issubclass(r.fault, BMCFault)],
    ids=lambda r: r.fault.__name__,
)
def test_the_pool_drops_a_session_as_the_policy_tables_column_says(
    clock: FakeClock, row: policy.FaultPolicy
) -> None:
    """The pool keeps no list of its own: the "drop session" column decides."""
    pool, build = DriverPool(clock=clock), Builder()
    with pytest.raises(row.fault), pool.session(key(), lambda: build(), deadline=budget()):
        raise row.fault("no", node="n1")
    assert pool.stats.dropped == (1 if row.drops_session else 0)
    assert row.drops_session == (row.fault in policy.DROPS_SESSION)
    assert {f.__name__ for f in policy.DROPS_SESSION} == {
        "BMCTimeout",
        "BMCProtocolError",
        "BMCUnreachable",
        "BMCAuthError",
        "UnclassifiedFault",
    }


def test_sessions_idle_out_on_the_injected_clock(clock: FakeClock) -> None:
    logouts = Jobs()
    pool, build = DriverPool(idle=60, clock=clock, start=logouts), Builder()
    read(pool, build)
    clock.advance(29)
    assert pool.expire_idle() == 0
    clock.advance(1)  # the driver's own session_idle (30 s) is shorter than the pool's
    assert pool.expire_idle() == 1
    assert logouts.run_all() == 1
    assert build.built[0].closed == 1
    assert pool.open_sessions() == 0
    read(pool, build)
    assert len(build.built) == 2
    assert pool.stats.idled == 1


def test_the_idle_for_a_sync_interval_is_twice_it_and_never_below_the_default() -> None:
    assert idle_for_interval(None) == DEFAULT_IDLE
    assert idle_for_interval(10.0) == DEFAULT_IDLE
    assert idle_for_interval(60.0) == 120.0
    assert idle_for_interval(120.0) == 240.0
    with pytest.raises(ValueError, match="positive"):
        idle_for_interval(0.0)


def test_a_stale_session_is_replaced_when_next_asked_for(clock: FakeClock) -> None:
    logouts = Jobs()
    pool, build = DriverPool(idle=10, clock=clock, start=logouts), Builder()
    read(pool, build)
    clock.advance(10)
    read(pool, build)  # no expire_idle() call in between
    assert logouts.run_all() == 1
    assert [d.closed for d in build.built] == [1, 0]


def test_a_stale_sessions_logout_never_holds_the_caller(clock: FakeClock) -> None:
    """An idle-expired session is logged out in the background: the BMC has
    likely forgotten it (that is what the idle limit says), and the logout to
    a BMC that has since hung waited its whole timeout in the caller's thread
    -- inside Ironic, the liveness read of a streamed node whose API hung
    (issue 48: the first pass after 5 % of 200 hung 1.37x a clean one)."""
    logouts = Jobs()
    pool = DriverPool(idle=10, clock=clock, start=logouts)

    build = Builder()
    read(pool, lambda node: SilentLogout(node, clock))
    clock.advance(10)
    before = clock()
    read(pool, build)
    assert clock() == before  # the caller never waited for the logout
    assert len(logouts.jobs) == 1
    pool.close()  # close() still sees the background logout through
    assert logouts.run_all() == 1
    assert clock() == before + 2.0


def test_idle_sessions_expire_without_holding_their_nodes(clock: FakeClock) -> None:
    """The keeper's round logs idle sessions out in the background, each on
    its own: a read of any of those nodes right after takes a fresh session
    at once, however long a logout to a hung BMC takes (the round used to
    log them out one after the other, every slot held to the end)."""
    logouts = Jobs()
    pool = DriverPool(idle=10, clock=clock, start=logouts)

    nodes = [key(f"n{i}", address=f"10.0.0.{i}") for i in range(3)]
    for k in nodes:
        read(pool, lambda node: SilentLogout(node, clock), k)
    clock.advance(10)
    before = clock()
    assert pool.expire_idle() == 3
    assert clock() == before
    build = Builder()
    for k in nodes:  # no wait at all for a slot
        with pool.session(k, lambda k=k: build(k.node), deadline=Deadline(clock(), clock)):
            pass
    assert len(build.built) == 3
    assert logouts.run_all() == 3


def test_changed_credentials_log_the_old_session_out_first(clock: FakeClock) -> None:
    pool, build = DriverPool(clock=clock), Builder()
    read(pool, build, key(password="old"))
    read(pool, build, key(password="new"))
    assert [d.closed for d in build.built] == [1, 0]
    assert pool.open_sessions() == 1


def test_close_logs_every_session_out_even_one_in_use(clock: FakeClock) -> None:
    pool, build = DriverPool(clock=clock), Builder()
    for n in range(3):
        read(pool, build, key(f"n{n}", address=f"10.0.0.{n}"))
    k = key("busy", address="10.0.0.9")
    with pool.session(k, lambda: build("busy"), deadline=budget()) as driver:
        driver.get_power_state(deadline=per_call(driver))
        pool.close()
        assert [d.closed for d in build.built] == [1, 1, 1, 0]
    assert [d.closed for d in build.built] == [1, 1, 1, 1]
    assert pool.open_sessions() == 0
    with pytest.raises(RuntimeError, match="closed"):
        read(pool, build)
    pool.close()  # twice is fine


def test_a_failed_build_holds_nothing(clock: FakeClock) -> None:
    pool = DriverPool(clock=clock)

    def broken() -> BMCDriver:
        raise InputError("unset password variable", field="driver_info.ipmi_password")

    with pytest.raises(InputError):
        pool.run(
            key(), broken, lambda d: d.get_power_state(deadline=per_call(d)), deadline=budget()
        )
    assert pool.open_sessions() == 0
    read(pool, Builder())  # the slot is free again


def test_keys_never_show_credentials() -> None:
    k = key(password="s3cr3t-pw")
    assert "s3cr3t" not in repr(k)
    assert "s3cr3t" not in k.digest
    assert key(password="a") != key(password="b")
    assert key(password="a") == key(password="a")


def test_run_on_nodes_with_a_pool_logs_in_once_per_node_across_sweeps(
    clock: FakeClock, store: Store, enroll: Callable[..., list[str]]
) -> None:
    enroll(6)
    pool, build = DriverPool(clock=clock), Builder()
    for _ in range(4):
        results = run_on_nodes(
            store.nodes.find(),
            lambda d: d.get_power_state(deadline=per_call(d)),
            factory=lambda r: build(r.name),
            workers=3,
            pool=pool,
            deadline=budget(),
        )
        assert all(r.ok for r in results)
    assert len(build.built) == 6
    assert pool.stats.logins == 6
    assert pool.stats.reads == 24
    assert pool.stats.reads_per_login == 4.0
    pool.close()
    assert all(d.closed == 1 for d in build.built)


@pytest.mark.parametrize("fault", [BMCTimeout, BMCProtocolError])
def test_a_dropped_session_is_closed_before_the_bmc_is_free_again(
    clock: FakeClock, fault: type[BMCFault]
) -> None:
    """At once after a garbled answer; in the background after no answer
    (the logout, a request to the same silent BMC, would wait as long as the
    read did), and the slot stays held until it is over."""
    logouts = Jobs()
    pool = DriverPool(clock=clock, start=logouts)
    seen: list[str] = []

    class Closing(SessionDriver):
        def close(self) -> None:
            # While this session is being logged out, nobody else gets the BMC.
            try:
                with pool.session(key(), lambda: Builder()(), deadline=Deadline(clock(), clock)):
                    seen.append("opened a second session")
            except SlotTimeout:
                seen.append("busy")
            super().close()

    with pytest.raises(fault):
        pool.run(
            key(),
            lambda: Closing("n1", fail=fault("no answer", node="n1")),
            lambda d: d.get_power_state(deadline=per_call(d)),
            deadline=budget(),
        )
    if fault is BMCTimeout:
        assert seen == []  # the caller is back before the logout
        with (  # the slot is held meanwhile
            pytest.raises(SlotTimeout),
            pool.session(key(), lambda: Builder()(), deadline=Deadline(clock(), clock)),
        ):
            pass
        assert logouts.run_all() == 1
    assert seen == ["busy"]
    assert pool.open_sessions() == 0
    read(pool, Builder())  # free once it is closed
    assert not logouts.jobs


def test_close_waits_for_the_background_logouts() -> None:
    """close() logs every session out, those logged out in the background
    included (on the pool's own threads here, not a test's collector)."""
    pool = DriverPool()
    built = Builder(fail=BMCTimeout("no answer", node="n1"))
    for node in ("n1", "n2", "n3"):
        with pytest.raises(BMCTimeout):
            read(pool, built, key(node))
    pool.close()
    assert [d.closed for d in built.built] == [1, 1, 1]
    assert pool.open_sessions() == 0


def test_keys_are_remembered_until_the_driver_info_changes(clock: FakeClock) -> None:
    pool = DriverPool(clock=clock)
    info = {"ipmi_address": "10.0.0.1", "ipmi_password": "a"}
    first = pool.key_for("ipmi", "n1", info)
    assert pool.key_for("ipmi", "n1", dict(info)) is first
    changed = pool.key_for("ipmi", "n1", {**info, "ipmi_password": "b"})
    assert changed != first
    assert changed.bmc == first.bmc  # the same BMC (and gate)
    assert changed.slot == first.slot  # the same node: the old driver is logged out first


class KeptAlive(SessionDriver):
    """A session kept alive every 10 s of idleness; a BMC that may stop answering."""

    session_idle = 20.0
    session_keepalive = 10.0

    def __init__(self, node: str, clock: FakeClock) -> None:
        super().__init__(node)
        self.fake = clock
        self.kept: list[float] = []
        self.dead = False

    def keepalive(self, *, deadline: Deadline) -> bool:
        if self.dead:
            raise BMCTimeout("no answer", node=self.node)
        self.kept.append(self.fake())
        return self.open


def test_keepalives_are_due_on_schedule_and_a_dead_session_is_logged_out() -> None:
    clock = FakeClock(start=0.0)
    drivers: dict[str, KeptAlive] = {}

    def build(node: str) -> KeptAlive:
        drivers[node] = KeptAlive(node, clock)
        return drivers[node]

    with DriverPool(clock=clock, idle=60) as pool:
        assert pool.keepalive_due_in() is None  # nothing pooled
        for node in ("n1", "n2"):
            read(pool, build, key(node))
        assert pool.keepalive_due_in() == 10.0
        clock.advance(10)
        assert pool.keepalive(per_call_deadline(clock)) == 2
        assert pool.keepalive_due_in() == 10.0
        drivers["n2"].dead = True
        clock.advance(10)
        assert pool.keepalive(per_call_deadline(clock)) == 1  # n2 gave no answer: logged out
        assert drivers["n2"].closed == 1
        assert pool.open_sessions() == 1
        clock.advance(45)  # well past session_idle: kept alive, never expired
        assert pool.keepalive(per_call_deadline(clock)) == 1
        assert pool.expire_idle() == 0
        read(pool, build, key("n1"))
        assert drivers["n1"].kept == [10.0, 20.0, 65.0]
        assert (pool.stats.logins, pool.stats.keepalives, pool.stats.dropped) == (2, 4, 1)


def test_sessions_falling_due_one_after_another_are_kept_in_few_rounds() -> None:
    """A pass uses sessions 0.25 s apart: without coalescing, each fell due
    on its own and each had a round of its own (a scan of the whole pool).
    A round also keeps what is due within KEEPALIVE_EARLY of the period
    (1 s of 10): 8 sessions, 2 rounds, none kept more than 1 s early."""
    clock = FakeClock(start=0.0)
    drivers: dict[str, KeptAlive] = {}

    def build(node: str) -> KeptAlive:
        drivers[node] = KeptAlive(node, clock)
        return drivers[node]

    assert KEEPALIVE_EARLY == 0.1
    with DriverPool(clock=clock, idle=60) as pool:
        for i in range(8):
            read(pool, build, key(f"n{i}"))
            clock.advance(0.25)
        rounds = []
        while clock() < 12.5:
            due = pool.keepalive_due_in()
            assert due is not None
            clock.advance(due)
            rounds.append((clock(), pool.keepalive(per_call_deadline(clock))))
    assert rounds == [(10.0, 5), (11.25, 3), (20.0, 5)]
    # each kept at 9-10 s of idleness, never later than due
    for i in range(8):
        idle = drivers[f"n{i}"].kept[0] - 0.25 * i
        assert 9.0 <= idle <= 10.0


def per_call_deadline(clock: FakeClock) -> Deadline:
    return Deadline.after(5.0, clock=clock)


class Silent(KeptAlive):
    """A BMC that stopped answering: its keepalive waits out ``wait`` (a
    fake wait: the clock moves) and gets no answer."""

    def __init__(self, node: str, clock: FakeClock, wait: float) -> None:
        super().__init__(node, clock)
        self.wait = wait
        self.asked = 0

    def keepalive(self, *, deadline: Deadline) -> bool:
        self.asked += 1
        self.fake.advance(min(self.wait, deadline.left()))
        raise BMCTimeout("no answer", node=self.node)


def test_a_round_out_of_time_gives_the_sessions_it_did_not_ask_back_unharmed() -> None:
    """Issue 26: one after the other, a silent BMC ran the keeper's round
    budget out and every healthy session after it was logged out unasked
    (and logged in again at the next read). One thread here, so the order
    is fixed: the silent one first, its wait the whole round."""
    clock = FakeClock(start=0.0)
    built: dict[str, KeptAlive] = {}

    def build(node: str) -> KeptAlive:
        made = Silent(node, clock, 5.0) if node == "n0" else KeptAlive(node, clock)
        built[node] = made
        return made

    with DriverPool(clock=clock, idle=60) as pool:
        for node in ("n0", "n1", "n2"):
            read(pool, build, key(node))
        clock.advance(10)
        assert pool.keepalive(Deadline.after(5.0, clock=clock), parallel=1) == 0
        assert built["n0"].closed == 1  # no answer: logged out
        assert [built[n].closed for n in ("n1", "n2")] == [0, 0]  # not asked: kept
        assert pool.open_sessions() == 2
        assert (pool.stats.keepalives, pool.stats.dropped) == (0, 1)
        assert pool.keepalive_due_in() == 0.0  # still due: asked in the next round
        assert pool.keepalive(Deadline.after(5.0, clock=clock), parallel=1) == 2
        assert built["n1"].kept == built["n2"].kept == [15.0]


class Hung(KeptAlive):
    """A silent BMC whose keepalive waits (really, bounded) until released."""

    def __init__(self, node: str, clock: FakeClock, release: threading.Event) -> None:
        super().__init__(node, clock)
        self.release = release

    def keepalive(self, *, deadline: Deadline) -> bool:
        assert self.release.wait(10.0), "never released"
        raise BMCTimeout("no answer", node=self.node)


def test_a_silent_bmc_holds_one_keepalive_thread_and_the_others_go_on() -> None:
    """The healthy sessions' keepalives are all answered while the silent
    BMC's is still waiting: it holds one thread of the round, not the round."""
    clock = FakeClock(start=0.0)
    release = threading.Event()
    healthy = [KeptAlive(f"n{i}", clock) for i in range(1, 6)]

    class Watching(KeptAlive):
        def keepalive(self, *, deadline: Deadline) -> bool:
            kept = super().keepalive(deadline=deadline)
            if all(h.kept for h in healthy) and self.kept:
                release.set()  # the last healthy one answered: let the silent one end
            return kept

    drivers: dict[str, KeptAlive] = {"n0": Hung("n0", clock, release)}
    for made in healthy:
        made.__class__ = Watching
        drivers[made.node] = made
    with DriverPool(clock=clock, idle=60) as pool:
        for node in drivers:
            read(pool, drivers.__getitem__, key(node))
        clock.advance(10)
        assert pool.keepalive(Deadline.after(5.0, clock=clock), parallel=3) == 5
        assert release.is_set()  # released by the healthy ones, not by a timeout
        assert drivers["n0"].closed == 1
        assert all(h.kept == [10.0] and h.closed == 0 for h in healthy)
        assert (pool.stats.keepalives, pool.stats.dropped) == (5, 1)
