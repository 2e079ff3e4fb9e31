"""What a command does once its ``--deadline`` has passed (issue 36: the worst
end-to-end overrun): it reports what it knows and leaves. No BMC thread is
waited for past the deadline, no session is logged out past it, a node whose
turn never got to send anything is not waited for, and the console script
leaves without the interpreter's teardown once the store is closed.

Every wait here is on an injected clock or an event; a test that would wait
for real only does so when the behaviour it guards is broken (the blocked
call then returns on its own ``timeout`` and the assertion fails)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
import pytest
from click.testing import CliRunner

from bmaas import leave as leave_mod
from bmaas import ops
from bmaas.cli import App, cli
from bmaas.cli.budget import room_for_the_store
from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.faults import BMCTimeout, SlotTimeout
from bmaas.ops import driver_factory, run_on_nodes
from bmaas.policy import policy_for
from bmaas.pool import DriverPool
from bmaas.store import NodeRecord, Store
from tests.budgets import per_call
from tests.fleet import write_inventory
from tests.unit.test_pool import Builder, SessionDriver, key, read

Enroll = Callable[..., list[str]]

#: how long a blocked fake waits before giving up on its own: only reached
#: when the code under test waits for it (the failure this file guards)
BLOCKED = 10.0


# -- run_on_nodes: a turn that sent nothing is not waited for ------------------------


@pytest.mark.parametrize("pooled", [False, True], ids=["built", "pooled"])
def test_a_node_still_building_its_driver_at_the_deadline_is_not_waited_for(
    store: Store, enroll: Enroll, monkeypatch: pytest.MonkeyPatch, pooled: bool
) -> None:
    """Building a driver first imports pyghmi or sushy, which nothing
    interrupts (0.5 s and more under load). A node whose turn is still there
    at the deadline has sent nothing: it is a SlotTimeout at once (never
    counted against it), not a BMCTimeout after the in-flight grace. The
    grace is made longer than the builder's own give-up here: waiting for
    the builder would hand back its driver's answer instead."""
    monkeypatch.setattr(ops, "IN_FLIGHT_GRACE", 2 * BLOCKED)
    enroll(1)
    clock = FakeClock()
    fleet = FakeFleet(clock=clock)
    release, built = threading.Event(), threading.Event()

    def factory(record: NodeRecord) -> BMCDriver:
        clock.advance(60)  # the import outlasts the deadline
        release.wait(BLOCKED)
        built.set()
        return FakeDriver(record.name, fleet=fleet)

    pool = DriverPool(clock=clock.monotonic) if pooled else None
    try:
        (result,) = run_on_nodes(
            store.nodes.find(),
            lambda d: d.get_power_state(deadline=per_call(d)),
            factory=factory,
            clock=clock.monotonic,
            deadline=Deadline.after(30, clock=clock.monotonic),
            pool=pool,
        )
        returned_while_building = not built.is_set()
    finally:
        release.set()
        if pool is not None:
            pool.close()
    assert returned_while_building
    assert isinstance(result.error, SlotTimeout)
    assert "nothing sent" in str(result.error)
    assert result.started
    assert not policy_for(result.error).counts_for_health


def test_a_call_that_began_is_still_given_its_grace(store: Store, enroll: Enroll) -> None:
    """Only turns that sent nothing are cut at once: a call in flight at the
    deadline still hands back its own answer within the grace (here it
    answers as soon as the caller has seen the deadline pass)."""
    enroll(1)
    clock = FakeClock()
    fleet = FakeFleet(clock=clock)
    deadline = Deadline.after(30, clock=clock.monotonic)

    class Late(FakeDriver):
        def get_power_state(self, *, deadline: Deadline) -> PowerState:
            clock.advance(60)  # the deadline passes while the BMC works
            return PowerState.ON

    (result,) = run_on_nodes(
        store.nodes.find(),
        lambda d: d.get_power_state(deadline=per_call(d)),
        factory=lambda r: Late(r.name, fleet=fleet),
        clock=clock.monotonic,
        deadline=deadline,
    )
    assert result.ok
    assert result.value is PowerState.ON


# -- the pool: no logout past the deadline, none waited for past it ------------------


class Hanging(SessionDriver):
    """A session whose logout hangs (a BMC that stopped answering); it moves
    the clock ``advance`` seconds first, as the world does while it hangs."""

    def __init__(self, node: str, clock: FakeClock, advance: float = 0.0, **kw: Any) -> None:
        super().__init__(node, **kw)
        self.fake_clock, self.advance = clock, advance
        self.release, self.done = threading.Event(), threading.Event()

    def close(self) -> None:
        self.fake_clock.advance(self.advance)
        self.release.wait(BLOCKED)
        super().close()
        self.done.set()


def test_closing_past_the_deadline_logs_nothing_out_and_waits_for_nothing() -> None:
    """Idle sessions are left to their BMCs; the background logout of a
    session whose BMC gave no answer is not waited for."""
    clock = FakeClock()
    pool, build = DriverPool(clock=clock.monotonic), Builder()
    for n in range(3):
        read(pool, build, key(f"n{n}", address=f"10.0.0.{n}"))
    silent = Hanging("s", clock, fail=BMCTimeout("no answer", node="s"))
    with pytest.raises(BMCTimeout):  # dropped: its logout runs in the background
        read(pool, lambda _node: silent, key("s", address="10.0.0.9"))
    spent = Deadline.after(1.0, clock=clock.monotonic)
    clock.advance(2.0)
    try:
        pool.close(spent)
        returned_while_logging_out = not silent.done.is_set()
        left = pool.open_sessions()
    finally:
        silent.release.set()
    assert returned_while_logging_out
    assert [d.closed for d in build.built] == [0, 0, 0]  # nothing sent past the deadline
    assert left == 1  # the idle ones forgotten; only the silent one's logout is out
    with pytest.raises(RuntimeError, match="closed"):
        read(pool, build)


def test_closing_before_the_deadline_logs_every_idle_session_out() -> None:
    clock = FakeClock()
    pool, build = DriverPool(clock=clock.monotonic), Builder()
    for n in range(3):
        read(pool, build, key(f"n{n}", address=f"10.0.0.{n}"))
    pool.close(Deadline.after(30.0, clock=clock.monotonic))
    assert [d.closed for d in build.built] == [1, 1, 1]
    assert pool.open_sessions() == 0


def test_a_logout_that_outlasts_the_deadline_is_left_behind() -> None:
    """Logging out before the deadline is a best effort within it: a logout
    still out when it passes is not waited for."""
    clock = FakeClock()
    pool = DriverPool(clock=clock.monotonic)
    slow = Hanging("n1", clock, advance=60.0)
    read(pool, lambda _node: slow, key("n1"))
    try:
        pool.close(Deadline.after(30.0, clock=clock.monotonic))
        returned_while_logging_out = not slow.done.is_set()
    finally:
        slow.release.set()
    assert returned_while_logging_out
    assert slow.done.wait(BLOCKED)  # it ends on its own thread


def test_closing_without_a_deadline_waits_for_the_logouts_as_before() -> None:
    clock = FakeClock()
    pool = DriverPool(clock=clock.monotonic)
    slow = Hanging("n1", clock)
    read(pool, lambda _node: slow, key("n1"))
    slow.release.set()  # it answers; close() waits for it
    pool.close()
    assert slow.done.is_set()
    assert slow.closed == 1


# -- a fleet command whose deadline the store's opening spent ------------------------


def test_a_fleet_command_spent_before_its_nodes_turn_builds_no_factory(tmp_path: Path) -> None:
    """No key-file check, no unsealing (cryptography), no driver: every node a
    SlotTimeout, exit 1, nothing asked."""
    clock = FakeClock()
    fleet = FakeFleet(clock=clock)
    made: list[float] = []

    def make_factory(**kw: Any) -> ops.DriverFactory:
        made.append(kw["bmc_timeout"])
        return driver_factory(fleet=fleet)

    inventory = write_inventory(
        tmp_path / "inv.yaml", [{"name": f"q{i}", "driver": "fake"} for i in range(3)]
    )
    runner = CliRunner()
    db = str(tmp_path / "b.db")
    assert runner.invoke(cli, ["enroll", str(inventory)], obj=App(db=db)).exit_code == 0

    class SlowStore(App):
        def store(self, **kw: Any) -> Store:
            opened = super().store(**kw)
            clock.advance(5.0)  # the database layer's import took the budget
            return opened

    app = SlowStore(db=db, make_factory=make_factory, deadline_clock=clock.monotonic)
    done = runner.invoke(cli, ["power", "status", "--all", "--deadline", "1", "--json"], obj=app)
    assert done.exit_code == 1, done.output
    assert made == []
    assert '"ok": 0' in done.output
    assert done.output.count("not started before the overall deadline") == 3


# -- leaving the process -------------------------------------------------------------


class Thread:
    def __init__(self, name: str, *, daemon: bool = False, alive: bool = True) -> None:
        self.name, self.daemon, self._alive = name, daemon, alive

    def is_alive(self) -> bool:
        return self._alive


def no_children() -> list[Any]:
    return []


def test_bmc_threads_and_daemons_never_hold_the_process() -> None:
    threads: Any = [
        threading.main_thread(),
        Thread("bmaas-node_0"),
        Thread("bmaas-logout_3"),
        Thread("bmaas-keepalive_1"),
        Thread("bmaas-probe_0"),
        Thread("bmaas-signals", daemon=True),
        Thread("writer", alive=False),
    ]
    assert leave_mod.blockers(threads, no_children) == []


def test_any_other_thread_or_a_child_process_makes_it_leave_the_usual_way() -> None:
    threads: Any = [threading.main_thread(), Thread("bmaas-node_0"), Thread("flusher")]
    assert leave_mod.blockers(threads, no_children) == ["thread flusher"]

    class Child:
        pid = 4242

    assert leave_mod.blockers([], lambda: [Child()]) == ["child process 4242"]

    def exit_(code: int) -> NoReturn:
        raise AssertionError("must not leave")

    leave_mod.leave(0, exit=exit_, threads=threads, children=no_children)  # returns


class Left(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def exit_(code: int) -> NoReturn:
    raise Left(code)


def test_leaving_flushes_the_output_first_and_keeps_the_code() -> None:
    out, err = io.StringIO(), io.StringIO()
    flushed: list[str] = []
    out.flush = lambda: flushed.append("out")  # type: ignore[method-assign]
    err.flush = lambda: flushed.append("err")  # type: ignore[method-assign]
    with pytest.raises(Left) as left:
        leave_mod.leave(1, streams=[out, err], exit=exit_, threads=[], children=no_children)
    assert left.value.code == 1
    assert flushed == ["out", "err"]


def test_output_that_cannot_be_flushed_is_not_a_success() -> None:
    """As the interpreter does at exit: a closed pipe turns 0 into 120."""
    broken = io.StringIO()

    def fail() -> None:
        raise BrokenPipeError

    broken.flush = fail  # type: ignore[method-assign]
    with pytest.raises(Left) as left:
        leave_mod.leave(0, streams=[broken], exit=exit_, threads=[], children=no_children)
    assert left.value.code == 120
    with pytest.raises(Left) as left:
        leave_mod.leave(1, streams=[broken], exit=exit_, threads=[], children=no_children)
    assert left.value.code == 1


@pytest.fixture
def empty_db(tmp_path: Path) -> str:
    db = str(tmp_path / "b.db")
    Store.open(db, create=True).close()
    return db


def test_the_console_script_leaves_once_the_store_is_closed(
    empty_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main() as the console script (no argv): the command runs to its end,
    closes the store, and only then leaves, with the command's exit code."""
    import bmaas.cli
    from bmaas.store import facade

    events: list[str] = []
    real_close = facade.Store.close

    def close(self: Store) -> None:
        events.append("store closed")
        real_close(self)

    def leave(code: int) -> None:
        events.append(f"leave {code}")
        raise Left(code)

    monkeypatch.setattr(facade.Store, "close", close)
    monkeypatch.setattr(leave_mod, "leave", leave)
    # this process began long ago: the command's budget counts from now
    monkeypatch.setattr("bmaas.clock.process_started", lambda **_: time.monotonic())
    monkeypatch.setattr(
        sys, "argv", ["bmaas", "--db", empty_db, "power", "status", "ghost", "--deadline", "30"]
    )
    with pytest.raises(Left) as left:
        bmaas.cli.main()
    assert left.value.code == 2  # no such node: the command's own code
    assert events == ["store closed", "leave 2"]


def test_main_called_with_argv_raises_system_exit_as_before(
    empty_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bmaas.cli

    def leave(code: int) -> None:
        raise AssertionError("an in-process caller must get its SystemExit")

    monkeypatch.setattr(leave_mod, "leave", leave)
    monkeypatch.setattr("bmaas.clock.process_started", lambda **_: time.monotonic())
    with pytest.raises(SystemExit) as done:
        bmaas.cli.main(["--db", empty_db, "power", "status", "ghost"])
    assert done.value.code == 2


# -- no database layer loaded that the deadline would not outlast ---------------------


def test_a_start_up_over_half_the_budget_loads_no_store(capsys: pytest.CaptureFixture[str]) -> None:
    """Loading the store takes at least what start-up took: with less left
    than that, the command ends before the import (one line, exit 1)."""
    clock = FakeClock(start=100.0)
    deadline = Deadline(100.0 - 0.3 + 0.5, clock.monotonic)  # 0.3 s of start-up, 0.2 s left
    with pytest.raises(click.exceptions.Exit) as info:
        room_for_the_store(deadline, 99.7, 0.5, loaded=lambda: False)
    assert info.value.exit_code == 1
    err = capsys.readouterr().err
    assert err.count("error:") == 1
    assert "the 0.5 s --deadline would pass while the database loads" in err
    assert "0.30 s after exec, 0.20 s left" in err
    assert "nothing was asked" in err


@pytest.mark.parametrize(
    ("started", "loaded"),
    [
        (99.8, False),  # 0.2 s of start-up, 0.3 s left: room for it
        (99.7, True),  # already loaded: nothing to wait for
        (None, False),  # not a bmaas process's own start: nothing to judge by
    ],
)
def test_the_store_loads_when_there_is_room_or_nothing_to_judge_by(
    started: float | None, loaded: bool
) -> None:
    clock = FakeClock(start=100.0)
    deadline = Deadline((started or 100.0) + 0.5, clock.monotonic)
    room_for_the_store(deadline, started, 0.5, loaded=lambda: loaded)


_PROBE = """
import json, sys, time
import bmaas.clock
# a start-up that took 31 s of a 60 s budget (nothing slept: the start is moved
# back), so the room is short whatever the real start-up adds under load, up to 29 s
# (with 6 s of 10, a real start-up over 4 s spends the budget: the other line)
bmaas.clock.process_started = lambda **kw: time.monotonic() - 31.0
from bmaas.cli import main
code = None
try:
    main(["--db", sys.argv[1], *json.loads(sys.argv[2])])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "sqlalchemy": "sqlalchemy" in sys.modules}))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["power", "status", "--all", "--deadline", "60"],
        ["boot-device", "get", "--all", "--deadline", "60"],
        ["sync", "--deadline", "60"],
    ],
    ids=["power", "boot-device", "sync"],
)
def test_a_command_with_no_room_for_the_store_ends_before_loading_it(
    tmp_path: Path, args: list[str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path / "bmaas.db"), json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "would pass while the database loads" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert result == {"code": 1, "sqlalchemy": False}
    assert not (tmp_path / "bmaas.db").exists()
