"""BIOS settings and the firmware inventory on hwlab's Redfish BMCs, through
the real RedfishDriver (issue 51): the default service and vendor shapes
(Lenovo's ``Bios/Pending``), a change applied by the next boot -- all of
it, part of it (``bios_partial``, ``FakeBios.applies``) or none
(``bios_pending``) -- verified after it, and fault rules on ``bios.get``,
``bios.set`` and ``firmware.get``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bmaas.driver import PowerAction
from bmaas.fakes.machine import FakeMachine
from bmaas.faults import BMCBusy, BMCInternalError, SettingsNotApplied
from bmaas.hwlab.redfish import RedfishServer
from tests.budgets import no_budget, per_call
from tests.lab.redfish_support import HARDWARE, PASSWORD, USERNAME, Lab, driver_for, lab_bmc

pytestmark = pytest.mark.lab

WANTED = {"ProcTurboMode": "Disabled", "ProcHyperthreading": "Disabled"}


@pytest.fixture(scope="module")
def server() -> Iterator[RedfishServer]:
    with RedfishServer() as s:
        yield s


@pytest.fixture
def lab(server: RedfishServer) -> Iterator[Lab]:
    with lab_bmc(server) as b:
        yield b


def _reboot(lab: Lab) -> None:
    d = lab.driver
    d.set_power_state(PowerAction.ON, wait=True, timeout=3.0, deadline=no_budget(d))


def test_a_change_applied_by_the_next_boot_is_verified(lab: Lab) -> None:
    d = lab.driver
    settings = d.get_bios(deadline=per_call(d))
    assert settings.registry is not None
    assert settings.registry["AdminPassword"].type == "Password"
    assert settings.current["AdminPassword"] is None  # never shown
    assert d.set_bios(WANTED, deadline=per_call(d)) == WANTED
    _reboot(lab)
    after = d.verify_bios(WANTED, deadline=per_call(d))
    assert after.pending == {}


@pytest.mark.parametrize(
    ("rule", "left"),
    [
        ({"effect": "bios_pending", "operation": "bios.set"}, set(WANTED)),
        ({"effect": "bios_partial", "operation": "bios.set"}, {"ProcTurboMode"}),
    ],
    ids=["never", "partly"],
)
def test_a_change_the_boot_does_not_apply_is_settings_not_applied(
    lab: Lab, rule: dict[str, str], left: set[str]
) -> None:
    d = lab.driver
    lab.rule(**rule)
    d.set_bios(WANTED, deadline=per_call(d))
    _reboot(lab)
    with pytest.raises(SettingsNotApplied) as info:
        d.verify_bios(WANTED, deadline=per_call(d))
    assert set(info.value.attributes) == left
    assert all(m["pending"] for m in info.value.attributes.values())


def test_a_bios_that_applies_partly_leaves_its_sticky_setting_pending(lab: Lab) -> None:
    d = lab.driver
    lab.machine.bios.applies = "partly"
    lab.machine.bios.sticky = {"ProcHyperthreading"}
    d.set_bios(WANTED, deadline=per_call(d))
    _reboot(lab)
    with pytest.raises(SettingsNotApplied) as info:
        d.verify_bios(WANTED, deadline=per_call(d))
    assert set(info.value.attributes) == {"ProcHyperthreading"}


def test_the_firmware_inventory_lists_the_machines_components(lab: Lab) -> None:
    d = lab.driver
    found = {c.id: c for c in d.get_firmware_inventory(deadline=per_call(d))}
    assert {k: v.version for k, v in found.items()} == {
        c.id: c.version for c in lab.machine.firmware
    }
    assert all(c.updateable for c in found.values())


def test_fault_rules_fire_on_the_lifecycle_operations(lab: Lab) -> None:
    d = lab.driver
    lab.rule(effect="internal_error", operation="firmware.get", times=1)
    with pytest.raises(BMCInternalError):
        d.get_firmware_inventory(deadline=per_call(d))
    lab.rule(effect="busy", operation="bios.get", times=1)  # last: a busy BMC defers the next call
    with pytest.raises(BMCBusy):
        d.get_bios(deadline=per_call(d))


@pytest.mark.parametrize("shape", ["xcc", "idrac9", "ilo5", "openbmc"])
def test_every_vendor_shape_takes_and_applies_a_change(server: RedfishServer, shape: str) -> None:
    machine = FakeMachine(f"lc-{shape}", HARDWARE)
    port = server.add(machine, username=USERNAME, password=PASSWORD, shape=shape)
    d = driver_for(server, port)
    try:
        d.set_bios(WANTED, deadline=per_call(d))
        d.set_power_state(PowerAction.ON, wait=True, timeout=3.0, deadline=no_budget(d))
        d.verify_bios(WANTED, deadline=per_call(d))
        assert d.get_firmware_inventory(deadline=per_call(d))
    finally:
        d.close()
