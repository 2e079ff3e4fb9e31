"""The lab guide's pytest-plugin example (docs/lab.md), verbatim: if it breaks, so does CI."""

import pytest

from bmaas.deadline import Deadline
from bmaas.faults import BMCTimeout
from bmaas.registry import build_driver


@pytest.mark.lab
def test_a_hung_bmc_is_a_timeout_not_a_hang(hwlab_lab):
    lab = hwlab_lab(nodes=2, protocols="mixed", profile="flaky", seed=7)
    node = lab.inventory()["nodes"][1]  # bmaas inventory, Ironic keys
    lab.add_faults(node["name"], [{"effect": "hang", "operation": "power.get"}])
    driver = build_driver(node["name"], node["driver"], node["driver_info"], bmc_timeout=1.0)
    try:
        with pytest.raises(BMCTimeout):
            driver.get_power_state(deadline=Deadline.after(1.0))
    finally:
        driver.close()
