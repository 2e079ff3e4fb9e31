"""The operator's commands end to end: enroll a fleet, list and show it, drive
power, boot device and virtual media over many nodes, maintenance, sync.
Runs on every backend in ``tests/core/backends.py``."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

import pytest
import yaml
from click.testing import Result

from bmaas import registry
from bmaas.driver import BootDevice, Capability, PowerState
from bmaas.store import OwnerKind, Store
from tests.core.backends import CoreFleet
from tests.core.conftest import Run

Bmaas = Callable[..., Result]


@pytest.fixture
def enrolled(bmaas: Bmaas, fleet: CoreFleet) -> list[str]:
    result = bmaas("enroll", str(fleet.inventory))
    assert f"{len(fleet.names)} enrolled" in result.stdout
    return fleet.names


def lines(result: Result) -> dict[str, str]:
    """Result lines by node name."""
    out = {}
    for line in result.stdout.splitlines():
        name, _, rest = line.partition(" ")
        out[name] = rest.strip()
    return out


def test_enroll_is_idempotent_and_validates_with_dry_run(
    bmaas: Bmaas, fleet: CoreFleet, enrolled: list[str]
) -> None:
    again = bmaas("enroll", str(fleet.inventory), "--json")
    assert json.loads(again.stdout)["unchanged"] == enrolled
    dry = bmaas("enroll", str(fleet.inventory), "--dry-run")
    assert "valid" in dry.stdout


def test_a_bad_inventory_lists_every_problem_and_enrolls_nothing(
    bmaas: Bmaas, fleet: CoreFleet
) -> None:
    doc = yaml.safe_load(fleet.inventory.read_text())
    doc["nodes"][0]["driver_info"]["bogus_key"] = 1
    doc["nodes"].append({"name": "x"})  # no driver
    bad = fleet.inventory.with_name("bad.yaml")
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = bmaas("enroll", str(bad), expect=2)
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 2
    assert all(e.startswith(f"error: {bad}:") for e in errors)
    assert "driver_info.bogus_key" in errors[0]
    assert "driver" in errors[1]
    listing = bmaas("node", "list", "--json", expect=2)  # nothing enrolled, nothing created
    assert "no database at" in listing.stderr


def test_node_list_and_show(bmaas: Bmaas, fleet: CoreFleet, enrolled: list[str]) -> None:
    table = bmaas("node", "list").stdout.splitlines()
    assert table[0].split()[:4] == ["NAME", "DRIVER", "POWER", "PROVISION"]
    assert [row.split()[0] for row in table[1:]] == enrolled
    records = json.loads(bmaas("node", "list", "--json").stdout)
    assert {r["power_state"] for r in records} == {"unknown"}  # never read yet: not "off"
    as_yaml = yaml.safe_load(bmaas("node", "list", "--yaml").stdout)
    assert [r["name"] for r in as_yaml] == enrolled
    bmaas("maintenance", "set", enrolled[0], "--reason", "bad DIMM", "--by", "alice")
    only = json.loads(bmaas("node", "list", "--maintenance", "--json").stdout)
    assert [r["name"] for r in only] == [enrolled[0]]
    free = json.loads(bmaas("node", "list", "--no-maintenance", "--json").stdout)
    assert len(free) == len(enrolled) - 1
    shown = bmaas("node", "show", enrolled[0]).stdout
    assert "yes, by alice: bad DIMM" in shown
    detail = json.loads(bmaas("node", "show", enrolled[1], "--json").stdout)
    assert detail["credentials"]  # where the password comes from, not what it is
    assert bmaas("node", "show", "nope", expect=2).stderr.startswith("error: node 'nope'")


def eventually(check: Callable[[], bool], limit: float) -> bool:
    """True once ``check`` is; False if it is not within ``limit`` seconds."""
    until = time.monotonic() + limit
    while not check():
        if time.monotonic() > until:
            return False
        time.sleep(0.05)
    return True


def test_power_on_off_reboot_and_status_over_many_nodes(
    bmaas: Bmaas, fleet: CoreFleet, enrolled: list[str]
) -> None:
    timeout = str(fleet.power_timeout)
    on = bmaas("power", "on", "--all", "--timeout", timeout)
    assert set(lines(on).values()) == {"ok    on"}
    assert all(fleet.machine(n).power_state() is PowerState.ON for n in enrolled)
    status = bmaas("power", "status", *enrolled[:2], "--json")
    report = json.loads(status.stdout)
    assert (report["ok"], report["failed"]) == (2, 0)
    assert [r["result"] for r in report["results"]] == ["on", "on"]
    boots = fleet.machine(enrolled[0]).boots
    bmaas("power", "reboot", enrolled[0], "--timeout", timeout)
    # IPMI reads "on" all through a reset, so the boot may land just after the
    # command returns; it must land within the power timeout.
    assert eventually(lambda: fleet.machine(enrolled[0]).boots == boots + 1, fleet.power_timeout)
    bmaas("power", "off", "--all", "--timeout", timeout)
    listed = json.loads(bmaas("node", "list", "--json").stdout)
    assert {r["power_state"] for r in listed} == {"off"}  # recorded as last seen
    assert "power_action" in bmaas("node", "show", enrolled[0]).stdout


def test_exit_codes_say_whether_every_node_succeeded(
    bmaas: Bmaas, fleet: CoreFleet, enrolled: list[str]
) -> None:
    fleet.add_rule(enrolled[1], {"effect": "auth_fail", "operation": "power.get"})
    result = bmaas("power", "status", "--all", expect=1)
    per_node = lines(result)
    assert per_node[enrolled[0]].startswith("ok")
    assert per_node[enrolled[1]].startswith("AUTH  BMCAuthError: ")  # fix the password
    assert enrolled[1] in per_node[enrolled[1]]
    assert f"{len(enrolled) - 1} ok, 1 failed (1 auth)" in result.stderr
    assert "BMC rejected credentials" in bmaas("node", "show", enrolled[1]).stdout
    bmaas("power", "status", expect=2)  # no node named: could not run
    bmaas("power", "status", enrolled[0], "--all", expect=2)
    fleet.clear_rules(enrolled[1])
    bmaas("power", "status", "--all", expect=0)


def test_boot_device_and_virtual_media(bmaas: Bmaas, fleet: CoreFleet, enrolled: list[str]) -> None:
    two = enrolled[:2]
    bmaas("boot-device", "set", *two, "--device", "pxe", "--persistent")
    got = bmaas("boot-device", "get", *two)
    assert set(lines(got).values()) == {"ok    pxe (persistent)"}
    assert fleet.machine(two[0]).boot_device().device is BootDevice.PXE
    url = "http://127.0.0.1:8080/deploy.iso"
    listed = json.loads(bmaas("node", "list", "--json").stdout)
    drivers = {r["name"]: r["driver"] for r in listed}
    media = [
        n
        for n in enrolled
        if Capability.VIRTUAL_MEDIA in registry.load_driver(drivers[n]).capabilities
    ]
    without = [n for n in enrolled if n not in media]
    if without:  # IPMI has no virtual media: a typed, per-node failure
        refused = bmaas("vmedia", "insert", without[0], "--url", url, expect=1)
        assert "UNSUPPORTED  UnsupportedOperation" in refused.stdout
    if media:
        bmaas("vmedia", "insert", media[0], "--url", url)
        assert fleet.machine(media[0]).media == url
        # --url ejects only that image: another one is left (issue 47)
        bmaas("vmedia", "eject", media[0], "--url", "http://127.0.0.1:8080/theirs.iso")
        assert fleet.machine(media[0]).media == url
        bmaas("vmedia", "insert", media[0], "--url", url)
        bmaas("vmedia", "eject", media[0])
        assert fleet.machine(media[0]).media is None
        history = json.loads(bmaas("node", "show", media[0], "--json").stdout)["events"]
        assert [e["kind"] for e in history][-2:] == ["vmedia", "vmedia"]
        assert history[-2]["message"] == f"virtual media inserted: {url}"
    assert media or without


def test_maintenance_status_says_what_still_holds_a_node(
    bmaas: Bmaas, enrolled: list[str], db: str
) -> None:
    node = enrolled[0]
    out = bmaas("maintenance", "status", node, expect=1).stdout
    assert "not in maintenance" in out
    # Something holds it (as the retry layer would): not ready until released.
    store = Store.open(db)
    owner = store.owners.create(OwnerKind.ATTEMPT, name="req-1/1")
    store.owners.claim(node, owner.id)
    set_out = bmaas("maintenance", "set", node, "--reason", "swap PSU").stdout
    assert "still held by attempt req-1/1" in set_out
    status = json.loads(bmaas("maintenance", "status", node, "--json", expect=1).stdout)
    assert status[0]["ready"] is False
    assert "held by attempt req-1/1" in status[0]["held_by"][0]
    store.owners.release(node, owner.id)
    store.close()
    assert "ready" in bmaas("maintenance", "status", node).stdout
    assert "out of maintenance" in bmaas("maintenance", "unset", node).stdout


def test_commands_never_print_a_secret(
    bmaas: Bmaas,
    fleet: CoreFleet,
    enrolled: list[str],
    runs: Run,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    fleet.add_rule(enrolled[0], {"effect": "auth_fail"})
    for args in (
        ["node", "list", "--json"],
        ["node", "list", "--yaml"],
        ["node", "show", enrolled[0], "--json"],
        ["node", "show", enrolled[1], "--yaml"],
        ["node", "show", enrolled[0]],
        ["enroll", str(fleet.inventory), "--json"],
        ["power", "status", "--all", "--json"],
        ["sync", "--json"],
        ["-v", "--debug", "power", "status", "--all"],
    ):
        bmaas(*args, expect=None)
    assert runs.output
    for secret in fleet.secrets:
        assert secret not in runs.output
        assert secret not in caplog.text


def test_db_current_and_upgrade(bmaas: Bmaas, enrolled: list[str]) -> None:
    assert "up to date" in bmaas("db", "current").stdout
    assert "already at" in bmaas("db", "upgrade").stdout
    assert json.loads(bmaas("db", "current", "--json").stdout)["up_to_date"] is True
