"""Inside Ironic, a BMC that refused IPMI cipher suite 17 (``ipmi_cipher_suite:
auto``) is recorded and reported as bmaas's own CLI does it (issue 36): the
node's ``driver_internal_info["bmaas_quirks"]`` (saved under an exclusive
lock; Ironic's periodic reads hold a shared one, under which it waits for the
next exclusive call), one node history entry and one warning per node and
conductor, also when the call itself then failed. Runs in the Ironic venv
(``scripts/ironic-env.sh``, hence the ``ironic`` mark) on stand-in tasks,
nodes and drivers; no Ironic service is started."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ironicscript import run_json

pytestmark = pytest.mark.ironic

_SCRIPT = r"""
import contextlib, json, logging, types
import ironic.conf
from ironic.conductor import utils as conductor_utils
from bmaas.driver import Quirk
from bmaas.drivers.ironic import calls, host, learned

history, warnings = [], []
conductor_utils.node_history_record = lambda node, **kw: history.append((node.uuid, kw))

class Warned(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            warnings.append(record.getMessage())

logging.getLogger("bmaas.drivers.ironic.learned").addHandler(Warned())

class Node:
    def __init__(self, uuid, internal=None):
        self.uuid, self.name, self.driver = uuid, uuid, "bmaas-ipmi"
        self.driver_info = {"ipmi_address": "127.0.0.1", "ipmi_password": "pw",
                            "ipmi_cipher_suite": "auto"}
        self.driver_internal_info = dict(internal or {})
        self.saves = 0
    def save(self):
        self.saves += 1

class Driver:
    def __init__(self, quirks=()):
        self.quirks = set(quirks)

def task(node, shared):
    return types.SimpleNamespace(node=node, shared=shared)

out = {}
suite3 = Driver([Quirk.IPMI_SUITE_3])
told = learned.Told()  # the conductor runtime's part

# an exclusive call: saved, told once
a = Node("a", {"other": 1})
learned.report(told, task(a, False), suite3)
learned.report(told, task(a, False), suite3)
out["exclusive"] = [a.saves, a.driver_internal_info, len(history), len(warnings)]

# a periodic read (shared lock): told at once, saved by the next exclusive call
b = Node("b")
learned.report(told, task(b, True), suite3)
shared = [b.saves, dict(b.driver_internal_info), len(history), len(warnings)]
learned.report(told, task(b, False), suite3)
out["shared"] = shared + [b.saves, b.driver_internal_info, len(history), len(warnings)]

# already recorded (another conductor, an earlier process): nothing
c = Node("c", {learned.KEY: [str(Quirk.IPMI_SUITE_3)]})
learned.report(told, task(c, False), suite3)
out["known"] = [c.saves, len(history)]

# a history that cannot be written never fails the call
def broken(node, **kw):
    raise RuntimeError("database gone")
conductor_utils.node_history_record = broken
d = Node("d")
learned.report(told, task(d, False), suite3)
out["broken"] = d.saves
conductor_utils.node_history_record = lambda node, **kw: history.append((node.uuid, kw))

# through calls.session: learned at login, the call then fails: still recorded
class Pool:
    @contextlib.contextmanager
    def session(self, key, make, *, deadline):
        yield self.driver
pool = Pool()
pool.driver = Driver()
calls.conf.CONF([], project="ironic", default_config_files=[])
rt = host.runtime()
rt.pool = pool
rt.part("quirks told", lambda: told)
budget = calls.Budget(call=1.0, operation=5.0, sync=5.0)
from bmaas.deadline import Deadline
e = Node("e")
try:
    with calls.session(task(e, False), "ipmi", budget, Deadline.after(5.0)) as drv:
        drv.quirks.add(Quirk.IPMI_SUITE_3)  # what the IPMI driver's login does
        raise TimeoutError("the read after the login timed out")
except TimeoutError:
    pass
out["session"] = [e.saves, e.driver_internal_info]
out["history"] = history
out["warnings"] = warnings
print(json.dumps(out))
"""


def _run() -> dict[str, Any]:
    result: dict[str, Any] = run_json(_SCRIPT)
    return result


SUITE_3 = "ipmi_cipher_suite_3"


def test_the_downgrade_is_recorded_and_reported_inside_ironic() -> None:
    out = _run()
    saves, internal, history, warned = out["exclusive"]
    assert (saves, internal) == (1, {"other": 1, "bmaas_quirks": [SUITE_3]})
    assert (history, warned) == (1, 1)  # told once, not per call

    shared_saves, shared_internal, *_ = out["shared"]
    assert (shared_saves, shared_internal) == (0, {})  # a shared lock never saves the node
    later_saves, later_internal = out["shared"][4:6]
    assert (later_saves, later_internal) == (1, {"bmaas_quirks": [SUITE_3]})
    assert out["shared"][6] == out["shared"][2]  # told when learned, not again

    assert out["known"] == [0, out["shared"][6]]  # the node had it: nothing written, told
    assert out["broken"] == 1  # the history failed, the record and the call did not

    assert out["session"] == [1, {"bmaas_quirks": [SUITE_3]}]  # a failed call still records

    nodes = [uuid for uuid, _kw in out["history"]]
    assert nodes == ["a", "b", "e"]
    for _uuid, kw in out["history"]:
        assert kw["event_type"] == "monitoring"
        assert kw["event"].startswith(f"bmaas: BMC quirk {SUITE_3}: the BMC refused IPMI")
    assert len(out["warnings"]) == 4  # a, b, d (history broken after the warning), e
    assert all("cipher suite 17" in w for w in out["warnings"])
