"""The bmaas-side hosts of a runtime (bmaas.runtime, issue 45): ``bmaas sync``
(one pass and a loop) and a fleet command each build exactly one Runtime,
close it, and leave no thread of theirs behind; and a sync's first pass
after a BMC hangs waits that BMC's silence bound, not ``--bmc-timeout``
(issue 48, finding 5), on a fake clock with the wire calls counted."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bmaas.cli import App, cli
from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.fleet import FakeFleet
from bmaas.faults import BMCTimeout
from bmaas.ops import driver_factory
from bmaas.runtime import Runtime
from bmaas.silence import BOUND_FLOOR
from bmaas.store import Store
from bmaas.sync import SyncParts, SyncSettings, sync_pass
from tests.fleet import write_inventory

Enroll = Callable[..., list[str]]
BMC_TIMEOUT = 5.0


def _pass(store: Store, parts: SyncParts, clock: FakeClock) -> Any:
    settings = SyncSettings(bmc_timeout=BMC_TIMEOUT)
    return sync_pass(store, settings, parts, deadline=Deadline.after(60.0, clock=clock))


@pytest.mark.parametrize("pooled", [True, False])
def test_the_first_pass_after_a_hang_waits_the_bmc_s_silence_bound(
    store: Store, enroll: Enroll, pooled: bool
) -> None:
    """Two passes teach the runtime's book each BMC's answer time (20 ms);
    then n02 hangs: the next pass waits for it BOUND_FLOOR (0.5 s), not the
    5 s bmc_timeout, one wire call, and its fault says why. Without a
    runtime (a driver per read) nothing is known: the whole timeout."""
    enroll(2)
    clock = FakeClock()
    fleet = FakeFleet(clock=clock)
    for name in ("n01", "n02"):
        fleet.add(name, rules=[{"effect": "delay", "seconds": 0.02}], power=PowerState.ON)
    built: list[FakeDriver] = []
    base = driver_factory(fleet=fleet, bmc_timeout=BMC_TIMEOUT)

    def factory(record: Any) -> Any:
        built.append(base(record))
        return built[-1]

    with Runtime(clock=clock, wait=BMC_TIMEOUT, probe=False) as rt:
        parts = SyncParts(factory, rt=rt if pooled else None, clock=clock)
        for _ in range(2):
            assert not _pass(store, parts, clock).failed
        fleet.machine("n02").plan.add(FaultRule.from_dict({"effect": "hang"}))
        calls = sum(len(d.wire_calls) for d in built)
        clock.sleeps.clear()
        report = _pass(store, parts, clock)
    (failed,) = report.failed
    assert isinstance(failed.error, BMCTimeout)
    assert sum(len(d.wire_calls) for d in built) - calls == 2  # one read each, none repeated
    if not pooled:
        assert clock.sleeps == [0.02, BMC_TIMEOUT]
        return
    assert clock.sleeps == [0.02, BOUND_FLOOR]
    assert "silence bound of 0.50s" in str(failed.error)
    assert "asked again by its next read with the whole deadline" in str(failed.error)
    assert rt.silence.bound(rt.pool.key_for("fake", "n02", {"fake_machine": "n02"}), 5.0) == 5.0


def test_the_later_passes_wait_a_hung_bmc_s_whole_timeout_once_not_on_every_pass(
    store: Store, enroll: Enroll
) -> None:
    """n02 hangs after two passes: its read is cut at the bound (0.5 s), the
    next given the whole bmc_timeout (a slow BMC would answer it), and when
    that got no answer either the one after is cut at the bound again -- a
    cut read used to forget the answer times, so every pass until the fence
    waited the whole timeout for it (issue 48)."""
    enroll(2)
    clock = FakeClock()
    fleet = FakeFleet(clock=clock)
    for name in ("n01", "n02"):
        fleet.add(name, rules=[{"effect": "delay", "seconds": 0.02}], power=PowerState.ON)
    factory = driver_factory(fleet=fleet, bmc_timeout=BMC_TIMEOUT)
    waits = []
    with Runtime(clock=clock, wait=BMC_TIMEOUT, probe=False) as rt:
        parts = SyncParts(factory, rt=rt, clock=clock)
        for _ in range(2):
            assert not _pass(store, parts, clock).failed
        fleet.machine("n02").plan.add(FaultRule.from_dict({"effect": "hang"}))
        for _ in range(3):
            clock.sleeps.clear()
            (failed,) = _pass(store, parts, clock).failed
            assert isinstance(failed.error, BMCTimeout)
            waits.append(max(clock.sleeps))
    assert waits == [BOUND_FLOOR, BMC_TIMEOUT, BOUND_FLOOR]


# -- one runtime a host, closed, no thread left ------------------------------------------


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Runtime constructions (whether each keeps sessions alive) and closes,
    however the host imported the class."""
    seen: dict[str, Any] = {"built": 0, "closed": 0, "keep": []}
    init, close = Runtime.__init__, Runtime.close

    def counting_init(self: Runtime, **kw: Any) -> None:
        seen["built"] += 1
        init(self, **kw)
        seen["keep"].append(self.keep)

    def counting_close(self: Runtime, deadline: Deadline) -> list[str]:
        seen["closed"] += 1
        left = close(self, deadline)
        assert left == []
        return left

    monkeypatch.setattr(Runtime, "__init__", counting_init)
    monkeypatch.setattr(Runtime, "close", counting_close)
    return seen


def _app(tmp_path: Path) -> App:
    app = App(db=str(tmp_path / "b.db"))  # the real driver factory: "fake" drivers
    inventory = write_inventory(
        tmp_path / "inv.yaml", [{"name": f"h{i}", "driver": "fake"} for i in range(4)]
    )
    assert CliRunner().invoke(cli, ["enroll", str(inventory)], obj=app).exit_code == 0
    return app


def _bmaas_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("bmaas")}


@pytest.mark.parametrize(
    "argv",
    [
        ["sync", "--processes", "1"],
        ["sync", "--interval", "0.01", "--count", "3", "--processes", "1"],
        ["power", "status", "--all"],
        ["power", "on", "h1", "h2"],
    ],
    ids=["sync-once", "sync-loop", "power-status", "power-on"],
)
def test_each_bmaas_host_builds_one_runtime_closes_it_and_leaves_no_thread(
    tmp_path: Path, counted: dict[str, Any], argv: list[str]
) -> None:
    """One runtime each; a sync loop's keeper keeps sessions alive between
    passes (nothing else sends keepalives), a one-shot command's sends none."""
    app = _app(tmp_path)
    before = _bmaas_threads()
    result = CliRunner().invoke(cli, argv, obj=app)
    assert result.exit_code == 0, result.output
    assert counted == {"built": 1, "closed": 1, "keep": ["--interval" in argv]}
    assert _bmaas_threads() - before == set()


def test_the_provisioner_holds_one_runtime_whose_session_serves_deploy_and_undeploy(
    store: Store, counted: dict[str, Any]
) -> None:
    """The embedded provisioner's runtime: the node's one pooled driver (one
    login) deploys it and undeploys it, and is logged out at its close."""
    from bmaas.provision import Request
    from tests.unit.test_provision import Rack

    before = _bmaas_threads()
    rack = Rack(store, count=1)
    with rack.provisioner as provisioner:
        done = provisioner.provision(Request("web-1"))
        assert provisioner.undeploy(done.instance_id) == ["n01"]
    (driver,) = rack.drivers["n01"]
    assert "power.set" in driver.wire_calls
    assert not driver.session_alive()
    assert counted == {"built": 1, "closed": 1, "keep": [False]}
    assert _bmaas_threads() - before == set()
