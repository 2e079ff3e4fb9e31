"""Events feed the sync: the SSE parser, the news in an Event, and the
watch's subscription, reconnect, safety-net and flood logic -- on fake
streams on a reactor the test steps, a fake clock and the waits the watch
is told (no real sleep, wire calls counted)."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.drivers.redfish.events import PowerNews, SSEParser, news_of, services
from bmaas.events import SAFETY_INTERVAL, Applied, Backoff, EventWatch, TokenBucket
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCTimeout, BMCUnreachable, UnsupportedOperation
from bmaas.liveness import LIVENESS_INTERVAL
from bmaas.provision.cancel import CancelToken
from tests.unit.stepped import Scripted, drive, reactor, recording

# -- the SSE parser --------------------------------------------------------------


def test_frames_split_anywhere_with_any_line_end_comments_and_multi_line_data() -> None:
    wire = (
        b": hwlab event stream\r\n\r\n"
        b'id: 7\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
        b"event: ping\rdata: x\r\r"
        b"retry: 2500\n: keepalive\n\n"
        b"data: last\n\n"
    )
    parser = SSEParser()
    messages = []
    for i in range(len(wire)):  # one byte at a time: a CR may be half a CRLF
        messages += parser.feed(wire[i : i + 1])
    assert [(m.data, m.event, m.id) for m in messages] == [
        ('{"a":\n1}', "message", "7"),
        ("x", "ping", "7"),
        ("last", "message", "7"),
    ]
    assert parser.last_id == "7"
    assert parser.retry == 2.5


def test_a_frame_that_never_ends_is_refused() -> None:
    parser = SSEParser(max_frame=64)
    with pytest.raises(ValueError, match="longer than 64"):
        parser.feed(b"data: " + b"x" * 100)


# -- the news in an Event ------------------------------------------------------------


def _event(*records: dict[str, Any]) -> str:
    return json.dumps({"@odata.type": "#Event.v1_7_0.Event", "Events": list(records)})


def _record(message: str, origin: str, stamp: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"MessageId": message, "OriginOfCondition": {"@odata.id": origin}}
    if stamp:
        out["EventTimestamp"] = stamp
    return out


def test_dmtf_and_ilo_power_messages_health_and_news_without_a_state() -> None:
    nodes = {"/redfish/v1/Systems/a": "node-a", "/redfish/v1/Systems/b": "node-b"}
    data = _event(
        _record("ResourceEvent.1.3.0.ResourcePoweredOff", "/redfish/v1/Systems/a",
                "2026-01-01T00:00:01.500+00:00"),
        _record("iLOEvents.2.1.ServerPoweredOn", "/redfish/v1/Systems/b/"),
        _record("ResourceEvent.1.3.0.ResourcePoweringOn", "/redfish/v1/Systems/a"),
        _record("ResourceEvent.1.3.0.ResourceStatusChangedWarning", "/redfish/v1/Systems/b"),
        _record("ResourceEvent.1.3.0.ResourceChanged", "/redfish/v1/Systems/a/Bios"),
        _record("ResourceEvent.1.3.0.ResourcePoweredOff", "/redfish/v1/Systems/other"),
        _record("ResourceEvent.1.3.0.ResourcePoweredOff", "/redfish/v1/Chassis/1"),
    )  # fmt: skip
    news = news_of(data, nodes)
    assert [(n.node, n.power, n.health) for n in news] == [
        ("node-a", PowerState.OFF, None),
        ("node-b", PowerState.ON, None),
        ("node-a", PowerState.POWERING_ON, None),
        ("node-b", None, "Warning"),
    ]  # a's ResourceChanged (its Bios) rides with a's power news: no read of its own
    assert news[0].at == 1767225601.5
    # the one node of a single-system service takes any system's news
    assert news_of(data, {"*": "solo"})[0].node == "solo"
    changed = _event(_record("ResourceEvent.1.3.0.ResourceChanged", "/redfish/v1/Systems/a"))
    assert [(n.node, n.power) for n in news_of(changed, nodes)] == [("node-a", None)]
    with pytest.raises(ValueError, match="not a Redfish Event"):
        news_of("[]", nodes)


@dataclasses.dataclass
class _Record:
    name: str
    driver_info: dict[str, Any]
    driver: str = "redfish"


def test_services_group_nodes_by_service_and_leave_out_what_they_cannot_route() -> None:
    info = {"redfish_username": "u", "redfish_password": "Sekr3t-pw"}
    A = "/redfish/v1/Systems/a"  # noqa: N806
    records = [
        _Record("a", {**info, "redfish_address": "http://h:1", "redfish_system_id": A}),
        _Record("b", {**info, "redfish_address": "http://h:1/", "redfish_system_id": "b"}),
        _Record("c", {**info, "redfish_address": "http://h:1"}),
        _Record("d", {**info, "redfish_address": "http://h:2"}),
        _Record("e", {**info, "redfish_address": "http://h:3", "redfish_password": "${NOPE_X}"}),
    ]  # fmt: skip
    streams, left_out = services(records, environ={})
    by_key = {s.key: s.nodes for s in streams}
    assert by_key == {
        "http://h:1": {"/redfish/v1/Systems/a": "a", "/redfish/v1/Systems/b": "b"},
        "http://h:2": {"*": "d"},
    }
    assert set(left_out) == {"c", "e"}
    assert "Sekr3t" not in repr(streams)  # the password never shows


# -- the watch -------------------------------------------------------------------


class FakeStream(Scripted):
    """A scripted stream: each open takes the next outcome; reads hand out
    the news batches, then the BMC closes it."""

    def __init__(self, key: str, nodes: dict[str, str], script: list[Any]) -> None:
        self.key, self.nodes, self.script = key, nodes, script
        self.opens = 0
        self.reads = 0
        self.closed = 0
        self.batches: list[Sequence[PowerNews]] = []
        self.on_empty: Any = None

    def open(self, deadline: Deadline) -> None:
        self.opens += 1
        outcome = self.script.pop(0) if self.script else BMCUnreachable("gone")
        if isinstance(outcome, Exception):
            raise outcome
        self.batches = list(outcome)

    def scripted(self) -> Sequence[PowerNews]:
        self.reads += 1
        if self.batches:
            return self.batches.pop(0)
        if self.on_empty is not None:
            self.on_empty()
        raise BMCUnreachable("the BMC closed the event stream")

    def close(self) -> None:
        self.closed += 1


def _watch(stream: FakeStream, sleeps: list[float], stop_after: int, **kw: Any) -> EventWatch:
    """A watch of ``stream``, run until it was told ``stop_after`` waits
    (``sleeps``), the clock moved past each but the last; then closed."""
    clock = kw.pop("clock", FakeClock())
    stepped = reactor(clock)
    watch = EventWatch(
        streams_of=lambda driver: lambda records: ([stream], {}),
        clock=clock,
        wall=lambda: 1000.0,
        reactor=stepped,
        **kw,
    )
    waits = recording(watch)
    watch.watch([_Record("n1", {})])
    drive(stepped, clock, waits, stop_after)
    watch.close()
    sleeps.extend(waits)
    return watch


def test_reconnects_are_paced_and_bounded_by_the_cap() -> None:
    clock = FakeClock()
    news = [[PowerNews("n1", "x.ResourcePoweredOn", PowerState.ON)]]
    script = [BMCUnreachable("refused"), BMCTimeout("slow"), news, BMCUnreachable("x")]
    stream = FakeStream("svc", {"*": "n1"}, script)
    sleeps: list[float] = []
    watch = _watch(stream, sleeps, stop_after=5, clock=clock, backoff=Backoff(1, 2, 30))
    # refused, slow: 1, 2; up then closed: 4; refused, refused: 8, 16
    assert sleeps == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert stream.opens == 5
    assert watch.opened_count == 1
    assert watch.pending() == 1


def test_a_stream_that_stayed_up_longer_than_the_cap_starts_the_back_off_over() -> None:
    clock = FakeClock()
    stream = FakeStream("svc", {"*": "n1"}, [BMCUnreachable("a"), BMCUnreachable("b"), [], []])
    stream.on_empty = lambda: clock.advance(45.0)  # each stream stays up 45 s > cap 30 s
    sleeps: list[float] = []
    watch = _watch(stream, sleeps, stop_after=4, clock=clock, backoff=Backoff(1, 2, 30))
    assert sleeps == [1.0, 2.0, 1.0, 1.0]
    assert watch.opened_count == 2


def test_a_service_without_events_is_asked_again_only_after_absent_retry() -> None:
    stream = FakeStream("svc", {"*": "n1"}, [UnsupportedOperation("no EventService")] * 3)
    sleeps: list[float] = []
    watch = _watch(stream, sleeps, stop_after=2, absent_retry=600.0)
    assert sleeps == [600.0, 600.0]
    assert stream.opens == 2
    assert not watch.up("n1")
    assert watch.to_read(["n1"], 0.0) == ["n1"]  # polled as before


def test_a_streamed_node_is_read_at_reconnect_then_once_its_last_read_is_safety_old() -> None:
    """The safety net is a time bound on the sync's clock, not a count of
    passes: passes every 60 s, safety 300 s -> read at 0, 300, 600 s."""
    watch = EventWatch(safety=300.0, liveness=0, streams_of=lambda d: None)
    watch._nodes["n1"] = _node()
    watch._mark(["n1"], up=True)
    passes = [60.0 * p for p in range(12)]
    read = [t for t in passes if "n1" in watch.to_read(["n1", "ipmi-node"], t)]
    assert read == [0.0, 300.0, 600.0]  # the reconciling read, then every 300 s
    assert watch.to_read(["ipmi-node"], 720.0) == ["ipmi-node"]  # no stream: every pass
    # late passes (a slow pass, a busy machine): the first pass after the bound reads it
    assert watch.to_read(["n1"], 899.0) == []
    assert watch.to_read(["n1"], 905.0) == ["n1"]
    watch._mark(["n1"], up=False)  # the stream went down: every pass
    assert watch.to_read(["n1"], 906.0) == ["n1"]
    assert watch.to_read(["n1"], 907.0) == ["n1"]
    assert watch.streamed(["n1", "ipmi-node"]) == []


def test_at_the_defaults_a_streamed_node_costs_exactly_its_liveness_reads_an_hour() -> None:
    """The documented defaults against --interval 60 and a fast pass
    interval: a healthy streamed node's reads per hour, after the first, are
    the liveness read's 3600 / 300 = 12 (the safety read, 1.5 an hour, falls
    inside them); without the liveness read, the safety read's 1.5."""
    for liveness, per_hour in ((LIVENESS_INTERVAL, 12), (0.0, 1.5)):
        for interval in (60.0, 0.5):
            watch = EventWatch(liveness=liveness, streams_of=lambda d: None)
            watch._nodes["n1"] = _node()
            watch._mark(["n1"], up=True)
            watch.to_read(["n1"], 0.0)  # the reconciling read
            steps = int(4 * 3600 / interval)
            reads = sum(1 for p in range(1, steps + 1) if watch.to_read(["n1"], p * interval))
            assert reads / 4 == per_hour
    assert SAFETY_INTERVAL == 2400.0
    assert LIVENESS_INTERVAL == 300.0


def test_safety_must_be_positive() -> None:
    with pytest.raises(ValueError, match="safety"):
        EventWatch(safety=0.0, streams_of=lambda d: None)


def test_a_flood_is_rate_limited_and_the_node_read_at_the_next_pass() -> None:
    clock = FakeClock()
    flood = [[PowerNews("n1", "x.ResourcePoweredOff", PowerState.OFF)] * 150]
    stream = FakeStream("svc", {"*": "n1"}, [flood])
    sleeps: list[float] = []
    watch = _watch(stream, sleeps, stop_after=1, clock=clock, rate=20.0, burst=100.0)
    assert (watch.pending(), watch.flooded) == (100, 50)
    bucket = TokenBucket(rate=2.0, burst=1.0, clock=clock)
    assert [bucket.take(), bucket.take()] == [True, False]
    clock.advance(0.5)
    assert bucket.take()


def test_news_is_applied_once_with_its_age_and_news_without_a_state_asks_for_a_read() -> None:
    clock = FakeClock()
    watch = EventWatch(streams_of=lambda d: None, clock=clock, wall=lambda: 1000.25)
    watch._nodes["n1"] = _node()
    watch._mark(["n1"], up=True)
    watch.to_read(["n1"], 0.0)  # reconciled
    watch.learn([("n1", PowerState.ON)])
    for news in (
        PowerNews("n1", "a.ResourcePoweredOn", PowerState.ON, at=999.0),  # what we know
        PowerNews("n1", "a.ResourcePoweredOff", PowerState.OFF, at=1000.0),
        PowerNews("n1", "a.ResourcePoweredOff", PowerState.OFF, at=1000.0),  # duplicate
        PowerNews("n1", "a.ResourceChanged", None),
    ):
        watch._offer(news)
    written: list[list[Applied]] = []
    watch.wait(0.0, written.append)
    assert written == [[Applied("n1", PowerState.OFF, "a.ResourcePoweredOff", 0.25)]]
    assert watch.to_read(["n1"], 1.0) == ["n1"]  # ResourceChanged: read it


def _node() -> Any:
    from bmaas.events import _Node

    return _Node()


def test_the_edge_is_asked_only_when_the_fleet_changes_and_a_lost_service_stops() -> None:
    asked: list[list[str]] = []
    made: dict[str, FakeStream] = {}

    def edge(records: Sequence[Any]) -> tuple[list[FakeStream], dict[str, str]]:
        asked.append([r.name for r in records])
        out = []
        for r in records:
            stream = made.setdefault(r.name, FakeStream(r.name, {"*": r.name}, []))
            out.append(stream)
        return out, {}

    clock = FakeClock()
    stepped = reactor(clock)
    watch = EventWatch(
        streams_of=lambda driver: edge if driver == "redfish" else None,
        clock=clock,
        absent_retry=600.0,
        reactor=stepped,
    )
    sleeps = recording(watch)
    for stream in ("a", "b"):
        made[stream] = FakeStream(stream, {"*": stream}, [UnsupportedOperation("no")] * 1000)
    a, b = _Record("a", {"x": 1}), _Record("b", {"x": 2})
    ipmi = _Record("i", {}, driver="ipmi")
    watch.watch([a, b, ipmi])
    watch.watch([a, b, ipmi])  # unchanged: the edge is not asked again
    assert asked == [["a", "b"]]
    drive(stepped, clock, sleeps, 2)  # both refused: no EventService
    watch.watch([a, ipmi])  # b went to another worker
    assert asked == [["a", "b"], ["a"]]
    assert set(watch._entries) == {"a"}
    stepped.step(0.0)  # the reactor closes b's stream
    assert made["b"].closed >= 1
    assert stepped.count() == 1
    watch.close()
    assert sleeps[:2] == [600.0, 600.0]  # no EventService: asked again after 600 s
    assert Backoff()(5000) == 60.0  # a BMC down for days: no float overflow


def test_wait_returns_at_once_when_the_command_is_stopped() -> None:
    stop = CancelToken()
    watch = EventWatch(streams_of=lambda d: None, stop=stop)
    stop.cancel("SIGTERM received")
    watch.wait(3600.0, lambda news: None)  # would hang the test otherwise


def test_a_wait_sleeps_its_whole_length_and_the_token_wakes_it() -> None:
    """An idle sync's wait between passes is one sleep, not a look at the
    clock every second: the command's token wakes it when a signal comes."""
    token = CancelToken()
    watch = EventWatch(streams_of=lambda d: None)
    watch.bind_stop(token)
    asked: list[float | None] = []
    inside = threading.Event()
    plain = watch._cond.wait

    def counted(timeout: float | None = None) -> bool:
        asked.append(timeout)
        inside.set()
        return plain(timeout)

    watch._cond.wait = counted  # type: ignore[method-assign]
    waiter = threading.Thread(target=watch.wait, args=(3600.0, lambda news: None))
    waiter.start()
    assert inside.wait(10)
    token.cancel("SIGTERM received")
    waiter.join(10)
    assert not waiter.is_alive()
    assert len(asked) == 1  # one sleep, ended by the token
    assert asked[0] is not None
    assert asked[0] > 3500.0


def test_on_cancel_runs_once_at_the_first_cancel_and_at_once_when_late() -> None:
    token, calls = CancelToken(), []
    token.on_cancel(lambda: calls.append("early"))
    token.cancel("first")
    token.cancel("second: roll back")  # escalates; callbacks are not run again
    token.on_cancel(lambda: calls.append("late"))
    assert calls == ["early", "late"]
    assert token.roll_back


# -- pushed news: when to look, never what is (issue 46, finding 5) ----------------


def test_pushed_news_ends_the_wait_asks_one_read_and_is_never_applied() -> None:
    """News a POST brought (anyone who knows the Context) is not applied: it
    wakes the sync's wait and names the node to read, once however many
    pieces named it; a node no longer watched is not read for it."""
    watch = EventWatch(streams_of=lambda driver: None, clock=FakeClock(0.0))
    watch._nodes["n1"], watch._nodes["n2"] = _node(), _node()
    watch._mark(["n1", "n2"], up=True)
    watch.to_read(["n1", "n2"], 0.0)  # reconciled
    applied: list[Applied] = []
    done = threading.Event()

    def wait() -> None:
        watch.wait(3600.0, applied.extend)  # an hour, unless the news ends it
        done.set()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    pushed = [
        PowerNews(n, "x.ResourcePoweredOff", PowerState.OFF, pushed=True)
        for n in ("n1", "n1", "gone")
    ]
    watch.news(None, pushed, [])  # type: ignore[arg-type]
    assert done.wait(10.0), "pushed news did not end the wait"
    waiter.join(10.0)
    assert applied == []
    assert watch.applied_total == 0
    assert watch.looking()
    assert watch.to_look(5.0) == ["n1"]
    assert not watch.looking()
    assert watch.to_look(6.0) == []
    assert (watch.pushed, watch.looked) == (3, 1)
    # the read was the node's pass read: not read again until the safety net
    assert watch.to_read(["n1", "n2"], 7.0) == []
    # news on bmaas's own stream (SSE) is still the BMC's word, applied at once
    sse = PowerNews("n2", "x.ResourcePoweredOff", PowerState.OFF)
    watch.news(None, [sse], [])  # type: ignore[arg-type]
    watch.wait(0.0, applied.extend)
    assert [(a.node, a.power) for a in applied] == [("n2", PowerState.OFF)]


def test_forged_news_asks_one_read_now_and_one_at_the_window_edge_per_node() -> None:
    """Issue 46: whoever knows a Context can POST Events without end. Each
    asks for a read of the node at its BMC; the reads pushed news causes are
    spaced per node (:attr:`Pacing.look_every`): 100 forged Events for one
    node in one second make one read now and one at the window's edge (a
    real change among them is still seen within the window); another
    node's news is not held back by the first's."""
    clock = FakeClock(0.0)
    step = 1 / 128  # exact in binary: the clock's sums are too
    watch = EventWatch(streams_of=lambda driver: None, clock=clock, rate=1e9, burst=1e9)
    every = watch.pacing.look_every
    assert every > 1.0
    for node in ("n1", "n2"):
        watch._nodes[node] = _node()
    watch._mark(["n1", "n2"], up=True)
    watch.to_read(["n1", "n2"], clock())  # reconciled
    start = clock()
    reads: list[tuple[float, list[str]]] = []

    def sync_looks() -> None:  # what the sync's wait loop does: read what is due
        if watch.looking():
            reads.append((clock() - start, watch.to_look(clock())))

    def forged(node: str) -> None:
        news = PowerNews(node, "x.ResourcePoweredOff", PowerState.OFF, pushed=True)
        watch.news(None, [news], [])  # type: ignore[arg-type]

    for i in range(100):  # 100 forged Events for n1 within one second
        forged("n1")
        if i == 50:
            forged("n2")  # n2's first news, in the middle of n1's burst
        sync_looks()
        clock.advance(step)
    assert reads == [(0.0, ["n1"]), (50 * step, ["n2"])]
    # the rest of the burst waits, coalesced, for the window's edge: the
    # sync's wait is not ended before it, then ends exactly at it
    assert not watch.looking()
    clock.advance(every - 101 * step)
    assert not watch.looking()
    clock.advance(step)
    sync_looks()
    assert reads[-1] == (every, ["n1"])
    assert not watch.looking()
    clock.advance(3600.0)
    assert not watch.looking()  # nothing asked since: no more reads
    assert len(reads) == 3
    assert (watch.pushed, watch.looked) == (101, 3)


def test_a_deferred_look_bounds_the_wait_between_passes() -> None:
    """A deferred look says when the sync's wait must end (the window's
    edge, :meth:`EventWatch.look_due`), and a pass read before it takes
    its place."""
    clock = FakeClock()
    watch = EventWatch(streams_of=lambda driver: None, clock=clock)
    watch._nodes["n1"] = _node()
    watch._mark(["n1"], up=True)
    watch.to_read(["n1"], clock())
    news = PowerNews("n1", "x.ResourcePoweredOff", PowerState.OFF, pushed=True)
    watch.news(None, [news, news], [])  # type: ignore[arg-type]
    assert watch.to_look(clock()) == ["n1"]
    watch.news(None, [news], [])  # type: ignore[arg-type]
    assert watch.look_due() == clock() + watch.pacing.look_every
    # a pass that reads the node first takes the deferred look's place
    clock.advance(1.0)
    watch.recheck(["n1"])  # e.g. its last read failed: the pass reads it
    assert watch.to_read(["n1"], clock()) == ["n1"]
    assert watch.look_due() is None


def test_close_shares_one_timeout_between_the_reactor_and_the_push_listeners() -> None:
    """Total means total: the reactor's join and then the listeners' pending
    subscription DELETEs share ``close``'s timeout (the listeners had their
    own 5 s beside it, and a test could not give them more)."""
    asked: list[tuple[str, float]] = []

    class Closing:
        def __init__(self, name: str) -> None:
            self.name = name

        def close(self, timeout: float) -> None:
            asked.append((self.name, timeout))

    watch = EventWatch(streams_of=lambda d: None)
    watch._reactor = Closing("reactor")  # type: ignore[assignment]
    watch._listeners["redfish"] = Closing("push listener")
    watch.close(timeout=30.0)
    assert [name for name, _ in asked] == ["reactor", "push listener"]
    (_, reactor_left), (_, listener_left) = asked
    assert 0.0 < listener_left <= reactor_left <= 30.0
