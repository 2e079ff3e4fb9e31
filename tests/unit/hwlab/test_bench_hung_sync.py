"""Which nodes the hung-BMC sync ratio hangs (bmaas.hwlab.harness.bench.hung_sync)."""

from __future__ import annotations

import dataclasses

import pytest

from bmaas.hwlab.harness.bench.hung_sync import hung_nodes


@dataclasses.dataclass(frozen=True)
class Node:
    name: str
    driver: str


def nodes(count: int) -> list[Node]:
    """A mixed fleet as the lab generates it: odd nodes IPMI, even Redfish."""
    return [Node(f"node-{i:03d}", "ipmi" if i % 2 else "redfish") for i in range(1, count + 1)]


def test_five_percent_of_a_thousand_is_twenty_five_of_each_protocol() -> None:
    hung = hung_nodes(nodes(1000), 0.05)
    assert len(hung) == len({n.name for n in hung}) == 50
    assert sum(n.driver == "ipmi" for n in hung) == sum(n.driver == "redfish" for n in hung) == 25
    assert [n.name for n in hung[:4]] == ["node-001", "node-002", "node-041", "node-042"]
    assert hung == sorted(hung, key=lambda n: n.name)  # in the fleet's order


def test_at_least_one_of_each_protocol_hangs() -> None:
    assert [n.name for n in hung_nodes(nodes(20), 0.1)] == ["node-001", "node-002"]
    assert [n.name for n in hung_nodes(nodes(4), 0.01)] == ["node-001", "node-002"]


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1])
def test_a_fraction_outside_zero_to_one_is_refused(fraction: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        hung_nodes(nodes(10), fraction)


def test_the_fencing_waits_for_every_hung_node_to_carry_the_fault() -> None:
    """A node a starved client's lateness kept from its fence is not fenced
    yet: the bench runs another pass (at most LATE_PASSES) rather than time
    "fenced" passes that still wait for it."""
    from types import SimpleNamespace

    from bmaas.hwlab.harness.bench.hung_sync import LATE_PASSES, _fenced

    faults = {"node-001": "power failure", "node-002": None}
    store = SimpleNamespace(
        nodes=SimpleNamespace(
            find=lambda names: [SimpleNamespace(name=n, fault=faults[n]) for n in names]
        )
    )
    assert _fenced(store, {"node-001", "node-002"}, "power failure") == {"node-001"}
    faults["node-002"] = "power failure"
    assert _fenced(store, {"node-001", "node-002"}, "power failure") == {"node-001", "node-002"}
    assert LATE_PASSES >= 1
