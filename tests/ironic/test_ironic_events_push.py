"""Pushed events inside a real Ironic (issue 37): the conductor listens
(``[bmaas]events_listen``, 127.0.0.1 and a free port), subscribes each
bmaas-redfish node's service with an EventDestination (push preferred over
the SSE hwlab offers: ``events_prefer_push``), and answers Ironic's periodic
power reads from the stream's cache, the BMC read as the safety net and
for each change the BMC POSTs (a POST is not the BMC's word: issue 46,
finding 5).

This module starts an Ironic of its own, as tests/ironic/test_ironic_events.py
does (sync every 2 s, the safety read every 20 s,
``force_power_state_during_sync`` off, DEBUG logging); counted on hwlab:
the power reads (``power.get``) and the EventService requests
(``event.subscribe``: the subscription's POST among them). What the BMC
holds is read from it: its ``Subscriptions`` collection, with the node's
own credentials.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.lab import Lab
from bmaas.hwlab.proxy.stock import free_port
from tests.ironic.test_ironic_events import OPENS, READS, SAFETY, SYNC, Events, Node
from tests.ironic.test_ironic_events import SETTINGS as SSE_SETTINGS


def settings(port: int) -> harness.IronicSettings:
    """The SSE module's Ironic, listening for pushes on ``port`` and preferring them."""
    return dataclasses.replace(
        SSE_SETTINGS,
        extra={
            **SSE_SETTINGS.extra,
            "bmaas": {
                **SSE_SETTINGS.extra["bmaas"],
                "events_listen": f"127.0.0.1:{port}",
                "events_prefer_push": "true",
            },
        },
    )


def destination(port: int) -> str:
    return f"http://127.0.0.1:{port}/bmaas/events"


SUBSCRIPTIONS = "/redfish/v1/EventService/Subscriptions"


def subscriptions(lab: Lab, node: Node) -> list[dict[str, Any]]:
    """The EventDestinations the node's BMC holds, read with its credentials."""
    entry = next(e for e in lab.inventory()["nodes"] if e["name"] == node.lab_name)
    info = entry["driver_info"]
    base = str(info["redfish_address"]).rstrip("/")
    auth = (info["redfish_username"], info["redfish_password"])
    verify = info.get("redfish_verify_ca", True)
    with requests.Session() as session:
        session.auth, session.verify = auth, verify
        members = session.get(base + SUBSCRIPTIONS, timeout=10).json().get("Members", [])
        return [session.get(base + m["@odata.id"], timeout=10).json() for m in members]


def ours(lab: Lab, node: Node, port: int) -> list[dict[str, Any]]:
    return [s for s in subscriptions(lab, node) if s.get("Destination") == destination(port)]


@pytest.fixture(scope="module")
def push_port() -> int:
    """Picked as the module's Ironic starts, not at import: a port freed at
    collection can be any outgoing connection's by the time a late test
    runs (the conductor then never listened: failed once under load)."""
    return free_port()


@pytest.fixture(scope="module")
def events(
    tmp_path_factory: pytest.TempPathFactory, ironic_lab: Lab, push_port: int
) -> Iterator[Events]:
    service = harness.IronicService(
        tmp_path_factory.mktemp("ironic-events-push"), settings(push_port)
    )
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


@pytest.mark.timeout(600)
def test_a_console_power_off_reaches_ironic_by_one_bmc_read_a_pushed_event_asked_for(
    events: Events, node: Node, push_port: int
) -> None:
    events.settled(node)
    log = events.log()
    assert f"listening for pushed Redfish events on 127.0.0.1:{push_port}" in log
    assert re.search(r"bmaas: event stream of \S+ up \(push subscription, \d+ nodes\)", log), log[
        -3000:
    ]
    (sub,) = ours(events.lab, node, push_port)  # one subscription, to this conductor
    assert sub["Protocol"] == "Redfish"
    assert sub["DeliveryRetryPolicy"] == "TerminateAfterRetries"
    assert len(sub["Context"]) == 64  # its secret: 32 random bytes, never logged
    assert sub["Context"] not in log
    if events.power(node) != "power on":
        events.lab.power(node.lab_name, "on")
        events.until(lambda: events.power(node) == "power on", SAFETY)
    reads = events.fired(node, READS)
    log_at = len(events.log())
    events.lab.power(node.lab_name, "off")  # the console: no client asked
    took = events.until(lambda: events.power(node) == "power off", SAFETY)
    new_log = events.log()[log_at:]
    # a POSTed Event proves only that its sender knows the Context (issue 46,
    # finding 5): it makes the next periodic read ask the BMC, whose answer
    # Ironic gets -- one read per pushed change, none answered from the news
    asked = events.bmc_reads(node, new_log)
    assert asked, new_log[-3000:]
    assert all(why.startswith("pushed news") for why in asked), asked
    assert events.fired(node, READS) - reads == len(asked)
    assert not re.search(
        rf"bmaas: {re.escape(node.name)}: power off from the event stream \(source: event",
        new_log,
    ), new_log[-3000:]
    print(f"console power off in Ironic after {took:.1f} s: a pushed event, then a BMC read")


@pytest.mark.timeout(600)
def test_passes_between_safety_reads_cost_the_bmc_nothing(events: Events, node: Node) -> None:
    events.settled(node)
    log_at = len(events.log())
    reads, opens = events.fired(node, READS), events.fired(node, OPENS)
    window = 1.5 * SAFETY
    time.sleep(window)
    new_log = events.log()[log_at:]
    asked = events.bmc_reads(node, new_log)
    served = events.fired(node, READS) - reads
    assert all(why.startswith("safety read") for why in asked), asked
    assert served == len(asked), (served, asked)
    assert served <= window / SAFETY + 1
    assert len(events.streamed(node, new_log)) >= 3 * max(1, served)
    # a push subscription holds no request open: nothing new at the EventService
    assert events.fired(node, OPENS) == opens
    print(f"{served} BMC reads, {len(events.streamed(node, new_log))} passes from pushes")


@pytest.mark.timeout(900)
def test_a_restarted_conductor_subscribes_again_and_its_pushes_land(
    events: Events, node: Node, push_port: int
) -> None:
    events.settled(node)
    (before,) = ours(events.lab, node, push_port)
    # a crash: no exit handler runs, so the subscription stays on the BMC
    process = events.service.process
    assert process is not None
    os.killpg(process.pid, signal.SIGKILL)
    events.service.stop()
    left = ours(events.lab, node, push_port)
    assert [s["@odata.id"] for s in left] == [before["@odata.id"]]
    events.service.launch(timeout=180)
    events.until(
        lambda: any(
            s["@odata.id"] != before["@odata.id"] for s in ours(events.lab, node, push_port)
        ),
        60 + 10 * SYNC,
    )
    # the new conductor's listener has the old one's Destination: its first
    # subscription deleted what the dead one left before it was made
    (now,) = ours(events.lab, node, push_port)
    assert now["@odata.id"] != before["@odata.id"]
    log_at = len(events.log())
    events.until(lambda: bool(events.streamed(node, events.log()[log_at:])), 60 + 10 * SYNC)
    reads = events.fired(node, READS)
    log_at = len(events.log())
    target = "off" if events.power(node) == "power on" else "on"
    events.lab.power(node.lab_name, target)
    events.until(lambda: events.power(node) == f"power {target}", SAFETY)
    asked = events.bmc_reads(node, events.log()[log_at:])
    assert any(why.startswith("pushed news") for why in asked), asked  # the push landed
    assert events.fired(node, READS) - reads == len(asked)
    print(f"the killed conductor's subscription {before['@odata.id']} was deleted at restart")
