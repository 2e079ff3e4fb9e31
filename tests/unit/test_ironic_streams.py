"""Redfish event streams inside Ironic's conductor (bmaas.drivers.ironic.streams
and .listener): which periodic reads the stream answers and which ask the
BMC, one listener per service, ownership and takeover, and the listener's
paced reconnects -- on fake streams on a reactor the test steps, a
FakeClock and the waits the listener is told (no real sleep, no thread). No Ironic
needed (tests/ironic/test_ironic_events.py drives the same through a real one)."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.driver_info import DriverInfo
from bmaas.drivers.ironic.listener import Listener, Service
from bmaas.drivers.ironic.streams import (
    HEALTH_WITH_POWER,
    SAFETY_INTERVAL,
    Answer,
    Miss,
    NodeRef,
    Streams,
    fingerprint,
)
from bmaas.drivers.redfish.events import PowerNews
from bmaas.events import Backoff, Pacing
from bmaas.fakes.clock import FakeClock
from bmaas.faults import (
    BMCAuthError,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    UnsupportedOperation,
)
from bmaas.reactor import Reactor
from tests.unit.stepped import Scripted, drive, reactor, recording

PASSWORD = "s3cret-pw"
INTERVAL = 60.0  # Ironic's sync interval in these tests
SAFETY = 600.0


class FakeStream(Scripted):
    """A service's stream: opens and reads as scripted; counts its opens."""

    def __init__(self, nodes: dict[str, str]) -> None:
        self.nodes = nodes
        self.opens: list[BaseException | None] = []
        #: None: the stream stays open, quiet
        self.reads: list[Sequence[PowerNews] | BaseException | None] = []
        self.opened = 0
        self.closed = 0

    @property
    def key(self) -> str:
        return "fake"

    def open(self, deadline: Deadline) -> None:
        assert deadline.left() > 0
        self.opened += 1
        outcome = self.opens.pop(0) if self.opens else None
        if outcome is not None:
            raise outcome

    def scripted(self) -> Sequence[PowerNews] | None:
        if not self.reads:
            raise BMCUnreachable("the BMC closed the event stream")
        item = self.reads.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self.closed += 1


@dataclasses.dataclass
class Rig:
    clock: FakeClock
    streams: Streams
    made: list[FakeStream]
    reactor: Reactor
    owned: set[str]
    why: list[str] = dataclasses.field(default_factory=list)

    def ask(self, node: NodeRef) -> Answer | None:
        """A periodic read: the stream's answer, or None (the BMC is read: why
        is kept in ``self.why``)."""
        found = self.streams.answer(node)
        if isinstance(found, Miss):
            self.why.append(found.why)
            return None
        return found

    def stream(self, i: int = -1) -> FakeStream:
        return self.made[i]

    def up(self, uuid: str) -> Listener:
        """Open the node's service's stream (as the reactor would)."""
        listener = self.streams._listeners[self.streams._books[uuid].service]
        self.streams.opened(listener)
        return listener

    def read(self, ref: NodeRef, power: PowerState) -> None:
        """A periodic read the stream did not answer: the BMC's, learned."""
        token = self.streams.reading(ref.uuid)
        self.streams.learned(ref.uuid, token, power)

    def news(self, uuid: str, *news: PowerNews, flood: Sequence[PowerNews] = ()) -> None:
        listener = self.streams._listeners[self.streams._books[uuid].service]
        self.streams.news(listener, list(news), list(flood))


@pytest.fixture
def rig() -> Iterator[Rig]:
    clock = FakeClock(start=0.0)
    made: list[FakeStream] = []
    stepped = reactor(clock)  # stepped only by the listener's tests
    owned: set[str] = set()

    def stream_of(service: Service, nodes: dict[str, str]) -> FakeStream:
        made.append(FakeStream(nodes))
        return made[-1]

    streams = Streams(
        safety=SAFETY,
        liveness=0,  # the liveness read's own tests: tests/unit/test_liveness.py
        interval=INTERVAL,
        stream_of=stream_of,
        owner=lambda ref: not owned or ref.uuid in owned,
        clock=clock,
        reactor=stepped,
    )
    yield Rig(clock, streams, made, stepped, owned)
    streams.close(timeout=0.0)


def ref(
    uuid: str, *, port: int = 8000, system: str | None = "1", password: str = PASSWORD
) -> NodeRef:
    raw: dict[str, Any] = {
        "redfish_address": f"http://127.0.0.1:{port}",
        "redfish_username": "admin",
        "redfish_password": password,
    }
    if system is not None:
        raw["redfish_system_id"] = f"/redfish/v1/Systems/{system}"
    info = DriverInfo.parse(raw, required=("redfish_address",), node=uuid)
    return NodeRef(uuid, f"node-{uuid}", info, fingerprint(raw), "bmaas-redfish", "")


def off(uuid: str, message: str = "ResourceEvent.1.0.ResourcePoweredOff") -> PowerNews:
    return PowerNews(uuid, message, PowerState.OFF)


def settled(rig: Rig, node: NodeRef, power: PowerState = PowerState.ON) -> None:
    """Registered, stream up, reconciled by one BMC read."""
    assert rig.ask(node) is None
    rig.up(node.uuid)
    assert rig.ask(node) is None  # the first pass after the open reads
    rig.read(node, power)


# -- which periodic reads the stream answers ----------------------------------------


def test_after_one_read_the_stream_answers_until_the_safety_read(rig: Rig) -> None:
    node = ref("a")
    settled(rig, node)
    answered = []
    for _ in range(12):  # one pass a minute: 10 answered, then the safety read
        rig.clock.advance(INTERVAL)
        found = rig.ask(node)
        answered.append(found is not None)
        if found is None:
            rig.read(node, PowerState.ON)
        else:
            assert found.power is PowerState.ON
            assert found.source == "read"
    assert answered == [True] * 9 + [False] + [True] * 2
    assert rig.streams.answered == 11
    assert rig.why[-1] == "safety read (last read 600 s ago)"


def test_a_console_power_off_is_answered_from_its_event_with_source_and_age(rig: Rig) -> None:
    node = ref("a")
    settled(rig, node)
    rig.clock.advance(5.0)
    rig.news("a", off("a"))
    rig.clock.advance(1.5)
    found = rig.ask(node)
    assert found is not None
    assert found.power is PowerState.OFF
    assert found.source == "event ResourceEvent.1.0.ResourcePoweredOff"
    assert found.age == pytest.approx(1.5)
    text = found.describe()
    assert "source: event ResourceEvent.1.0.ResourcePoweredOff, 1.5 s old" in text
    assert "BMC read 6.5 s ago" in text


def test_the_bmc_is_read_when_the_stream_cannot_vouch(rig: Rig) -> None:
    node = ref("a")
    assert rig.ask(node) is None  # registered: listener started, not up
    assert [lst.service.address for lst in rig.streams._listeners.values()] == [
        "http://127.0.0.1:8000"
    ]
    rig.read(node, PowerState.ON)  # read before the stream opened
    assert rig.ask(node) is None
    assert rig.why[-1] == "its event stream is down"
    listener = rig.up("a")
    assert rig.ask(node) is None  # that read predates the open: reconcile
    assert rig.why[-1] == "reconcile (the stream opened since its last read)"
    rig.read(node, PowerState.ON)
    assert rig.ask(node) is not None
    # news that names no state (ResourceChanged), a transition: read it
    for vague in (
        PowerNews("a", "ResourceEvent.1.0.ResourceChanged"),
        PowerNews("a", "ResourceEvent.1.0.ResourcePoweringOn", PowerState.POWERING_ON),
    ):
        rig.news("a", vague)
        assert rig.ask(node) is None
        rig.read(node, PowerState.ON)
        assert rig.ask(node) is not None
    # a power action ran: its next periodic read asks the BMC
    rig.streams.acted("a")
    assert rig.ask(node) is None
    rig.read(node, PowerState.ON)
    # the stream lost: every pass reads until it is back and reconciled
    rig.streams.lost(listener, BMCUnreachable("gone"), 1.0, opening=False)
    for _ in range(3):
        assert rig.ask(node) is None
        rig.read(node, PowerState.ON)
    rig.streams.opened(listener)
    assert rig.ask(node) is None
    rig.read(node, PowerState.ON)
    assert rig.ask(node) is not None


def test_news_that_lands_during_a_read_wins_over_the_read(rig: Rig) -> None:
    node = ref("a")
    settled(rig, node)
    rig.streams.acted("a")
    assert rig.ask(node) is None
    token = rig.streams.reading("a")  # the BMC read starts: still on
    rig.news("a", off("a"))  # meanwhile the power-off's event arrives
    rig.streams.learned("a", token, PowerState.ON)  # the read's stale answer
    assert rig.ask(node) is None  # not kept: read again
    rig.read(node, PowerState.OFF)
    found = rig.ask(node)
    assert found is not None
    assert found.power is PowerState.OFF


def test_a_flood_is_not_trusted_its_nodes_are_read(rig: Rig) -> None:
    node = ref("a")
    settled(rig, node)
    rig.news("a", flood=[off("a")])
    assert rig.streams.flooded == 1
    assert rig.ask(node) is None  # not off from untrusted news: read
    rig.read(node, PowerState.ON)
    found = rig.ask(node)
    assert found is not None
    assert found.power is PowerState.ON


def test_health_rides_with_a_streamed_power_answer_and_follows_its_events(rig: Rig) -> None:
    node = ref("a")
    settled(rig, node)
    assert rig.streams.health("a") == (False, None)  # that pass's power was the BMC's
    rig.streams.learned_health("a", "OK")  # the health read of the same pass
    assert rig.ask(node) is not None
    assert rig.streams.health("a") == (True, "OK")
    rig.news(
        "a", PowerNews("a", "ResourceEvent.1.0.ResourceStatusChangedWarning", health="Warning")
    )
    assert rig.ask(node) is not None  # health news needs no read
    assert rig.streams.health("a") == (True, "Warning")
    rig.clock.advance(HEALTH_WITH_POWER + 1)  # not this pass's power answer: read it
    assert rig.streams.health("a") == (False, None)


# -- one stream per service, on the conductor that owns the nodes -------------------


def test_one_listener_per_service_and_per_credentials(rig: Rig) -> None:
    for node in (ref("a", system="1"), ref("b", system="2"), ref("c", port=8001)):
        rig.ask(node)
    rig.ask(ref("d", system="3", password="other"))
    assert len(rig.made) == 3
    assert rig.made[0].nodes == {"/redfish/v1/Systems/1": "a", "/redfish/v1/Systems/2": "b"}
    assert rig.streams.summary()["streams"] == 3


def test_a_node_without_a_system_path_is_streamed_only_alone(rig: Rig) -> None:
    lone = ref("a", system=None)
    settled(rig, lone)
    assert rig.ask(lone) is not None
    rig.ask(ref("b", system="2"))  # a second system on that service
    assert rig.made[0].nodes == {"/redfish/v1/Systems/2": "b"}
    assert rig.ask(lone) is None  # nobody can tell its events apart: polled


def test_a_node_this_conductor_does_not_own_is_not_streamed(rig: Rig) -> None:
    rig.owned.add("mine")
    rig.ask(ref("theirs"))
    assert rig.made == []
    assert rig.streams.summary()["nodes"] == 0


def test_a_takeover_closes_the_old_stream_and_the_new_owner_subscribes(rig: Rig) -> None:
    node = ref("a")
    settled(rig, node)
    old = rig.stream()
    # the hash ring moves the node: this conductor's next sweep lets it go
    rig.owned.add("someone-else")
    rig.clock.advance(INTERVAL)
    rig.streams.sweep()
    assert rig.streams._listeners == {}
    rig.reactor.step(0.0)  # the reactor closes what was dropped
    assert old.closed >= 1  # the subscription ends with the connection
    # the conductor that now owns it subscribes at its first pass
    taker = Streams(
        safety=SAFETY,
        interval=INTERVAL,
        stream_of=lambda service, nodes: FakeStream(nodes),
        clock=rig.clock,
        reactor=reactor(rig.clock),
    )
    assert isinstance(taker.answer(node), Miss)
    assert [lst.service.address for lst in taker._listeners.values()] == ["http://127.0.0.1:8000"]
    taker.close(timeout=0.0)


def test_a_node_no_longer_read_leaves_and_its_stream_closes(rig: Rig) -> None:
    a, b = ref("a", system="1"), ref("b", system="2")
    settled(rig, a)
    rig.ask(b)
    # only b is read (a went to maintenance, or was deleted): a leaves once
    # three passes' worth of reads (3 x 2 nodes) went by, and expire seconds
    for _ in range(7):
        rig.clock.advance(INTERVAL)
        rig.ask(b)
    assert "a" not in rig.streams._books
    assert rig.made[0].nodes == {"/redfish/v1/Systems/2": "b"}
    for _ in range(4):
        rig.clock.advance(INTERVAL)
        rig.streams.sweep()
    assert rig.streams._listeners == {}
    rig.reactor.step(0.0)
    assert rig.stream().closed >= 1


def test_new_credentials_move_a_node_to_a_new_stream(rig: Rig) -> None:
    settled(rig, ref("a"))
    rig.ask(ref("a", password="rotated"))
    rig.reactor.step(0.0)
    assert len(rig.made) == 2
    assert rig.made[0].closed >= 1
    assert next(iter(rig.streams._listeners.values())).stream is rig.made[1]


def test_streams_are_bounded_beyond_which_nodes_are_polled(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.streams.max_streams = 1
    with caplog.at_level(logging.WARNING):
        rig.ask(ref("a", port=8000))
        rig.ask(ref("b", port=8001))
        rig.ask(ref("c", port=8002))
    assert len(rig.made) == 1
    assert sum("events_max_streams" in r.getMessage() for r in caplog.records) == 1


def test_close_ends_every_listener(rig: Rig) -> None:
    for port in (8000, 8001):
        rig.ask(ref(f"n{port}", port=port))
    listeners = list(rig.streams._listeners.values())
    rig.reactor.step(0.0)  # their streams open
    rig.streams.close(timeout=0.0)
    assert all(lst.own.is_set() for lst in listeners)
    assert all(s.closed >= 1 for s in rig.made)
    assert rig.reactor.count() == 0
    assert rig.ask(ref("late", port=8005)) is None
    assert len(rig.made) == 2  # nothing new after close


# -- the listener: paced, bounded, stopped ------------------------------------------


def run_listener(
    rig: Rig, script: Callable[[FakeStream], None], *, sleeps: int
) -> tuple[FakeStream, list[float]]:
    """Run node a's listener on the rig's reactor until it was told ``sleeps`` waits."""
    rig.streams.pacing = Pacing(open_deadline=5.0, backoff=Backoff(first=1.0, factor=2.0, cap=8.0))
    rig.ask(ref("a"))
    listener = rig.streams._listeners[rig.streams._books["a"].service]
    stream = listener.stream
    assert isinstance(stream, FakeStream)
    script(stream)
    waits = recording(rig.streams)
    drive(rig.reactor, rig.clock, waits, sleeps)
    return stream, waits


def test_reconnects_back_off_and_a_stream_that_stayed_up_starts_over(rig: Rig) -> None:
    def script(stream: FakeStream) -> None:
        stream.opens = [BMCUnreachable("refused"), BMCTimeout("slow"), None, None, None]
        stream.reads = [[], BMCUnreachable("closed"), [], BMCUnreachable("closed")]

    stream, waits = run_listener(rig, script, sleeps=6)
    # open fails twice (1, 2), opens, is lost (4), opens, is lost (8, the cap), then
    # opens and is closed at once, twice (8, 8): paced, never a tight loop
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert stream.opened == 6
    assert rig.streams.opened_count == 4
    assert rig.streams.faults == 6


def test_no_event_service_or_a_rejected_password_waits_absent_retry(rig: Rig) -> None:
    def script(stream: FakeStream) -> None:
        stream.opens = [
            UnsupportedOperation("no EventService"),
            BMCAuthError("the event stream refused the credentials"),
            BMCProtocolError("the stream is text/html"),
        ]

    stream, waits = run_listener(rig, script, sleeps=3)
    assert waits == [600.0, 600.0, 600.0]  # never a login a minute with a bad password
    assert stream.opened == 3


def test_news_reaches_the_cache_and_a_drop_ends_the_thread(rig: Rig) -> None:
    node = ref("a")

    def script(stream: FakeStream) -> None:
        stream.reads = [[], [off("a")]]

    rig.ask(node)
    rig.read(node, PowerState.ON)
    _stream, waits = run_listener(rig, script, sleeps=1)
    assert waits == [1.0]  # closed after the news: one back-off, then dropped
    book = rig.streams._books["a"]
    assert book.power is PowerState.OFF
    assert book.source == "event ResourceEvent.1.0.ResourcePoweredOff"


def test_a_long_stream_up_resets_the_back_off(rig: Rig) -> None:
    class Slow(FakeStream):
        def scripted(self) -> Sequence[PowerNews] | None:
            rig.clock.advance(30.0)  # each read returns after 30 s (keepalives)
            return super().scripted()

    rig.streams._stream_of = lambda service, nodes: Slow(nodes)  # type: ignore[method-assign]

    def script(stream: FakeStream) -> None:
        stream.opens = [BMCUnreachable("x"), BMCUnreachable("x"), BMCUnreachable("x")]
        stream.reads = [[], [], []]  # up for 90 s (> the 8 s cap), then closed

    _, waits = run_listener(rig, script, sleeps=5)
    assert waits == [1.0, 2.0, 4.0, 1.0, 1.0]


# -- no secret anywhere ---------------------------------------------------------------


def test_no_password_in_reprs_or_logs(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    node = ref("a")
    with caplog.at_level(logging.DEBUG):
        settled(rig, node)
        listener = rig.streams._listeners[rig.streams._books["a"].service]
        rig.streams.lost(listener, BMCUnreachable("refused"), 1.0, opening=True)
        rig.streams.opened(listener)
        rig.news("a", off("a"))
        rig.streams.close(timeout=0.0)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "http://127.0.0.1:8000" in text
    assert PASSWORD not in text
    assert PASSWORD not in repr(listener.service)
    assert PASSWORD not in repr(node)
    assert listener.service.key not in text


def test_safety_default_is_bmaas_syncs() -> None:
    import bmaas.events

    assert getattr(bmaas.events, "SAFETY_INTERVAL", SAFETY_INTERVAL) == SAFETY_INTERVAL
    with pytest.raises(ValueError, match="positive"):
        Streams(safety=0)


def test_the_sweeper_lets_go_of_streams_when_no_node_is_read_here_any_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The sync's reads sweep only while this conductor reads a streamed
    node; when every node moved away, the sweeper thread still closes their
    streams (and a sweep that fails is tried again next period)."""
    clock = FakeClock(start=0.0)
    stepped = reactor(clock)
    made: list[FakeStream] = []
    owned = {"a"}
    waits: list[float] = []

    def stream_of(service: Service, nodes: dict[str, str]) -> FakeStream:
        made.append(FakeStream(nodes))
        return made[-1]

    def sleep(stop: threading.Event, seconds: float) -> bool:
        waits.append(seconds)
        clock.advance(seconds)
        if len(waits) == 3:
            streams.close(timeout=0.0)
        return stop.is_set()

    asked: list[str] = []

    def owner(r: NodeRef) -> bool:
        asked.append(r.uuid)
        if len(asked) == 2:  # the first sweep's ring read fails (its database, say)
            raise RuntimeError("the hash ring could not be had")
        return r.uuid in owned

    streams = Streams(
        safety=SAFETY,
        liveness=0,  # the liveness read's own tests: tests/unit/test_liveness.py
        interval=INTERVAL,
        stream_of=stream_of,
        owner=owner,
        sleep=sleep,
        clock=clock,
        reactor=stepped,
    )
    assert isinstance(streams.answer(ref("a")), Miss)
    (listener,) = streams._listeners.values()
    made[0].reads = [None]  # it opens and stays open, quiet
    stepped.step(0.0)
    owned.clear()  # the hash ring gave it to another conductor; no read comes here
    with caplog.at_level(logging.ERROR):
        streams.run_sweeper()
    assert waits == [INTERVAL] * 3
    assert asked == ["a", "a", "a"]  # registered; the failed sweep; the next one
    assert "sweeping the event streams failed" in caplog.text
    assert "a" not in streams._books
    assert listener.own.is_set()
    assert made[0].closed >= 1


def test_how_loud_a_lost_stream_is_comes_from_the_policy_tables_stream_column(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """``late`` (no EventService, a refused password, a malformed stream): a
    lasting state of the BMC, INFO once until the stream opens again, DEBUG
    meanwhile; ``soon`` (unreachable, a timeout): a WARNING each time."""
    node = ref("a")
    rig.ask(node)
    listener = rig.streams._listeners[rig.streams._books["a"].service]
    faults = [
        (UnsupportedOperation("no EventService"), True),
        (UnsupportedOperation("no EventService"), True),
        (BMCAuthError("refused"), True),
        (BMCUnreachable("gone"), True),
        (BMCTimeout("slow"), False),
    ]
    with caplog.at_level(logging.DEBUG, logger="bmaas.drivers.ironic.streams"):
        for fault, opening in faults:
            rig.streams.lost(listener, fault, 1.0, opening=opening)
        rig.up("a")
        rig.streams.lost(listener, BMCProtocolError("not an Event"), 600.0, opening=False)
    said = [(r.levelname, r.getMessage().split(" (")[0]) for r in caplog.records]
    assert said == [
        ("INFO", "bmaas: no event stream at http://127.0.0.1:8000"),
        ("DEBUG", "bmaas: no event stream at http://127.0.0.1:8000"),
        ("DEBUG", "bmaas: no event stream at http://127.0.0.1:8000"),
        ("WARNING", "bmaas: event stream of http://127.0.0.1:8000 did not open"),
        ("WARNING", "bmaas: event stream of http://127.0.0.1:8000 lost"),
        ("INFO", "bmaas: event stream of http://127.0.0.1:8000 up"),
        ("INFO", "bmaas: event stream dropped at http://127.0.0.1:8000"),
    ]


def test_news_that_names_a_state_marks_its_node_changed_for_the_next_look(rig: Rig) -> None:
    """What bmaas.drivers.ironic.news records between passes: the nodes
    trusted news named, taken once; none while the fleet is at rest."""
    a, b = ref("a"), ref("b", system="2")
    settled(rig, a)
    settled(rig, b)
    assert rig.streams.changed() == set()  # at rest: nothing to look at
    rig.news("a", off("a"))
    rig.news(
        "b", PowerNews("b", "ResourceEvent.1.0.ResourceStatusChangedWarning", health="Warning")
    )
    assert rig.streams.changed() == {"a", "b"}
    assert rig.streams.changed() == set()  # taken
    rig.streams.again({"a", "gone"})  # a node the streams no longer know is dropped
    assert rig.streams.changed() == {"a"}
    # news that says nothing of the state, a flood, a push: the sync reads those
    rig.news("a", PowerNews("a", "ResourceEvent.1.0.ResourceChanged"), flood=[off("b")])
    rig.news("a", dataclasses.replace(off("a"), pushed=True))
    assert rig.streams.changed() == set()


def test_news_wakes_the_news_periodic_and_nothing_else_does(rig: Rig) -> None:
    """What bmaas.drivers.ironic.news waits on to record news as it comes
    (issue 46: a change waited up to [bmaas]events_apply_interval for the
    next look): trusted news that names a state or health moves the mark;
    news the sync must read for, nodes given back for later and a fleet at
    rest do not, so a locked node is never looked at in a loop."""
    a, b = ref("a"), ref("b", system="2")
    settled(rig, a)
    settled(rig, b)
    mark = rig.streams.news_mark()
    assert rig.streams.wait_news(mark, 0.0) is False  # at rest
    rig.news("a", PowerNews("a", "ResourceEvent.1.0.ResourceChanged"), flood=[off("b")])
    rig.news("a", dataclasses.replace(off("a"), pushed=True))
    rig.streams.again({"a", "b"})
    assert rig.streams.news_mark() == mark
    assert rig.streams.wait_news(mark, 0.0) is False
    rig.news("a", off("a"), off("a", "ResourceEvent.1.0.ResourcePoweredOff.2"))
    assert rig.streams.news_mark() == mark + 1  # one batch, one wake-up
    assert rig.streams.wait_news(mark, 0.0) is True  # came before the wait: not missed
    assert rig.streams.wait_news(mark + 1, 0.0) is False


def test_a_waiting_news_periodic_is_woken_by_news_and_by_close(rig: Rig) -> None:
    a = ref("a")
    settled(rig, a)
    woke: list[bool] = []

    def wait(mark: int) -> threading.Thread:
        thread = threading.Thread(target=lambda: woke.append(rig.streams.wait_news(mark, 60.0)))
        thread.start()
        return thread

    waiter = wait(rig.streams.news_mark())
    rig.news("a", off("a"))
    waiter.join(10.0)  # bounded; woken at once, far inside its 60 s
    assert not waiter.is_alive()
    assert woke == [True]
    waiter = wait(rig.streams.news_mark())
    rig.streams.close(timeout=1.0)
    waiter.join(10.0)
    assert not waiter.is_alive()
    assert woke == [True, False]


def test_vouched_is_the_passes_answer_less_the_reads_that_probe_the_api(rig: Rig) -> None:
    node = ref("a")
    settled(rig, node)
    rig.streams.learned_health("a", "OK")
    rig.news("a", off("a"))
    while rig.ask(node) is not None:  # a pass a minute until one would read the BMC (safety)
        rig.clock.advance(INTERVAL)
    assert rig.why[-1].startswith(("safety read", "liveness read"))  # the news stands
    found = rig.streams.vouched("a", node.fingerprint)
    assert found is not None
    assert found.power is PowerState.OFF
    assert rig.streams.health("a") == (True, "OK")  # rides with it, as with a pass's answer
    assert rig.streams.vouched("a", "another driver_info") is None
    assert rig.streams.vouched("unknown", node.fingerprint) is None
    rig.streams.acted("a")  # a power action since (one the BMC took and has not confirmed)
    assert rig.streams.vouched("a", node.fingerprint) is None


def test_pushed_news_has_a_node_read_at_most_once_a_window(rig: Rig) -> None:
    """Issue 46: whoever knows a Context can POST Events without end, and
    each makes the node's next periodic read ask its BMC. However short
    Ironic's sync interval (a pass a second here), a node is read for pushed
    news at most once a window (:meth:`Pacing.look_at`, as ``bmaas
    sync``'s): the news within it waits for the first pass after its edge;
    another node's news is not held back by the first's."""
    a, b = ref("a"), ref("b", port=8001)  # two services: b's open is not a's
    settled(rig, a)
    settled(rig, b)
    every = rig.streams.pacing.look_every
    reads: dict[str, list[float]] = {"a": [], "b": []}
    start = rig.clock()
    for second in range(int(3 * every)):  # a forged Event about a every second
        rig.news("a", dataclasses.replace(off("a"), pushed=True))
        if second == 5:
            rig.news("b", dataclasses.replace(off("b"), pushed=True))
        for node in (a, b):  # Ironic's pass
            found = rig.ask(node)
            if found is None:
                reads[node.uuid].append(rig.clock() - start)
                rig.read(node, PowerState.ON)
            else:
                assert found.power is PowerState.ON  # the BMC's last word, not the POST's
        rig.clock.advance(1.0)
    assert reads == {"a": [0.0, every, 2 * every], "b": [5.0]}
    assert rig.streams.pushed == int(3 * every) + 1


def test_a_pass_longer_than_expire_keeps_every_stream_it_opened(rig: Rig) -> None:
    """10,000 nodes on one conductor (2 cores): the first pass opened some
    700 streams a minute, so a node read at its start was not read again
    for 15 minutes, far past ``expire`` (three 60 s intervals). It must not
    leave before the pass comes back to it: each stream was closed and
    opened again at the node's next read, every pass, for ever (10,314
    closes in 17 minutes). Here 20 nodes, one read every 20 s: a pass of
    400 s, twice over; every service opened once, none closed."""
    nodes = [ref(f"n{i:02d}", port=8000 + i) for i in range(20)]
    for _ in range(2):
        for node in nodes:
            rig.clock.advance(20.0)
            rig.ask(node)
            rig.streams.sweep()
    assert len(rig.streams._books) == 20
    assert len(rig.made) == 20  # one stream a service, opened once
    assert all(s.closed == 0 for s in rig.made)
    # when the sync stops reading a node, it still leaves: three passes'
    # worth of reads of the others later, and expire seconds
    for _ in range(3):
        for node in nodes[1:]:
            rig.clock.advance(20.0)
            rig.ask(node)
            rig.streams.sweep()
    assert "n00" not in rig.streams._books
    assert len(rig.streams._books) == 19
