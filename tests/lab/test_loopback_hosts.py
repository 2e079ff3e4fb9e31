"""IPMI BMCs on loopback addresses of their own (``Lab(ipmi_hosts=...)``): what
``hwlab bench ironic-scale`` gives stock ``ipmi``, which spaces its ipmitool
calls per address string. Each BMC answers on its address and only there."""

from __future__ import annotations

import socket
import struct
from ipaddress import ip_address
from pathlib import Path

import pytest

from bmaas.driver import PowerState
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.labspec import generate, loopback_hosts
from bmaas.registry import build_driver
from tests.budgets import per_call
from tests.lab.test_hwlab_manager import hwlab, state_dir

__all__ = ["state_dir"]  # the fixture

pytestmark = pytest.mark.lab


def udp_addresses_on(port: int) -> set[str]:
    """The IPv4 addresses UDP sockets on this host are bound to at ``port``,
    from ``/proc/net/udp`` (hex ``ADDR:PORT``, the address in host order)."""
    found = set()
    for line in Path("/proc/net/udp").read_text().splitlines()[1:]:
        address, _, hex_port = line.split()[1].partition(":")
        if int(hex_port, 16) == port:
            found.add(socket.inet_ntoa(struct.pack("<I", int(address, 16))))
    return found


def test_each_ipmi_bmc_answers_on_its_own_address(tmp_path: Path) -> None:
    spec = generate(3, protocols="both", seed=4)
    hosts = loopback_hosts([n.name for n in spec.nodes])
    lab = Lab(spec, tmp_path / "lab", ipmi_hosts=hosts, shard_size=2)
    lab.start(timeout=60)
    try:
        entries = {e["name"]: e for e in lab.inventory()["nodes"]}
        assert {n: e["driver_info"]["ipmi_address"] for n, e in entries.items()} == hosts
        # Redfish stays on the lab's address
        assert all("//127.0.0.1:" in e["driver_info"]["redfish_address"] for e in entries.values())
        for name, entry in entries.items():
            driver = build_driver(name, "ipmi", entry["driver_info"], bmc_timeout=5.0)
            try:
                assert driver.get_power_state(deadline=per_call(driver)) is PowerState.OFF
            finally:
                driver.close()
        # bound to its address only, not the wildcard: the kernel's socket
        # table names the address. (Binding 127.0.0.1 on the same port to prove
        # it free raced every other worker's free-port pick: CI saw EADDRINUSE.)
        info = entries[spec.nodes[0].name]["driver_info"]
        bound = udp_addresses_on(info["ipmi_port"])
        assert info["ipmi_address"] in bound, bound
        assert not any(ip_address(a).is_unspecified for a in bound), bound
    finally:
        lab.stop()


def test_hwlab_up_ipmi_own_addresses_writes_them_to_the_inventory(state_dir: Path) -> None:
    up = hwlab("up", "--nodes", "4", "--ipmi-own-addresses", "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr
    try:
        text = (state_dir / "inventory.yaml").read_text()
        assert '"ipmi_address": "127.1.0.1"' in text
        assert '"ipmi_address": "127.1.0.2"' in text  # the second IPMI node of a mixed lab
        assert '"redfish_address": "http://127.0.0.1:' in text
    finally:
        assert hwlab("down", "--state-dir", str(state_dir)).returncode == 0
