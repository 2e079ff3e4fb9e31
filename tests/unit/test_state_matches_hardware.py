"""What bmaas records after deploy, undeploy and move is the power state the
node was left in, and a fenced node's fault names the step that failed."""

from __future__ import annotations

from bmaas.driver import PowerState
from bmaas.fakes.faults import FaultRule
from bmaas.provision import Request
from bmaas.store import Store
from tests.unit.test_provision import Rack


def test_undeploy_records_off(store: Store) -> None:
    rack = Rack(store, count=1)
    rack.provisioner.provision(Request("r1"))
    rack.provisioner.undeploy("r1")
    assert store.nodes.get("n01").power_state is PowerState.OFF


def test_a_failed_eject_fences_naming_the_eject_and_records_off(store: Store) -> None:
    rack = Rack(store, count=1)
    rack.provisioner.provision(Request("r1"))
    rule = {"effect": "malformed_reply", "operation": "vmedia.eject"}
    rack.fleet.machine("n01").plan.add(FaultRule.from_dict(rule))
    rack.provisioner.undeploy("r1")
    node = store.nodes.get("n01")
    assert node.fault == "undeploy failure"
    assert "vmedia.eject" in (node.last_error or "")
    assert node.power_state is PowerState.OFF  # the power-off before it worked


def test_an_eject_the_bmc_cannot_do_is_skipped_not_fenced(store: Store) -> None:
    """No CD slot, or one the service links but does not serve (issue 36):
    nothing bmaas could have inserted there; the node is off and released."""
    rack = Rack(store, count=1)
    rack.provisioner.provision(Request("r1"))
    rule = {"effect": "unsupported", "operation": "vmedia.eject"}
    rack.fleet.machine("n01").plan.add(FaultRule.from_dict(rule))
    rack.provisioner.undeploy("r1")
    node = store.nodes.get("n01")
    assert node.fault is None
    assert node.owner_id is None
    assert node.power_state is PowerState.OFF


def test_a_failed_power_off_records_unknown(store: Store) -> None:
    rack = Rack(store, count=1)
    rack.provisioner.provision(Request("r1"))
    rule = {"effect": "malformed_reply", "operation": "power.set"}
    rack.fleet.machine("n01").plan.add(FaultRule.from_dict(rule))
    rack.provisioner.undeploy("r1")
    node = store.nodes.get("n01")
    assert "power" in (node.last_error or "")
    assert node.power_state is PowerState.UNKNOWN


def test_move_records_target_on_and_source_off(store: Store) -> None:
    rack = Rack(store, count=2)
    rack.provisioner.provision(Request("r1"))
    moved = rack.provisioner.move("r1")
    assert store.nodes.get(moved.target).power_state is PowerState.ON
    assert store.nodes.get(moved.source).power_state is PowerState.OFF
