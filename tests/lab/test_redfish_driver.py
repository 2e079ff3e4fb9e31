"""RedfishDriver end to end: one-time boot, TLS verification, and no leaked secrets."""

from __future__ import annotations

import logging
import pickle
import time
import traceback
from collections.abc import Iterator

import pytest

from bmaas.driver import BootDevice, BootSetting, PowerAction, PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCAuthError, BMCFault, BMCInternalError, InputError
from bmaas.hwlab.redfish import RedfishServer
from tests.budgets import ask, no_budget, per_call
from tests.lab.redfish_support import PASSWORD, Lab, driver_for, lab_bmc

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def tls_server() -> Iterator[RedfishServer]:
    with RedfishServer(tls=True) as s:
        yield s


@pytest.fixture
def lab(tls_server: RedfishServer) -> Iterator[Lab]:
    with lab_bmc(tls_server) as b:
        yield b


def test_one_time_pxe_is_consumed_at_the_next_power_on(lab: Lab) -> None:
    driver, machine = lab.driver, lab.machine
    driver.set_boot_device(BootDevice.PXE, persistent=False, deadline=per_call(driver))
    assert driver.get_boot_device(deadline=per_call(driver)) == BootSetting(
        BootDevice.PXE, persistent=False
    )

    assert (
        driver.set_power_state(PowerAction.ON, wait=True, timeout=3, deadline=no_budget(driver))
        is PowerState.ON
    )
    assert machine.last_boot_device is BootDevice.PXE
    # consumed: the next boot is from the persistent device again
    assert driver.get_boot_device(deadline=per_call(driver)) == BootSetting(
        BootDevice.DISK, persistent=True
    )

    driver.set_power_state(PowerAction.REBOOT, wait=True, timeout=3, deadline=no_budget(driver))
    for _ in range(40):  # bounded: the reboot lands within ~0.3 s
        if machine.boots == 2:
            break
        time.sleep(0.025)
    assert machine.boots == 2
    assert machine.last_boot_device is BootDevice.DISK


def test_persistent_boot_survives_power_cycles(lab: Lab) -> None:
    lab.driver.set_boot_device(BootDevice.CDROM, persistent=True, deadline=per_call(lab.driver))
    lab.driver.set_power_state(PowerAction.ON, wait=True, timeout=3, deadline=no_budget(lab.driver))
    assert lab.machine.last_boot_device is BootDevice.CDROM
    assert lab.driver.get_boot_device(deadline=per_call(lab.driver)) == BootSetting(
        BootDevice.CDROM, persistent=True
    )


def test_boot_progress_follows_the_boot(tls_server: RedfishServer) -> None:
    clock = FakeClock()  # the machine's time: the boot advances when the test says so
    with lab_bmc(tls_server, clock=clock.monotonic) as lab:
        assert lab.driver.get_boot_progress(deadline=per_call(lab.driver)) == "None"
        lab.machine.force_power(PowerState.ON)
        assert lab.driver.get_boot_progress(deadline=per_call(lab.driver)) == "OSBootStarted"
        clock.advance(lab.machine.hardware.os_boot_time)
        assert lab.driver.get_boot_progress(deadline=per_call(lab.driver)) == "OSRunning"


def test_inventory_reads_the_machine(lab: Lab) -> None:
    inventory = lab.driver.get_inventory(deadline=per_call(lab.driver))
    hw = lab.machine.hardware
    assert (inventory.manufacturer, inventory.model, inventory.cpus, inventory.memory_mb) == (
        hw.vendor,
        hw.model,
        hw.cpus,
        hw.memory_mb,
    )


def test_an_unknown_ca_is_refused(tls_server: RedfishServer, lab: Lab) -> None:
    other = RedfishServer(tls=True)  # a different lab CA
    try:
        driver = driver_for(tls_server, lab.port, redfish_verify_ca=other.ca_path)
        # the node's configuration, not its hardware (issue 36): never retried or counted
        with pytest.raises(InputError, match="certificate does not verify") as info:
            driver.get_power_state(deadline=per_call(driver))
        assert info.value.field == "driver_info.redfish_verify_ca"
        driver.close()
    finally:
        other.stop()


def test_verify_off_warns_once_and_still_works(
    tls_server: RedfishServer, lab: Lab, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bmaas.drivers.redfish")
    # not a deadline test: a roomy budget, so a TLS login on a loaded machine fits
    driver = driver_for(tls_server, lab.port, bmc_timeout=10.0, redfish_verify_ca=False)
    try:
        assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
        assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
    finally:
        driver.close()
    warnings = [r for r in caplog.records if "verification is off" in r.getMessage()]
    assert len(warnings) == 1
    assert PASSWORD not in caplog.text


def _tokens(lab: Lab) -> set[str]:
    """Every session token the BMC handed out and the driver holds."""
    tokens = {s.token.reveal() for s in lab.server.bmc(lab.port).sessions()}
    held = lab.driver._conn._session.headers.get("X-Auth-Token") if lab.driver._conn else None
    return tokens | ({held} if held else set())


def test_failing_calls_leak_neither_password_nor_token(
    lab: Lab, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger: bmaas, sushy, urllib3, hwlab, flask
    tokens = _tokens(lab)
    assert tokens  # the driver logged in with a session

    lab.rule(effect="internal_error", operation="power.get", times=1)
    lab.rule(effect="auth_fail", operation="boot.get", times=2)
    faults: list[BMCFault] = []
    for call in (lab.driver.get_power_state, lab.driver.get_boot_device):
        with pytest.raises(BMCFault) as info:
            ask(call)
        faults.append(info.value)
    tokens |= _tokens(lab)  # the re-login during the auth failure made a new one
    assert isinstance(faults[0], BMCInternalError)
    assert isinstance(faults[1], BMCAuthError)

    for fault in faults:
        print(fault)
        print(repr(fault))
        print(fault.to_dict())
        traceback.print_exception(fault)  # the chained sushy/requests exceptions too
        print(pickle.loads(pickle.dumps(fault)).to_dict())
    print(repr(lab.driver), repr(lab.driver.info), lab.driver.info.to_dict())
    out = capsys.readouterr()
    seen = caplog.text + out.out + out.err
    assert "Internal" in seen  # the capture did capture
    assert "HTTP request: GET" in caplog.text  # ... down to sushy's debug log of each request
    assert PASSWORD not in seen
    for token in tokens:
        assert token not in seen
