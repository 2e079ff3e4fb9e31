"""BIOS settings, firmware updates and inspection through a real Ironic
(issue 51): ``bmaas-redfish`` with the ``bmaas`` bios, firmware and inspect
interfaces, beside stock ``redfish`` in the same Ironic where it does the
same cheaply.

* a BIOS apply (manual clean step ``bios.apply_configuration``, no ramdisk)
  reaches ``manageable`` with the settings applied, as stock's does;
* a setting the boot leaves pending (hwlab ``bios_pending``) fails the
  clean ``[bmaas settings_not_applied ...]``, while stock's keeps waiting in
  ``clean wait`` (it polls until Ironic's clean timeout, then fails untyped);
* a firmware update (clean step ``firmware.update``) through a BMC reboot
  (``update_reboot``) reaches ``manageable`` with the new version in Ironic's
  firmware table; a rejected image fails typed;
* servicing an active node (``firmware.update`` as a service step, which
  stock's runs without a ramdisk too), both types update the BMC through its
  reboot and are ``active`` again with the new version;
* inspection creates a port per NIC the BMC lists, as stock's does.

This module starts an Ironic of its own with the interfaces enabled."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.lab import Lab
from tests.ironic.conftest import _NEXT
from tests.ironic.conftest import SETTINGS as SESSION_SETTINGS

#: a clean (or inspection) through Ironic, stock's beside: minutes on 2 busy cores
pytestmark = pytest.mark.timeout(400)

#: manual cleaning without a ramdisk (disable_ramdisk: 1.70), firmware API (1.86)
API = "1.86"
WANTED = {"ProcTurboMode": "Disabled", "ProcCoreDisable": "2"}
#: the lab's BMC reads version ``bmc-2.0.bin`` after this image
IMAGE = "http://127.0.0.1:9/fw/bmc-2.0.bin"
SETTINGS = dataclasses.replace(
    SESSION_SETTINGS,
    extra={
        "DEFAULT": {
            "enabled_bios_interfaces": "no-bios,redfish,bmaas",
            "enabled_firmware_interfaces": "no-firmware,redfish,bmaas",
            "enabled_inspect_interfaces": "no-inspect,redfish,bmaas",
        },
        # stock's BIOS apply is finished by a periodic task (default every 60
        # s); its BMC update looks at the version after a 300 s delay, then
        # wants 3 good answers 30 s apart: the test's end state is the same
        # in seconds (the bench measures the defaults)
        "redfish": {
            "firmware_update_status_interval": 2,
            "firmware_update_reboot_delay": 10,
            "firmware_update_validation_interval": 2,
        },
        "bmaas": {"events": "false", "lifecycle_deadline": 60},
    },
)


@pytest.fixture(scope="module")
def lifecycle_ironic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with contextlib.ExitStack() as stack:
        service = harness.IronicService(tmp_path_factory.mktemp("ironic-lifecycle"), SETTINGS)
        stack.callback(service.stop)
        service.start(timeout=180)
        conn = service.connect()
        stack.callback(conn.close)
        answer = conn.baremetal.get("/drivers/bmaas-redfish", microversion=API)
        for kind in ("bios", "firmware", "inspect"):
            assert "bmaas" in answer.json()[f"enabled_{kind}_interfaces"], answer.text
        conn.bmaas_service = service
        yield conn


@pytest.fixture
def manageable(lifecycle_ironic: Any, ironic_lab: Lab) -> Iterator[Callable[..., Any]]:
    """Enroll the next lab node with ``driver`` and the interfaces named,
    and take it to ``manageable`` (or, ``active=True``, deploy it: the
    harness's ramdisk deploy, no IPA); ``(node, lab name)``."""
    conn = lifecycle_ironic
    entries = ironic_lab.inventory()["nodes"]
    used: list[str] = []

    def enroll(driver: str, interface: str, *, active: bool = False) -> tuple[Any, str]:
        entry = entries[next(_NEXT)]
        used.append(entry["name"])
        node = harness.enroll(
            conn,
            entry,
            driver=driver,
            name=f"lc-{driver}-{entry['name']}",
            kernel=conn.bmaas_service.kernel,
            ramdisk=conn.bmaas_service.ramdisk,
            provide=False,
        )
        kinds = ("bios", "firmware", "inspect")
        node = conn.baremetal.update_node(node, **{f"{k}_interface": interface for k in kinds})
        conn.baremetal.set_node_provision_state(node, "manage", wait=True, timeout=60)
        if active:
            for verb in ("provide", "active"):
                conn.baremetal.set_node_provision_state(node, verb, wait=True, timeout=120)
        return conn.baremetal.get_node(node.id), entry["name"]

    yield enroll
    for name in used:
        ironic_lab.clear_faults(name)


def _clean(conn: Any, node: Any, *steps: dict[str, Any]) -> None:
    answer = conn.baremetal.put(
        f"/nodes/{node.id}/states/provision",
        json={"target": "clean", "clean_steps": list(steps), "disable_ramdisk": True},
        microversion=API,
    )
    assert answer.status_code == 202, answer.text


def _bios_step(settings: dict[str, str]) -> dict[str, Any]:
    args = {"settings": [{"name": k, "value": v} for k, v in settings.items()]}
    return {"interface": "bios", "step": "apply_configuration", "args": args}


def _bios(conn: Any, node: Any) -> dict[str, str]:
    answer = conn.baremetal.get(f"/nodes/{node.id}/bios", microversion=API)
    return {s["name"]: s["value"] for s in answer.json()["bios"]}


def _cases(manageable: Callable[..., Any], **kw: Any) -> list[tuple[str, Any, str]]:
    return [
        (driver, *manageable(driver, interface, **kw))
        for driver, interface in (("redfish", "redfish"), ("bmaas-redfish", "bmaas"))
    ]


def test_a_bios_apply_reaches_its_end_as_stock_does(
    lifecycle_ironic: Any, manageable: Callable[..., Any]
) -> None:
    conn = lifecycle_ironic
    cases = _cases(manageable)
    start = time.monotonic()
    for _, node, _ in cases:
        _clean(conn, node, _bios_step(WANTED))
    # bmaas's within its lifecycle_deadline (60 s); stock's took 32 s on Ironic
    # 39 and 133 s on 35.1.0 on 2 busy cores (its periodic finishes the step)
    for driver, node, _ in reversed(cases):
        limit = 60 if driver == "bmaas-redfish" else 300
        done = harness.wait_for_provision(conn, node, {"manageable"}, timeout=limit)
        assert done.last_error is None, (driver, done.last_error)
        cached = _bios(conn, node)
        assert {k: cached[k] for k in WANTED} == WANTED, (driver, cached)
        print(f"{driver}: BIOS apply manageable after {time.monotonic() - start:.1f}s")


def test_a_setting_left_pending_ends_typed_where_stock_keeps_waiting(
    lifecycle_ironic: Any, ironic_lab: Lab, manageable: Callable[..., Any]
) -> None:
    conn = lifecycle_ironic
    cases = _cases(manageable)
    start = time.monotonic()
    for _, node, lab_name in cases:
        ironic_lab.add_faults(lab_name, [{"effect": "bios_pending", "operation": "bios.set"}])
        _clean(conn, node, _bios_step(WANTED))
    (_, stock, _), (_, ours, _) = cases
    _await_state(conn, ours, "clean failed")
    print(f"bmaas-redfish: pending BIOS setting clean failed after {time.monotonic() - start:.1f}s")
    text = harness.failure_text(conn, ours) or ""
    assert "[bmaas settings_not_applied retry=" in text, text
    assert "ProcTurboMode: wanted 'Disabled', reads 'Enabled' (still pending)" in text, text
    # stock: the reboot done, its periodic (every 2 s) reads BootProgress
    # past POST and the settings still pending, and keeps waiting
    _await_state(conn, stock, "clean wait")
    time.sleep(8)
    seen = conn.baremetal.get_node(stock.id)
    assert seen.provision_state == "clean wait", (seen.provision_state, seen.last_error)
    assert not seen.last_error
    conn.baremetal.set_node_provision_state(stock, "abort")


def _await_state(conn: Any, node: Any, state: str, timeout: float = 120.0) -> Any:
    end = time.monotonic() + timeout
    while (seen := conn.baremetal.get_node(node.id)).provision_state != state:
        assert time.monotonic() < end, (seen.provision_state, seen.last_error)
        time.sleep(0.5)
    return seen


def _firmware_step(component: str, url: str) -> dict[str, Any]:
    args = {"settings": [{"component": component, "url": url}]}
    return {"interface": "firmware", "step": "update", "args": args}


def test_a_firmware_update_through_a_bmc_reboot_reaches_its_end(
    lifecycle_ironic: Any, ironic_lab: Lab, manageable: Callable[..., Any]
) -> None:
    conn = lifecycle_ironic
    node, lab_name = manageable("bmaas-redfish", "bmaas")
    rule = {"effect": "update_reboot", "duration": 1.0, "operation": "firmware.update"}
    ironic_lab.add_faults(lab_name, [rule])
    _clean(conn, node, _firmware_step("bmc", IMAGE))
    done = harness.wait_for_provision(conn, node, {"manageable"}, timeout=120)
    assert done.last_error is None, done.last_error
    answer = conn.baremetal.get(f"/nodes/{node.id}/firmware", microversion=API)
    versions = {c["component"]: c["current_version"] for c in answer.json()["firmware"]}
    assert versions["bmc"] == "bmc-2.0.bin", versions


#: servicing an active node (1.87)
SERVICE_API = "1.87"


def test_a_firmware_update_through_servicing_reaches_its_end_on_both_types(
    lifecycle_ironic: Any, ironic_lab: Lab, manageable: Callable[..., Any]
) -> None:
    """Stock's ``firmware.update`` clean step needs a ramdisk, its service
    step does not: on an active node both types update the BMC through its
    reboot and return to ``active`` with the new version in Ironic's table."""
    conn = lifecycle_ironic
    cases = _cases(manageable, active=True)
    rule = {"effect": "update_reboot", "duration": 1.0, "operation": "firmware.update"}
    start = time.monotonic()
    for _, node, lab_name in cases:
        ironic_lab.add_faults(lab_name, [rule])
        answer = conn.baremetal.put(
            f"/nodes/{node.id}/states/provision",
            json={"target": "service", "service_steps": [_firmware_step("bmc", IMAGE)]},
            microversion=SERVICE_API,
        )
        assert answer.status_code == 202, answer.text
    # stock's looks at the BMC's version only after [redfish]
    # firmware_update_reboot_delay (10 s here), then wants 3 good answers
    for driver, node, _ in reversed(cases):
        limit = 120 if driver == "bmaas-redfish" else 240
        done = harness.wait_for_provision(conn, node, {"active", "service failed"}, timeout=limit)
        assert done.provision_state == "active", (driver, harness.failure_text(conn, node))
        answer = conn.baremetal.get(f"/nodes/{node.id}/firmware", microversion=API)
        versions = {c["component"]: c["current_version"] for c in answer.json()["firmware"]}
        assert versions.get("bmc") == "bmc-2.0.bin", (driver, versions)
        print(f"{driver}: firmware service active after {time.monotonic() - start:.1f}s")


def test_a_rejected_firmware_image_ends_typed(
    lifecycle_ironic: Any, ironic_lab: Lab, manageable: Callable[..., Any]
) -> None:
    conn = lifecycle_ironic
    node, lab_name = manageable("bmaas-redfish", "bmaas")
    ironic_lab.add_faults(lab_name, [{"effect": "update_rejected", "operation": "firmware.update"}])
    _clean(conn, node, _firmware_step("bios", "http://127.0.0.1:9/fw/bios-2.0.bin"))
    _await_state(conn, node, "clean failed")
    text = harness.failure_text(conn, node) or ""
    assert "[bmaas request_rejected retry=never]" in text, text


def test_inspection_creates_a_port_per_nic_as_stock_does(
    lifecycle_ironic: Any, manageable: Callable[..., Any]
) -> None:
    conn = lifecycle_ironic
    cases = _cases(manageable)
    for _, node, _ in cases:
        conn.baremetal.set_node_provision_state(node, "inspect")
    found = {}
    for driver, node, _ in cases:
        done = harness.wait_for_provision(conn, node, {"manageable"}, timeout=120)
        assert done.last_error is None, (driver, done.last_error)
        inventory = conn.baremetal.get(f"/nodes/{node.id}/inventory", microversion=API).json()
        macs = {i["mac_address"] for i in inventory["inventory"]["interfaces"]}
        ports = {p.address for p in conn.baremetal.ports(node_uuid=node.id)}
        assert macs, driver
        assert macs <= ports, (driver, macs, ports)
        props = done.properties
        found[driver] = (len(macs), props["memory_mb"], props["cpu_arch"], props["local_gb"])
    assert found["bmaas-redfish"] == found["redfish"], found
