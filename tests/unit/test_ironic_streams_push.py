"""Push subscriptions inside Ironic's conductor (issue 37): the conductor's
streams (bmaas.drivers.ironic.streams) with ``[bmaas]events_listen``'s
listener, each service subscribed with an EventDestination whose Events the
BMC POSTs to it (bmaas.drivers.ironic.listener.push_streams).

Against tests/unit/test_redfish_push.py's tiny Redfish service (it records
every request and POSTs Events as a BMC does) and a real PushListener on
127.0.0.1, a free port; the subscription rides the streams' reactor (its
thread real: a pushed body wakes it through the stream's inbox), waited on
through events, never slept on; the streams' clock is a FakeClock (no
safety read comes due). No Ironic needed
(tests/ironic/test_ironic_events_push.py runs the same in a real one)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from bmaas.driver import PowerState
from bmaas.driver_info import DriverInfo
from bmaas.drivers.ironic.listener import Listener, push_streams
from bmaas.drivers.ironic.streams import Answer, Miss, NodeRef, Streams, fingerprint
from bmaas.drivers.redfish.push import PushListener, PushStream
from bmaas.events import News
from bmaas.fakes.clock import FakeClock
from bmaas.listenspec import host_port
from tests.unit.test_redfish_push import OFF, SUBS, Service, _post, serving

PASSWORD = "pw-Push-ironic-1"
#: seconds any wait on the listener thread may take (a hang guard, not a timing)
WAIT = 10.0


class Watched(Streams):
    """Streams that say when their listener thread opened and brought news."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.up_event = threading.Event()
        self.news_event = threading.Event()
        self.taken = threading.Condition()

    def opened(self, listener: Listener) -> None:
        super().opened(listener)
        self.up_event.set()

    def news(self, listener: Listener, trusted: Sequence[News], flood: Sequence[News]) -> None:
        super().news(listener, trusted, flood)
        if trusted:
            self.news_event.set()
        with self.taken:
            self.taken.notify_all()

    def pushed_at_least(self, count: int) -> bool:
        """Wait (at most WAIT s) until ``count`` pushed Events were taken."""
        with self.taken:
            return self.taken.wait_for(lambda: self.pushed >= count, WAIT)


def ref(url: str, uuid: str = "a") -> NodeRef:
    raw: dict[str, Any] = {
        "redfish_address": url,
        "redfish_username": "admin",
        "redfish_password": PASSWORD,
        "redfish_system_id": "/redfish/v1/Systems/1",
    }
    info = DriverInfo.parse(raw, required=("redfish_address",), node=uuid)
    return NodeRef(uuid, f"node-{uuid}", info, fingerprint(raw), "bmaas-redfish", "")


@pytest.fixture
def push() -> Iterator[PushListener]:
    listener = PushListener("127.0.0.1", 0)
    yield listener
    listener.close()


def test_a_pushed_event_makes_the_next_read_ask_the_bmc_and_a_moved_node_lets_go(
    push: PushListener,
) -> None:
    service = Service(sse=True)  # SSE offered: push preferred all the same
    owned = {"a"}
    with serving(service) as url:
        streams = Watched(
            safety=600.0,
            interval=60.0,
            stream_of=push_streams(push, prefer=True),
            owner=lambda r: r.uuid in owned,
            clock=FakeClock(start=0.0),
        )
        try:
            node = ref(url)
            assert isinstance(streams.answer(node), Miss)  # registered: its listener starts
            assert streams.up_event.wait(WAIT)
            listener = streams._listeners[streams._books["a"].service]
            assert isinstance(listener.stream, PushStream)
            assert listener.stream.mode == "push"
            assert listener.reactor is not None  # no thread of its own
            (sub,) = service.subscriptions.values()
            assert sub["Destination"] == push.url
            # the first pass after the open reads the BMC (reconcile), then the
            # stream answers
            assert isinstance(streams.answer(node), Miss)
            streams.learned("a", streams.reading("a"), PowerState.ON)
            found = streams.answer(node)
            assert isinstance(found, Answer)
            assert found.power is PowerState.ON
            # the console powers it off: the BMC POSTs the Event to the conductor;
            # a POST proves only that its sender knows the Context, so the
            # next periodic read asks the BMC (issue 46, finding 5)
            assert service.post_event(OFF) == 204
            assert streams.news_event.wait(WAIT)
            found = streams.answer(node)
            assert isinstance(found, Miss), found
            assert found.why.startswith("pushed news")
            streams.learned("a", streams.reading("a"), PowerState.OFF)  # what the BMC says
            found = streams.answer(node)
            assert isinstance(found, Answer), found
            assert (found.power, found.source) == (PowerState.OFF, "read")
            assert (push.received, push.refused, streams.pushed) == (1, 0, 1)
            # the hash ring moves the node to another conductor: at the sweep
            # its stream is dropped here; the reactor closes it and the push
            # listener's pool deletes the subscription
            owned.clear()
            deleted = threading.Event()
            later = push.later
            push.later = lambda work: later(lambda: (work(), deleted.set()))  # type: ignore[method-assign]
            streams.sweep(force=True)
            assert "a" not in streams._books
            assert deleted.wait(WAIT)
            assert service.subscriptions == {}
            assert service.requests[-1] == ("DELETE", f"{SUBS}/1")
            # an Event still POSTed with the old Context is refused
            assert _post(push.url, {**OFF, "Context": sub["Context"]}) == 403
        finally:
            streams.close(timeout=WAIT)
    assert [r for r in service.requests if r[0] == "POST"] == [("POST", SUBS)]


def test_without_push_preferred_a_service_with_sse_streams_it(push: PushListener) -> None:
    service = Service(sse=True)
    with serving(service) as url:
        stream_of = push_streams(push, prefer=False)
        node = ref(url)
        stream = stream_of(
            _service_of(node),
            {"/redfish/v1/Systems/1": "a"},
        )
        assert isinstance(stream, PushStream)
        assert not stream.prefer_push
    assert service.requests == []  # nothing asked until it opens


def _service_of(node: NodeRef) -> Any:
    from bmaas.drivers.ironic.listener import Service as StreamService

    found = StreamService.of(node.info)
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8789", ("127.0.0.1", 8789)),
        ("[::1]:0", ("::1", 0)),
        (" 10.0.0.5:80 ", ("10.0.0.5", 80)),
    ],
)
def test_host_port_reads_host_and_port(text: str, expected: tuple[str, int]) -> None:
    assert host_port(text) == expected


@pytest.mark.parametrize(
    "text", ["8789", ":8789", "host:", "host:http", "host:70000", "h:\u0665", "h:\u00b2"]
)
def test_host_port_refuses_what_is_not_host_colon_port(text: str) -> None:
    """``[bmaas]events_listen`` is read by bmaas.listenspec, as ``bmaas sync
    --events-listen`` is (one way: the option's check and the listener's)."""
    with pytest.raises(ValueError, match="must be HOST:PORT"):
        host_port(text)


def test_a_forged_event_makes_one_bmc_read_and_answers_nothing(push: PushListener) -> None:
    """Anyone who can read the BMC can read the subscription's Context; ten
    POSTs with it saying "off" for a running node, before the next periodic
    read: that read asks the BMC (one read for the ten), the BMC says on,
    and on is what the stream answers after it."""
    service = Service()  # no SSE: a push subscription
    with serving(service) as url:
        streams = Watched(
            safety=600.0,
            interval=60.0,
            stream_of=push_streams(push, prefer=False),
            clock=FakeClock(start=0.0),
        )
        try:
            node = ref(url)
            assert isinstance(streams.answer(node), Miss)
            assert streams.up_event.wait(WAIT)
            streams.learned("a", streams.reading("a"), PowerState.ON)  # the reconciling read
            assert isinstance(streams.answer(node), Answer)
            (sub,) = service.subscriptions.values()
            for _ in range(10):  # the forger: the Context read off the BMC
                assert _post(push.url, {**OFF, "Context": sub["Context"]}) == 204
            assert streams.pushed_at_least(10)
            reads = 0
            for _ in range(3):  # three periodic reads
                found = streams.answer(node)
                if isinstance(found, Miss):
                    reads += 1
                    streams.learned("a", streams.reading("a"), PowerState.ON)  # the BMC's word
                else:
                    assert found.power is PowerState.ON
            assert reads == 1
        finally:
            streams.close(timeout=WAIT)
