"""What the IPMI wire-answer tests (login and in-session) share: an emulated
node and a proxied one with the same fault rule, and the fault a power read
meets on each."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bmaas.drivers.ipmi import IPMIDriver
from bmaas.faults import BMCFault
from bmaas.hwlab.proxy import ProxyHost, ProxySpec
from bmaas.secrets import Secret
from tests.budgets import HEALTHY_BMC_TIMEOUT, ask
from tests.lab.conftest import PASSWORD, USER, Lab

Start = Callable[..., ProxyHost]

#: the bound of a test that waits it out (the BMC silent, or late past it)
SILENCE_TIMEOUT = 1.5


def pair(
    lab: Lab, proxy_host: Start, rule: dict[str, object], *, silent: bool = False
) -> tuple[IPMIDriver, IPMIDriver]:
    """Drivers with no session yet to an emulated node with ``rule``, and to
    a proxied one (the proxy, with the same rule, in front of an emulated
    BMC with no rules). ``silent``: the test waits the bound out
    (:data:`SILENCE_TIMEOUT`); else the drivers get a healthy call's bound,
    which a starved client's login must not overrun."""
    bmc_timeout = SILENCE_TIMEOUT if silent else HEALTHY_BMC_TIMEOUT
    emulated = lab.machine("emu")
    lab.rule(emulated, **rule)
    lab.machine("real")  # no rules: the proxy answers in its place
    spec = ProxySpec(
        "real",
        "ipmi",
        "127.0.0.1",
        lab.server.endpoints["real"],
        username=USER,
        password=Secret(PASSWORD),
    )
    port = proxy_host(spec, [rule]).endpoints["real"]["ipmi"]
    return (
        lab.driver("emu", bmc_timeout=bmc_timeout),
        lab.driver("real", bmc_timeout=bmc_timeout, ipmi_port=port),
    )


def read_fault(driver: IPMIDriver) -> BMCFault:
    """The fault a power read raises."""
    with pytest.raises(BMCFault) as info:
        ask(driver.get_power_state)
    return info.value
