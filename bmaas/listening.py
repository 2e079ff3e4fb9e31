"""The one listener loop's decisions: how a host listens to a BMC
service's event stream, and every decision it takes about it (issue 45).

``bmaas sync``'s :class:`~bmaas.events.EventWatch` and Ironic's conductor
(``bmaas.drivers.ironic.streams``) listen the same way: every stream on
the host's one reactor thread (:mod:`bmaas.reactor`, one selector), each
driving one :class:`Listening`, which decides what to do with news
(trusted within :class:`Pacing`'s rate, the rest a flood; the reads pushed
news asks for spaced per node, :meth:`Pacing.look_at`), with a stream
that ended or failed (closed, its nodes polled) and when to open it again
-- the policy table's ``stream`` column (:class:`~bmaas.policy.Reopen`):
``soon``, paced by :class:`Backoff`, or ``late`` (a rejected password:
accounts lock). A listener never dies and never gives up.

Its own module so that the hosts and the reactor depend on it, and not on
each other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.faults import BmaasError
from bmaas.policy import Reopen, policy_for

__all__ = [
    "LOOK_EVERY",
    "Backoff",
    "Listening",
    "News",
    "Pacing",
    "Sink",
    "Stream",
    "TokenBucket",
]

LOG = logging.getLogger("bmaas.events")

#: seconds: pushed news has one node read at most once a window (:meth:`Pacing.look_at`)
LOOK_EVERY = 10.0


class News(Protocol):
    """What a stream's edge reports (``bmaas.drivers.redfish.events.PowerNews``)."""

    @property
    def node(self) -> str: ...
    @property
    def message_id(self) -> str: ...
    @property
    def power(self) -> PowerState | None: ...
    @property
    def at(self) -> float | None: ...
    @property
    def pushed(self) -> bool:
        """POSTed to the push listener: a reason to read the node, not its state."""
        ...


class Stream(Protocol):
    """One service's event stream at the protocol's edge, as the reactor
    reads it (``bmaas.drivers.redfish.events.ServiceStream``)."""

    nodes: dict[str, str]

    @property
    def key(self) -> str: ...
    def open(self, deadline: Deadline) -> None: ...
    def close(self) -> None: ...

    def selectable(self) -> Any | None:
        """The open stream's ``fileno()`` holder (or a
        :class:`bmaas.reactor.Inbox`), None when closed."""
        ...

    def read_ready(self) -> Sequence[News] | None:
        """The news in what has arrived, without waiting; None: no byte yet."""
        ...

    def silent(self, idle: float) -> Exception:
        """The fault of a stream silent for ``idle`` seconds (closed)."""
        ...

    @property
    def keeps_alive(self) -> bool:
        """The service has sent a keepalive on this stream since it opened:
        its silence past :attr:`Pacing.idle` is a lost stream. One that
        never has is silent at rest by design (:attr:`Pacing.quiet`)."""
        ...


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Seconds before reconnect ``n`` (0-based): ``first * factor**n``, at most ``cap``."""

    first: float = 1.0
    factor: float = 2.0
    cap: float = 60.0

    def __call__(self, n: int) -> float:
        # n is capped: a BMC down for days must not overflow a float (2.0**1024)
        return min(self.cap, self.first * self.factor ** min(n, 64))


class TokenBucket:
    """``rate`` per second, ``burst`` at once, on an injected clock."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float]) -> None:
        self.rate, self.burst, self._clock = rate, burst, clock
        self._tokens, self._at = burst, clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


@dataclasses.dataclass(frozen=True)
class Pacing:
    """The numbers of a listener: how long it opens, reads and waits. Which
    wait a fault takes is the policy table's ``stream`` column
    (:class:`~bmaas.policy.Reopen`), never decided here."""

    #: seconds the open (the EventService read and the stream's request) may take
    open_deadline: float = 15.0
    #: seconds of silence before a stream that sends keepalives counts as
    #: lost (TCP keepalive notices a vanished BMC sooner:
    #: bmaas.drivers.redfish.wirestream)
    idle: float = 300.0
    #: the wait before re-opening ``soon``
    backoff: Backoff = Backoff()
    #: seconds before re-opening ``late`` (no EventService, a rejected password)
    absent_retry: float = 600.0
    #: news trusted per second, and at once
    rate: float = 20.0
    burst: float = 100.0
    #: seconds between two reads of one node that pushed news asks for: a
    #: POST proves only that its sender knows the Context, so however many
    #: arrive, one node's BMC is read for them at most once a window
    look_every: float = LOOK_EVERY
    #: seconds of silence before a stream that never sent a keepalive is
    #: opened again (at least ``idle``). Such a service (OpenBMC's bmcweb,
    #: hwlab ``--sse-keepalive 0``) sends nothing while nothing happens:
    #: dropped after ``idle``, its streams cost some 36 requests a node-hour
    #: at rest. A BMC that vanished is TCP keepalive's to notice; a change a
    #: hung stream missed, the node's liveness read's (bmaas.liveness)
    quiet: float = 3600.0

    def silence_limit(self, keeps_alive: bool) -> float:
        """Seconds of silence a stream may keep: ``idle`` once it has sent
        a keepalive (the promise broken past it), else ``quiet``."""
        return self.idle if keeps_alive else max(self.idle, self.quiet)

    def look_at(self, looked: float | None, now: float) -> float:
        """When pushed news arriving at ``now`` may have its node read:
        at once, or ``look_every`` after the last read pushed news caused
        (``looked``); the news in between waits for that one read, so a
        real change among it is seen within the window."""
        return now if looked is None else max(now, looked + self.look_every)

    def wait(self, fault: BaseException, failures: int) -> float:
        """Seconds before the next open after ``fault``, the ``failures``-th in a row."""
        if policy_for(fault).stream is Reopen.SOON:
            return self.backoff(failures)
        return self.absent_retry


W = TypeVar("W", contravariant=True)


class Sink(Protocol[W]):
    """What a listener tells its host (``who``: the host's handle on it)."""

    def opened(self, who: W) -> None: ...
    def lost(self, who: W, fault: Exception, wait: float, *, opening: bool) -> None: ...
    def news(self, who: W, trusted: Sequence[News], flood: Sequence[News]) -> None: ...


class Listening(Generic[W]):
    """The decisions of one listener, which :class:`bmaas.reactor.Reactor`
    drives (every stream on one thread). One set of decisions: news through the
    bucket (beyond its rate: a flood), after any exception the stream
    closed, the wait the policy table's ``stream`` column says (the back-off
    starting over after a stream that stayed up), the fault logged and told."""

    def __init__(
        self,
        who: W,
        stream: Stream,
        sink: Sink[W],
        pacing: Pacing,
        clock: Callable[[], float],
    ) -> None:
        self.who, self.stream, self.sink, self.pacing = who, stream, sink, pacing
        self._clock = clock
        self.failures = 0
        self.bucket = TokenBucket(pacing.rate, pacing.burst, clock)
        #: when the stream last opened (None: not open)
        self.opened_at: float | None = None

    def deadline(self) -> Deadline:
        """The open's deadline, from now."""
        return Deadline.after(self.pacing.open_deadline, clock=self._clock)

    def began(self) -> None:
        """The stream opened (not yet told: the host may have dropped it meanwhile)."""
        self.opened_at = self._clock()

    def opened(self) -> None:
        self.sink.opened(self.who)

    def arrived(self, items: Iterable[News]) -> None:
        """News read off the stream; beyond the bucket's rate, a flood: not trusted."""
        trusted: list[News] = []
        flood: list[News] = []
        for news in items:
            (trusted if self.bucket.take() else flood).append(news)
        self.sink.news(self.who, trusted, flood)

    def close(self) -> None:
        """Nothing of ours stays open (the stream, if it opened)."""
        if self.opened_at is not None:
            with contextlib.suppress(Exception):
                self.stream.close()

    def failed(self, fault: Exception) -> float:
        """``fault`` ended the stream (or its open): its nodes are polled;
        the seconds before the next open."""
        opened_at, self.opened_at = self.opened_at, None
        if opened_at is not None and self._clock() - opened_at > self.pacing.backoff.cap:
            self.failures = 0  # it stayed up: the back-off starts over
        wait = self.pacing.wait(fault, self.failures)
        self.failures += 1
        key = self.stream.key
        if not isinstance(fault, BmaasError):  # a bug, not the BMC: say where
            LOG.error("%s: the event listener met %s: %s; its nodes are polled, "
                      "re-opened in %.0f s", key, type(fault).__name__, fault, wait,
                      exc_info=fault)  # fmt: skip
        try:
            self.sink.lost(self.who, fault, wait, opening=opened_at is None)
        except Exception:
            LOG.exception("%s: the event listener's host failed to take a lost stream", key)
        return wait
