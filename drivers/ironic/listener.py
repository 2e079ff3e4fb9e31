"""One Redfish service's event stream inside Ironic's conductor: a
listener of :mod:`bmaas.drivers.ironic.streams` -- on the streams' one
reactor thread (:mod:`bmaas.reactor`), an SSE stream's socket or a push
subscription's inbox alike.

The reactor takes bmaas's one set of listener decisions
(:class:`bmaas.reactor.Listening`, as ``bmaas sync`` does): open the
stream (bounded by a Deadline), read it (an idle limit), hand what
arrives to the streams' cache (the :class:`~bmaas.events.Sink`), and
after any exception wait what the policy table's ``stream`` column says
-- back off, or the long wait of a rejected password (accounts lock) --
and open again, until dropped. Dropping a listener sets its ``own``
event and hands its stream to the reactor to close.

**Push** (:func:`push_streams`): where the conductor listens for pushed
events (``[bmaas]events_listen``), each service's stream is a
:class:`~bmaas.drivers.redfish.push.PushStream`: its SSE stream where the
service offers one (unless push is preferred), else an ``EventDestination``
subscription whose Events the BMC POSTs to that listener. The reactor reads
it the same way (a pushed body wakes it through the subscription's inbox);
dropping it closes the stream on the reactor's thread, and the
subscription's DELETE runs on the push listener's pool (one bounded
request: neither the reactor nor the sync waits on a BMC for it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import secrets
import threading
from collections.abc import Callable
from typing import Any, cast

from bmaas.driver_info import DriverInfo
from bmaas.events import Stream
from bmaas.secrets import Secret

__all__ = [
    "Listener",
    "Service",
    "push_streams",
    "service_stream",
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


@dataclasses.dataclass(eq=False)
class Listener:
    """One service's stream and its state, on the streams' reactor."""

    service: Service
    #: system path -> node uuid: the stream's own mapping (shared with it)
    nodes: dict[str, str]
    stream: Stream
    own: threading.Event = dataclasses.field(default_factory=threading.Event)
    #: the stream is open (the sink's lock guards it)
    up: bool = False
    #: opens so far: a read made before the latest one cannot vouch for now
    epoch: int = 0
    #: a lasting fault (the policy's ``late``) was logged at INFO since it last opened
    told_late: bool = False
    #: on the streams' reactor (:class:`bmaas.reactor.Reactor`): it and its entry
    reactor: Any = None
    entry: Any = None

    def drop(self) -> None:
        """End it: the reactor closes its stream (and subscription)."""
        self.own.set()
        self.up = False
        if self.reactor is not None:
            self.reactor.drop(self.entry)
