"""The bmaas IPMI driver through the proxy to a stock vbmcd: no rules, every
call works; each effect, the fault class :data:`bmaas.hwlab.proxy.EXPECTED_FAULTS`
names (the same as hwlab's fault matrix), within the call's deadline.

virtualbmc is pyghmi's BMC server, which only speaks cipher suite 3 (and
answers a suite-17 proposal with suite-3 keys), hence ``ipmi_cipher_suite: 3``.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from bmaas.driver import BootSetting, PowerAction, PowerState, Quirk
from bmaas.fakes.faults import Effect
from bmaas.faults import BMCUnreachable, UnclassifiedFault
from bmaas.hwlab.proxy import ProxyHost, ProxySpec, expected_fault, rmcp
from bmaas.hwlab.proxy.stock import StockVbmc
from bmaas.registry import build_driver
from bmaas.secrets import Secret
from tests.budgets import ask
from tests.lab.proxy_support import VBMC_PASSWORD, VBMC_USER, require_driver

require_driver("ipmi")

pytestmark = pytest.mark.lab

DEADLINE = 1.5
Start = Callable[..., ProxyHost]


def _proxy(vbmc: StockVbmc, start: Start, rules: list[dict[str, Any]] | None = None) -> int:
    spec = ProxySpec(
        "vm1",
        "ipmi",
        "127.0.0.1",
        vbmc.ports["test"],
        username=VBMC_USER,
        password=Secret(VBMC_PASSWORD),
    )
    return start(spec, rules).endpoints["vm1"]["ipmi"]


def _driver(port: int) -> Any:
    info = {
        "ipmi_address": "127.0.0.1",
        "ipmi_port": port,
        "ipmi_username": VBMC_USER,
        "ipmi_password": VBMC_PASSWORD,
        "ipmi_cipher_suite": 3,
    }
    return build_driver("vm1", "ipmi", info, bmc_timeout=DEADLINE)


def test_every_call_works_through_the_proxy_without_rules(
    stock_vbmc: StockVbmc, proxy_host: Start
) -> None:
    with _driver(_proxy(stock_vbmc, proxy_host)) as driver:
        assert ask(driver.probe).power_state is PowerState.ON  # the test domain runs
        assert ask(driver.get_power_state) is PowerState.ON
        assert isinstance(ask(driver.get_boot_device), BootSetting)
        ask(driver.request_power, PowerAction.ON)


def test_the_driver_knows_stock_vbmc_by_its_device_id(
    stock_vbmc: StockVbmc, proxy_host: Start
) -> None:
    """Stock vbmcd answers Get Device ID with pyghmi's defaults, the identity
    ``KNOWN_BMCS`` names (relayed unchanged by the proxy): the probe learns
    ``boot_reads_running`` -- vbmc reads the boot device from the running
    domain (tests/unit/test_boot_reads_running.py; the VM lab's IPMI deploy)."""
    with _driver(_proxy(stock_vbmc, proxy_host)) as driver:
        ask(driver.probe)
        assert driver.quirks == {Quirk.BOOT_READS_RUNNING}


CASES = [
    ("hang", "power.get", {}),
    ("drop", "power.get", {}),
    ("delay", "power.get", {"seconds": DEADLINE + 1}),
    ("trickle", "power.get", {"bytes": 4, "every": 0.25}),
    ("busy", "power.get", {}),
    ("internal_error", "power.get", {}),
    ("unsupported", "power.get", {}),
    ("auth_fail", "power.get", {}),
    ("malformed_reply", "power.get", {}),
    ("hang", "login", {}),
    ("drop", "login", {}),
    ("trickle", "login", {"bytes": 4, "every": 0.25}),
    ("busy", "login", {}),
    ("auth_fail", "login", {}),
    ("internal_error", "login", {}),
    ("unsupported", "login", {}),
    ("malformed_reply", "login", {}),
]


@pytest.mark.parametrize(("effect", "operation", "params"), CASES, ids=lambda v: str(v))
def test_each_effect_is_the_expected_fault(
    stock_vbmc: StockVbmc,
    proxy_host: Start,
    effect: str,
    operation: str,
    params: dict[str, Any],
) -> None:
    rule = {"effect": effect, "operation": operation, **params}
    expected = expected_fault(Effect(effect), "ipmi", operation)
    assert expected is not None
    with _driver(_proxy(stock_vbmc, proxy_host, [rule])) as driver:
        start = time.monotonic()
        with pytest.raises(expected) as info:
            ask(driver.get_power_state)
    assert not isinstance(info.value, UnclassifiedFault)
    assert time.monotonic() - start < DEADLINE + 3
    assert info.value.node == "vm1"


def test_bmc_reboot_is_unreachable_for_its_window(stock_vbmc: StockVbmc, proxy_host: Start) -> None:
    rule = {"effect": "bmc_reboot", "operation": "login", "duration": 5, "times": 1}
    port = _proxy(stock_vbmc, proxy_host, [rule])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:  # a login: the reboot starts
        sock.sendto(rmcp.channel_auth_request(), ("127.0.0.1", port))
    time.sleep(0.2)
    with _driver(port) as driver, pytest.raises(BMCUnreachable):
        ask(driver.get_power_state)


def test_duplicate_power_request_still_succeeds(stock_vbmc: StockVbmc, proxy_host: Start) -> None:
    rule = {"effect": "duplicate", "operation": "power.set"}
    with _driver(_proxy(stock_vbmc, proxy_host, [rule])) as driver:
        ask(driver.request_power, PowerAction.ON)
