"""The one set of event listener decisions (:class:`bmaas.reactor.Listening`,
on the reactor) as both of its hosts run it: ``bmaas sync``'s
:class:`~bmaas.events.EventWatch` and Ironic's conductor
(:class:`~bmaas.drivers.ironic.streams.Streams`). Every wait after
a fault is the policy table's ``stream`` column (issue 45: a rejected
password re-opened every <= 60 s in the sync, 600 s in Ironic), and no
exception ends a listener (issue 46: a RecursionError killed the sync's
thread and left its nodes "streamed"). Fake streams on a reactor the test
steps, a FakeClock and the waits the hosts are told: no real sleep."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver_info import DriverInfo
from bmaas.drivers.ironic.answers import NodeRef, fingerprint
from bmaas.drivers.ironic.streams import Streams
from bmaas.events import Backoff, EventWatch, News, Pacing
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCAuthError, BMCUnreachable
from bmaas.policy import POLICY, Reopen, policy_for
from tests.unit.stepped import Scripted, drive, reactor, recording

BACKOFF = Backoff(first=1.0, factor=2.0, cap=8.0)
LATE = 600.0


class ScriptStream(Scripted):
    """Each open takes the next outcome (None: it opens); each read the next
    (an exception raised, or a batch); then the BMC closes the stream."""

    def __init__(self, opens: Sequence[BaseException | None], reads: Sequence[Any] = ()) -> None:
        self.script_opens, self.script_reads = list(opens), list(reads)
        self.nodes: dict[str, str] = {}
        self.opens = self.closes = 0

    @property
    def key(self) -> str:
        return "http://127.0.0.1:8000"

    def open(self, deadline: Deadline) -> None:
        self.opens += 1
        outcome = self.script_opens.pop(0) if self.script_opens else None
        if outcome is not None:
            raise outcome

    def scripted(self) -> Sequence[News]:
        outcome = self.script_reads.pop(0) if self.script_reads else BMCUnreachable("closed")
        if isinstance(outcome, BaseException):
            raise outcome
        return list(outcome)

    def close(self) -> None:
        self.closes += 1


#: a host runs the stream's listener until it was told ``sleeps`` waits; it
#: returns the waits, whether the node still counts as streamed, and the
#: host's fault count
Host = Callable[[ScriptStream, int], tuple[list[float], bool, int]]


def bmaas_sync(stream: ScriptStream, sleeps: int) -> tuple[list[float], bool, int]:
    clock = FakeClock(start=0.0)
    stepped = reactor(clock)
    stream.nodes.update({"*": "n1"})
    watch = EventWatch(
        streams_of=lambda driver: lambda records: ([stream], {}),
        backoff=BACKOFF,
        absent_retry=LATE,
        clock=clock,
        reactor=stepped,
    )
    waits = recording(watch)
    record = type("Record", (), {"name": "n1", "driver": "redfish", "driver_info": {}})()
    watch.watch([record])
    drive(stepped, clock, waits, sleeps)
    watch.close()
    return waits, watch.up("n1"), watch.faults


def ironic_conductor(stream: ScriptStream, sleeps: int) -> tuple[list[float], bool, int]:
    clock = FakeClock(start=0.0)
    stepped = reactor(clock)

    def stream_of(service: Any, nodes: dict[str, str]) -> ScriptStream:
        stream.nodes = nodes  # the conductor's own mapping, shared with its listener
        return stream

    streams = Streams(
        stream_of=stream_of,  # type: ignore[arg-type]
        pacing=Pacing(open_deadline=5.0, backoff=BACKOFF, absent_retry=LATE),
        clock=clock,
        reactor=stepped,
    )
    waits = recording(streams)
    raw = {"redfish_address": stream.key, "redfish_username": "u", "redfish_password": "p"}
    info = DriverInfo.parse(raw, required=("redfish_address",), node="n1")
    streams.answer(NodeRef("n1", "node-n1", info, fingerprint(raw), "bmaas-redfish", ""))
    (listener,) = streams._listeners.values()
    drive(stepped, clock, waits, sleeps)
    up, faults = listener.up, streams.faults
    streams.close(timeout=0.0)
    return waits, up, faults


HOSTS: dict[str, Host] = {"bmaas sync": bmaas_sync, "ironic conductor": ironic_conductor}


def test_a_rejected_password_waits_the_policys_long_wait_in_both_hosts() -> None:
    assert policy_for(BMCAuthError).stream is Reopen.LATE
    for name, host in HOSTS.items():
        stream = ScriptStream([BMCAuthError("the event stream refused the credentials")] * 3)
        waits, streamed, faults = host(stream, 3)
        assert waits == [LATE, LATE, LATE], name  # never a login a minute: accounts lock
        assert (stream.opens, streamed, faults) == (3, False, 3), name


@pytest.mark.parametrize("row", POLICY, ids=lambda row: row.fault.__name__)
def test_every_fault_waits_what_its_row_says_in_both_hosts(row: Any) -> None:
    """Open refused twice with the row's fault: soon is the back-off (1 s,
    then 2 s), late the long wait, the same in each host."""
    expected = [1.0, 2.0] if row.stream is Reopen.SOON else [LATE, LATE]
    for name, host in HOSTS.items():
        waits, _, _ = host(ScriptStream([row.fault("refused")] * 2), 2)
        assert waits == expected, name


def test_a_bug_in_a_listener_is_caught_counted_polled_and_restarted_in_both_hosts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A RecursionError (json.loads on a deep frame, before the parse was
    bounded) met at the loop: the stream is dropped, its node polled, the
    listener re-opens after the back-off, and says so once in the log."""
    for name, host in HOSTS.items():
        caplog.clear()
        stream = ScriptStream([None, None], [RecursionError("maximum recursion depth")])
        waits, streamed, faults = host(stream, 2)
        assert waits == [1.0, 2.0], name  # back off, re-open (then closed by the BMC)
        assert (stream.opens, streamed, faults) == (2, False, 2), name
        tracebacks = [r for r in caplog.records if r.exc_info]
        assert len(tracebacks) == 1, name
        assert "RecursionError" in tracebacks[0].getMessage(), name
