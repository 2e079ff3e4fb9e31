"""Test fleets for the core: inventories, stub protocol drivers, fake machines.

The lab will write inventories with ``driver: ipmi`` / ``driver: redfish``
nodes and Ironic driver_info keys. Until the real drivers and the lab exist,
:func:`install_stub_drivers` registers stand-ins under those names: the real
key sets (so validation, password resolution and masking are exercised as
they will be), FakeDriver underneath (so no socket is opened).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

import bmaas.inventory.nodes
from bmaas import registry
from bmaas.driver import BMCDriver
from bmaas.driver_info import DriverInfo
from bmaas.fakes.driver import FakeDriver

__all__ = [
    "PASSWORD",
    "StubIpmiDriver",
    "StubRedfishDriver",
    "install_stub_drivers",
    "ipmi_node",
    "write_inventory",
]

#: a password no output may ever contain
PASSWORD = "Zq-7!never-print-me"

_IPMI_KEYS = frozenset(
    {
        "ipmi_address",
        "ipmi_port",
        "ipmi_username",
        "ipmi_password",
        "ipmi_cipher_suite",
        "ipmi_priv_level",
        "fake_machine",
    }
)
_REDFISH_KEYS = frozenset(
    {
        "redfish_address",
        "redfish_system_id",
        "redfish_username",
        "redfish_password",
        "redfish_verify_ca",
        "redfish_auth_type",
        "fake_machine",
    }
)


class StubIpmiDriver(FakeDriver):
    """Accepts what the IPMI driver accepts; drives a fake machine."""

    name = "ipmi"
    required_info = ("ipmi_address", "ipmi_username", "ipmi_password")
    accepted_info = _IPMI_KEYS
    #: every password a driver was built with (to check resolution, in tests only)
    passwords: ClassVar[list[str]] = []

    def __init__(self, node: str, info: DriverInfo | None = None, **kw: Any) -> None:
        super().__init__(node, info, **kw)
        if info is not None:
            type(self).passwords.append(info.ipmi_password.reveal())


class StubRedfishDriver(FakeDriver):
    name = "redfish"
    required_info = ("redfish_address", "redfish_username", "redfish_password")
    accepted_info = _REDFISH_KEYS


STUBS: dict[str, type[BMCDriver]] = {"ipmi": StubIpmiDriver, "redfish": StubRedfishDriver}


def install_stub_drivers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``ipmi`` and ``redfish`` resolve to the stubs, wherever bmaas looks."""
    real = registry.load_driver

    def load(name: str) -> type[BMCDriver]:
        return STUBS.get(name) or real(name)

    monkeypatch.setattr(registry, "load_driver", load)
    monkeypatch.setattr(bmaas.inventory.nodes, "load_driver", load)
    StubIpmiDriver.passwords = []


def ipmi_node(name: str, *, password: str = PASSWORD, **extra: Any) -> dict[str, Any]:
    """A node as the lab's inventory will have it (IPMI, Ironic keys)."""
    node: dict[str, Any] = {
        "name": name,
        "driver": "ipmi",
        "driver_info": {
            "ipmi_address": "127.0.0.1",
            "ipmi_port": 6230,
            "ipmi_username": "admin",
            "ipmi_password": password,
        },
    }
    node.update(extra)
    return node


def write_inventory(
    path: Path,
    nodes: Iterable[dict[str, Any]],
    *,
    networks: Sequence[dict[str, Any]] | None = None,
) -> Path:
    doc: dict[str, Any] = {"nodes": list(nodes)}
    if networks is not None:
        doc["networks"] = list(networks)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def enrolled_app(tmp_path: Path, fleet: Any, names: Sequence[str]) -> Any:
    """A CLI ``App`` on a fake fleet and its fake clock (retries sleep on it,
    no jitter), with ``names`` enrolled as ``fake`` nodes: what the fleet
    commands' unit tests start from."""
    from click.testing import CliRunner

    from bmaas.cli import App, cli
    from bmaas.ops import driver_factory
    from bmaas.retry import RetryLimits

    retry = RetryLimits(sleep=fleet.clock.sleep, clock=fleet.clock, jitter=0.0)
    app = App(
        db=str(tmp_path / "b.db"),
        make_factory=lambda bmc_timeout: driver_factory(fleet=fleet, bmc_timeout=bmc_timeout),
        retry=retry,
        deadline_clock=fleet.clock,
    )
    inventory = write_inventory(
        tmp_path / "inv.yaml", [{"name": n, "driver": "fake"} for n in names]
    )
    assert CliRunner().invoke(cli, ["enroll", str(inventory)], obj=app).exit_code == 0
    return app
