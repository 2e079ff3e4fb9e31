"""``bmaas firmware update`` (the library call, through the retrying Redfish
driver) through the proxy in front of a stock sushy-emulator (fake driver),
issue 51: the proxy carries out the update effects in its own way
(:mod:`bmaas.hwlab.proxy.updates`) and each ends typed, as on hwlab's own
Redfish BMCs (``tests/lab/test_hwlab_firmware_update.py``).

Stock sushy-tools serves no FirmwareInventory (it links one and answers 404):
the driver reads the System's ``BiosVersion`` as component ``BIOS``, as
Ironic does. Its fake driver cannot update (SimpleUpdate answers 500), so an
update that lands is not seen here: ``update_reboot`` relayed ends as the
BMC's refusal, and the BMC does not reboot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.faults import (
    BMCInternalError,
    BMCNotBack,
    BMCUnreachable,
    RequestRejected,
    SettingsNotApplied,
    TaskStuck,
)
from bmaas.hwlab.proxy import ProxyHost, ProxySpec
from bmaas.hwlab.proxy.stock import StockSushy
from bmaas.retry import RetryingDriver, RetryLimits
from bmaas.updates import UpdateBounds
from tests.lab.proxy_support import require_driver, sushy_driver

require_driver("redfish")

pytestmark = pytest.mark.lab

Start = Callable[..., ProxyHost]
#: the task read every 0.1 s, at most 2 s; a BMC back after 2 answers 0.3 s
#: apart, within 5 s
BOUNDS = UpdateBounds(task=2.0, poll=0.1, back=5.0, good=2, interval=0.3)
#: a set-up call's bound (stock sushy-tools is slow to start answering)
SETUP = 30.0


def _proxy(sushy: StockSushy, start: Start) -> ProxyHost:
    return start(ProxySpec("rf1", "redfish", sushy.host, sushy.port, tls=False))


def _update(
    sushy: StockSushy,
    host: ProxyHost,
    rule: dict[str, Any],
    bounds: UpdateBounds = BOUNDS,
    lines: list[str] | None = None,
) -> None:
    """One update through ``host``'s proxy, ``rule`` firing once on it;
    its progress lines go to ``lines``."""
    lines = [] if lines is None else lines
    with sushy_driver(host, sushy, bmc_timeout=1.0) as driver:
        before = driver.get_firmware_inventory(deadline=Deadline.after(SETUP))
        assert [c.id for c in before] == ["BIOS"]  # the System's BiosVersion
        host.add_faults("rf1", [{"operation": "firmware.update", "times": 1, **rule}])
        RetryingDriver(driver, RetryLimits(bmc_timeout=1.0)).update_firmware(
            "http://127.0.0.1:9/fw/bios-2.0.bin",
            targets=("BIOS",),
            deadline=Deadline.after(15.0),
            bounds=bounds,
            progress=lines.append,
        )


@pytest.mark.parametrize(
    ("rule", "fault", "said"),
    [
        ({"effect": "task_hang"}, TaskStuck, "still reads Running"),
        ({"effect": "update_rejected"}, RequestRejected, "VerificationFailed"),
        ({"effect": "version_unchanged"}, SettingsNotApplied, "BIOS still reads"),
        (
            {"effect": "update_reboot", "duration": 1.0, "version": "old"},
            SettingsNotApplied,
            "BIOS still reads",
        ),
    ],
    ids=["task_hang", "update_rejected", "version_unchanged", "update_reboot_old"],
)
def test_each_update_effect_ends_typed_in_front_of_stock_sushy(
    stock_sushy: StockSushy,
    proxy_host: Start,
    rule: dict[str, Any],
    fault: type[Exception],
    said: str,
) -> None:
    host = _proxy(stock_sushy, proxy_host)
    with pytest.raises(fault) as info:
        _update(stock_sushy, host, rule)
    assert said in str(info.value)
    assert host.proxies["rf1"].counters["answered"] == 1  # never relayed


def test_a_bmc_rebooting_past_its_bound_is_not_back(
    stock_sushy: StockSushy, proxy_host: Start
) -> None:
    """The proxy refuses its port for 4 s after taking the update; the
    update waits 1 s for the BMC, then ends BMCNotBack from the refusal."""
    rule = {"effect": "update_reboot", "duration": 4.0, "version": "old"}
    bounds = dataclasses.replace(BOUNDS, task=8.0, back=1.0)
    with pytest.raises(BMCNotBack) as info:
        _update(stock_sushy, _proxy(stock_sushy, proxy_host), rule, bounds)
    assert isinstance(info.value.__cause__, BMCUnreachable)


def test_a_bmc_ridden_out_through_its_reboot_then_read_back(
    stock_sushy: StockSushy, proxy_host: Start
) -> None:
    """3 s down: past the task read's brief retries, so the update waits for
    the BMC (2 answers in a row), follows the task to Completed and reads
    the version back -- unchanged (``version=old``), so SettingsNotApplied."""
    rule = {"effect": "update_reboot", "duration": 3.0, "version": "old"}
    bounds = dataclasses.replace(BOUNDS, task=8.0)
    host, lines = _proxy(stock_sushy, proxy_host), []
    with pytest.raises(SettingsNotApplied):
        _update(stock_sushy, host, rule, bounds, lines)
    assert host.proxies["rf1"].counters["reboots"] == 1
    assert "BMC not answering (rebooting?): waiting for it" in lines, lines
    assert "BMC answers (2 of 2)" in lines
    assert lines[-1] == "task Completed 100%"


def test_update_reboot_relays_and_a_refused_update_does_not_reboot(
    stock_sushy: StockSushy, proxy_host: Start
) -> None:
    """``version=new``: the update is the BMC's own, so the proxy relays the
    POST; sushy-tools' fake driver refuses it (500), and a BMC that refused
    an update does not reboot."""
    host = _proxy(stock_sushy, proxy_host)
    with pytest.raises(BMCInternalError) as info:
        _update(stock_sushy, host, {"effect": "update_reboot", "duration": 5.0})
    # the System named as the target (lifecycle.system_bios), found by sushy-tools
    assert "Failed fetching BIOS information" in str(info.value)
    assert host.proxies["rf1"].counters["reboots"] == 0
    assert host.proxies["rf1"].counters["answered"] == 0  # relayed
