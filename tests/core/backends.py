"""The fleets the core's end-to-end tests run on, each a factory of ``CoreFleet``.

Today: ``fake`` - stub ``ipmi``/``redfish`` drivers over in-process fake
machines on a fake clock. The hwlab issue adds its backend here (a factory
that starts a lab, writes its ``inventory.yaml`` and yields a ``CoreFleet``
whose factory builds the real drivers, plus a ``pytest.param(..., marks=
pytest.mark.lab)`` in ``BACKENDS``); every test in ``tests/core`` then runs on
it too, unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.fleet import FakeFleet
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.ops import DriverFactory, driver_factory
from bmaas.retry import RetryLimits
from tests.fleet import PASSWORD, install_stub_drivers, ipmi_node, write_inventory

__all__ = ["BACKENDS", "CoreFleet"]

#: quick transitions so a real-time backend converges in well under a second
QUICK = Hardware(power_on_time=0.2, power_off_time=0.1, soft_off_time=0.3, os_boot_time=0.5)
ENV_VAR = "BMAAS_TEST_REDFISH_PW"
REDFISH_PASSWORD = "Rf-9?also-never-printed"


@dataclasses.dataclass
class CoreFleet:
    """What the core's end-to-end tests need from a fleet of BMCs."""

    #: an inventory file in bmaas's format (the lab writes its own)
    inventory: Path
    names: list[str]
    #: ``make_factory(bmc_timeout=...)`` -> DriverFactory, as ``App`` takes it
    make_factory: Callable[..., DriverFactory]
    #: per-call deadline for tests that make BMCs hang
    deadline: float
    #: seconds a power transition may take to be seen
    power_timeout: float
    #: the simulated hardware behind each BMC (to arrange and to verify)
    machine: Callable[[str], FakeMachine]
    #: every credential in the inventory; no output may contain one
    secrets: list[str]
    #: the operation retry the CLI gives fleet commands (fake: fake time)
    retry: RetryLimits = dataclasses.field(default_factory=RetryLimits)

    def add_rule(self, node: str, rule: dict[str, Any]) -> None:
        self.machine(node).plan.add(FaultRule.from_dict(rule))

    def clear_rules(self, node: str) -> None:
        self.machine(node).plan.clear()


@contextlib.contextmanager
def fake_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int = 6
) -> Iterator[CoreFleet]:
    """Half IPMI (inline password), half Redfish (password from the
    environment), as the lab's inventory mixes them."""
    install_stub_drivers(monkeypatch)
    monkeypatch.setenv(ENV_VAR, REDFISH_PASSWORD)
    fleet = FakeFleet(clock=FakeClock())
    names = [f"r1-n{i:02d}" for i in range(1, size + 1)]
    nodes = []
    for i, name in enumerate(names):
        fleet.add(name, hardware=QUICK, power=PowerState.OFF)
        if i % 2 == 0:
            nodes.append(ipmi_node(name, resource_class="baremetal"))
        else:
            nodes.append(
                {
                    "name": name,
                    "driver": "redfish",
                    "driver_info": {
                        "redfish_address": "https://127.0.0.1:8443",
                        "redfish_system_id": f"/redfish/v1/Systems/{name}",
                        "redfish_username": "admin",
                        "redfish_password": "${" + ENV_VAR + "}",
                        "redfish_verify_ca": False,
                    },
                    "resource_class": "baremetal",
                }
            )
    inventory = write_inventory(tmp_path / "inventory.yaml", nodes)

    def make_factory(bmc_timeout: float = 5.0) -> DriverFactory:
        return driver_factory(bmc_timeout=bmc_timeout, fleet=fleet)

    yield CoreFleet(
        inventory=inventory,
        names=names,
        make_factory=make_factory,
        deadline=5.0,
        power_timeout=5.0,
        machine=fleet.machine,
        secrets=[PASSWORD, REDFISH_PASSWORD],
        retry=RetryLimits(sleep=fleet.clock.sleep, clock=fleet.clock),
    )


@contextlib.contextmanager
def hwlab_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int = 6
) -> Iterator[CoreFleet]:
    """Real BMC emulators on 127.0.0.1 (half IPMI, half Redfish when both
    drivers are installed) and the real drivers, built from the inventory
    hwlab writes. The shard runs in this process, so tests can still look at
    the machines behind the BMCs."""
    from bmaas.hwlab.inventory import inventory_document, node_entry
    from bmaas.hwlab.labspec import generate
    from bmaas.hwlab.worker import Shard, ShardServers
    from bmaas.registry import available_drivers

    protocols = "mixed" if "redfish" in available_drivers() else "ipmi"
    spec = generate(size, protocols=protocols, hardware=QUICK, prefix="r1-n")
    shard = Shard(index=0, nodes=spec.nodes, seed=0, events_path=str(tmp_path / "events.jsonl"))
    with ShardServers(shard) as servers:
        doc = inventory_document(
            (node_entry(n, servers.endpoints[n.name], host="127.0.0.1") for n in spec.nodes),
            spec.nodes,
        )
        inventory = tmp_path / "inventory.yaml"
        inventory.write_text(yaml.safe_dump(doc, sort_keys=False))

        def make_factory(bmc_timeout: float = 5.0) -> DriverFactory:
            return driver_factory(bmc_timeout=bmc_timeout)

        yield CoreFleet(
            inventory=inventory,
            names=[n.name for n in spec.nodes],
            make_factory=make_factory,
            deadline=0.5,
            power_timeout=5.0,
            machine=servers.machines.__getitem__,
            secrets=[spec.nodes[0].password.reveal()],
        )


BACKENDS = [
    pytest.param(fake_fleet, id="fake"),
    pytest.param(hwlab_fleet, id="hwlab", marks=pytest.mark.lab),
]
