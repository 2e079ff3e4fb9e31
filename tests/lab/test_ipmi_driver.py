"""IPMIDriver against hwlab's BMC: credentials, sessions, cipher suites,
privilege, concurrency, and secrets that never leak."""

from __future__ import annotations

import gc
import logging
import pickle
import socket
import threading
import time
from collections.abc import Callable

import pytest

import bmaas.drivers.ipmi.driver as ipmi_driver
from bmaas.driver import BootDevice, BootSetting, PowerAction, PowerState, Quirk
from bmaas.drivers.ipmi import IPMIDriver
from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCBusy,
    BMCFault,
    BMCTimeout,
    BMCUnreachable,
    UnsupportedOperation,
)
from bmaas.gate import GateRegistry
from bmaas.registry import build_driver
from tests.budgets import ask, bound, no_budget, per_call
from tests.lab.conftest import PASSWORD, Lab

pytestmark = pytest.mark.lab

#: seconds: an answered failure comes back well before the 5 s deadline these
#: tests give; half of it, not a tighter figure, so a loaded machine passes too
FAST = 2.5


def _timed(call: Callable[[], object]) -> tuple[BaseException | None, float]:
    start = time.monotonic()
    try:
        call()
    except BmaasError as exc:
        return exc, time.monotonic() - start
    return None, time.monotonic() - start


# -- credentials and reachability ----------------------------------------------


@pytest.mark.parametrize(
    "creds", [{"ipmi_username": "nobody"}, {"ipmi_password": "wrong"}], ids=["user", "password"]
)
def test_wrong_credentials_fail_fast_with_auth_error(lab: Lab, creds: dict[str, str]) -> None:
    lab.machine()
    fault, took = _timed(bound(lab.driver(bmc_timeout=5.0, **creds).get_power_state))
    assert isinstance(fault, BMCAuthError)
    assert took < FAST


def test_a_closed_port_is_unreachable_at_once(lab: Lab) -> None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now: the kernel answers ICMP port unreachable
    lab.machine()
    fault, took = _timed(bound(lab.driver(bmc_timeout=5.0, ipmi_port=port).probe))
    assert isinstance(fault, BMCUnreachable)
    assert "ICMP" in str(fault)
    assert took < FAST


def test_built_through_the_registry_with_driver_info(lab: Lab) -> None:
    lab.machine()
    info = lab.info().to_dict(reveal=True)
    with build_driver("n1", "ipmi", info, bmc_timeout=2.0) as driver:
        assert isinstance(driver, IPMIDriver)
        assert driver.probe(deadline=per_call(driver)).power_state is PowerState.OFF


# -- sessions ------------------------------------------------------------------


def test_one_login_serves_many_calls(lab: Lab) -> None:
    machine = lab.machine()
    logins = lab.counter(machine, "login")
    driver = lab.driver()
    for _ in range(5):
        driver.get_power_state(deadline=per_call(driver))
    driver.set_boot_device(BootDevice.PXE, deadline=per_call(driver))
    assert machine.plan.counts()[logins] == 1


def test_an_idle_session_is_not_reused(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ipmi_driver.IPMIDriver, "session_idle", 0.0)
    machine = lab.machine()
    logins = lab.counter(machine, "login")
    driver = lab.driver()
    driver.get_power_state(deadline=per_call(driver))
    driver.get_power_state(deadline=per_call(driver))
    assert machine.plan.counts()[logins] == 2


def test_close_logs_out(lab: Lab) -> None:
    lab.machine()
    driver = lab.driver()
    driver.get_power_state(deadline=per_call(driver))
    bmc = lab.server.bmc("n1")
    assert len(bmc.sessions) == 1
    driver.close()
    deadline = time.monotonic() + 1.0
    while bmc.sessions and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not bmc.sessions  # Close Session reached the BMC
    assert (
        driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
    )  # and the driver can log in again


def test_a_dropped_driver_logs_out(lab: Lab) -> None:
    lab.machine()
    driver = IPMIDriver("n1", lab.info(), bmc_timeout=1.0)
    driver.get_power_state(deadline=per_call(driver))
    bmc = lab.server.bmc("n1")
    assert len(bmc.sessions) == 1
    del driver
    gc.collect()
    deadline = time.monotonic() + 1.0
    while bmc.sessions and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not bmc.sessions


def test_two_drivers_for_one_bmc_each_keep_their_session(lab: Lab) -> None:
    lab.machine()
    first, second = lab.driver(), lab.driver()
    assert first.get_power_state(deadline=per_call(first)) is PowerState.OFF
    assert (
        second.get_power_state(deadline=per_call(second)) is PowerState.OFF
    )  # a second socket, woken for it
    assert first.get_power_state(deadline=per_call(first)) is PowerState.OFF
    assert len(lab.server.bmc("n1").sessions) == 2


# -- cipher suites and privilege ------------------------------------------------


@pytest.mark.parametrize("suite", [None, 3, 17])
def test_cipher_suites(lab: Lab, suite: int | None) -> None:
    lab.machine()
    extra = {"ipmi_cipher_suite": suite} if suite else {}
    ask(lab.driver(**extra).get_power_state)
    (session,) = lab.server.bmc("n1").sessions.values()
    assert session.suite.number == (suite or 17)


def test_a_bmc_without_suite_17_is_refused_by_default_naming_the_setting(lab: Lab) -> None:
    """Issue 36: pyghmi proposed suite 3 after a refused suite 17 in the same
    login, without a word. Now suite 17 is the default, and only
    ``ipmi_cipher_suite: auto`` (or 3) lets a session run suite 3."""
    lab.machine(cipher_suites=(3,))
    for driver in (lab.driver(), lab.driver(ipmi_cipher_suite=17)):
        fault, took = _timed(bound(driver.get_power_state))
        assert isinstance(fault, UnsupportedOperation)  # never retried, never counted
        assert fault.status == "rmcp 0x11"
        assert "set driver_info ipmi_cipher_suite: auto" in str(fault)
        assert took < FAST
        assert driver.quirks == set()
    assert ask(lab.driver(ipmi_cipher_suite=3).get_power_state) is PowerState.OFF


def test_auto_falls_back_to_suite_3_and_says_so(lab: Lab, caplog: pytest.LogCaptureFixture) -> None:
    lab.machine("n1", cipher_suites=(3,))
    lab.machine("n2")  # offers 17 (and 3)
    downgraded = lab.driver("n1", ipmi_cipher_suite="auto")
    with caplog.at_level(logging.WARNING, logger="bmaas.drivers.ipmi.driver"):
        assert ask(downgraded.get_power_state) is PowerState.OFF
        assert ask(downgraded.get_power_state) is PowerState.OFF  # the session is reused
    assert downgraded.quirks == {Quirk.IPMI_SUITE_3}
    warned = [r.getMessage() for r in caplog.records if "suite 17" in r.getMessage()]
    assert warned == [
        "n1: the BMC refused cipher suite 17; logged in with suite 3 (HMAC-SHA1, AES-128), "
        "as ipmi_cipher_suite: auto allows (ipmi_cipher_suite_3)"
    ]
    assert PASSWORD not in caplog.text
    upgraded = lab.driver("n2", ipmi_cipher_suite="auto")
    assert ask(upgraded.get_power_state) is PowerState.OFF
    assert upgraded.quirks == set()  # 17 offered: 17 used, nothing to report


def test_auto_never_falls_back_for_a_refusal_that_is_not_about_algorithms(lab: Lab) -> None:
    """pyghmi falls back on any Open Session error; a busy BMC (0x01) is busy
    with suite 3 too: reported as busy, no downgrade recorded."""
    machine = lab.machine()
    lab.rule(machine, operation="login", effect="busy")
    driver = lab.driver(ipmi_cipher_suite="auto")
    fault, _ = _timed(bound(driver.get_power_state))
    assert isinstance(fault, BMCBusy)
    assert driver.quirks == set()


def test_user_privilege_reads_but_cannot_act(lab: Lab) -> None:
    machine = lab.machine()
    driver = lab.driver(ipmi_priv_level="user")
    assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
    with pytest.raises(BMCAuthError) as info:
        driver.set_power_state(PowerAction.ON, deadline=per_call(driver))
    assert info.value.status == "0xD4"
    assert machine.power_state() is PowerState.OFF


# -- operations ----------------------------------------------------------------


def test_soft_reboot_is_soft_off_then_on(lab: Lab) -> None:
    machine = lab.machine(power=PowerState.ON)
    driver = lab.driver()
    assert driver.set_power_state(
        PowerAction.SOFT_REBOOT, wait=True, timeout=3.0, deadline=no_budget(driver)
    ) is (PowerState.ON)
    assert machine.boots == 1


def test_one_time_boot_device_is_consumed_by_the_next_power_on(lab: Lab) -> None:
    machine = lab.machine()
    driver = lab.driver()
    driver.set_boot_device(BootDevice.PXE, persistent=False, deadline=per_call(driver))
    driver.set_power_state(PowerAction.ON, wait=True, timeout=3.0, deadline=no_budget(driver))
    assert machine.last_boot_device is BootDevice.PXE
    assert driver.get_boot_device(deadline=per_call(driver)) == BootSetting(
        BootDevice.DISK, persistent=True
    )


def test_command_specific_codes_are_read_with_their_command(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = lab.machine()
    logins = lab.counter(machine, "login")
    # a BMC without boot-flags support answers 0x80, "parameter not supported"
    monkeypatch.setattr(lab.server.bmc("n1"), "_get_boot_options", lambda data: (0x80, b""))
    # not a timing test: a budget a loaded runner's cold login always fits in
    # (the 1 s default once ran out in the login, CI floor step, 2026-11-27)
    driver = lab.driver(bmc_timeout=5.0)
    with pytest.raises(UnsupportedOperation) as info:
        driver.get_boot_device(deadline=per_call(driver))
    assert info.value.status == "0x80"
    assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
    assert machine.plan.counts()[logins] == 1  # an answered error keeps the session


def test_inventory_from_fru(lab: Lab) -> None:
    machine = lab.machine()
    inventory = ask(lab.driver().get_inventory)
    assert inventory.manufacturer == machine.hardware.vendor
    assert inventory.model == machine.hardware.model


# -- concurrency -----------------------------------------------------------------


def test_parallel_calls_on_many_bmcs(lab: Lab) -> None:
    names = [f"p{i}" for i in range(6)]
    for name in names:
        lab.machine(name)
    drivers = [lab.driver(name, bmc_timeout=5.0) for name in names]
    drivers.append(lab.driver("p0", bmc_timeout=5.0))  # two drivers on one BMC, too
    errors: list[BaseException] = []

    def work(driver: IPMIDriver) -> None:
        try:
            for _ in range(15):
                assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(d,)) for d in drivers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    assert not any(t.is_alive() for t in threads)


def test_deadlines_hold_for_parallel_hung_calls(lab: Lab) -> None:
    results: list[tuple[BaseException | None, float]] = []
    drivers = []
    for name in ("h1", "h2", "h3"):
        machine = lab.machine(name)
        drivers.append(lab.driver(name, bmc_timeout=1.0))
        drivers[-1].probe(deadline=per_call(drivers[-1]))  # log in, then every power read hangs
        lab.rule(machine, effect="hang", operation="power.get")
    threads = [
        threading.Thread(target=lambda d=d: results.append(_timed(bound(d.get_power_state))))
        for d in drivers
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(results) == 3
    for fault, took in results:
        assert isinstance(fault, BMCTimeout)
        assert took < 1.0 + 0.75


# -- secrets -------------------------------------------------------------------


def test_secrets_never_leak(
    lab: Lab, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    machine = lab.machine()
    faults: list[BMCFault] = []
    attempts = [
        lab.driver(ipmi_password=PASSWORD + "x"),  # wrong password: RAKP2 carries HMACs
        lab.driver(ipmi_username="nobody"),
        lab.driver(),
    ]
    for driver in attempts[:2]:
        with pytest.raises(BMCFault) as info:
            driver.probe(deadline=per_call(driver))
        faults.append(info.value)
    for effect in ("auth_fail", "malformed_reply"):
        lab.rule(machine, effect=effect, operation="power.get", times=1)
        with pytest.raises(BMCFault) as info:
            attempts[2].get_power_state(deadline=per_call(attempts[2]))
        faults.append(info.value)
    out = capsys.readouterr()
    texts = [caplog.text, out.out, out.err]
    for fault in faults:
        texts += [str(fault), repr(fault), str(fault.to_dict()), str(fault.cause_text)]
        texts.append(str(pickle.loads(pickle.dumps(fault)).to_dict()))
    for driver in attempts:
        texts += [repr(driver), repr(driver.info), str(driver.info.to_dict())]
    for text in texts:
        assert PASSWORD not in text
        assert PASSWORD.encode().hex() not in text


def test_a_keepalive_keeps_the_session_and_never_logs_in(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = lab.machine()
    logins = lab.counter(machine, "login")
    driver = lab.driver()
    assert driver.keepalive(deadline=per_call(driver)) is False  # no session: no login
    assert machine.plan.counts()[logins] == 0
    driver.get_power_state(deadline=per_call(driver))
    assert driver.keepalive(deadline=per_call(driver)) is True
    driver.get_power_state(deadline=per_call(driver))
    assert machine.plan.counts()[logins] == 1
    monkeypatch.setattr(ipmi_driver.IPMIDriver, "session_idle", 0.0)  # the BMC forgot it
    assert driver.keepalive(deadline=per_call(driver)) is False
    assert machine.plan.counts()[logins] == 1


def test_a_login_and_the_calls_first_command_share_one_turn_at_the_gate(lab: Lab) -> None:
    """Spacing is between a BMC's operations, not inside one: ipmitool sends
    its login and its command back to back, and so does a bmaas call that
    logs in. A later command of the call, and the next call, wait their turns."""
    lab.machine()
    waits: list[float] = []
    driver = lab.driver(bmc_timeout=5.0, bmc_min_interval=1.0)
    driver.gates = GateRegistry(sleep=waits.append)  # turns recorded, not slept

    ask(driver.probe)  # login + Get Device ID (one turn), Get Chassis Status (the next)
    assert driver.logins == 1
    assert driver.gate.stats.paced == 2
    assert len(waits) == 1  # nothing between the login and the first command
    assert 1.5 < waits[0] <= 2.0  # the login's turn counts as two requests to the BMC

    ask(driver.get_power_state)  # the session is kept: its command waits a turn
    assert driver.logins == 1
    assert len(waits) == 2
    assert 2.5 < waits[1] <= 3.0  # behind the probe's turns: 2 + 1 spacings
