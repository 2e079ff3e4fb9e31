"""A real Ironic and an hwlab lab for the ``ironic`` tests (one per session).

``bash scripts/ironic-env.sh`` must have installed Ironic into
``.venv-ironic`` (or ``$BMAAS_IRONIC_VENV``); these fixtures install nothing.
They start one standalone Ironic (API + conductor, SQLite, noauth, no RPC) on
a free port of 127.0.0.1 and one lab of emulated BMCs that speak IPMI and
Redfish, and stop both whatever happens.

Fixtures for any test under tests/ironic/:

* ``ironic`` -- the :class:`~bmaas.hwlab.harness.ironic.IronicService`;
* ``ironic_lab`` -- the :class:`~bmaas.hwlab.lab.Lab`;
* ``baremetal`` -- an openstacksdk connection to the Ironic;
* ``ironic_node(driver, provide=True)`` -- enrolls the next unused lab node
  with that hardware type and returns ``(node, lab_name)``; faults the test
  put on it are cleared at teardown.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bmaas.fakes.machine import Hardware
from bmaas.hwlab.daemon import LabOptions, build_spec
from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.lab import Lab

#: lab nodes for the whole session (each test takes fresh ones)
LAB_NODES = 40
#: quick hardware, so power transitions take a fraction of a second
QUICK = Hardware(power_on_time=0.3, power_off_time=0.2, soft_off_time=0.5, os_boot_time=1.0)
#: the [bmaas] budget of the test Ironic (the fault tests check it holds)
SETTINGS = harness.IronicSettings(
    sync_interval=3,
    sync_max_retries=2,
    power_timeout=20,
    bmaas_call_deadline=2.0,
    bmaas_operation_deadline=10.0,
    bmaas_sync_deadline=6.0,
    # the session's sync tests count what the sync's reads meet (busy answers,
    # a latched fault, a hung BMC); events would answer bmaas-redfish's from
    # the stream instead (test_ironic_events.py runs an Ironic with them on)
    extra={"bmaas": {"events": "false"}},
)


# openstacksdk warns about its own deprecations (resource internals, metrics
# options nobody set) on ordinary calls; they are not ours to fix.
_SDK_WARNINGS = [
    pytest.mark.filterwarnings("ignore::openstack.warnings.OpenStackWarning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK50Warning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK60Warning"),
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark this folder ``ironic``. (Which of its tests share a pytest-xdist
    worker: ``XDIST_GROUPS`` in tests/conftest.py.)"""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.ironic)
            for mark in _SDK_WARNINGS:
                item.add_marker(mark)


@pytest.fixture(scope="session")
def ironic_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    spec = build_spec(LabOptions(nodes=LAB_NODES, protocols="both", seed=11))
    spec = spec.__class__(
        nodes=tuple(n.__class__(**{**n.__dict__, "hardware": QUICK}) for n in spec.nodes),
        seed=spec.seed,
        profile=spec.profile,
        redfish_tls=spec.redfish_tls,
    )
    lab = Lab(spec, tmp_path_factory.mktemp("ironic-hwlab"))
    try:
        lab.start(timeout=120)
        yield lab
    finally:
        lab.stop()


@pytest.fixture(scope="session")
def ironic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.IronicService]:
    service = harness.IronicService(tmp_path_factory.mktemp("ironic"), SETTINGS)
    try:
        service.start(timeout=180)
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="session")
def baremetal(ironic: harness.IronicService) -> Any:
    conn = ironic.connect()
    yield conn
    conn.close()


_NEXT = itertools.count()


@pytest.fixture
def ironic_node(
    ironic: harness.IronicService, ironic_lab: Lab, baremetal: Any
) -> Iterator[Callable[..., tuple[Any, str]]]:
    """Enroll the next unused lab node with a hardware type."""
    used: list[str] = []
    entries = ironic_lab.inventory()["nodes"]

    def enroll(driver: str, *, provide: bool = True, **kw: Any) -> tuple[Any, str]:
        index = next(_NEXT)
        if index >= len(entries):
            raise RuntimeError(f"the session lab has only {len(entries)} nodes; raise LAB_NODES")
        entry = entries[index]
        used.append(entry["name"])
        node = harness.enroll(
            baremetal,
            entry,
            driver=driver,
            name=f"{driver}-{entry['name']}",
            kernel=ironic.kernel,
            ramdisk=ironic.ramdisk,
            provide=provide,
            **kw,
        )
        return node, entry["name"]

    yield enroll
    for name in used:
        ironic_lab.clear_faults(name)
