"""The bmaas Redfish driver through the proxy to a stock sushy-emulator (fake
driver): no rules, every call works; each effect, the fault class
:data:`bmaas.hwlab.proxy.EXPECTED_FAULTS` names (the same as hwlab's fault matrix),
within the call's deadline, with the upstream untouched when the proxy
answers. The fake driver lands power changes 1-11 s later: no state asserts."""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import BootSetting, PowerAction, PowerState
from bmaas.fakes.faults import Effect
from bmaas.faults import (
    BMCBusy,
    BMCInternalError,
    BMCUnreachable,
    UnclassifiedFault,
    UnsupportedOperation,
)
from bmaas.hwlab.proxy import ProxyHost, ProxySpec, expected_fault
from bmaas.hwlab.proxy.stock import StockSushy
from tests.budgets import ask, bound
from tests.lab.proxy_support import require_driver, sushy_driver

require_driver("redfish")

pytestmark = pytest.mark.lab

DEADLINE = 1.5
#: a set-up call's bound: stock sushy-tools behind the TLS proxy took over
#: DEADLINE for its first probe (TLS, session, system) with four CPU burners
SETUP = 30.0
Start = Callable[..., ProxyHost]


def _calm() -> Deadline:
    """A bound for a call whose speed is not what is tested."""
    return Deadline.after(SETUP)


def _warm(driver: Any) -> None:
    """Connected and authenticated (a set-up step, not what is tested)."""
    driver.probe(deadline=_calm())


def _proxy(sushy: StockSushy, start: Start, rules: list[dict[str, Any]] | None = None) -> ProxyHost:
    return start(ProxySpec("rf1", "redfish", sushy.host, sushy.port, tls=True), rules)


def _driver(host: ProxyHost, sushy: StockSushy) -> Any:
    return sushy_driver(host, sushy, bmc_timeout=DEADLINE)


def test_every_call_works_through_the_proxy_without_rules(
    stock_sushy: StockSushy, proxy_host: Start
) -> None:
    host = _proxy(stock_sushy, proxy_host)
    with _driver(host, stock_sushy) as driver:
        _warm(driver)
        # what works, not how fast
        assert driver.get_power_state(deadline=_calm()) in (PowerState.ON, PowerState.OFF)
        assert isinstance(driver.get_boot_device(deadline=_calm()), BootSetting)
        driver.request_power(PowerAction.ON, deadline=_calm())
    assert host.status()["events"] == 0


CASES = [
    ("hang", "power.get", {}),
    ("drop", "power.get", {}),
    ("delay", "power.get", {"seconds": DEADLINE + 1}),
    ("busy", "power.get", {"retry_after": 2}),
    ("internal_error", "power.get", {"message_id": "Acme.1.0.Kaput"}),
    ("auth_fail", "power.get", {}),
    ("malformed_reply", "power.get", {}),
    ("unsupported", "power.set", {}),
]


@pytest.mark.parametrize(("effect", "operation", "params"), CASES, ids=lambda v: str(v))
def test_each_effect_is_the_expected_fault(
    stock_sushy: StockSushy,
    proxy_host: Start,
    effect: str,
    operation: str,
    params: dict[str, Any],
) -> None:
    host = _proxy(stock_sushy, proxy_host)
    expected = expected_fault(Effect(effect), "redfish", operation)
    assert expected is not None
    with _driver(host, stock_sushy) as driver:
        _warm(driver)  # connected and authenticated before the rule goes in
        host.add_faults("rf1", [{"effect": effect, "operation": operation, **params}])
        # REBOOT is always sent (the driver skips an ON the node already reads,
        # and the stock emulator's earlier power-on lands at a random moment);
        # the proxy answers it without forwarding, so nothing reboots.
        call = (
            (lambda: ask(driver.request_power, PowerAction.REBOOT))
            if operation == "power.set"
            else bound(driver.get_power_state)
        )
        start = time.monotonic()
        with pytest.raises(expected) as info:
            call()
    fault = info.value
    assert not isinstance(fault, UnclassifiedFault)
    assert time.monotonic() - start < DEADLINE + 3
    if isinstance(fault, BMCBusy):
        assert fault.retry_after == 2
    if isinstance(fault, BMCInternalError):
        assert fault.message_id == "Acme.1.0.Kaput"


def test_bmc_reboot_is_unreachable_for_its_window(
    stock_sushy: StockSushy, proxy_host: Start
) -> None:
    rule = {"effect": "bmc_reboot", "operation": "probe", "duration": 5, "times": 1}
    host = _proxy(stock_sushy, proxy_host, [rule])
    cert = str(host.proxies["rf1"].cert_path)  # type: ignore[attr-defined]
    context = ssl.create_default_context(cafile=cert)
    # This request starts the reboot and is cut (connection reset).
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(  # noqa: S310 - loopback
            host.proxies["rf1"].url + "/redfish/v1/",  # type: ignore[attr-defined]
            timeout=5,
            context=context,
        )
    with _driver(host, stock_sushy) as driver, pytest.raises(BMCUnreachable):
        ask(driver.get_power_state)


@pytest.mark.parametrize(
    ("incident", "expected"),
    [
        ("idrac10-power-on-conflict", BMCBusy),  # a proxy has no machine: no window, always
        ("supermicro-licence", UnsupportedOperation),
        ("idrac-licence", UnsupportedOperation),
    ],
)
def test_vendor_incidents_through_the_proxy(
    stock_sushy: StockSushy, proxy_host: Start, incident: str, expected: type
) -> None:
    """The vendor's real answer, forged by the proxy in front of a stock BMC."""
    host = _proxy(stock_sushy, proxy_host)
    with _driver(host, stock_sushy) as driver:
        _warm(driver)
        rule = {"effect": "incident", "incident": incident, "operation": "power.set"}
        host.add_faults("rf1", [rule])
        assert (
            expected_fault(Effect.INCIDENT, "redfish", "power.set", incident=incident) is expected
        )
        with pytest.raises(expected):
            ask(driver.request_power, PowerAction.REBOOT)
