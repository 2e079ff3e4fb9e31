"""Each fault class of the lab's matrix, through a real Ironic, on both
bmaas hardware types: the failure's code is readable from ``last_error`` (or
node history once the power sync has cleared it), and the operation gave up
within its configured budget."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from bmaas import faulttext
from bmaas.hwlab.harness import ironic as harness
from tests.ironic.conftest import SETTINGS

TYPES = ("bmaas-ipmi", "bmaas-redfish")

#: effect on the power request -> the fault code Ironic must report
POWER_FAULTS = {
    "busy": ({"effect": "busy", "operation": "power.set"}, "bmc_busy"),
    "internal_error": (
        {"effect": "internal_error", "operation": "power.set"},
        "bmc_internal_error",
    ),
    "hang": ({"effect": "hang", "operation": "power.set"}, "bmc_timeout"),
    "drop": ({"effect": "drop", "rate": 1.0, "operation": "power.set"}, "bmc_timeout"),
    "malformed_reply": (
        {"effect": "malformed_reply", "operation": "power.set"},
        "bmc_protocol_error",
    ),
    "unsupported": ({"effect": "unsupported", "operation": "power.set"}, "unsupported_operation"),
    "power_stuck": ({"effect": "power_stuck", "operation": "power.set"}, "power_failure"),
    # wrong credentials fail the read Ironic makes before acting
    "auth_fail": ({"effect": "auth_fail"}, "bmc_auth_error"),
}

_GAVE_UP = re.compile(r"gave up after (?P<seconds>\d+\.\d+)s")

#: a power-on the BMC took and that never lands (issue 48). IPMI's BMC says
#: so (the chassis control's completion code: power_failure, above);
#: Redfish's accepts and says nothing, and the session's power window (20 s)
#: is longer than its budget (10 s): the action is pending, not failed --
#: Ironic records "power on" (its sync, not a guess, says what became of it)
#: and the node's history says power_pending and how long the operation ran
PENDING = {("power_stuck", "bmaas-redfish")}


def _assert_pending(baremetal: Any, node: Any, text: str) -> None:
    assert text == "", f"{node.name}: an accepted action reported as failed: {text}"
    fresh = baremetal.baremetal.get_node(node.id)
    assert fresh.power_state == "power on", fresh.power_state
    said = [str(e.get("event")) for e in harness.history(baremetal, node)]
    pending = [e for e in said if e.startswith("[bmaas power_pending retry=same_node]")]
    assert pending, said
    assert "not confirmed after" in pending[-1]


def _power_on_and_read_failure(
    baremetal: Any, ironic_lab: Any, node: Any, lab_name: str, rule: dict[str, Any]
) -> str:
    ironic_lab.add_faults(lab_name, [rule])
    baremetal.baremetal.set_node_power_state(node, "power on", wait=False)
    harness.wait_for_power_settled(baremetal, node, timeout=120)
    return harness.failure_text(baremetal, node) or ""


@pytest.mark.parametrize("fault", sorted(POWER_FAULTS))
def test_power_on_fault_is_typed_and_bounded(
    fault: str, ironic_node: Any, ironic_lab: Any, baremetal: Any
) -> None:
    rule, code = POWER_FAULTS[fault]
    nodes = [ironic_node(driver) for driver in TYPES]
    with ThreadPoolExecutor(len(nodes)) as pool:  # both types at once: half the wall time
        texts = list(
            pool.map(
                lambda pair: _power_on_and_read_failure(baremetal, ironic_lab, *pair, rule),
                nodes,
            )
        )
    budget = SETTINGS.bmaas_operation_deadline
    for driver, (node, _), text in zip(TYPES, nodes, texts, strict=True):
        if (fault, driver) in PENDING:
            _assert_pending(baremetal, node, text)
            continue
        parsed = faulttext.parse(text)
        assert parsed is not None, f"{node.name}: no bmaas prefix in {text!r}"
        assert parsed.code == code, f"{node.name}: {text}"
        took = _GAVE_UP.search(text)
        assert took is not None, text
        assert float(took["seconds"]) <= budget * 1.1, text
        assert node.name in text


@pytest.mark.parametrize("driver", TYPES)
def test_boot_device_not_applied_is_a_boot_failure(
    driver: str, ironic_node: Any, ironic_lab: Any, baremetal: Any
) -> None:
    node, lab_name = ironic_node(driver)
    ironic_lab.add_faults(lab_name, [{"effect": "boot_not_persisted"}])
    with pytest.raises(Exception, match=r"\[bmaas boot_failure retry=other_node\]"):
        baremetal.baremetal.set_node_boot_device(node, "pxe", persistent=True)
