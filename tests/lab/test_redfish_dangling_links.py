"""A 404 on a resource the Redfish service itself links (issue 36).

hwlab with ``--redfish-service-size 4`` linked a Manager from every system
and served it for the first only; bmaas read the 404 as a malformed reply
(``BMCProtocolError``, counted) and ``undeploy --all`` fenced 6 of 8
healthy nodes. Here a recorded tree (Lenovo SR650: the CD slot under
``/redfish/v1/Managers/1``) loses resources behind the driver's back, served
by :mod:`tests.lab.redfish_trees`, and the real driver is asked to eject:

* a Manager linked but not served: ``UnsupportedOperation`` naming the
  path, a row that neither counts nor fences, and ``undeploy_node`` powers
  the node off and skips the eject;
* a slot path kept from an earlier call that answers 404 now (a slot gone
  and back under another id): the links are read again once, in the same
  call, and the eject succeeds.
"""

from __future__ import annotations

import copy
import logging

import pytest

from bmaas.deadline import Deadline
from bmaas.deploy import undeploy_node
from bmaas.driver import PowerAction
from bmaas.faults import BMCProtocolError, UnsupportedOperation
from bmaas.policy import FleetOutcome, policy_for
from bmaas.retry import RetryLimits
from tests.lab.test_redfish_vendor_trees import tree

pytestmark = pytest.mark.lab

MANAGER = "/redfish/v1/Managers/1"
COLLECTION = f"{MANAGER}/VirtualMedia"
SLOT = f"{COLLECTION}/CD"
MOVED = f"{COLLECTION}/CD-2"
URL = "http://images.example/deploy.iso"


def call() -> Deadline:
    return Deadline.after(5.0)


def test_a_manager_linked_but_not_served_is_unsupported_never_the_nodes_fault() -> None:
    with tree("lenovo-sr650") as (state, driver):
        del state.resources[MANAGER]  # still in the system's Links.ManagedBy
        with pytest.raises(UnsupportedOperation) as info:
            driver.eject_virtual_media(deadline=call())
    fault = info.value
    assert not isinstance(fault, BMCProtocolError)
    assert f"the service links {MANAGER} but does not serve it" in str(fault)
    assert fault.status == "404"
    assert fault.operation == "vmedia.eject"
    row = policy_for(fault)
    assert (row.counts_for_health, row.fences) == (False, False)
    assert row.fleet is FleetOutcome.UNSUPPORTED
    # read once, the answer believed: no second round of reads in this call
    assert [p for m, p, _ in state.calls("GET") if p == MANAGER] == [MANAGER]


def test_undeploy_powers_off_and_skips_an_eject_the_service_cannot_serve(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with tree("lenovo-sr650") as (state, driver):
        system = state.system()
        driver.set_power_state(PowerAction.ON, deadline=call())
        del state.resources[MANAGER]
        with caplog.at_level(logging.WARNING, logger="bmaas.deploy"):
            undeploy_node(driver, limits=RetryLimits(), power_timeout=5.0, deadline=call())
        assert state.resources[system]["PowerState"] == "Off"
    assert any("virtual media not ejected" in r.getMessage() for r in caplog.records)


def test_a_kept_slot_that_answers_404_is_found_again_once() -> None:
    with tree("lenovo-sr650") as (state, driver):
        driver.insert_virtual_media(URL, deadline=call())  # finds and keeps the CD slot
        # the slot goes and comes back under another id (a Manager reset)
        slot = copy.deepcopy(state.resources.pop(SLOT))
        slot["@odata.id"] = MOVED
        state.resources[MOVED] = slot
        state.generation[MOVED] = 1
        state.recorded[MOVED] = copy.deepcopy(slot)
        members = state.resources[COLLECTION]["Members"]
        state.resources[COLLECTION]["Members"] = [
            {"@odata.id": MOVED} if m["@odata.id"] == SLOT else m for m in members
        ]
        before = len(state.requests)
        driver.eject_virtual_media(deadline=call())
        gets = [p for m, p, _ in state.requests[before:] if m == "GET"]
        assert gets[0] == SLOT  # the kept path: 404
        assert COLLECTION in gets  # the links read again, in the same call
        assert state.resources[MOVED]["Inserted"] is False  # ejected where it is now
        after = len(state.requests)
        driver.eject_virtual_media(deadline=call())  # the new path kept from then on
        assert [p for m, p, _ in state.requests[after:] if m == "GET"] == [MOVED]
