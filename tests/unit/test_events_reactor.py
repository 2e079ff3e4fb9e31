"""Event streams on one thread (issue 46, finding 7): :class:`bmaas.reactor.Reactor`.

Real Redfish stream code (``ServiceStream.read_ready`` over
``wirestream.Stream``) on socketpairs, the reactor stepped by the test on a
fake clock, opens run inline: many streams cost no thread; a silent stream
times out alone (BMCTimeout, the policy's back-off, its nodes lost), a
closed one is lost alone, an event cut in pieces across reads and frames
arrives whole, what came with the head is read at once, and a dropped or
re-opened stream leaves no descriptor behind."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.drivers.redfish.events import ServiceStream
from bmaas.drivers.redfish.framing import Reader
from bmaas.drivers.redfish.wirestream import Stream as WireStream
from bmaas.events import Backoff, News, Pacing
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCTimeout, BMCUnreachable
from bmaas.reactor import Reactor, fd_room
from bmaas.secrets import Secret

IDLE = 30.0
PACING = Pacing(open_deadline=5.0, idle=IDLE, backoff=Backoff(first=1.0), absent_retry=600.0)


def frame(system: str, state: str) -> bytes:
    event = {
        "Events": [
            {
                "MessageId": f"ResourceEvent.1.3.0.ResourcePowered{state}",
                "OriginOfCondition": {"@odata.id": f"/redfish/v1/Systems/{system}"},
            }
        ]
    }
    return b"data: " + json.dumps(event).encode() + b"\n\n"


class PairStream(ServiceStream):
    """A Redfish stream whose open is a socketpair (the BMC's end kept)."""

    #: every BMC end made (the fixture closes them)
    ends: list[socket.socket] = []

    def __init__(self, n: int, head: bytes = b"") -> None:
        super().__init__(
            f"http://bmc{n}", "u", Secret("p"), False, {f"/redfish/v1/Systems/{n}": f"n{n}"}
        )
        self.head = head
        self.bmc: socket.socket | None = None
        self.opens = 0
        self.fail_open: Exception | None = None

    def open(self, deadline: Deadline) -> None:
        self.close()
        self.opens += 1
        if self.fail_open is not None:
            raise self.fail_open
        ours, self.bmc = socket.socketpair()
        PairStream.ends.append(self.bmc)
        reader = Reader(ours, deadline, "test")
        reader.buf += self.head  # bytes that came with the head
        self._stream = WireStream(ours, reader, 200, "OK", {})


class Host:
    """The sink: what each stream told, in order."""

    def __init__(self) -> None:
        self.told: list[tuple[str, Any]] = []

    def opened(self, who: Any) -> None:
        self.told.append(("opened", who.key))

    def lost(self, who: Any, fault: Exception, wait: float, *, opening: bool) -> None:
        self.told.append(("lost", (who.key, type(fault).__name__, wait, opening)))

    def news(self, who: Any, trusted: Sequence[News], flood: Sequence[News]) -> None:
        for news in trusted:
            self.told.append(("news", (news.node, news.power)))

    def of(self, kind: str) -> list[Any]:
        return [what for k, what in self.told if k == kind]


@pytest.fixture
def rig() -> Iterator[tuple[Reactor, FakeClock, Host]]:
    clock = FakeClock(start=0.0)

    def inline(work: Callable[[], None]) -> None:
        return work()

    reactor = Reactor(clock=clock, submit=inline, spawn=lambda *a: pytest.fail("no thread"))
    yield reactor, clock, Host()
    reactor.close()
    while PairStream.ends:
        PairStream.ends.pop().close()


def settle(reactor: Reactor, steps: int = 4) -> None:
    for _ in range(steps):
        reactor.step(0.05)


def test_many_streams_one_thread_and_news_from_each(rig: tuple[Reactor, FakeClock, Host]) -> None:
    reactor, _, host = rig
    before = set(threading.enumerate())  # a count would see an earlier test's threads end
    streams = [PairStream(n) for n in range(200)]
    for s in streams:
        reactor.add(s, s, host, PACING)
    settle(reactor)
    assert len(host.of("opened")) == 200
    assert reactor.count() == 200
    for s in streams[::7]:
        assert s.bmc is not None
        s.bmc.sendall(frame(s.key.removeprefix("http://bmc"), "Off"))
    settle(reactor)
    assert sorted(host.of("news")) == sorted((f"n{n}", PowerState.OFF) for n in range(0, 200, 7))
    assert set(threading.enumerate()) <= before  # the test's own thread did it all


def test_a_silent_stream_times_out_alone(rig: tuple[Reactor, FakeClock, Host]) -> None:
    reactor, clock, host = rig
    # both keep alive (the other from its head on); the greeting alone is no promise
    quiet, talks = PairStream(1, b": greeting\n\n: keepalive\n\n"), PairStream(2, b": hi\n\n")
    for s in (quiet, talks):
        reactor.add(s, s, host, PACING)
    settle(reactor)
    for _ in range(2):  # the other keeps alive: a keepalive is a byte
        clock.advance(IDLE / 2)
        assert talks.bmc is not None
        talks.bmc.sendall(b": keepalive\n\n")
        settle(reactor)
    assert host.of("lost") == [("http://bmc1", "BMCTimeout", 1.0, False)]
    assert quiet.selectable() is None  # closed
    clock.advance(1.0)  # the back-off: opened again
    settle(reactor)
    assert quiet.opens == 2
    assert talks.opens == 1
    clock.advance(IDLE - 2.0)  # the other's idle limit counts from its last byte (t=30)
    settle(reactor)
    assert len(host.of("lost")) == 1
    assert host.of("opened").count("http://bmc1") == 2


def test_a_stream_that_never_sent_a_keepalive_may_be_silent_until_quiet(
    rig: tuple[Reactor, FakeClock, Host],
) -> None:
    """OpenBMC's bmcweb sends no keepalive: silence is what it sends at rest,
    so its stream is not dropped at ``idle`` (and opened again: some 36
    requests a node-hour) but at ``quiet``; one that sends a keepalive
    later is held to ``idle`` from then."""
    reactor, clock, host = rig
    pacing = Pacing(
        open_deadline=5.0,
        idle=IDLE,
        backoff=Backoff(first=1.0),
        absent_retry=600.0,
        quiet=10 * IDLE,
    )
    assert pacing.silence_limit(False) == 10 * IDLE
    assert pacing.silence_limit(True) == IDLE
    # bmcweb says nothing at all; hwlab greets with a comment at the start
    bmcweb, later = PairStream(1), PairStream(2, b": hwlab event stream\n\n")
    for s in (bmcweb, later):
        reactor.add(s, s, host, pacing)
    settle(reactor)
    for _ in range(4):  # 4 x 1.5 idle of silence: both held
        clock.advance(1.5 * IDLE)
        settle(reactor)
    assert host.of("lost") == []
    assert later.bmc is not None
    later.bmc.sendall(b": keepalive\n\n")  # t = 6 idle: a second comment, a promise from now on
    settle(reactor)
    clock.advance(IDLE)
    settle(reactor)
    assert host.of("lost") == [("http://bmc2", "BMCTimeout", 1.0, False)]
    clock.advance(4 * IDLE - 1.0)  # t = 11 idle less 1 s: past bmc1's limit (10 idle)
    settle(reactor)
    assert [lost[0] for lost in host.of("lost")] == ["http://bmc2", "http://bmc1"]
    assert bmcweb.opens == 1  # one open in 10 idle periods of silence


def test_a_closed_stream_is_lost_alone(rig: tuple[Reactor, FakeClock, Host]) -> None:
    reactor, _, host = rig
    gone, stays = PairStream(1), PairStream(2)
    for s in (gone, stays):
        reactor.add(s, s, host, PACING)
    settle(reactor)
    assert gone.bmc is not None
    assert stays.bmc is not None
    gone.bmc.close()
    settle(reactor)
    assert host.of("lost") == [("http://bmc1", "BMCUnreachable", 1.0, False)]
    stays.bmc.sendall(frame("2", "On"))
    settle(reactor)
    assert host.of("news") == [("n2", PowerState.ON)]


def test_an_event_in_pieces_across_reads_and_frames(rig: tuple[Reactor, FakeClock, Host]) -> None:
    reactor, _, host = rig
    s = PairStream(3)
    reactor.add(s, s, host, PACING)
    settle(reactor)
    wire = frame("3", "Off") + frame("3", "On")
    assert s.bmc is not None
    for at in range(0, len(wire), 7):  # 7 bytes at a time, each its own read
        s.bmc.sendall(wire[at : at + 7])
        reactor.step(0.05)
    settle(reactor)
    assert host.of("news") == [("n3", PowerState.OFF), ("n3", PowerState.ON)]
    assert host.of("lost") == []


def test_what_came_with_the_head_is_read_at_once(rig: tuple[Reactor, FakeClock, Host]) -> None:
    reactor, _, host = rig
    s = PairStream(4, head=frame("4", "Off"))
    reactor.add(s, s, host, PACING)
    settle(reactor)
    assert host.of("news") == [("n4", PowerState.OFF)]


def test_a_failed_open_waits_the_policys_time(rig: tuple[Reactor, FakeClock, Host]) -> None:
    reactor, clock, host = rig
    s = PairStream(5)
    s.fail_open = BMCUnreachable("refused", node="n5")
    reactor.add(s, s, host, PACING)
    settle(reactor)
    clock.advance(1.0)
    settle(reactor)
    assert host.of("lost") == [
        ("http://bmc5", "BMCUnreachable", 1.0, True),
        ("http://bmc5", "BMCUnreachable", 2.0, True),  # the back-off grows
    ]
    s.fail_open = BMCTimeout("slow", node="n5")
    clock.advance(2.0)
    settle(reactor)
    assert s.opens == 3


def test_a_host_bug_is_a_lost_stream_not_a_dead_reactor(
    rig: tuple[Reactor, FakeClock, Host],
) -> None:
    reactor, _, host = rig
    s, other = PairStream(6), PairStream(7)

    def broken(who: Any, trusted: Any, flood: Any) -> None:
        raise RuntimeError("a bug in the host")

    bad = Host()
    bad.news = broken  # type: ignore[method-assign]
    reactor.add(s, s, bad, PACING)
    reactor.add(other, other, host, PACING)
    settle(reactor)
    assert s.bmc is not None
    assert other.bmc is not None
    s.bmc.sendall(frame("6", "Off"))
    other.bmc.sendall(frame("7", "Off"))
    settle(reactor)
    assert bad.of("lost") == [("http://bmc6", "RuntimeError", 1.0, False)]
    assert host.of("news") == [("n7", PowerState.OFF)]


def test_a_dropped_stream_is_closed_and_forgotten(rig: tuple[Reactor, FakeClock, Host]) -> None:
    reactor, clock, host = rig
    s = PairStream(8)
    entry = reactor.add(s, s, host, PACING)
    settle(reactor)
    reactor.drop(entry)
    settle(reactor)
    assert s.selectable() is None
    assert reactor.count() == 0
    clock.advance(IDLE * 2)
    settle(reactor)
    assert host.of("lost") == []  # dropped is not lost


def test_the_open_file_limit_leaves_room() -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert fd_room(10) == 10
    assert fd_room(10**9) < soft  # what cannot fit is refused, not opened


def test_ironic_streams_share_the_reactor_no_thread_a_service() -> None:
    """The conductor's SSE streams are on its one reactor (made here, stepped
    by the test): no thread a service; news
    reaches the cache; a dropped listener is closed by the reactor."""
    from bmaas.driver_info import DriverInfo
    from bmaas.drivers.ironic.answers import NodeRef
    from bmaas.drivers.ironic.streams import Streams, fingerprint

    clock = FakeClock(start=0.0)
    spawned: list[str] = []
    made: dict[str, PairStream] = {}

    def stream_of(service: Any, nodes: dict[str, str]) -> PairStream:
        n = int(service.address.rsplit(":", 1)[1]) - 9000
        stream = made[service.key] = PairStream(n)
        stream.nodes = nodes  # the listener's mapping, shared
        return stream

    def inline(work: Callable[[], None]) -> None:
        work()

    streams = Streams(
        interval=60.0,
        stream_of=stream_of,
        clock=clock,
        reactor=Reactor(clock=clock, submit=inline, spawn=lambda *a: spawned.append("reactor")),
    )
    refs = []
    for n in range(50):
        raw = {
            "redfish_address": f"http://127.0.0.1:{9000 + n}",
            "redfish_username": "admin",
            "redfish_password": "pw",
            "redfish_system_id": f"/redfish/v1/Systems/{n}",
        }
        info = DriverInfo.parse(raw, required=("redfish_address",), node=f"u{n}")
        refs.append(NodeRef(f"u{n}", f"node-{n}", info, fingerprint(raw), "bmaas-redfish", ""))
        streams.answer(refs[-1])
    try:
        settle(streams._reactor)
        assert spawned == ["reactor"]  # one thread, none a service: all on the reactor
        assert streams._reactor is not None
        assert streams._reactor.count() == 50
        assert streams.summary()["up"] == 50
        target = made[next(iter(streams._listeners))]
        assert target.bmc is not None
        node = next(iter(target.nodes.values()))
        target.bmc.sendall(frame(next(iter(target.nodes)).rsplit("/", 1)[1], "Off"))
        settle(streams._reactor)
        assert streams._books[node].power is PowerState.OFF
        streams.close()
        assert all(s.selectable() is None for s in made.values())  # closed, by the reactor
    finally:
        while PairStream.ends:
            PairStream.ends.pop().close()
