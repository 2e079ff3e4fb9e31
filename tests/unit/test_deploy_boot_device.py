"""``driver_info.deploy_boot_device``: what a deploy boots where the node has
no virtual media. PXE unless the node says ``cdrom`` (the VM lab's IPMI
nodes: the lab put the disc in the drive, IPMI cannot); virtual media still
wins where the driver has it and an image is given."""

from __future__ import annotations

from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.deploy import DeploySettings, deploy_node
from bmaas.driver import BootDevice, Capability, PowerState
from bmaas.driver_info import DriverInfo
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.faults import InputError
from bmaas.retry import RetryLimits

HW = Hardware(power_on_time=1, power_off_time=1, soft_off_time=1, os_boot_time=1, reset_time=0.5)
SETTINGS = DeploySettings(power_timeout=30, settle=2, boot_timeout=30, deadline_s=120)


class Recording(FakeMachine):
    asked: list[tuple[BootDevice, bool]]

    def set_boot_device(self, device: BootDevice, *, persistent: bool, **kw: Any) -> None:
        self.asked.append((device, persistent))
        super().set_boot_device(device, persistent=persistent, **kw)


class NoVirtualMedia(FakeDriver):
    """An IPMI-like driver: no virtual media."""

    capabilities = frozenset(Capability) - {Capability.VIRTUAL_MEDIA}


def deploy(
    info: dict[str, Any], *, image: str | None = None, cls: type[FakeDriver] = FakeDriver
) -> tuple[str, Recording, FakeDriver]:
    clock = FakeClock(start=0.0)
    machine = Recording("n1", HW, clock=clock, power=PowerState.OFF)
    machine.asked = []
    driver = cls("n1", DriverInfo.parse(info), machine=machine, clock=clock, sleep=clock.sleep)
    report = deploy_node(
        driver,
        settings=DeploySettings(**{**SETTINGS.__dict__, "image_url": image}),
        limits=RetryLimits(sleep=clock.sleep, clock=clock),
        deadline=Deadline.after(600, clock=clock),
    )
    return report.boot_method, machine, driver


def test_pxe_by_default() -> None:
    method, machine, _ = deploy({})
    assert method == "pxe"
    assert machine.asked == [(BootDevice.PXE, False), (BootDevice.DISK, True)]


def test_cdrom_is_asked_once_then_disk_restored() -> None:
    method, machine, driver = deploy({"deploy_boot_device": "cdrom"})
    assert method == "cdrom"
    # one-time cdrom, then the finalize step's persistent disk; nothing inserted
    assert machine.asked == [(BootDevice.CDROM, False), (BootDevice.DISK, True)]
    assert not any(call.startswith("vmedia") for call in driver.wire_calls)


def test_an_image_without_virtual_media_boots_the_chosen_device() -> None:
    """IPMI has no virtual media: the URL is not sent anywhere, the CD drive
    holds what the lab put there (``boot_method`` says cdrom, not vmedia)."""
    method, machine, driver = deploy(
        {"deploy_boot_device": "CDROM"}, image="http://127.0.0.1/x.iso", cls=NoVirtualMedia
    )
    assert method == "cdrom"
    assert machine.asked[0] == (BootDevice.CDROM, False)
    assert not any(call.startswith("vmedia") for call in driver.wire_calls)


def test_virtual_media_wins_where_the_driver_has_it() -> None:
    method, machine, driver = deploy(
        {"deploy_boot_device": "cdrom"}, image="http://127.0.0.1/x.iso"
    )
    assert method == "vmedia"
    assert machine.asked[0] == (BootDevice.CDROM, False)
    assert "vmedia.insert" in driver.wire_calls


@pytest.mark.parametrize("value", ["floppy", "disk", ""])
def test_other_devices_are_refused_naming_the_key(value: str) -> None:
    problems = DriverInfo.problems({"deploy_boot_device": value}, node="n1")
    assert [p.field for p in problems] == ["driver_info.deploy_boot_device"]
    assert all(isinstance(p, InputError) for p in problems)
    assert "pxe, cdrom" in problems[0].message
