"""``bmaas-redfish``'s bios, firmware and inspect interfaces inside Ironic
(issue 51), with stand-in tasks: a BIOS apply staged, the node rebooted
through Ironic and the settings verified after it, a setting the boot did not
apply failing the step typed (never success), bad settings refused before
anything is sent; a firmware update followed to its end, a rejected image
and an unknown component typed; the inventory in Ironic's shape.

Runs in the Ironic venv (``ironic`` mark) on a simulated machine whose clock
moves only when the driver waits (no real sleeps)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.ironicscript import run_json

pytestmark = pytest.mark.ironic

_SETUP = """
import json, sys, types
import ironic.conf
from ironic.common import exception
from bmaas.driver import PowerAction
from bmaas.drivers.ironic import calls
from bmaas.drivers.ironic.bios import BmaasBIOS
from bmaas.drivers.ironic.firmware import BmaasFirmware
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.updates import UpdateBounds

calls.conf.CONF([], project="ironic", default_config_files=[])
calls.conf.CONF.set_override("events", False, group="bmaas")
clock = FakeClock()
machine = FakeMachine("n1", Hardware(os_boot_time=1.0, firmware_update_time=2.0),
                      clock=clock.monotonic)
calls.build_driver = lambda name, protocol, info, **kw: FakeDriver(
    name, machine=machine, clock=clock.monotonic, sleep=clock.sleep, bmc_timeout=1.0
)
for rule in json.loads(sys.argv[2]):
    machine.plan.add(FaultRule.from_dict(rule))
info = {"redfish_address": "https://127.0.0.1:1", "redfish_system_id": "/redfish/v1/Systems/1",
        "redfish_username": "u", "redfish_password": "secret-pw"}
node = types.SimpleNamespace(name="n1", uuid="u-1", id=1, driver="bmaas-redfish",
                             driver_info=info, properties={})
class Task:
    shared = False
task = Task()
task.node = node
out = {"reboots": 0, "cached": 0}

class Bios(BmaasBIOS):
    sleep = staticmethod(clock.sleep)
    def reboot(self, task):  # Ironic's node_power_action, on the machine
        out["reboots"] += 1
        machine.set_power(PowerAction.REBOOT)
        clock.advance(10)
    def cache_bios_settings(self, task):
        out["cached"] += 1

class Firmware(BmaasFirmware):
    bounds = UpdateBounds(task=30.0, poll=0.5, back=10.0, good=2, interval=1.0)
    def cache_firmware_components(self, task):
        out["cached"] += 1

def run(fn, *args):
    try:
        fn(task, *args)
        out["raised"] = None
    except exception.IronicException as exc:
        out["raised"] = type(exc).__name__
        out["text"] = str(exc)
"""

_BIOS = (
    _SETUP
    + """
run(Bios().apply_configuration, json.loads(sys.argv[1]))
out["current"] = dict(machine.bios.current)
out["pending"] = dict(machine.bios.pending)
out["sleeps"] = clock.sleeps
print(json.dumps(out, default=str))
"""
)

_FIRMWARE = (
    _SETUP
    + """
run(Firmware().update, json.loads(sys.argv[1]))
out["versions"] = {c.id: c.version for c in machine.firmware_now()[0]}
print(json.dumps(out, default=str))
"""
)

_INVENTORY = """
import json
import ironic.conf
from bmaas.drivers.ironic.inspect import inventory_of, local_gb
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.machine import FakeMachine
from bmaas.deadline import Deadline
found = FakeDriver("n1", machine=FakeMachine("n1")).get_inventory(
    deadline=Deadline.after(5), detail=True)
print(json.dumps({"inventory": inventory_of(found), "local_gb": local_gb(found),
                  "memory_mb": found.memory_mb}))
"""

WANTED = [
    {"name": "ProcTurboMode", "value": "Disabled"},
    {"name": "ProcCoreDisable", "value": "2"},
]


def _bios(settings: Any, *rules: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = run_json(_BIOS, json.dumps(settings), json.dumps(list(rules)))
    return result


def _firmware(settings: Any, *rules: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = run_json(_FIRMWARE, json.dumps(settings), json.dumps(list(rules)))
    return result


def test_a_bios_apply_is_staged_rebooted_through_ironic_and_verified() -> None:
    out = _bios(WANTED)
    assert out["raised"] is None, out
    assert out["reboots"] == 1
    assert out["current"]["ProcTurboMode"] == "Disabled"
    assert out["current"]["ProcCoreDisable"] == 2  # typed by the registry: an Integer
    assert out["pending"] == {}
    assert out["cached"] == 1  # Ironic's BIOS settings table refreshed
    assert out["sleeps"] == []  # the settings object emptied by the boot: no wait


def test_settings_already_applied_need_no_reboot() -> None:
    out = _bios([{"name": "ProcTurboMode", "value": "Enabled"}])
    assert out["raised"] is None, out
    assert out["reboots"] == 0


@pytest.mark.parametrize(
    ("effect", "left"),
    [("bios_pending", {"ProcTurboMode", "ProcCoreDisable"}), ("bios_partial", {"ProcTurboMode"})],
)
def test_a_setting_the_boot_did_not_apply_fails_the_step_typed(effect: str, left: set[str]) -> None:
    out = _bios(WANTED, {"effect": effect, "operation": "bios.set"})
    assert out["raised"] == "BmaasDriverError", out
    text = out["text"]
    assert text.startswith("[bmaas settings_not_applied retry="), text
    assert f"{len(left)} of 2 attribute(s) did not apply" in text
    assert all(f"{name}: wanted" in text for name in left)
    assert "(still pending)" in text
    assert "BIOS apply gave up after" in text
    assert out["cached"] == 0
    # the first BootProgress after the reboot is not trusted: one poll, then past POST
    assert out["sleeps"] == [5.0]


def test_bad_settings_are_refused_before_anything_is_sent() -> None:
    out = _bios(
        [
            {"name": "ProcCoreDisable", "value": "99"},
            {"name": "SystemModelName", "value": "x"},
            {"name": "NoSuchThing", "value": "1"},
        ]
    )
    assert out["raised"] == "InvalidParameterValue", out
    text = out["text"]
    assert text.startswith("[bmaas input_error retry=never]"), text
    for name in ("ProcCoreDisable", "SystemModelName", "NoSuchThing"):
        assert f"bios.{name}" in text
    assert out["reboots"] == 0
    assert out["pending"] == {}


def test_a_firmware_update_is_followed_to_its_end() -> None:
    out = _firmware([{"component": "bios", "url": "http://127.0.0.1:9/fw/bios-2.0.bin"}])
    assert out["raised"] is None, out
    assert out["versions"]["BIOS"] == "bios-2.0.bin"
    assert out["cached"] == 1


def test_a_firmware_update_through_a_bmc_reboot_reaches_its_end() -> None:
    rule = {"effect": "update_reboot", "duration": 3.0, "operation": "firmware.update"}
    out = _firmware([{"component": "BMC", "url": "http://127.0.0.1:9/fw/bmc-2.0.bin"}], rule)
    assert out["raised"] is None, out
    assert out["versions"]["BMC"] == "bmc-2.0.bin"


@pytest.mark.parametrize(
    ("rule", "code"),
    [
        ({"effect": "update_rejected"}, "request_rejected retry=never"),
        ({"effect": "version_unchanged"}, "settings_not_applied"),
        ({"effect": "task_hang"}, "task_stuck"),
    ],
)
def test_a_firmware_update_that_ends_otherwise_is_typed(rule: dict[str, Any], code: str) -> None:
    out = _firmware(
        [{"component": "bios", "url": "http://127.0.0.1:9/fw/bios-2.0.bin"}],
        {**rule, "operation": "firmware.update"},
    )
    assert out["raised"] == "BmaasDriverError", out
    assert out["text"].startswith(f"[bmaas {code}"), out["text"]
    assert "firmware update BIOS gave up after" in out["text"]
    assert out["cached"] == 0


def test_firmware_settings_name_every_problem_before_anything_is_sent() -> None:
    out = _firmware([{"component": "raid", "url": "http://x/r.bin"}, {"component": "bmc"}, "nope"])
    assert out["raised"] == "InvalidParameterValue", out
    text = out["text"]
    assert text.startswith("[bmaas input_error retry=never]"), text
    assert "settings[0].component: 'raid' is not one the BMC lists (BIOS, BMC, NIC1)" in text
    assert "settings[1].url: is required" in text
    assert "settings[2]: must be a dict" in text
    assert out["versions"]["BIOS"] == "fake-bios-1.0"
    assert "secret-pw" not in json.dumps(out)


def test_the_inventory_is_in_ironic_s_shape() -> None:
    out = run_json(_INVENTORY)
    inv = out["inventory"]
    assert inv["cpu"]["architecture"] == "x86_64"
    assert inv["cpu"]["count"] >= 1
    assert inv["memory"] == {"physical_mb": out["memory_mb"]}
    (nic,) = inv["interfaces"]
    assert nic["mac_address"] == nic["mac_address"].lower()
    assert nic["name"] == "NIC1"
    assert inv["disks"]
    assert out["local_gb"] >= 0
