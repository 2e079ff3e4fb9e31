"""A power action the BMC took, whose state the budget ends before reading,
inside Ironic (issue 48): not ``power_failure retry=other_node`` but done as
far as Ironic is told (``set_power_state`` returns, so Ironic records the
target and its sync never switches the booting machine back off), with a
``power_pending`` warning that says how long the whole operation ran. The
hardware's window is Ironic's ``power_state_change_timeout`` from the
moment the BMC took the request, never cut to what the budget had left.

Runs in the Ironic venv (``ironic`` mark) with a stand-in task; the node is
a simulated machine on the real clock whose power-on takes 30 s."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.ironicscript import run_json

pytestmark = pytest.mark.ironic

_ACT = """
import json, logging, sys, time, types
import ironic.conf
from ironic.common import exception
from bmaas.drivers.ironic import calls
from bmaas.drivers.ironic.power import BmaasPower
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.machine import FakeMachine, Hardware

calls.conf.CONF([], project="ironic", default_config_files=[])
calls.conf.CONF.set_override("operation_deadline", float(sys.argv[1]), group="bmaas")
calls.conf.CONF.set_override("call_deadline", 0.5, group="bmaas")
calls.conf.CONF.set_override("events", False, group="bmaas")
machine = FakeMachine("n1", Hardware(power_on_time=30.0), clock=time.monotonic)
calls.build_driver = lambda name, protocol, info, **kw: FakeDriver(
    name, machine=machine, clock=time.monotonic, sleep=time.sleep, bmc_timeout=0.5
)
seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append(record.getMessage())
logging.getLogger("bmaas.drivers.ironic").addHandler(Keep())
info = {"ipmi_address": "127.0.0.1", "ipmi_username": "u", "ipmi_password": "secret-pw"}
node = types.SimpleNamespace(name="n1", uuid="u-1", driver="bmaas-ipmi", driver_info=info,
                             power_state="power off")
class Task:  # weakly referenced by the request book, as Ironic's TaskManager
    shared = False
task = Task()
task.node = node
start = time.monotonic()
try:
    BmaasPower().set_power_state(task, "power on", timeout=int(sys.argv[2]))
    out = {"raised": None}
except exception.IronicException as exc:
    out = {"raised": type(exc).__name__, "text": str(exc)}
out["took"] = time.monotonic() - start
out["log"] = seen
print(json.dumps(out))
"""


def _power_on(budget: float, window: int) -> dict[str, Any]:
    result: dict[str, Any] = run_json(_ACT, str(budget), str(window))
    return result


def test_an_accepted_power_on_past_the_budget_is_pending_not_a_hardware_failure() -> None:
    out = _power_on(budget=2.0, window=60)
    assert out["raised"] is None, out  # Ironic records "power on": its sync will not undo it
    (warning,) = [m for m in out["log"] if "power_pending" in m]
    assert warning.startswith("bmaas: [bmaas power_pending retry=same_node] n1")
    assert "power on was taken by the BMC and is not confirmed after" in warning
    assert "power_failure" not in warning
    assert "secret-pw" not in json.dumps(out)
    assert out["took"] < 2.0 + 5  # ended by the budget (plus start-up), not the 60 s window


def test_a_window_that_ends_first_is_still_the_hardware_s_failure() -> None:
    out = _power_on(budget=6.0, window=1)
    assert out["raised"] == "BmaasPowerFailure", out
    assert out["text"].startswith("[bmaas power_failure retry=other_node] n1")
