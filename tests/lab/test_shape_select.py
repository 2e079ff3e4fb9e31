"""``$select`` in the lab (issue 47, finding 7): every vendor shape whose
vendor advertises ``ProtocolFeaturesSupported.SelectQuery`` answers a
``$select`` GET with the selected properties only, and the driver's lean
power read takes that path (it falls back to whole reads, for good, when a
service refuses or ignores ``$select``: the flag staying set shows it did
not)."""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerAction, PowerState
from bmaas.drivers.redfish.service import ServiceRegistry
from bmaas.fakes.machine import Hardware
from bmaas.hwlab.labspec import NodeSpec
from bmaas.hwlab.redfish.shapes import SHAPES
from bmaas.hwlab.worker import Shard, ShardServers
from bmaas.registry import build_driver
from bmaas.secrets import Secret

pytestmark = pytest.mark.lab

PASSWORD = "select-password"
SELECTING = sorted(n for n, s in SHAPES.items() if s.select_query)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShardServers]:
    nodes = tuple(
        NodeSpec(
            name=f"sel-{name}",
            protocols=("redfish",),
            hardware=Hardware(power_on_time=0.0),
            password=Secret(PASSWORD),
            shape=name,
        )
        for name in SHAPES
    )
    tmp = tmp_path_factory.mktemp("select")
    shard = Shard(index=0, nodes=nodes, seed=0, events_path=str(tmp / "events.jsonl"))
    with ShardServers(shard) as running:
        yield running


def _get(servers: ShardServers, name: str, target: str) -> dict[str, Any]:
    port = servers.endpoints[f"sel-{name}"]["redfish"]
    request = urllib.request.Request(f"http://127.0.0.1:{port}{target}")
    token = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 (127.0.0.1)
        body: dict[str, Any] = json.loads(answer.read())
        return body


def test_the_shapes_that_advertise_select_are_the_vendors_that_do() -> None:
    assert "dmtf" not in SELECTING  # its recording says SelectQuery: false
    assert {"idrac9", "ilo5", "xcc", "supermicro", "openbmc"} <= set(SELECTING)


@pytest.mark.parametrize("name", SELECTING)
def test_a_select_request_is_answered_with_the_selected_properties_only(
    servers: ShardServers, name: str
) -> None:
    shape = SHAPES[name]
    root = _get(servers, name, "/redfish/v1")
    assert root["ProtocolFeaturesSupported"]["SelectQuery"] is True
    body = _get(servers, name, f"{shape.system_path}?$select=PowerState,Status")
    assert set(body) - {"@odata.id", "@odata.type", "@odata.etag"} == {"PowerState", "Status"}


@pytest.mark.parametrize("name", SELECTING)
def test_the_drivers_select_path_runs_on_the_shape(servers: ShardServers, name: str) -> None:
    node = f"sel-{name}"
    port = servers.endpoints[node]["redfish"]
    driver = build_driver(
        node,
        "redfish",
        {
            "redfish_address": f"http://127.0.0.1:{port}",
            "redfish_username": "admin",
            "redfish_password": PASSWORD,
        },
        bmc_timeout=10.0,
    )
    driver.services = ServiceRegistry()  # type: ignore[attr-defined]
    try:
        servers.machines[node].set_power(PowerAction.ON)
        assert driver.get_power_state(deadline=Deadline.after(10.0)) is PowerState.ON
        assert driver.get_power_state(deadline=Deadline.after(10.0)) is PowerState.ON
        lean = driver._service().conn.lean  # type: ignore[attr-defined]
        assert lean.select is True  # advertised, sent, honoured: never dropped
    finally:
        driver.close()
