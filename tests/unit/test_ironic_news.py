"""Event news recorded on Ironic's node between power-sync passes
(bmaas.drivers.ironic.news, issue 48 finding 3): what one look does with a
node's news -- recorded as Ironic's sync records a change, never racing a
power action, never undoing one the stream cannot vouch for, never against
``force_power_state_during_sync`` -- with a stand-in task and streams.

Runs in the Ironic venv (``ironic`` mark): one script plays every case and
prints what happened; the tests below read it. (tests/ironic/
test_ironic_news.py drives the same through a real Ironic.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.ironicscript import run_json

pytestmark = pytest.mark.ironic

_CASES = """
import contextlib, json, types
import ironic.conf
from ironic.common import exception
from bmaas.driver import PowerState
from bmaas.drivers.ironic import conf, news
from bmaas.drivers.ironic.answers import Answer, fingerprint

conf.CONF([], project="ironic", default_config_files=[])
said = []
news.nova.power_update = lambda ctx, inst, state: said.append(["nova", inst, state])
news.notification_utils.emit_power_state_corrected_notification = (
    lambda task, old: said.append(["corrected", old, task.node.power_state]))
news.conductor_utils.node_cache_health = lambda task: said.append(["health", task.shared])

INFO = {"redfish_address": "http://127.0.0.1:8000", "redfish_username": "u",
        "redfish_password": "secret-pw", "redfish_system_id": "/redfish/v1/Systems/1"}

class Streams:
    def __init__(self, power, health=(True, "OK"), changed=("u-1",)):
        self.power, self._health, self._changed, self.back = power, health, set(changed), set()
        self.asked = 0
    def changed(self):
        taken, self._changed = self._changed, set()
        return taken
    def again(self, uuids):
        self.back |= uuids
    def vouched(self, uuid, driver_info):
        assert (uuid, driver_info) == ("u-1", fingerprint(INFO))
        self.asked += 1
        if self.power is None:  # reconcile: after a power action, a reopened stream
            return None
        return Answer(self.power, "event ResourceEvent.1.0.ResourcePoweredOff", 0.2, 30, 2000)
    def health(self, uuid):
        return self._health

def node(**kw):
    fields = dict(uuid="u-1", name="n1", driver="bmaas-redfish", driver_info=INFO,
                  power_state="power on", target_power_state=None, reservation=None,
                  maintenance=False, provision_state="active", driver_internal_info={},
                  instance_uuid=None, disable_power_off=False)
    fields.update(kw)
    made = types.SimpleNamespace(**fields)
    made.save = lambda: said.append(["save", made.power_state])
    return made

class Task:
    def __init__(self, node, reloaded=None, locked=False):
        self.node, self.shared, self.context = node, True, "ctx"
        self.reloaded, self.locked = reloaded, locked
        self.driver = types.SimpleNamespace(
            power=types.SimpleNamespace(supports_power_sync=lambda task: True))
    def upgrade_lock(self, purpose=None, retry=None):
        said.append(["upgrade", purpose, retry])
        if self.locked:
            raise exception.NodeLocked(node=self.node.uuid, host="other")
        self.shared = False
        if self.reloaded is not None:
            self.node = self.reloaded

def case(task, streams, force=False):
    conf.CONF.set_override("force_power_state_during_sync", force, group="conductor")
    del said[:]
    outcome = news.apply(task, streams)
    return {"outcome": outcome.name, "said": list(said), "asked": streams.asked}

OFF, ON = PowerState.OFF, PowerState.ON
out = {
    "recorded": case(Task(node(instance_uuid="i-1")), Streams(OFF)),
    "same": case(Task(node()), Streams(ON)),
    "action": case(Task(node(target_power_state="power off")), Streams(OFF)),
    "reserved": case(Task(node(reservation="other")), Streams(OFF)),
    "unvouched": case(Task(node()), Streams(None)),
    "forced": case(Task(node()), Streams(OFF), force=True),
    "forced_no_power_off": case(Task(node(disable_power_off=True)), Streams(OFF), force=True),
    "maintenance": case(Task(node(maintenance=True)), Streams(OFF)),
    "deploywait": case(Task(node(provision_state="wait call-back")), Streams(OFF)),
    "stock": case(Task(node(driver="redfish")), Streams(OFF)),
    "started_meanwhile": case(
        Task(node(), reloaded=node(target_power_state="power on")), Streams(OFF)),
    "no_health": case(Task(node()), Streams(ON, health=(False, None))),
}

def look(task=None, raised=None, streams=None):
    streams = streams or Streams(OFF)
    acquired = []
    @contextlib.contextmanager
    def acquire(context, uuid, purpose, shared):
        acquired.append([uuid, purpose, shared])
        if raised is not None:
            raise raised
        yield task
    conf.CONF.set_override("force_power_state_during_sync", False, group="conductor")
    counts = news.look("ctx", streams, acquire=acquire)
    return {"counts": {k.name: v for k, v in counts.items() if v}, "acquired": acquired,
            "again": sorted(streams.back)}

out["look_locked"] = look(Task(node(), locked=True))
out["look_gone"] = look(raised=exception.NodeNotFound(node="u-1"))
out["look_recorded"] = look(Task(node()))
out["look_at_rest"] = look(streams=Streams(OFF, changed=()))

class Waited(Streams):
    # news comes as the script says: each wait_news takes the next
    # (seconds, news?) step on a fake clock, capped at its timeout
    def __init__(self, script):
        super().__init__(OFF)
        self.script, self.count, self.waits, self.now = list(script), 0, [], 0.0
    def news_mark(self):
        return self.count
    def wait_news(self, mark, timeout):
        self.waits.append([mark, round(timeout, 3)])
        seconds, came = self.script.pop(0) if self.script else (timeout, False)
        if came is None:  # closed
            return False
        self.now += min(seconds, timeout)
        if came and seconds <= timeout:
            self.count += 1
            self._changed.add("u-1")
            return True
        return False

def watch(script, tasks, seconds=1.0):
    streams = Waited(script)
    tasks = list(tasks)
    @contextlib.contextmanager
    def acquire(context, uuid, purpose, shared):
        yield tasks.pop(0)
    conf.CONF.set_override("force_power_state_during_sync", False, group="conductor")
    counts = news.watch("ctx", streams, seconds, acquire=acquire, clock=lambda: streams.now)
    return {"counts": {k.name: v for k, v in counts.items() if v}, "waits": streams.waits,
            "now": streams.now, "left": len(streams.script)}

# locked at the first look (given back: no news, no wake-up); news at 0.3 s: looked
# at once and recorded; then nothing until the run's second is up
out["watch"] = watch([(0.3, True), (5.0, False)], [Task(node(), locked=True), Task(node())])
# streams closed while waiting: the run ends there
out["watch_closed"] = watch([(0.0, None)], [Task(node())])
out["watch_off"] = {k.name: v for k, v in news.watch("ctx", None, 1.0).items() if v}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def cases() -> dict[str, Any]:
    result: dict[str, Any] = run_json(_CASES)
    return result


def test_a_change_is_recorded_as_ironic_s_sync_records_it(cases: dict[str, Any]) -> None:
    got = cases["recorded"]
    assert got["outcome"] == "RECORDED"
    # health through Ironic's own node_cache_health on the shared lock (the
    # stream answers it), then the lock upgraded without waiting, the record,
    # Nova and the power_state_corrected notification
    assert got["said"] == [
        ["health", True],
        ["upgrade", "bmaas: recording event news", False],
        ["save", "power off"],
        ["nova", "i-1", "power off"],
        ["corrected", "power on", "power off"],
    ]
    assert got["asked"] == 2  # the stream asked again under the exclusive lock


def test_news_the_record_already_says_takes_no_exclusive_lock(cases: dict[str, Any]) -> None:
    assert cases["same"]["outcome"] == "SAME"
    assert cases["same"]["said"] == [["health", True]]
    assert cases["no_health"]["said"] == []  # health unknown to the stream: not read here


@pytest.mark.parametrize("name", ["action", "reserved", "started_meanwhile"])
def test_a_power_action_under_way_is_never_raced(cases: dict[str, Any], name: str) -> None:
    got = cases[name]
    assert got["outcome"] == "LATER", got
    assert not [s for s in got["said"] if s[0] in ("save", "nova", "corrected")]


def test_news_the_stream_cannot_vouch_for_is_left_to_the_sync(cases: dict[str, Any]) -> None:
    # after a power action (one the BMC took and has not confirmed: Ironic
    # recorded its target), a reopened stream, news without a state
    assert cases["unvouched"] == {"outcome": "LEFT", "said": [], "asked": 1}


def test_force_power_state_during_sync_keeps_the_record_for_the_pass(
    cases: dict[str, Any],
) -> None:
    assert cases["forced"]["outcome"] == "LEFT"
    assert cases["forced"]["said"] == [["health", True]]  # health still recorded
    # a node Ironic may not power off: the sync records it, so does the look
    assert cases["forced_no_power_off"]["outcome"] == "RECORDED"


@pytest.mark.parametrize("name", ["maintenance", "deploywait", "stock"])
def test_nodes_the_sync_would_not_touch_are_left(cases: dict[str, Any], name: str) -> None:
    assert cases[name] == {"outcome": "LEFT", "said": [], "asked": 0}


def test_a_look_tries_a_locked_node_again_and_forgets_a_deleted_one(
    cases: dict[str, Any],
) -> None:
    assert cases["look_locked"]["counts"] == {"LATER": 1}
    assert cases["look_locked"]["again"] == ["u-1"]
    assert cases["look_gone"]["counts"] == {"LEFT": 1}
    assert cases["look_gone"]["again"] == []
    recorded = cases["look_recorded"]
    assert recorded["counts"] == {"RECORDED": 1}
    assert recorded["acquired"] == [["u-1", "bmaas: recording event news", True]]


def test_a_fleet_at_rest_costs_no_lock(cases: dict[str, Any]) -> None:
    assert cases["look_at_rest"] == {"counts": {}, "acquired": [], "again": []}


def test_a_watch_records_news_as_it_comes_not_at_the_next_run(cases: dict[str, Any]) -> None:
    """The news periodic's run (issue 46): a look at once, then one each
    time news comes, until the run's ``events_apply_interval`` is up -- not a
    look a second, which kept a change up to a second from Ironic's node.
    A node left for later (locked) wakes nothing: the next news brings it
    back, so a lock held elsewhere is not looked at in a loop."""
    watched = cases["watch"]
    assert watched["counts"] == {"LATER": 1, "RECORDED": 1}
    # waited from the mark of each look's start, for what the run had left
    assert watched["waits"] == [[0, 1.0], [1, 0.7]]
    assert watched["now"] == 1.0
    assert watched["left"] == 0
    closed = cases["watch_closed"]
    assert closed["counts"] == {"RECORDED": 1}
    assert closed["waits"] == [[0, 1.0]]
    assert cases["watch_off"] == {}
