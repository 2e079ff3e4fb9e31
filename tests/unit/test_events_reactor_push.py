"""Push subscriptions on the streams' reactor (issue 46, finding 7): no
thread a subscription. Real :class:`~bmaas.drivers.redfish.push.PushStream`
code (its inbox, check and close), the BMC's requests faked, the reactor
stepped by the test on a fake clock with opens inline: a pushed body wakes
the reactor and becomes news marked ``pushed``; a burst is one wake; a
quiet subscription is never timed out like a silent SSE stream but checked
every ``verify_every`` seconds on the pool, and a forgotten one (404) is
lost and made again; more bodies than the inbox holds ask for every node;
a closed subscription's DELETE leaves the reactor's thread."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.drivers.redfish.events import ServiceStream
from bmaas.drivers.redfish.push import OVERFLOW, PushStream
from bmaas.drivers.redfish.wire import Answer
from bmaas.events import Backoff, Pacing
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCUnreachable
from bmaas.reactor import Inbox, Reactor
from bmaas.secrets import Secret
from tests.unit.test_events_reactor import Host

IDLE = 30.0
VERIFY = 3600.0
PACING = Pacing(open_deadline=5.0, idle=IDLE, backoff=Backoff(first=1.0), absent_retry=600.0)


class Listener:
    """The push listener as a stream sees it; ``later`` runs inline, noted."""

    url = "http://127.0.0.1:1/bmaas/events"

    def __init__(self) -> None:
        self.sinks: dict[str, Callable[[str], None]] = {}
        self.later_thread: list[str] = []

    def register(self, token: str, sink: Callable[[str], None]) -> None:
        self.sinks[token] = sink

    def unregister(self, token: str) -> None:
        self.sinks.pop(token, None)

    def later(self, work: Callable[[], None]) -> None:
        self.later_thread.append(threading.current_thread().name)
        work()


class Subscribed(PushStream):
    """A push subscription whose BMC is a list of requests."""

    def __init__(self, n: int, listener: Listener) -> None:
        sse = ServiceStream(
            f"http://bmc{n}", "u", Secret("p"), False, {f"/redfish/v1/Systems/{n}": f"n{n}"}
        )
        super().__init__(sse, listener, prefer_push=True, verify_every=VERIFY)  # type: ignore[arg-type]
        self.requests: list[str] = []
        self.forgotten = False

    def _subscribe(self, deadline: Deadline) -> None:  # the POST, without a BMC
        self.requests.append("POST")
        self.listener.register(self._token, self._inbox.put)
        self._location = "/redfish/v1/EventService/Subscriptions/1"

    def _request(
        self, method: str, path: str, body: Any, deadline: Deadline, started: float
    ) -> Answer:
        self.requests.append(method)
        if self.forgotten and method == "GET":
            raise self.sse.fail(BMCUnreachable, "the BMC forgot the subscription", started)
        return Answer(200, "OK", {}, b"{}")

    def push(self, state: str) -> None:
        body = {
            "Context": self._token,
            "Events": [
                {
                    "MessageId": f"ResourceEvent.1.3.0.ResourcePowered{state}",
                    "OriginOfCondition": {"@odata.id": f"/redfish/v1/Systems/{self.key[10:]}"},
                }
            ],
        }
        self.listener.sinks[self._token](json.dumps(body))  # type: ignore[attr-defined]


@pytest.fixture
def rig() -> Iterator[tuple[Reactor, FakeClock, Host, Listener]]:
    clock = FakeClock(start=0.0)

    def inline(work: Callable[[], None]) -> None:
        return work()

    reactor = Reactor(clock=clock, submit=inline, spawn=lambda *a: pytest.fail("no thread"))
    yield reactor, clock, Host(), Listener()
    reactor.close()


def settle(reactor: Reactor) -> None:
    for _ in range(4):
        reactor.step(0.01)


def pushed(host: Host) -> list[tuple[str, PowerState | None]]:
    return host.of("news")


def test_pushed_bodies_wake_the_reactor_no_thread_a_subscription(
    rig: tuple[Reactor, FakeClock, Host, Listener],
) -> None:
    reactor, _, host, listener = rig
    before = set(threading.enumerate())  # a count would see an earlier test's threads end
    streams = [Subscribed(n, listener) for n in range(300)]
    for s in streams:
        reactor.add(s, s, host, PACING)
    settle(reactor)
    assert len(host.of("opened")) == 300
    assert isinstance(streams[0].selectable(), Inbox)
    calls: list[int] = []
    read_ready = streams[7].read_ready
    streams[7].read_ready = lambda: calls.append(1) or read_ready()  # type: ignore[method-assign,func-returns-value]
    for s in streams[::7]:
        s.push("Off")
    streams[7].push("On")  # a burst: one wake, one read of both
    settle(reactor)
    expected = [(f"n{n}", PowerState.OFF) for n in range(0, 300, 7)] + [("n7", PowerState.ON)]
    assert sorted(pushed(host)) == sorted(expected)
    assert calls == [1]
    assert set(threading.enumerate()) <= before  # the test's own thread did it all


def test_a_quiet_subscription_is_checked_not_timed_out(
    rig: tuple[Reactor, FakeClock, Host, Listener],
) -> None:
    reactor, clock, host, listener = rig
    s = Subscribed(1, listener)
    reactor.add(s, s, host, PACING)
    settle(reactor)
    clock.advance(IDLE * 10)  # far past an SSE stream's idle limit
    settle(reactor)
    assert host.of("lost") == []
    assert s.requests == ["POST"]
    clock.advance(VERIFY)
    settle(reactor)
    assert s.requests == ["POST", "GET"]  # one check, still there
    s.forgotten = True  # the BMC rebooted and forgot it
    clock.advance(VERIFY)
    settle(reactor)
    assert host.of("lost") == [("http://bmc1", "BMCUnreachable", 1.0, False)]
    s.forgotten = False
    clock.advance(1.0)  # the back-off: subscribed again
    settle(reactor)
    assert s.requests[-1] == "POST"
    assert host.of("opened") == ["http://bmc1", "http://bmc1"]


def test_an_overflowing_inbox_asks_for_every_node(
    rig: tuple[Reactor, FakeClock, Host, Listener],
) -> None:
    reactor, _, host, listener = rig
    s = Subscribed(2, listener)
    s.nodes["/redfish/v1/Systems/3"] = "n3"
    reactor.add(s, s, host, PACING)
    settle(reactor)
    for _ in range(s._inbox.cap + 1):
        s.push("Off")
    got = s.read_ready()
    assert got is not None
    assert sorted((n.node, n.message_id, n.pushed) for n in got) == [
        ("n2", OVERFLOW, True),
        ("n3", OVERFLOW, True),
    ]


def test_a_closed_subscription_is_deleted_off_the_reactors_thread(
    rig: tuple[Reactor, FakeClock, Host, Listener],
) -> None:
    reactor, _, host, listener = rig
    s = Subscribed(4, listener)
    entry = reactor.add(s, s, host, PACING)
    settle(reactor)
    reactor.drop(entry)
    settle(reactor)
    assert s.requests == ["POST", "DELETE"]
    assert listener.later_thread == [threading.current_thread().name]  # through later()
    assert listener.sinks == {}
    assert s.selectable() is None
