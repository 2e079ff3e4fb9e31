"""ipmitool (a client that is not ours) against hwlab's IPMI BMC."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from bmaas.driver import BootDevice, BootSetting, PowerState
from tests.lab.conftest import PASSWORD, USER, Lab

pytestmark = pytest.mark.lab


def ipmitool(lab: Lab, *args: str, name: str = "n1", password: str = PASSWORD, suite: str = "17"):
    tool = shutil.which("ipmitool")
    if tool is None:
        pytest.fail("ipmitool is not installed: run scripts/setup.sh (it installs it from Debian)")
    command = [tool, "-I", "lanplus", "-H", "127.0.0.1", "-p", str(lab.server.endpoints[name])]
    command += ["-U", USER, "-P", password, "-C", suite, "-N", "1", "-R", "1", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=15, check=False)


@pytest.mark.parametrize("suite", ["3", "17"])
def test_power_round_trip(lab: Lab, suite: str) -> None:
    machine = lab.machine()
    assert ipmitool(lab, "power", "status", suite=suite).stdout.strip() == "Chassis Power is off"
    assert ipmitool(lab, "power", "on", suite=suite).returncode == 0
    assert machine.power_state() in (PowerState.POWERING_ON, PowerState.ON)
    machine.force_power(PowerState.ON)
    assert ipmitool(lab, "power", "status", suite=suite).stdout.strip() == "Chassis Power is on"
    assert ipmitool(lab, "power", "off", suite=suite).returncode == 0
    assert machine.power_state() in (PowerState.POWERING_OFF, PowerState.OFF)


def test_boot_device_round_trip(lab: Lab) -> None:
    machine = lab.machine()
    assert ipmitool(lab, "chassis", "bootdev", "pxe").returncode == 0
    assert machine.boot_device() == BootSetting(BootDevice.PXE, persistent=False)
    assert ipmitool(lab, "chassis", "bootdev", "cdrom", "options=persistent").returncode == 0
    assert machine.boot_device() == BootSetting(BootDevice.CDROM, persistent=True)
    shown = ipmitool(lab, "chassis", "bootparam", "get", "5").stdout
    assert "Force Boot from CD/DVD" in shown
    assert "Options apply to all future boots" in shown


def test_chassis_status_shows_a_power_fault(lab: Lab) -> None:
    machine = lab.machine(power=PowerState.ON)
    lab.rule(machine, effect="power_lost", operation="power.get", times=1)
    status = ipmitool(lab, "chassis", "status").stdout
    assert "System Power         : off" in status
    assert "Main Power Fault     : true" in status


def test_mc_info_and_fru(lab: Lab) -> None:
    machine = lab.machine()
    info = ipmitool(lab, "mc", "info").stdout
    assert "IPMI Version              : 2.0" in info
    assert "Firmware Revision         : 1.00" in info
    fru = ipmitool(lab, "fru", "print", "0").stdout
    assert f"Product Manufacturer  : {machine.hardware.vendor}" in fru


def test_wrong_password_is_refused(lab: Lab) -> None:
    lab.machine()
    result = ipmitool(lab, "power", "status", password="wrong")
    assert result.returncode != 0
    assert "Unable to establish IPMI v2 / RMCP+ session" in result.stderr


def test_faults_reach_ipmitool(lab: Lab) -> None:
    machine = lab.machine()
    lab.rule(machine, effect="busy", operation="power.get")
    result = ipmitool(lab, "power", "status")
    assert result.returncode != 0
    assert "Node busy" in result.stderr


@pytest.mark.parametrize(
    ("command", "shows"),
    [
        ("mc info", "IPMI Version              : 2.0"),
        ("fru", "Product Manufacturer"),
        ("sdr list", ""),
        ("sdr", ""),
        ("sel info", "Entries          : 0"),
        ("sel list", "SEL has no entries"),
        ("chassis status", "System Power         : off"),
        ("chassis bootparam get 5", "Boot Device Selector"),
        ("mc guid", "System GUID"),
    ],
)
def test_everyday_ipmitool_commands_succeed(lab: Lab, command: str, shows: str) -> None:
    lab.machine()
    result = ipmitool(lab, *command.split())
    assert result.returncode == 0, result.stderr
    assert shows in result.stdout + result.stderr
