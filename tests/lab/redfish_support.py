"""Fixtures for the Redfish lab tests: one emulated BMC per test, short deadlines.

A module shares one :class:`RedfishServer` (one event-loop thread); each test
adds its own machine, so its endpoint's request count starts at zero.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from bmaas.clock import ClockFn
from bmaas.driver_info import DriverInfo
from bmaas.drivers.redfish import RedfishDriver
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.faults import BmaasError, BMCTimeout, BMCUnreachable
from bmaas.hwlab.inventory import inventory_document, node_entry
from bmaas.hwlab.labspec import NodeSpec
from bmaas.hwlab.redfish import RedfishServer
from bmaas.hwlab.worker import Shard, ShardServers
from tests.budgets import HEALTHY_BMC_TIMEOUT, per_call

#: quick transitions, so power changes land in well under a second
HARDWARE = Hardware(power_on_time=0.2, power_off_time=0.1, soft_off_time=0.3, os_boot_time=0.5)
USERNAME = "lab-admin"
PASSWORD = "Lab-Passw0rd-7b1e"
#: the per-call deadline in lab tests
DEADLINE = 1.0
#: how much later than its deadline a failing call may return
SLACK = 1.0

_names = itertools.count(1)


def driver_for(
    server: RedfishServer, port: int, *, bmc_timeout: float = HEALTHY_BMC_TIMEOUT, **info: Any
) -> RedfishDriver:
    """A driver for the BMC at ``port``. Its per-call bound is the healthy
    one: a test about answers must not be failed by a starved runner (at
    load 24 a boot override's login, read and PATCH missed 1 s); a test that
    means a call to time out uses :func:`lab_bmc` (:data:`DEADLINE`) or
    passes its own."""
    raw: dict[str, Any] = {
        "redfish_address": server.url(port),
        "redfish_username": USERNAME,
        "redfish_password": PASSWORD,
        **info,
    }
    if server.tls and "redfish_verify_ca" not in info:
        raw["redfish_verify_ca"] = server.ca_path
    parsed = DriverInfo.parse(raw, required=RedfishDriver.required_info)
    driver = RedfishDriver(f"node-{port}", parsed, bmc_timeout=bmc_timeout)
    driver.poll_interval = 0.02
    return driver


@dataclasses.dataclass
class Lab:
    """One machine behind one emulated BMC, and a warmed-up driver for it."""

    server: RedfishServer
    machine: FakeMachine
    port: int
    driver: RedfishDriver

    @property
    def requests(self) -> int:
        return self.server.request_count(self.port)

    def rule(self, **rule: Any) -> None:
        self.machine.plan.add(FaultRule.from_dict(rule))

    def fails(self, call: Callable[[], object]) -> tuple[BmaasError, float, int]:
        """Run a call that must fail: the fault, seconds taken, requests the BMC read."""
        before = self.requests
        start = time.monotonic()
        with pytest.raises(BmaasError) as info:
            call()
        return info.value, time.monotonic() - start, self.requests - before

    def succeeds(self, call: Callable[[], Any]) -> tuple[Any, int]:
        before = self.requests
        return call(), self.requests - before


#: probes a warm-up may make: setup, not the call under test. A new emulated
#: BMC's first answer missed the 1 s per-call deadline at load 9-11 (an
#: under-load run), which errored the test before it began.
WARM_UP_PROBES = 5


def _warm_up(driver: RedfishDriver) -> None:
    for left in reversed(range(WARM_UP_PROBES)):
        try:
            driver.probe(deadline=per_call(driver))
            return
        except (BMCTimeout, BMCUnreachable):
            if not left:
                raise


@contextlib.contextmanager
def lab_bmc(
    server: RedfishServer, *, warm: bool = True, clock: ClockFn | None = None, **info: Any
) -> Iterator[Lab]:
    machine = FakeMachine(f"rf{next(_names)}", HARDWARE, clock=clock)
    port = server.add(machine, username=USERNAME, password=PASSWORD)
    driver = driver_for(server, port, **{"bmc_timeout": DEADLINE, **info})
    try:
        if warm:  # connected and logged in: the calls under test are steady-state
            _warm_up(driver)
        yield Lab(server, machine, port, driver)
    finally:
        driver.close()


def dribble(port: int, path: str = "/redfish/v1/") -> list[tuple[float, bytes]]:
    """GET ``path`` over plain HTTP on a raw socket; every chunk received,
    with the time since the request went out (to see a trickled answer).
    The client closes first, once the answer is whole (no TIME_WAIT on the
    server's port)."""
    import socket

    chunks: list[tuple[float, bytes]] = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        start = time.monotonic()  # before the send: no chunk can leave the server earlier
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b""
        while True:
            chunk = sock.recv(65536)
            assert chunk, "the server closed before the answer was whole"
            chunks.append((time.monotonic() - start, chunk))
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                length = next(
                    int(v)
                    for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                    if k.strip().lower() == b"content-length"
                )
                if len(body) >= length:
                    return chunks


@contextlib.contextmanager
def served_shard(nodes: Sequence[NodeSpec], tmp: Path) -> Iterator[tuple[ShardServers, Path]]:
    """``nodes`` served as one hwlab shard on 127.0.0.1, and the path of
    their bmaas inventory file (written under ``tmp``)."""
    shard = Shard(index=0, nodes=tuple(nodes), seed=0, events_path=str(tmp / "events.jsonl"))
    with ShardServers(shard) as servers:
        doc = inventory_document(
            (node_entry(n, servers.endpoints[n.name], host="127.0.0.1") for n in nodes), nodes
        )
        path = tmp / "inventory.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        yield servers, path
