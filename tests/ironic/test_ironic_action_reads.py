"""An action's reads are the action's (issue 35), through a real Ironic's API
as an operator drives it: Ironic reads the power state before every power
action; that read now runs under the request's budget and the action rule,
so a power-on through a BMC rebooting for a firmware update, or past six
"busy" answers, ends with the node on -- as stock Ironic's types do -- where
the sync rule failed it at once (0/8 and 0/2 in the trial).

This module starts an Ironic of its own with the README's ``[bmaas]``
defaults (call 5, operation 60, sync 15): the session Ironic's 10 s
operation budget is shorter than the windows measured here."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.lab import Lab
from tests.ironic.conftest import _NEXT
from tests.ironic.conftest import SETTINGS as SESSION_SETTINGS

TYPES = ("bmaas-ipmi", "bmaas-redfish")
#: the README's [bmaas] defaults, and Ironic's own power wait
SETTINGS = dataclasses.replace(
    SESSION_SETTINGS,
    sync_interval=10,
    sync_max_retries=3,
    power_timeout=30,
    bmaas_call_deadline=5.0,
    bmaas_operation_deadline=60.0,
    bmaas_sync_deadline=15.0,
)


@pytest.fixture(scope="module")
def defaults_ironic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    service = harness.IronicService(tmp_path_factory.mktemp("ironic-defaults"), SETTINGS)
    with contextlib.ExitStack() as stack:
        stack.callback(service.stop)
        service.start(timeout=180)
        conn = service.connect()
        stack.callback(conn.close)
        yield service, conn


@pytest.fixture
def node_for(defaults_ironic: Any, ironic_lab: Lab) -> Iterator[Callable[[str], tuple[Any, str]]]:
    service, conn = defaults_ironic
    entries = ironic_lab.inventory()["nodes"]
    used: list[str] = []

    def enroll(driver: str) -> tuple[Any, str]:
        entry = entries[next(_NEXT)]
        used.append(entry["name"])
        node = harness.enroll(
            conn,
            entry,
            driver=driver,
            name=f"act-{driver}-{entry['name']}",
            kernel=service.kernel,
            ramdisk=service.ramdisk,
        )
        return node, entry["name"]

    yield enroll
    for name in used:
        ironic_lab.clear_faults(name)


def _power_on(conn: Any, lab: Lab, node: Any, lab_name: str, rule: dict[str, Any]) -> tuple:
    """Put ``rule`` on the node's BMC and power the node on through the API,
    as an operator does; (node as read after, seconds the API took to settle)."""
    conn.baremetal.set_node_power_state(node, "power off", wait=True, timeout=120)
    lab.add_faults(lab_name, [rule])
    start = time.monotonic()
    conn.baremetal.set_node_power_state(node, "power on", wait=False)
    settled = harness.wait_for_power_settled(conn, node, timeout=180)
    return settled, time.monotonic() - start


def _both_types(
    node_for: Callable[[str], tuple[Any, str]], conn: Any, lab: Lab, rule: dict[str, Any]
) -> list[tuple[Any, float]]:
    nodes = [node_for(driver) for driver in TYPES]
    with ThreadPoolExecutor(len(nodes)) as pool:  # both types at once: half the wall time
        return list(pool.map(lambda pair: _power_on(conn, lab, *pair, rule), nodes))


def _assert_on(conn: Any, results: list[tuple[Any, float]]) -> None:
    for settled, took in results:
        text = harness.failure_text(conn, settled) or ""
        assert settled.power_state == "power on", f"{settled.name}: {text}"
        assert "not asked again by this read" not in harness.history_text(conn, settled)
        # the read, the request and the wait shared one operation budget (and
        # the API's own bookkeeping: a generous margin on a loaded machine)
        assert took < SETTINGS.bmaas_operation_deadline + 30, f"{settled.name}: {took:.1f}s"


@pytest.mark.timeout(900)
def test_power_on_through_a_10s_bmc_reboot(
    node_for: Callable[[str], tuple[Any, str]], defaults_ironic: Any, ironic_lab: Lab
) -> None:
    """The firmware-update reboot (hwlab's ``bmc_reboot``, once): the
    read before the power-on meets it and is asked again through its window."""
    _, conn = defaults_ironic
    rule = {"effect": "bmc_reboot", "duration": 10.0, "times": 1}
    _assert_on(conn, _both_types(node_for, conn, ironic_lab, rule))


@pytest.mark.timeout(900)
def test_power_on_past_six_busy_answers(
    node_for: Callable[[str], tuple[Any, str]], defaults_ironic: Any, ironic_lab: Lab
) -> None:
    """Six "later" answers (IPMI 0xC0, Redfish 503) to the reads: backed off
    within the request's budget, not the sync's."""
    _, conn = defaults_ironic
    rule = {"effect": "busy", "operation": "power.get", "times": 6}
    _assert_on(conn, _both_types(node_for, conn, ironic_lab, rule))


#: the first API version with node.health (Ironic 34.0)
HEALTH_VERSION = "1.109"


def _health(conn: Any, node: Any) -> str | None:
    answer = conn.baremetal.get(f"/nodes/{node.id}", microversion=HEALTH_VERSION)
    answer.raise_for_status()
    health = answer.json().get("health")
    return str(health) if health is not None else None


def _wait_health(conn: Any, node: Any, wanted: str, *, passes: int = 4) -> None:
    """Poll until Ironic's sync has cached ``wanted`` (a few sync passes at most)."""
    end = time.monotonic() + passes * SETTINGS.sync_interval + 30
    seen = _health(conn, node)
    while seen != wanted:
        assert time.monotonic() < end, f"{node.name}: health {seen!r}, wanted {wanted!r}"
        time.sleep(0.5)
        seen = _health(conn, node)


@pytest.mark.timeout(900)
def test_node_health_follows_the_bmc(
    node_for: Callable[[str], tuple[Any, str]], defaults_ironic: Any, ironic_lab: Lab
) -> None:
    """node.health is the System's Status.Health, read with the sync's power
    read, and follows the BMC; bmaas-ipmi leaves it empty (IPMI has no
    overall health: UnsupportedDriverExtension, as stock ipmitool)."""
    _, conn = defaults_ironic
    node, lab_name = node_for("bmaas-redfish")
    ipmi_node, _ = node_for("bmaas-ipmi")
    try:
        _wait_health(conn, node, "OK")
        for health in ("Warning", "Critical", "OK"):
            ironic_lab.health(lab_name, health)
            _wait_health(conn, node, health)
    finally:
        ironic_lab.health(lab_name, "OK")
    assert _health(conn, ipmi_node) is None
    assert "health" not in (harness.failure_text(conn, node) or "").lower()
