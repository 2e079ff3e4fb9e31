"""A BMC that keeps a one-time boot override as a persistent one (stock
sushy-tools, several real BMCs) is a capability fact, not broken hardware:
the read-back records a Quirk, the deploy goes on and asks persistent next
time, the store keeps it once; another *device* is still a BootFailure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.deploy import DeploySettings, deploy_node
from bmaas.driver import BootDevice, BootSetting, PowerState, Quirk
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.faults import BootFailure
from bmaas.retry import RetryLimits
from bmaas.store import Store
from bmaas.store.nodes import QUIRKS_KEY
from tests.budgets import ask

HW = Hardware(power_on_time=1, power_off_time=1, soft_off_time=1, os_boot_time=1, reset_time=0.5)
SETTINGS = DeploySettings(
    power_timeout=30, settle=2, boot_timeout=30, poll_interval=1, deadline_s=120
)


class KeepsPersistent(FakeMachine):
    """sushy-tools' fake driver: BootSourceOverrideEnabled stays Continuous."""

    asked: list[tuple[BootDevice, bool]]

    def set_boot_device(self, device: BootDevice, *, persistent: bool, **kw: Any) -> None:
        self.asked.append((device, persistent))
        super().set_boot_device(device, persistent=True, **kw)


class IgnoresDevice(FakeMachine):
    def set_boot_device(self, device: BootDevice, *, persistent: bool, **kw: Any) -> None:
        super().set_boot_device(BootDevice.DISK, persistent=persistent, **kw)


def rig(machine_cls: type[FakeMachine]) -> tuple[FakeDriver, FakeMachine, FakeClock]:
    clock = FakeClock(start=0.0)
    machine = machine_cls("n1", HW, clock=clock, power=PowerState.OFF)
    machine.asked = []  # type: ignore[attr-defined]
    return FakeDriver("n1", machine=machine, clock=clock, sleep=clock.sleep), machine, clock


def deploy(driver: FakeDriver, clock: FakeClock, **kw: Any) -> None:
    limits = RetryLimits(sleep=clock.sleep, clock=clock)
    settings = DeploySettings(**{**SETTINGS.__dict__, **kw})
    deploy_node(driver, settings=settings, limits=limits, deadline=Deadline.after(600, clock=clock))


def test_a_one_time_override_read_back_persistent_is_a_quirk_not_a_fault(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, _, _ = rig(KeepsPersistent)
    ask(driver.set_boot_device, BootDevice.PXE, persistent=False)
    ask(driver.set_boot_device, BootDevice.PXE, persistent=False)
    assert driver.quirks == {Quirk.BOOT_ONCE_KEPT_PERSISTENT}
    warned = [r for r in caplog.records if "boot_once_kept_persistent" in r.getMessage()]
    assert len(warned) == 1  # reported once


def test_another_device_is_still_a_boot_failure() -> None:
    driver, _, _ = rig(IgnoresDevice)
    with pytest.raises(BootFailure, match="asked for pxe"):
        ask(driver.set_boot_device, BootDevice.PXE, persistent=False)
    assert driver.quirks == set()


def test_a_deploy_on_such_a_bmc_succeeds_and_restores_disk_boot() -> None:
    driver, machine, clock = rig(KeepsPersistent)
    deploy(driver, clock)
    assert Quirk.BOOT_ONCE_KEPT_PERSISTENT in driver.quirks
    assert machine.boot_device() == BootSetting(BootDevice.DISK, persistent=True)
    assert machine.asked == [(BootDevice.PXE, False), (BootDevice.DISK, True)]  # type: ignore[attr-defined]


def test_a_known_quirk_asks_for_a_persistent_override_from_the_start() -> None:
    driver, machine, clock = rig(KeepsPersistent)
    driver.quirks.add(Quirk.BOOT_ONCE_KEPT_PERSISTENT)
    deploy(driver, clock)
    assert machine.asked == [(BootDevice.PXE, True), (BootDevice.DISK, True)]  # type: ignore[attr-defined]


def test_persistent_boot_can_be_forced_like_ironics_option() -> None:
    driver, machine, clock = rig(FakeMachine)
    machine.asked = []  # type: ignore[attr-defined]
    deploy(driver, clock, persistent_boot=True)
    assert driver.quirks == set()


def test_the_store_keeps_each_quirk_once_with_one_event(
    store: Store, enroll: Callable[..., list[str]]
) -> None:
    (name,) = enroll(1)
    assert store.nodes.record_quirks(name, ["boot_once_kept_persistent"]) == [
        "boot_once_kept_persistent"
    ]
    assert store.nodes.record_quirks(name, ["boot_once_kept_persistent"]) == []
    node = store.nodes.get(name)
    assert node.extra[QUIRKS_KEY] == ["boot_once_kept_persistent"]
    assert node.fault is None  # never counted against health
    assert node.fault_count == 0
    events = [e for e in store.nodes.events(name) if e.kind == "bmc_quirk"]
    assert len(events) == 1
