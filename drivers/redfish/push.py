"""Redfish push subscriptions: bmaas as the listener an ``EventDestination`` POSTs to.

SSE needs no listening port, so it is preferred; push is for services that
offer no SSE (iLO, older iDRACs) or when the operator prefers it (an SSE
stream holds a socket per service; a push subscription holds none).

* :class:`PushListener` is one HTTP (or HTTPS, with a certificate) server of
  the process (one thread, whatever its peers:
  :mod:`~bmaas.drivers.redfish.pushserver`), bound where the operator says
  (127.0.0.1 by default: a BMC on a management network needs an address
  it can reach, ``--events-listen``).
  Every subscription it makes carries a ``Context`` of 32 random bytes, the
  subscription's secret: the BMC repeats it in every Event it POSTs, and an
  Event whose ``Context`` is not one of ours is refused (403) and counted,
  never read further. Bodies are capped (1 MiB, 413 past it); nothing of a
  request is logged, and the token never reaches a message.
* :class:`PushStream` is one service's stream for :class:`bmaas.events.EventWatch`:
  its SSE stream where the service offers one (unless push is preferred),
  else ``POST /redfish/v1/EventService/Subscriptions`` (``Destination`` the
  listener's URL, ``Context`` the token, ``Protocol`` Redfish,
  ``EventFormatType`` Event, ``DeliveryRetryPolicy`` TerminateAfterRetries:
  a listener gone for good is not retried for ever); its news then arrives
  through the listener, each piece marked ``pushed``: the Context proves
  only that the sender can read the BMC, so hosts take it as a reason to
  read the node, never as its state (:mod:`bmaas.events`). A subscription
  costs no thread: the listener hands each body to its
  :class:`~bmaas.reactor.Inbox`, which wakes the hosts' one reactor
  (:mod:`bmaas.reactor`) to read it. A push
  subscription sends nothing while nothing happens, so it is checked every
  ``verify_every`` seconds (one GET of it, on the reactor's pool): a BMC
  that forgot it (its own reboot) answers 404 and the subscription is made
  again (and its nodes reconciled). On close it is deleted (on the
  listener's pool of :data:`DELETERS` threads: :meth:`PushListener.later`).
* **Nothing left behind by a process that died**: a process killed before
  it could delete its subscriptions (SIGKILL, a crash, a conductor whose
  exit hooks did not run) leaves them on the BMC, where each holds one of
  the BMC's few subscription slots until a failed delivery ends it. So the
  first subscription a stream makes looks first: every subscription on
  the BMC whose ``Destination`` is this listener's URL (``--events-listen``
  / ``events_listen`` fixed the address; only this process takes Events
  there) is an earlier run's, and is deleted. That costs a GET of the
  collection and one per member, once per service and process, within
  half of the open's deadline; a failure there is logged and the
  subscription made all the same.

Every request to the BMC (the EventService, the subscription's POST,
GET and DELETE) is :meth:`~bmaas.drivers.redfish.events.ServiceStream.request`:
bmaas's own HTTP (:mod:`bmaas.drivers.redfish.wire`), ended by the
caller's deadline however the service dribbles its answer; faults are
those of :mod:`bmaas.drivers.redfish.events` (an error status through
:func:`bmaas.drivers.redfish.faults.map_answer`, the drivers' one table).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import logging
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bmaas import listenspec, threads
from bmaas.deadline import Deadline
from bmaas.drivers.redfish.events import EVENT_SERVICE, MAX_FRAME, PowerNews, ServiceStream, news_of
from bmaas.drivers.redfish.events import services as sse_services
from bmaas.drivers.redfish.framing import loads_bounded
from bmaas.drivers.redfish.pushserver import REQUESTS, Limits, Server
from bmaas.drivers.redfish.wire import Answer
from bmaas.faults import (
    BmaasError,
    BMCProtocolError,
    BMCUnreachable,
    InputError,
    UnsupportedOperation,
)
from bmaas.reactor import Inbox

__all__ = ["PATH", "Limits", "PushListener", "PushStream", "listener", "services"]

LOG = logging.getLogger(__name__)

#: where the listener takes Events
PATH = "/bmaas/events"
#: seconds between checks that the BMC still has the subscription
VERIFY_EVERY = 3600.0
#: seconds the subscription's DELETE may take on close (a courtesy)
DELETE_TIMEOUT = 2.0
#: subscriptions looked at for an earlier run's, at most (a BMC holds a few)
SWEEP_LIMIT = 64
#: a ``"Context": "..."`` string in a pushed body, found without parsing it
_CONTEXT = re.compile(rb'"Context"\s*:\s*"([^"\\]{1,256})"')
#: Context strings looked up in one body, at most
MAX_CONTEXTS = 8
#: the news an overflowing inbox gives each node of its service (read it)
OVERFLOW = "bmaas.PushInboxOverflow"
#: threads deleting closed subscriptions at once (the listener's pool)
DELETERS = 4


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class PushListener:
    """The process's listener for pushed Events (see the module docstring);
    its server (:class:`~bmaas.drivers.redfish.pushserver.Server`) runs in
    one thread, whatever its peers do."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        url: str | None = None,
        certfile: str | None = None,
        keyfile: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        self._sinks: dict[str, Callable[[str], None]] = {}
        self._lock = threading.Lock()
        #: Events taken
        self.received = 0
        try:  # the checks the CLI made up front, made again (one way)
            tls = listenspec.server_context(certfile, keyfile) if certfile else None
            sock = listenspec.listening_socket(host, port)
        except ValueError as exc:
            what = "push listener certificate" if "listen on" not in str(exc) else "push listener"
            raise InputError(str(exc), field=what) from None
        self._server = Server(sock, self.deliver, path=PATH, tls=tls, limits=limits)
        bound_host, bound_port = sock.getsockname()[:2]
        scheme = "https" if tls else "http"
        #: what BMCs are told to POST to (``Destination``)
        self.url = url or f"{scheme}://{listenspec.where(bound_host, bound_port)}{PATH}"
        self.port = int(bound_port)
        # One thread, blocked in the selector while nothing happens (no
        # tick: most of an idle listener's CPU was a poll); close() wakes it.
        self._thread = threads.spawn(self._server.serve, "bmaas-events-push")
        #: closed subscriptions' DELETEs (:meth:`later`), and those in flight
        self._deletes: Any = None
        self._pending: set[Any] = set()

    @property
    def refused(self) -> int:
        """Requests refused (unknown Context, bad body, malformed, too large)."""
        counts = self._server.refusals.counts
        return sum(n for kind, n in counts.items() if kind in REQUESTS)

    @property
    def refusals(self) -> dict[str, int]:
        """Every refusal (connections too) by class: :data:`pushserver.KINDS`."""
        return dict(self._server.refusals.counts)

    @property
    def open_connections(self) -> int:
        return self._server.open_connections

    def register(self, token: str, sink: Callable[[str], None]) -> None:
        with self._lock:
            self._sinks[_digest(token)] = sink

    def unregister(self, token: str) -> None:
        with self._lock:
            self._sinks.pop(_digest(token), None)

    def deliver(self, body: bytes) -> int:
        """One POSTed body: the HTTP status to answer.

        Whose it is comes first, before a byte is parsed: a scan for
        ``"Context": "..."`` strings (the first :data:`MAX_CONTEXTS`), each
        looked up among ours. Only then is the body parsed (bounded in size
        and depth), and its own top-level ``Context`` must be the one found."""
        token, sink = None, None
        for found in itertools.islice(_CONTEXT.finditer(body), MAX_CONTEXTS):
            candidate = found.group(1).decode("ascii", "replace")
            with self._lock:
                sink = self._sinks.get(_digest(candidate))
            if sink is not None:
                token = candidate
                break
        if sink is None:
            return 403
        try:
            document = loads_bounded(body, limit=MAX_FRAME)
        except ValueError:
            return 400
        if not isinstance(document, dict) or document.get("Context") != token:
            return 403  # ours only deeper inside: not the Event's own Context
        self.received += 1
        sink(body.decode("utf-8", "replace"))
        return 204

    def later(self, work: Callable[[], None]) -> None:
        """``work`` (a subscription's DELETE: a request) on the listener's
        pool of :data:`DELETERS` threads, so that the thread that closed a
        stream -- the reactor's -- never waits for a BMC."""
        with self._lock:
            if self._deletes is None:
                self._deletes = threads.pool(DELETERS, "bmaas-events-push-delete")
            try:
                future = self._deletes.submit(work)
            except RuntimeError:  # closed: no one to delete it; TerminateAfterRetries will
                return
            self._pending.add(future)
        future.add_done_callback(self._pending.discard)

    def drain(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the DELETEs :meth:`later` took."""
        import concurrent.futures

        with self._lock:
            pending = list(self._pending)
        if pending:
            concurrent.futures.wait(pending, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving, the pending DELETEs given ``timeout`` seconds."""
        self.drain(timeout)
        with self._lock:
            deletes = self._deletes
        if deletes is not None:
            deletes.shutdown(wait=False, cancel_futures=True)
        self._server.close()
        self._thread.join(timeout)


def listener(settings: Any) -> PushListener:
    """The listener for ``settings`` (a :class:`bmaas.events.PushSettings`)."""
    return PushListener(
        settings.host,
        settings.port,
        url=settings.url,
        certfile=settings.certfile,
        keyfile=settings.keyfile,
    )


@dataclasses.dataclass(eq=False)
class PushStream:
    """One service's events: SSE where offered (unless ``prefer_push``), else a
    push subscription to ``listener``."""

    sse: ServiceStream
    listener: PushListener
    prefer_push: bool = False
    verify_every: float = VERIFY_EVERY
    #: "sse" or "push" once open (None: closed)
    mode: str | None = None
    _token: str = dataclasses.field(default_factory=lambda: secrets.token_hex(32), repr=False)
    _location: str | None = dataclasses.field(default=None, repr=False)
    _subscriptions: str | None = dataclasses.field(default=None, repr=False)
    _inbox: Inbox = dataclasses.field(init=False, repr=False)
    #: the BMC was looked at for an earlier run's subscriptions
    _swept: bool = False

    def __post_init__(self) -> None:
        self._inbox = Inbox(self.verify_every, self._check)

    @property
    def key(self) -> str:
        return self.sse.key

    @property
    def nodes(self) -> dict[str, str]:
        return self.sse.nodes

    def open(self, deadline: Deadline) -> None:
        if not self.prefer_push:
            try:
                self.sse.open(deadline)
                self.mode = "sse"
                return
            except UnsupportedOperation:
                if self.sse.event_service is None:  # no EventService at all
                    raise
        self._subscribe(deadline)
        self.mode = "push"

    def _subscribe(self, deadline: Deadline) -> None:
        started = time.monotonic()
        if self._subscriptions is None:
            service = self.sse.event_service or _json(
                self._request("GET", EVENT_SERVICE, None, deadline, started)
            )
            link = service.get("Subscriptions") if isinstance(service, dict) else None
            path = link.get("@odata.id") if isinstance(link, dict) else None
            if not isinstance(service, dict) or service.get("ServiceEnabled") is False:
                raise self.sse.fail(UnsupportedOperation, "the EventService is disabled", started)
            if not isinstance(path, str) or not path.startswith("/"):
                raise self.sse.fail(UnsupportedOperation, "no push subscriptions", started)
            self._subscriptions = path
        if not self._swept:
            self._swept = True
            self._sweep(Deadline.after(max(0.0, deadline.left() / 2)), started)
        self._token = secrets.token_hex(32)  # a new secret for every subscription
        body = {
            "Destination": self.listener.url,
            "Context": self._token,
            "Protocol": "Redfish",
            "EventFormatType": "Event",
            "DeliveryRetryPolicy": "TerminateAfterRetries",
        }
        self.listener.register(self._token, self._inbox.put)
        try:
            answer = self._request("POST", self._subscriptions, body, deadline, started)
        except BaseException:
            self.listener.unregister(self._token)
            raise
        location = answer.headers.get("location") or _json(answer).get("@odata.id")
        if not isinstance(location, str) or not location:
            self.listener.unregister(self._token)
            raise self.sse.fail(BMCProtocolError, "the subscription has no Location", started)
        self._location = urllib.parse.urlsplit(location).path or location

    def _sweep(self, deadline: Deadline, started: float) -> None:
        """Delete the subscriptions an earlier run of this listener left
        (same ``Destination``); see the module docstring."""
        assert self._subscriptions is not None
        try:
            members = _json(self._request("GET", self._subscriptions, None, deadline, started))
            found = members.get("Members")
            for member in found[:SWEEP_LIMIT] if isinstance(found, list) else []:
                path = member.get("@odata.id") if isinstance(member, dict) else None
                if not isinstance(path, str) or not path.startswith("/"):
                    continue
                sub = _json(self._request("GET", path, None, deadline, started))
                if sub.get("Destination") == self.listener.url:
                    self._request("DELETE", path, None, deadline, started)
                    LOG.info(
                        "%s: deleted %s, left by an earlier run of this listener", self.key, path
                    )
        except BmaasError as exc:  # a courtesy: the new subscription is made all the same
            LOG.info("%s: could not look for an earlier run's subscriptions: %s", self.key, exc)

    # -- read by the reactor (bmaas.reactor): no thread a subscription ---------

    def selectable(self) -> Any | None:
        """The SSE stream's socket, or the push subscription's :class:`Inbox`
        (bodies the listener's thread hands it; the reactor's check every
        ``verify_every`` seconds), None when closed."""
        if self.mode == "sse":
            return self.sse.selectable()
        return self._inbox if self.mode == "push" else None

    def read_ready(self) -> list[PowerNews] | None:
        """The news in what has arrived, without waiting (None: nothing yet).
        Pushed bodies become news marked ``pushed`` (a reason to read the
        node); more bodies than the inbox holds: every node, to be read."""
        if self.mode == "sse":
            return self.sse.read_ready()
        if self.mode != "push":
            raise self.sse.fail(BMCUnreachable, "the push subscription is closed", time.monotonic())
        bodies, overflowed = self._inbox.take()
        if not bodies and not overflowed:
            return None
        if overflowed:  # which bodies were lost is unknown: read them all
            return [PowerNews(n, OVERFLOW, pushed=True) for n in sorted(set(self.nodes.values()))]
        out: list[PowerNews] = []
        for text in bodies:
            try:
                out.extend(news_of(text, self.nodes, pushed=True))
            except ValueError:
                LOG.info("%s: a pushed body that is not an Event; ignored", self.key)
        return out

    @property
    def keeps_alive(self) -> bool:
        """The SSE stream's (a push subscription is checked instead)."""
        return self.sse.keeps_alive

    def silent(self, idle: float) -> BmaasError:
        """The SSE stream's silence (a push subscription is checked instead)."""
        return self.sse.silent(idle)

    def _check(self, deadline: Deadline) -> None:
        """One GET of the subscription (the Inbox's check): 404 says the
        BMC forgot it (BMCUnreachable: made again at the next open)."""
        if self._location is None:
            return
        self._request("GET", self._location, None, deadline, time.monotonic())

    def close(self) -> None:
        """Close the stream; the subscription's DELETE runs on the
        listener's pool (never on the reactor's thread)."""
        self.sse.close()
        self.mode = None
        self.listener.unregister(self._token)
        location, self._location = self._location, None
        if location is not None:
            self.listener.later(lambda: self._delete(location))

    def _delete(self, location: str) -> None:
        with contextlib.suppress(Exception):  # a courtesy: TerminateAfterRetries ends it anyway
            self._request(
                "DELETE", location, None, Deadline.after(DELETE_TIMEOUT), time.monotonic()
            )

    def _request(
        self, method: str, path: str, body: Any, deadline: Deadline, started: float
    ) -> Answer:
        """One request with the service's Basic auth, by ``deadline``
        (:meth:`ServiceStream.request`); an error status raises the edge's fault."""
        answer = self.sse.request(method, path, deadline, started, body=body)
        if answer.status >= 400:
            if answer.status == 404 and method == "GET" and path == self._location:
                raise self.sse.fail(BMCUnreachable, "the BMC forgot the subscription", started)
            raise self.sse.refused(answer, method, path, started)
        return answer


def _json(answer: Answer) -> dict[str, Any]:
    try:
        document = loads_bounded(answer.body or b"{}", limit=MAX_FRAME)
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def services(
    records: Iterable[Any],
    *,
    push: PushListener,
    prefer_push: bool = False,
    environ: Mapping[str, str] | None = None,
) -> tuple[list[PushStream], dict[str, str]]:
    """:func:`bmaas.drivers.redfish.events.services`, each stream able to fall
    back to (or prefer) a push subscription to ``push``."""
    streams, left_out = sse_services(records, environ=environ)
    return [PushStream(s, push, prefer_push=prefer_push) for s in streams], left_out
