"""A BMC that answers the boot-device read from the *running* machine (stock
virtualbmc: ``set_boot_device`` writes libvirt's saved definition,
``get_boot_device`` reads the running domain), without a VM.

The fake below is that BMC at the IPMI command level, as the IPMI driver
sees it: Get Device ID answers pyghmi's defaults (what vbmc serves), a set
goes to the *defined* device, a read answers the *running* one while the VM
runs, a power-on (cold start) boots the defined device, a reset (warm)
boots the running one again. The driver knows it by its Get Device ID
(:data:`bmaas.drivers.ipmi.driver.KNOWN_BMCS`) or by the node's record, and
then judges a set made while the node is on against what such a BMC can
show: ``Quirk.BOOT_READS_RUNNING``, recorded and warned about, never a
silent pass. Without that knowledge the same deploy ends ``BootFailure`` in
its finalize step (what the VM lab measured before)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.deploy import DeploySettings, deploy_node
from bmaas.driver import BootDevice, BootSetting, Quirk
from bmaas.driver_info import DriverInfo
from bmaas.drivers.ipmi import IPMIDriver
from bmaas.drivers.ipmi.driver import KNOWN_BMCS
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BootFailure
from bmaas.quirks import warning
from bmaas.retry import RetryLimits
from tests.budgets import ask

#: what stock virtualbmc answers to Get Device ID (pyghmi's Bmc defaults:
#: device 0, revision 0, firmware 1.00, IPMI 2.0, no device support,
#: manufacturer and product as 4 bytes each, as pyghmi packs them)
VBMC_DEVICE_ID = bytes([0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0])
#: hwlab's emulated BMC (hwlab/ipmi/bmc.py): another identity
HWLAB_DEVICE_ID = bytes([0x20, 0x01, 0x01, 0x00, 0x02, 0x8E, 0, 0, 0, 0x42, 0x4C, 0, 0, 0, 0])
#: vbmc's GET_BOOT_DEVICES_MAP (the selector byte as pyghmi sends it)
_SELECTOR = {"network": 4, "hd": 8, "cdrom": 0x14}
_NAME = {BootDevice.PXE: "network", BootDevice.DISK: "hd", BootDevice.CDROM: "cdrom"}
_FROM_SELECTOR = {1: "network", 2: "hd", 5: "cdrom"}

SETTINGS = DeploySettings(
    power_timeout=30, settle=2, boot_timeout=30, poll_interval=1, deadline_s=300
)


class VbmcLike:
    """Stock vbmc in front of a libvirt domain, as the IPMI wire shows it."""

    def __init__(self, *, on: bool = False, defined: str = "hd", device_id: bytes = VBMC_DEVICE_ID):
        self.on = on
        self.defined = defined
        self.running = defined
        self.device_id = device_id
        #: the device each start booted, and how it was started
        self.boots: list[tuple[str, str]] = []
        self.sent: list[tuple[int, int, list[int]]] = []
        #: a BMC that takes no boot device at all (answers, never writes)
        self.ignores_sets = False

    def xraw_command(self, netfn: int, command: int, data: Any = (), **kw: Any) -> dict[str, Any]:
        data = list(data)
        self.sent.append((netfn, command, data))
        if (netfn, command) == (0x06, 0x01):
            return {"data": self.device_id}
        if (netfn, command) == (0x00, 0x01):
            return {"data": bytes([1 if self.on else 0, 0, 0])}
        if (netfn, command) == (0x00, 0x02):
            self._control(data[0])
            return {"data": b""}
        if (netfn, command) == (0x00, 0x08):
            if not self.ignores_sets:
                self.defined = _FROM_SELECTOR[(data[2] >> 2) & 0x0F]
            return {"data": b""}
        if (netfn, command) == (0x00, 0x09):
            shown = self.running if self.on else self.defined
            # pyghmi's Bmc: flags 0x80 (valid, never persistent), vbmc's selector
            return {"data": bytes([1, 5, 0x80, _SELECTOR[shown], 0, 0, 0])}
        raise AssertionError(f"unexpected command {netfn:#x}/{command:#x}")

    raw_command = xraw_command

    def _control(self, directive: int) -> None:
        if directive == 0x01 and not self.on:  # domain.create(): the saved definition
            self.on, self.running = True, self.defined
            self.boots.append((self.running, "cold"))
        elif directive == 0x00:  # domain.destroy()
            self.on = False
        elif directive == 0x03 and self.on:  # domain.reset(): warm, the running definition
            self.boots.append((self.running, "warm"))

    def commands(self) -> list[tuple[int, int]]:
        return [(n, c) for n, c, _ in self.sent]


def rig(bmc: VbmcLike) -> tuple[IPMIDriver, FakeClock]:
    clock = FakeClock(start=0.0)
    info = DriverInfo.parse(
        {
            "ipmi_address": "127.0.0.1",
            "ipmi_password": "password",
            "deploy_boot_device": "cdrom",
        }
    )
    driver = IPMIDriver("vm1", info, clock=clock, sleep=clock.sleep)
    driver.min_interval = 0.0
    # the one place a call reaches the wire: the fake instead of a session
    driver._call = lambda operation, deadline, act: act(bmc)  # type: ignore[method-assign]
    return driver, clock


def deploy(driver: IPMIDriver, clock: FakeClock) -> Any:
    return deploy_node(
        driver,
        settings=SETTINGS,
        limits=RetryLimits(sleep=clock.sleep, clock=clock),
        deadline=Deadline.after(600, clock=clock),
    )


# -- the driver ------------------------------------------------------------------


def test_probe_knows_stock_vbmc_by_its_device_id_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, _ = rig(VbmcLike())
    with caplog.at_level(logging.WARNING):
        ask(driver.probe)
        ask(driver.probe)
    assert driver.quirks == {Quirk.BOOT_READS_RUNNING}
    told = [r for r in caplog.records if "boot_reads_running" in r.getMessage()]
    assert len(told) == 1, told  # never silent, told once per driver
    assert "virtualbmc" in told[0].getMessage()
    assert warning(Quirk.BOOT_READS_RUNNING) is not None  # recorded with a warning
    other, _ = rig(VbmcLike(device_id=HWLAB_DEVICE_ID))
    ask(other.probe)
    assert other.quirks == set()
    assert VBMC_DEVICE_ID[:11] in KNOWN_BMCS


def test_without_the_quirk_a_set_while_the_vm_runs_is_a_boot_failure() -> None:
    """What stock vbmc does to a driver that does not know it: the set went
    to the saved definition, the read shows the running domain's cdrom."""
    bmc = VbmcLike(on=True, defined="cdrom")
    driver, _ = rig(bmc)
    with pytest.raises(BootFailure, match=r"asked for disk .* reads back cdrom"):
        ask(driver.set_boot_device, BootDevice.DISK, persistent=True)
    assert bmc.defined == "hd"  # the BMC did take it
    assert bmc.commands() == [(0, 0x08), (0, 0x09)]  # no extra request without the quirk


def test_with_the_quirk_a_set_while_running_reads_back_the_running_device() -> None:
    bmc = VbmcLike(on=True, defined="cdrom")
    driver, _ = rig(bmc)
    driver.quirks.add(Quirk.BOOT_READS_RUNNING)
    ask(driver.set_boot_device, BootDevice.DISK, persistent=True)
    assert driver.unverified_boot == BootSetting(BootDevice.DISK, persistent=True)
    # power, the running device, the set, the read-back: two requests more
    assert bmc.commands() == [(0, 0x01), (0, 0x09), (0, 0x08), (0, 0x09)]
    assert bmc.defined == "hd"


def test_with_the_quirk_another_device_is_still_a_boot_failure() -> None:
    """The read-back must be the wanted device or the one the node runs with:
    a BMC that shows a third device did not answer as this BMC does."""
    bmc = VbmcLike(on=True, defined="cdrom")
    driver, _ = rig(bmc)
    driver.quirks.add(Quirk.BOOT_READS_RUNNING)
    real_read = bmc.xraw_command
    reads = 0

    def flaky(netfn: int, command: int, data: Any = (), **kw: Any) -> dict[str, Any]:
        nonlocal reads
        reply = real_read(netfn, command, data, **kw)
        if (netfn, command) == (0, 0x09):
            reads += 1
            if reads == 2:  # the read-back after the set: PXE, neither wanted nor running
                return {"data": bytes([1, 5, 0x80, _SELECTOR["network"], 0, 0, 0])}
        return reply

    bmc.xraw_command = flaky  # type: ignore[method-assign]
    with pytest.raises(BootFailure, match=r"asked for disk .* reads back pxe"):
        ask(driver.set_boot_device, BootDevice.DISK, persistent=True)
    assert driver.unverified_boot is None


def test_with_the_quirk_a_set_while_off_is_read_back_as_ever() -> None:
    bmc = VbmcLike(on=False, defined="hd")
    bmc.ignores_sets = True
    driver, _ = rig(bmc)
    driver.quirks.add(Quirk.BOOT_READS_RUNNING)
    with pytest.raises(BootFailure, match=r"asked for cdrom .* reads back disk"):
        ask(driver.set_boot_device, BootDevice.CDROM, persistent=False)
    assert bmc.commands() == [(0, 0x01), (0, 0x08), (0, 0x09)]  # off: nothing to compare with


# -- the deploy ------------------------------------------------------------------


def test_a_deploy_onto_stock_vbmc_ends_active_with_disk_boot_unverified(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The VM lab's IPMI deploy: off, boot cdrom once, power on (a cold start:
    the VM boots its CD), settle, then disk boot set while it runs. The
    driver learns the quirk from the check step's probe; the finalize step's
    read-back (cdrom, the running device) is judged as this BMC's, and the
    report says disk boot shows at the next cold start."""
    bmc = VbmcLike(on=False, defined="hd")
    driver, clock = rig(bmc)
    with caplog.at_level(logging.WARNING):
        report = deploy(driver, clock)
    assert bmc.boots == [("cdrom", "cold")]  # booted the CD, once
    assert bmc.defined == "hd"  # disk from the next cold start on
    assert report.boot_method == "cdrom"
    assert report.unverified_boot == "disk (persistent)"
    assert Quirk.BOOT_READS_RUNNING in driver.quirks
    assert any("next cold start" in r.getMessage() for r in caplog.records)


def test_the_same_deploy_without_knowing_the_bmc_fails_in_finalize() -> None:
    """The before: a BMC with another identity that behaves the same (the
    quirk neither in its Get Device ID nor on the node's record)."""
    bmc = VbmcLike(on=False, defined="hd", device_id=HWLAB_DEVICE_ID)
    driver, clock = rig(bmc)
    with pytest.raises(BootFailure) as info:
        deploy(driver, clock)
    assert "deploy step: finalize" in (info.value.__notes__ or [])
    assert bmc.boots == [("cdrom", "cold")]


def test_a_quirk_from_the_nodes_record_is_enough() -> None:
    """Known from the record (``extra.bmc_quirks``, seeded as a deploy does),
    whatever the BMC's identity."""
    bmc = VbmcLike(on=False, defined="hd", device_id=HWLAB_DEVICE_ID)
    driver, clock = rig(bmc)
    driver.quirks.add(Quirk.BOOT_READS_RUNNING)
    report = deploy(driver, clock)
    assert report.unverified_boot == "disk (persistent)"


def test_a_node_already_on_gets_a_cold_cycle_and_the_device_is_verified() -> None:
    """Node on: the boot-device step's set reads back the running disk (taken
    for the next cold start); a reset would boot the running definition
    again (vbmc's reset is warm), so the power step powers off and on, then
    reads the device back, which must now show cdrom."""
    bmc = VbmcLike(on=True, defined="hd")
    driver, clock = rig(bmc)
    report = deploy(driver, clock)
    assert bmc.boots == [("cdrom", "cold")]  # no warm reset: the CD really booted
    directives = [d[0] for n, c, d in bmc.sent if (n, c) == (0, 0x02)]
    assert directives == [0x00, 0x01]  # off, on: never a reset
    assert report.unverified_boot == "disk (persistent)"


def test_a_cold_cycle_that_still_shows_the_old_device_is_a_boot_failure() -> None:
    """The BMC answered the set but never took it: after the cold start the
    read-back shows disk, not cdrom -- verified after the power cycle, and
    typed."""
    bmc = VbmcLike(on=True, defined="hd")
    bmc.ignores_sets = True
    driver, clock = rig(bmc)
    with pytest.raises(BootFailure, match=r"asked for cdrom .* reads back disk") as info:
        deploy(driver, clock)
    assert "deploy step: power" in (info.value.__notes__ or [])
    assert bmc.boots == [("hd", "cold")]
    assert bmc.on


def test_a_one_shot_command_knows_the_quirk_from_the_nodes_record() -> None:
    """``bmaas boot-device set`` on a node whose record holds the quirk
    (a deploy recorded it): the command's driver starts knowing it, so a set
    while the VM runs is judged as this BMC's, not a BootFailure; names
    this bmaas does not know are left out."""
    from types import SimpleNamespace

    from bmaas.cli.app import App

    bmc = VbmcLike(on=True, defined="cdrom", device_id=HWLAB_DEVICE_ID)
    made: list[IPMIDriver] = []

    def make_factory(**kw: Any) -> Any:
        def build(record: Any) -> IPMIDriver:
            made.append(rig(bmc)[0])
            return made[-1]

        return build

    record = SimpleNamespace(
        name="vm1", extra={"bmc_quirks": ["boot_reads_running", "from_a_newer_bmaas"]}
    )
    driver = App(make_factory=make_factory).factory(10.0)(record)
    assert driver.quirks == {Quirk.BOOT_READS_RUNNING}
    ask(driver.set_boot_device, BootDevice.DISK, persistent=True)
    assert driver.unverified_boot == BootSetting(BootDevice.DISK, persistent=True)
