"""Power and health from the BMC's own word inside a real Ironic (issue 37):
bmaas-redfish nodes' periodic reads answered from their Redfish event
stream (bmaas.drivers.ironic.streams), the BMC read only as the safety net.

This module starts an Ironic of its own: the power sync every 2 s, the
safety read every 20 s (``[bmaas]events_safety_interval``),
``force_power_state_during_sync`` off (a change made outside shows in the
node instead of being undone), and DEBUG logging, where every
periodic read says whether the stream answered it (source, age) or why the
BMC was read. Counted on hwlab: the power reads (``power.get``: the lean
GET that carries power and health) and the EventService requests
(``event.subscribe``: the stream's opens) each BMC served, through
zero-second delay rules used as counters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.lab import Lab
from tests.ironic.conftest import _NEXT
from tests.ironic.conftest import SETTINGS as SESSION_SETTINGS

#: seconds between Ironic's power sync passes, and between a streamed node's BMC reads
SYNC, SAFETY = 2, 20.0
SETTINGS = dataclasses.replace(
    SESSION_SETTINGS,
    sync_interval=SYNC,
    extra={
        "DEFAULT": {"debug": "true"},
        # the liveness read off (its own tests: tests/unit/test_liveness.py):
        # every BMC read here is the safety net's
        "bmaas": {"events_safety_interval": SAFETY, "events_liveness_interval": 0},
        # Ironic's default (true) powers a node back to its recorded state at the
        # pass that finds it changed: the change would show as Ironic's action
        "conductor": {"force_power_state_during_sync": "false"},
    },
)
#: the first API version with node.health (Ironic 34.0)
HEALTH_VERSION = "1.109"
READS = {"name": "count-reads", "effect": "delay", "seconds": 0, "operation": "power.get"}
OPENS = {"name": "count-opens", "effect": "delay", "seconds": 0, "operation": "event.subscribe"}


@dataclasses.dataclass
class Node:
    node: Any
    lab_name: str

    @property
    def name(self) -> str:
        return str(self.node.name)


class Events:
    """This module's Ironic, its nodes, and what the lab and the log say."""

    def __init__(self, service: harness.IronicService, conn: Any, lab: Lab) -> None:
        self.service, self.conn, self.lab = service, conn, lab

    def enroll(self) -> Node:
        entry = self.lab.inventory()["nodes"][next(_NEXT)]
        self.lab.add_faults(entry["name"], [READS, OPENS])
        node = harness.enroll(
            self.conn,
            entry,
            driver="bmaas-redfish",
            name=f"ev-{entry['name']}",
            kernel=self.service.kernel,
            ramdisk=self.service.ramdisk,
        )
        return Node(node, entry["name"])

    def fired(self, node: Node, rule: dict[str, Any]) -> int:
        status = self.lab.status()["nodes"][node.lab_name]
        return int(status["fired"].get(rule["name"], 0))

    def log(self) -> str:
        return self.service.log_path.read_text(errors="replace")

    def streamed(self, node: Node, text: str) -> list[str]:
        """Periodic reads of ``node`` the stream answered, as logged."""
        return re.findall(
            rf"bmaas: {re.escape(node.name)}: power \S+ from the event stream.*", text
        )

    def bmc_reads(self, node: Node, text: str) -> list[str]:
        """Periodic reads of ``node`` that asked the BMC, with why."""
        pattern = rf"bmaas: {re.escape(node.name)}: power read from the BMC: (.*?)(?: answer \S+)?$"
        return re.findall(pattern, text, re.MULTILINE)

    def power(self, node: Node) -> str:
        return str(self.conn.baremetal.get_node(node.node.id).power_state)

    def health(self, node: Node) -> str | None:
        answer = self.conn.baremetal.get(f"/nodes/{node.node.id}", microversion=HEALTH_VERSION)
        answer.raise_for_status()
        found = answer.json().get("health")
        return str(found) if found is not None else None

    def until(self, what: Callable[[], bool], seconds: float, poll: float = 0.2) -> float:
        """Seconds until ``what()`` held (bounded; AssertionError past ``seconds``)."""
        start = time.monotonic()
        while not what():
            assert time.monotonic() - start < seconds, f"not within {seconds:g} s"
            time.sleep(poll)
        return time.monotonic() - start

    def settled(self, node: Node) -> None:
        """The node's stream is up and one sync pass has been answered from it."""
        self.until(lambda: bool(self.streamed(node, self.log())), 60 + 10 * SYNC)


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory, ironic_lab: Lab) -> Iterator[Events]:
    service = harness.IronicService(tmp_path_factory.mktemp("ironic-events"), SETTINGS)
    with contextlib.ExitStack() as stack:
        stack.callback(service.stop)
        service.start(timeout=180)
        conn = service.connect()
        stack.callback(conn.close)
        yield Events(service, conn, ironic_lab)


@pytest.fixture
def node(events: Events) -> Iterator[Node]:
    enrolled = events.enroll()
    yield enrolled
    events.lab.clear_faults(enrolled.lab_name)
    events.lab.health(enrolled.lab_name, "OK")


@pytest.mark.timeout(600)
def test_a_console_power_off_reaches_ironic_by_its_event_with_no_bmc_read(
    events: Events, node: Node
) -> None:
    events.settled(node)
    if events.power(node) != "power on":  # on first, by the console too
        events.lab.power(node.lab_name, "on")
        events.until(lambda: events.power(node) == "power on", SAFETY)
    target = "off"
    reads = events.fired(node, READS)
    log_at = len(events.log())
    events.lab.power(node.lab_name, target)  # the console: no client asked
    took = events.until(lambda: events.power(node) == f"power {target}", SAFETY)
    new_log = events.log()[log_at:]
    # the next pass answered from the event: no BMC read in between, and the
    # conductor log says so, with the event's MessageId and age
    assert events.fired(node, READS) == reads, events.bmc_reads(node, new_log)
    assert re.search(
        rf"bmaas: {re.escape(node.name)}: power {target} from the event stream "
        r"\(source: event \S+Powered(On|Off), \d+\.\d s old;.*; not read from the BMC",
        new_log,
    ), new_log[-3000:]
    print(f"console power {target} in Ironic after {took:.1f} s (sync every {SYNC} s)")


@pytest.mark.timeout(600)
def test_sync_passes_read_the_bmc_only_for_the_safety_net(events: Events, node: Node) -> None:
    events.settled(node)
    log_at = len(events.log())
    reads = events.fired(node, READS)
    window = 2.5 * SAFETY
    time.sleep(window)
    new_log = events.log()[log_at:]
    streamed = events.streamed(node, new_log)
    asked = events.bmc_reads(node, new_log)
    served = events.fired(node, READS) - reads
    # every BMC read in the window was a safety read, and the BMC served
    # exactly those: the passes between them cost it nothing
    assert asked, "no safety read in 2.5 safety intervals"
    assert all(why.startswith("safety read") for why in asked), asked
    assert served == len(asked), (served, asked)
    assert served <= window / SAFETY + 1
    assert len(streamed) >= 3 * served, (len(streamed), served)
    print(f"{len(streamed)} passes answered by the stream, {served} BMC reads in {window:g} s")


@pytest.mark.timeout(600)
def test_node_health_fills_and_follows_the_bmcs_events(events: Events, node: Node) -> None:
    events.settled(node)
    events.until(lambda: events.health(node) == "OK", 10 * SYNC)
    reads = events.fired(node, READS)
    for health in ("Warning", "Critical", "OK"):
        events.lab.health(node.lab_name, health)
        events.until(lambda wanted=health: events.health(node) == wanted, SAFETY)  # type: ignore[misc]
    assert events.fired(node, READS) == reads  # by the events, not by reads


@pytest.mark.timeout(900)
def test_a_restarted_conductor_subscribes_again(events: Events, node: Node) -> None:
    """A conductor that takes the node over (here: the same one, restarted,
    its memory gone) subscribes at its first passes and answers from the
    new stream."""
    events.settled(node)
    opens = events.fired(node, OPENS)
    events.service.stop()
    events.service.launch(timeout=180)
    events.until(lambda: events.fired(node, OPENS) > opens, 60 + 10 * SYNC)
    log_at = len(events.log())
    events.until(lambda: bool(events.streamed(node, events.log()[log_at:])), 60 + 10 * SYNC)
    reads = events.fired(node, READS)
    target = "off" if events.power(node) == "power on" else "on"
    events.lab.power(node.lab_name, target)
    events.until(lambda: events.power(node) == f"power {target}", SAFETY)
    assert events.fired(node, READS) == reads


@pytest.mark.timeout(600)
def test_an_action_reads_the_bmc_and_the_next_pass_reconciles(events: Events, node: Node) -> None:
    events.settled(node)
    reads = events.fired(node, READS)
    log_at = len(events.log())
    target = "power off" if events.power(node) == "power on" else "power on"
    events.conn.baremetal.set_node_power_state(node.node, target, wait=True, timeout=60)
    assert events.fired(node, READS) > reads  # the action's reads asked the BMC
    events.until(
        lambda: any(
            w.startswith("reconcile") for w in events.bmc_reads(node, events.log()[log_at:])
        ),
        10 * SYNC + 30,
    )
    events.until(lambda: bool(events.streamed(node, events.log()[log_at:])), 10 * SYNC + 30)


@pytest.mark.timeout(600)
def test_a_lost_event_is_caught_by_the_safety_read(events: Events, node: Node) -> None:
    events.settled(node)
    events.lab.add_faults(node.lab_name, [{"effect": "drop", "operation": "event.power"}])
    reads = events.fired(node, READS)
    log_at = len(events.log())
    target = "off" if events.power(node) == "power on" else "on"
    events.lab.power(node.lab_name, target)  # its event is lost
    took = events.until(lambda: events.power(node) == f"power {target}", SAFETY + 10 * SYNC + 30)
    assert events.fired(node, READS) > reads  # by a read
    # the safety read, or the read a ResourceChanged that got through asks for
    asked = events.bmc_reads(node, events.log()[log_at:])
    assert any(why.startswith(("safety read", "reconcile")) for why in asked), asked
    print(f"lost event: power {target} in Ironic after {took:.1f} s, read because {asked}")
