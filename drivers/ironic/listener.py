"""One Redfish service's event stream inside Ironic's conductor: the
listener thread of :mod:`bmaas.drivers.ironic.streams`.

It only receives: it opens the stream (bounded by a Deadline), reads it
(an idle limit), and hands what arrives to its :class:`Sink` (the streams'
cache); on a fault it waits and opens again, paced by
:class:`~bmaas.events.Backoff` (1 s, 2 s, 4 s ... at most 60 s, reset by a
stream that stayed up longer than that), or after ``absent_retry`` seconds
where asking again soon cannot help (the policy table's scope is not
``same_node``: no EventService or no SSE, a rejected password -- tried
once, not every minute, as accounts lock --, a malformed answer). News beyond ``rate``
per second (``burst`` at once) is handed over as *not trusted*: the
node is read from its BMC at its next pass. Dropping a listener sets its
``own`` event and closes its stream, so a blocked read returns at once and
the thread ends.

**Push** (:func:`push_streams`): where the conductor listens for pushed
events (``[bmaas]events_listen``), each service's stream is a
:class:`~bmaas.drivers.redfish.push.PushStream`: its SSE stream where the
service offers one (unless push is preferred), else an ``EventDestination``
subscription whose Events the BMC POSTs to that listener. The listener
thread reads it the same way (a push stream's read waits on its inbox);
dropping it wakes the read (:meth:`Listener.drop`), and the thread, not the
caller, deletes the subscription on its way out (one bounded request: the
sync's threads never wait on a BMC for it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import secrets
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from bmaas import clock as _clock
from bmaas.deadline import Deadline
from bmaas.driver_info import DriverInfo
from bmaas.events import Backoff, News, Stream, TokenBucket
from bmaas.faults import BmaasError, RetryScope
from bmaas.policy import policy_for
from bmaas.secrets import Secret

__all__ = [
    "Listener",
    "Pacing",
    "Service",
    "Sink",
    "host_port",
    "push_streams",
    "service_stream",
    "thread",
]

_SALT = secrets.token_bytes(16)


@dataclasses.dataclass(frozen=True)
class Service:
    """One Redfish service as a stream sees it; ``key`` is a keyed digest
    of all four (credentials included), never printed."""

    address: str
    username: str
    password: Secret = dataclasses.field(repr=False)
    verify: bool | str
    key: str = dataclasses.field(repr=False)

    @classmethod
    def of(cls, info: DriverInfo) -> Service | None:
        if not info.redfish_address:
            return None
        address = str(info.redfish_address).rstrip("/")
        password = Secret(info.redfish_password or "")
        canonical = json.dumps(
            [address, info.redfish_username or "", password.reveal(), repr(info.redfish_verify_ca)]
        )
        key = hmac.new(_SALT, canonical.encode(), hashlib.sha256).hexdigest()
        return cls(address, info.redfish_username or "", password, info.redfish_verify_ca, key)


@dataclasses.dataclass(frozen=True)
class Pacing:
    """How a listener opens, reads and tries again (the module doc)."""

    #: seconds the open (the EventService read and the stream's request) may take
    open_deadline: float = 15.0
    #: seconds of silence before the stream counts as lost (TCP keepalive
    #: notices a vanished BMC sooner: bmaas.drivers.redfish.events)
    idle: float = 300.0
    backoff: Backoff = dataclasses.field(default_factory=Backoff)
    #: seconds before asking a service without an EventService again
    absent_retry: float = 600.0
    #: news trusted per second, and at once
    rate: float = 20.0
    burst: float = 100.0


class Sink(Protocol):
    """Where a listener's news and state go (the streams' cache)."""

    def opened(self, listener: Listener) -> None: ...
    def lost(
        self, listener: Listener, fault: BmaasError | None, wait: float, *, opening: bool
    ) -> None: ...
    def news(self, listener: Listener, trusted: Sequence[News], flood: Sequence[News]) -> None: ...


def service_stream(service: Service, nodes: dict[str, str]) -> Stream:
    """The Redfish SSE stream of ``service`` for ``nodes`` (system path -> node)."""
    from bmaas.drivers.redfish.events import ServiceStream

    return ServiceStream(service.address, service.username, service.password, service.verify, nodes)


def push_streams(push: Any, *, prefer: bool) -> Callable[[Service, dict[str, str]], Stream]:
    """Streams that may use push: a service's SSE stream where it offers one
    (unless ``prefer``), else a push subscription to ``push`` (a started
    :class:`~bmaas.drivers.redfish.push.PushListener`)."""
    from bmaas.drivers.redfish.events import ServiceStream
    from bmaas.drivers.redfish.push import PushStream

    def stream_of(service: Service, nodes: dict[str, str]) -> Stream:
        sse = cast(ServiceStream, service_stream(service, nodes))
        # PushStream's nodes are its SSE stream's (a property): the same dict
        return PushStream(sse, push, prefer_push=prefer)  # type: ignore[return-value]

    return stream_of


def host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) as (host, port);
    ValueError saying what is wrong."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected HOST:PORT (port 0-65535), not {text!r}")
    return host, int(port)


def thread(target: Callable[[], None], name: str) -> threading.Thread:
    """Run ``target`` in a daemon thread (a conductor that exits does not wait for it)."""
    started = threading.Thread(target=target, name=name, daemon=True)
    started.start()
    return started


@dataclasses.dataclass(eq=False)
class Listener:
    """One service's stream and its state; :meth:`run` is its thread."""

    service: Service
    #: system path -> node uuid: the stream's own mapping (shared with it)
    nodes: dict[str, str]
    stream: Stream
    own: threading.Event = dataclasses.field(default_factory=threading.Event)
    #: the stream is open (the sink's lock guards it)
    up: bool = False
    #: opens so far: a read made before the latest one cannot vouch for now
    epoch: int = 0
    thread: Any = None

    def drop(self) -> None:
        """End it: the thread stops, the stream (and its subscription) closes."""
        self.own.set()
        self.up = False
        # a blocked read returns at once; a push stream's subscription is
        # deleted by the thread on its way out (a request: not here, where
        # the caller may hold the streams' lock)
        interrupt = getattr(self.stream, "interrupt", None)
        if callable(interrupt):
            interrupt()
        else:
            self.stream.close()

    def run(
        self,
        sink: Sink,
        pacing: Pacing,
        *,
        clock: _clock.ClockFn = _clock.monotonic,
        sleep: Callable[[threading.Event, float], object] = threading.Event.wait,
    ) -> None:
        """Open, read, and on a fault wait and open again, until dropped.
        ``sleep(own, seconds)`` ends early when ``own`` is set."""
        failures = 0
        bucket = TokenBucket(pacing.rate, pacing.burst, clock)
        stream = self.stream
        while not self.own.is_set():
            try:
                stream.open(Deadline.after(pacing.open_deadline, clock=clock))
            except BmaasError as exc:
                # asking again soon helps only where the policy table's scope
                # says this BMC, later; not for a service without an
                # EventService, a rejected password (accounts lock) or a
                # malformed answer: those wait absent_retry
                soon = policy_for(exc).retry is RetryScope.SAME_NODE
                wait = pacing.backoff(failures) if soon else pacing.absent_retry
                failures += 1
                sink.lost(self, exc, wait, opening=True)
                sleep(self.own, wait)
                continue
            if self.own.is_set():  # dropped while it was opening
                stream.close()
                break
            sink.opened(self)
            opened_at = clock()
            fault: BmaasError | None = None
            try:
                while not self.own.is_set():
                    trusted: list[News] = []
                    flood: list[News] = []
                    for news in stream.read(pacing.idle):
                        (trusted if bucket.take() else flood).append(news)
                    sink.news(self, trusted, flood)
            except BmaasError as exc:
                fault = exc
            finally:
                stream.close()
            if self.own.is_set():
                break
            if clock() - opened_at > pacing.backoff.cap:
                failures = 0  # it stayed up: the back-off starts over
            wait = pacing.backoff(failures)
            failures += 1
            sink.lost(self, fault, wait, opening=False)
            sleep(self.own, wait)
