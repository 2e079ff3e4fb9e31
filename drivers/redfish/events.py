"""A Redfish service's events over SSE: the driver edge of ``bmaas.events``.

sushy has EventService subscriptions but no SSE client, so this is a small
one on bmaas's own HTTP (:mod:`bmaas.drivers.redfish.wire`, the stream by
:mod:`~bmaas.drivers.redfish.wirestream`: every request, the stream's open
included, ends by the caller's deadline however the service dribbles its
answer): it reads ``/redfish/v1/EventService`` (is the
service enabled, where is its ``ServerSentEventUri``), opens the stream
with ``$filter=EventFormatType eq 'Event'``, and turns its frames into
:class:`PowerNews` for the nodes behind the service.

What it understands, per record of an Event:

* a power message: DMTF's ``ResourceEvent.*.ResourcePoweredOn/Off`` (and
  ``ResourcePoweringOn/Off``, a transition), HPE iLO's
  ``iLOEvents.*.ServerPoweredOn/Off``: the node's power, at once;
* a health message (``ResourceEvent.*.ResourceStatusChanged<Health>``);
* anything else about a system it knows (``ResourceChanged``, a test
  event): news without a state -- the node is read at the next pass.

Every failure leaves as a bmaas fault: an HTTP status (and no
EventService, or one not enabled, or no ``ServerSentEventUri``) through
:func:`bmaas.drivers.redfish.faults.map_answer`, the drivers' one table; a
failure below HTTP through :func:`_fault` (refused or unreachable:
:class:`BMCUnreachable`; silence past the idle limit or the open's
deadline: :class:`BMCTimeout`; not an event stream:
:class:`BMCProtocolError`). Credentials ride as Basic auth on the stream's
one request; they never reach a message.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import http.client
import json
import re
import socket
import ssl
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bmaas import credentials
from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.driver_info import DriverInfo
from bmaas.drivers.redfish.faults import ConnectFailed, DeadlineExceeded, map_answer
from bmaas.drivers.redfish.framing import loads_bounded
from bmaas.drivers.redfish.wire import Answer, Target, exchange, request_bytes
from bmaas.drivers.redfish.wirestream import Stream, open_stream
from bmaas.faults import (
    BmaasError,
    BMCFault,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    InputError,
    UnsupportedOperation,
)
from bmaas.gate import GATES
from bmaas.secrets import Secret
from bmaas.tlspolicy import TLSPolicy

__all__ = [
    "PowerNews",
    "SSEMessage",
    "SSEParser",
    "ServiceStream",
    "news_of",
    "services",
]

OPERATION = "events.stream"
EVENT_SERVICE = "/redfish/v1/EventService"
#: the most of an error answer's body read for its fault (the ExtendedInfo)
MAX_ERROR_BODY = 64 * 1024
#: the most a stream's one frame may hold, every line counted (a BMC that never ends a frame)
MAX_FRAME = 1024 * 1024
#: bytes a stream may carry since its last event that are neither an event
#: nor a keepalive (random bytes, bare newlines): past it, it is down
MAX_JUNK = 64 * 1024
#: a comment longer than this is not a keepalive (hwlab's is 12 bytes)
MAX_COMMENT = 256
#: keepalive comments that make a stream's silence a lost stream (one
#: alone may be a greeting at the start)
PROMISED = 2
_LINE_END = re.compile(rb"\r\n|\r|\n")
_FIELDS = frozenset({"data", "event", "id", "retry"})
_POWER = re.compile(r"\.(?:ResourcePower(?:ed|ing)|ServerPowered)(On|Off)$")
_HEALTH = re.compile(r"\.ResourceStatusChanged(OK|Warning|Critical)$")
_FILTER = "?$filter=" + urllib.parse.quote("EventFormatType eq 'Event'")


@dataclasses.dataclass(frozen=True)
class SSEMessage:
    """One dispatched SSE event (WHATWG HTML, "server-sent events")."""

    data: str
    event: str = "message"
    id: str | None = None


class SSEParser:
    """Bytes in, messages out: lines end in CR, LF or CRLF; ``:`` lines are
    comments (keepalives); ``data`` lines join with LF; a blank line
    dispatches; a frame without data dispatches nothing.

    A stream must carry what Redfish defines, and ValueError says it does
    not: a frame (every line of it, with its line end) over ``max_frame``
    bytes, or ``max_junk`` bytes since the last event that are neither an
    event nor a keepalive (lines SSE ignores, blank lines that end no
    frame, a frame without data, a comment over :data:`MAX_COMMENT`)."""

    def __init__(self, max_frame: int = MAX_FRAME, max_junk: int = MAX_JUNK) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        #: bytes of the frame so far (every line), and of its fields: junk
        #: unless it dispatches
        self._size = self._held = 0
        #: bytes since the last event that were not an event or a keepalive
        self._junk = 0
        #: the last line was a keepalive comment (the blank line after it is not junk)
        self._keepalive = False
        self.max_frame, self.max_junk = max_frame, max_junk
        #: the last ``id`` seen (what a reconnect would send as Last-Event-ID)
        self.last_id: str | None = None
        #: ``retry`` the server asked for, in seconds
        self.retry: float | None = None
        #: keepalive comments seen (a service that sends them promises them)
        self.keepalives = 0

    def feed(self, chunk: bytes) -> list[SSEMessage]:
        buffer = self._buffer + chunk
        out: list[SSEMessage] = []
        start = 0
        for match in _LINE_END.finditer(buffer):  # one pass: no copy of the rest per line
            if match.group() == b"\r" and match.end() == len(buffer):
                break  # a CR at the end may be half a CRLF
            message = self._line(buffer[start : match.start()], match.end() - start)
            start = match.end()
            if message is not None:
                out.append(message)
        self._buffer = buffer[start:]
        if len(self._buffer) + self._size > self.max_frame:
            raise ValueError(f"an event stream frame longer than {self.max_frame} bytes")
        return out

    def _line(self, raw: bytes, size: int) -> SSEMessage | None:
        if not raw:
            return self._end(size)
        self._size += size
        if self._size > self.max_frame:
            raise ValueError(f"an event stream frame longer than {self.max_frame} bytes")
        line = raw.decode("utf-8", "replace")
        self._keepalive = line.startswith(":") and size <= MAX_COMMENT
        self.keepalives += self._keepalive
        if line.startswith(":"):
            self._junk += 0 if self._keepalive else size
        else:
            self._field(line, size)
        self._check_junk()
        return None

    def _field(self, line: str, size: int) -> None:
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name not in _FIELDS:
            self._junk += size  # a field SSE does not define
            return
        self._held += size
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = self.last_id = value
        elif name == "retry" and value.isdigit():
            self.retry = int(value) / 1000

    def _end(self, size: int) -> SSEMessage | None:
        """A blank line: the frame so far is dispatched, or junk."""
        data, event = self._data, self._event
        if data:
            self._junk = 0
        else:
            self._junk += self._held + (0 if self._keepalive else size)
        self._data, self._event, self._size, self._held = [], "", 0, 0
        self._keepalive = False
        self._check_junk()
        if not data:
            return None
        return SSEMessage("\n".join(data), event or "message", self._id)

    def _check_junk(self) -> None:
        if self._junk > self.max_junk:
            raise ValueError(f"{self._junk} bytes without an event (a stream of garbage)")


@dataclasses.dataclass(frozen=True)
class PowerNews:
    """What one event record says about one node."""

    node: str
    message_id: str
    #: the power it reports (None: news without a state; read the node)
    power: PowerState | None = None
    health: str | None = None
    #: the BMC's EventTimestamp (epoch seconds), when it gave one
    at: float | None = None
    #: it came in a POST to bmaas's push listener (from whoever knows the
    #: subscription's Context), not on a stream bmaas opened to the BMC with
    #: its credentials: it says when to read the node, never what it is
    pushed: bool = False


def _timestamp(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        stamp = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.UTC)
    return stamp.timestamp()


def news_of(data: str, nodes: Mapping[str, str], *, pushed: bool = False) -> list[PowerNews]:
    """The news in one Event document for the nodes ``nodes`` maps from
    system path (``"*"``: the one node of a single-system service);
    ``pushed``: the document was POSTed to the push listener (each piece of
    news says so: :attr:`PowerNews.pushed`).
    Records about other resources are skipped; a document that is not an
    Event (not JSON, over :data:`MAX_FRAME`, nested deeper than
    :func:`~bmaas.drivers.redfish.framing.loads_bounded` takes) raises ValueError."""
    document = loads_bounded(data.encode(), limit=MAX_FRAME)
    records = document.get("Events") if isinstance(document, dict) else None
    if not isinstance(records, list):
        raise ValueError("not a Redfish Event (no Events array)")
    out: list[PowerNews] = []
    for record in records:
        if not isinstance(record, dict):
            continue
        message = str(record.get("MessageId") or "")
        origin = record.get("OriginOfCondition")
        path = origin.get("@odata.id") if isinstance(origin, dict) else origin
        node = _node_of(str(path or ""), nodes)
        if node is None:
            continue
        power = health = None
        found = _POWER.search(message)
        if found is not None and "Powering" not in message:
            power = PowerState.ON if found.group(1) == "On" else PowerState.OFF
        elif found is not None:
            power = PowerState.POWERING_ON if found.group(1) == "On" else PowerState.POWERING_OFF
        health_found = _HEALTH.search(message)
        if health_found is not None:
            health = health_found.group(1)
        at = _timestamp(record.get("EventTimestamp"))
        out.append(PowerNews(node, message, power, health, at, pushed))
    # A power or health record says what changed: the ResourceChanged beside
    # it in the same Event asks for no read of its own.
    told = {n.node for n in out if n.power is not None or n.health is not None}
    return [n for n in out if n.node not in told or n.power is not None or n.health is not None]


def _node_of(path: str, nodes: Mapping[str, str]) -> str | None:
    path = path.rstrip("/")
    if not path.startswith("/redfish/v1/Systems/"):
        return None
    system = "/".join(path.split("/")[:5])  # /redfish/v1/Systems/<id>
    return nodes.get(system) or nodes.get("*")


# -- the stream ------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class ServiceStream:
    """One Redfish service's event stream, for the nodes behind it."""

    address: str
    username: str
    password: Secret = dataclasses.field(repr=False)
    verify: bool | str
    #: system path (``"*"``: any; one node on the service) -> node
    nodes: dict[str, str]
    #: the TLS the BMC must meet (the node's driver_info, as its driver's)
    tls: TLSPolicy | None = dataclasses.field(default=None, repr=False)
    #: the open stream (read by the reactor: :meth:`read_ready`)
    _stream: Stream | None = dataclasses.field(default=None, repr=False)
    _wire_target: Target | None = dataclasses.field(default=None, repr=False)
    _parser: SSEParser = dataclasses.field(default_factory=SSEParser, repr=False)
    #: the ServerSentEventUri the last open found: a reconnect opens it
    #: directly (one request, not two), and reads the EventService again
    #: only if that fails
    _sse_uri: str | None = dataclasses.field(default=None, repr=False)
    #: the EventService document the last full open read (None: none read,
    #: or the service has none): a push subscription's fallback reads it
    event_service: dict[str, Any] | None = dataclasses.field(default=None, repr=False)
    #: the BMC's request gate (bmaas.gate) as its nodes' drivers take it:
    #: every request of the stream waits for its turn there, as theirs do
    cap: int = 4
    spacing: float = 0.05

    def pace(self, deadline: Deadline) -> None:
        """This request's turn at the BMC's gate (shared with the drivers of
        its nodes in this process): a stream opening while a pass reads the
        same BMC keeps to the spacing; ``SlotTimeout`` when no turn comes
        by ``deadline``."""
        gate = GATES.gate(f"redfish:{self.key}", cap=self.cap, spacing=self.spacing)
        gate.pace(deadline, node=",".join(sorted(set(self.nodes.values()))), operation=OPERATION)

    @property
    def key(self) -> str:
        return self.address.rstrip("/")

    def fail(self, cls: type[BMCFault], message: str, started: float, **kw: Any) -> BMCFault:
        """A fault of this stream's service, naming its nodes and the time
        since ``started``."""
        node = ",".join(sorted(set(self.nodes.values())))
        return cls(
            message,
            node=node,
            driver="redfish",
            operation=OPERATION,
            address=self.key,
            elapsed=time.monotonic() - started,
            **kw,
        )

    def request(
        self, method: str, path: str, deadline: Deadline, started: float, *, body: Any = None
    ) -> Answer:
        """One request to the service (Basic auth, JSON ``body``), through
        its gate, on a connection of its own (:mod:`bmaas.drivers.redfish.wire`):
        the whole answer by ``deadline``, whatever its status
        (:meth:`refused` maps an error status). A failure below HTTP, or the
        deadline passing, raises the edge's fault."""
        what = f"{method} {path.partition('?')[0]}"
        if deadline.left() <= 0:
            raise self.fail(BMCTimeout, f"no time left for {what}", started)
        self.pace(deadline)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = self._headers("application/json", close=True)
            if data is not None:
                headers["Content-Type"] = "application/json"
            target = self._target()
            sent = request_bytes(method, target, path, headers, data)
            return exchange(target, sent, deadline, what=what, max_body=MAX_FRAME)
        except Exception as exc:
            raise _fault(self, exc, started) from exc

    def refused(self, answer: Answer, method: str, path: str, started: float) -> BmaasError:
        """The fault for an answer that is not what was asked: its status
        through :func:`bmaas.drivers.redfish.faults.map_answer` (the one table)."""

        def build(cls: type[BMCFault], message: str, **kw: Any) -> BMCFault:
            return self.fail(cls, message, started, **kw)

        node = ",".join(sorted(set(self.nodes.values())))
        parts = (answer.status, answer.reason, answer.headers, answer.body)
        return map_answer(method, self.key + path, parts, build, node=node)

    def _target(self) -> Target:
        target = self._wire_target
        if target is None:
            target = self._wire_target = Target.of(self.address, verify=self.verify, tls=self.tls)
        return target

    def _headers(self, accept: str, *, close: bool = False) -> dict[str, str]:
        token = base64.b64encode(f"{self.username}:{self.password.reveal()}".encode()).decode()
        headers = {"Authorization": f"Basic {token}", "Accept": accept}
        if close:
            headers["Connection"] = "close"
        return headers

    def open(self, deadline: Deadline) -> None:
        """Read the EventService and open its SSE stream within ``deadline``;
        a reconnect opens the stream the last open found, at once (the
        EventService is read again only if that fails)."""
        started = time.monotonic()
        self.close()
        known = self._sse_uri
        if known is not None:
            try:
                self._open_sse(known, deadline, started)
                return
            except (UnsupportedOperation, BMCProtocolError):  # moved, or gone: ask again
                self._sse_uri = None
        self.event_service = None
        answer = self.request("GET", EVENT_SERVICE, deadline, started)
        if answer.status != 200:
            raise self.refused(answer, "GET", EVENT_SERVICE, started)
        try:
            service = loads_bounded(answer.body, limit=MAX_FRAME)
        except ValueError as exc:
            raise self.fail(BMCProtocolError, "the EventService is not JSON", started) from exc
        if isinstance(service, dict):
            self.event_service = service
        if not isinstance(service, dict) or service.get("ServiceEnabled") is False:
            raise self.fail(UnsupportedOperation, "the EventService is disabled", started)
        uri = service.get("ServerSentEventUri")
        if not isinstance(uri, str) or not uri.startswith("/"):
            raise self.fail(UnsupportedOperation, "the EventService offers no SSE", started)
        self._open_sse(uri, deadline, started)

    def _open_sse(self, uri: str, deadline: Deadline, started: float) -> None:
        """The stream's GET, its head read by ``deadline``."""
        if deadline.left() <= 0:
            raise self.fail(BMCTimeout, "no time left to open the event stream", started)
        self.pace(deadline)
        try:
            target = self._target()
            sent = request_bytes("GET", target, uri + _FILTER, self._headers("text/event-stream"))
            stream = open_stream(target, sent, deadline, what="the event stream's open")
        except Exception as exc:
            raise _fault(self, exc, started) from exc
        if stream.status != 200:
            try:
                answer = stream.whole(MAX_ERROR_BODY)
            except Exception:  # the status says enough
                answer = Answer(stream.status, stream.reason, stream.headers, b"")
            raise self.refused(answer, "GET", uri, started)
        kind = stream.headers.get("content-type", "").split(";")[0].strip()
        if kind != "text/event-stream":
            stream.close()
            raise self.fail(BMCProtocolError, f"the stream is {kind or 'untyped'}", started)
        self._stream = stream
        self._parser = SSEParser()
        self._sse_uri = uri

    def selectable(self) -> Stream | None:
        """The open stream (a ``fileno()`` a selector waits on:
        :class:`bmaas.reactor.Reactor`), None when closed."""
        return self._stream

    def read_ready(self) -> list[PowerNews] | None:
        """The news in what has arrived, without waiting (maybe none: a
        keepalive), None when no byte has (a partial TLS record). A closed
        stream is :class:`BMCUnreachable`, a bad event :class:`BMCProtocolError`.
        The reactor calls it when the stream's socket is readable; the idle
        limit is the reactor's (:meth:`silent`)."""
        started = time.monotonic()
        stream = self._open_or_fail(started)
        try:
            chunk = stream.read_now()
        except Exception as exc:
            self.close()
            raise _fault(self, exc, started) from exc
        return None if chunk is None else self._news(chunk, started)

    @property
    def keeps_alive(self) -> bool:
        """The service sent keepalive comments since the stream opened: two
        at least (one at the start is a greeting, hwlab's ``: hwlab event
        stream``; a service that keeps alive sends one every period)."""
        return self._parser.keepalives >= PROMISED

    def silent(self, idle: float) -> BmaasError:
        """The fault of a stream silent for ``idle`` seconds (it is closed)."""
        self.close()
        return self.fail(BMCTimeout, "the event stream was silent", time.monotonic() - idle)

    def _open_or_fail(self, started: float) -> Stream:
        stream = self._stream
        if stream is None:
            raise self.fail(BMCUnreachable, "the event stream is not open", started)
        return stream

    def _news(self, chunk: bytes, started: float) -> list[PowerNews]:
        if not chunk:
            self.close()
            raise self.fail(BMCUnreachable, "the BMC closed the event stream", started)
        out: list[PowerNews] = []
        try:
            for message in self._parser.feed(chunk):
                out.extend(news_of(message.data, self.nodes))
        except ValueError as exc:
            self.close()
            raise self.fail(BMCProtocolError, f"a bad event: {exc}", started) from exc
        return out

    def close(self) -> None:
        """Close the stream (its connection shut down)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()


def _fault(stream: ServiceStream, exc: BaseException, started: float) -> BmaasError:
    """The edge's one mapping of a socket or HTTP failure."""
    if isinstance(exc, BmaasError):
        return exc
    if isinstance(exc, DeadlineExceeded):
        return stream.fail(BMCTimeout, str(exc), started, cause=exc)
    if isinstance(exc, ConnectFailed):
        return stream.fail(BMCUnreachable, str(exc), started, cause=exc)
    if isinstance(exc, socket.timeout | TimeoutError):
        return stream.fail(BMCTimeout, "the event stream was silent", started, cause=exc)
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return stream.fail(BMCProtocolError, f"TLS: {type(exc).__name__}", started, cause=exc)
    if isinstance(exc, ConnectionError | OSError | http.client.IncompleteRead):
        return stream.fail(BMCUnreachable, type(exc).__name__, started, cause=exc)
    if isinstance(exc, http.client.HTTPException):
        return stream.fail(BMCProtocolError, type(exc).__name__, started, cause=exc)
    return stream.fail(BMCProtocolError, type(exc).__name__, started, cause=exc)


def services(
    records: Iterable[Any], *, environ: Mapping[str, str] | None = None
) -> tuple[list[ServiceStream], dict[str, str]]:
    """One :class:`ServiceStream` per Redfish service behind ``records``
    (``NodeRecord``s of driver ``redfish``: same address and credentials),
    and the nodes left out with why (a password reference that does not
    resolve: such a node is polled, and its read says why)."""
    by_service: dict[tuple[str, str, str, str, str], ServiceStream] = {}
    left_out: dict[str, str] = {}
    for record in records:
        try:
            raw = credentials.resolve_driver_info(
                record.driver_info, node=record.name, environ=environ
            )
            info = DriverInfo.parse(raw, required=("redfish_address",), node=record.name)
            tls = TLSPolicy.of(
                min_version=info.redfish_tls_min_version, ciphers=info.redfish_tls_ciphers
            )
        except InputError as exc:
            left_out[record.name] = str(exc)
            continue
        address = str(info.redfish_address).rstrip("/")
        password = Secret(info.redfish_password or "")
        key = (
            address,
            info.redfish_username or "",
            password.reveal(),
            repr(info.redfish_verify_ca),
            f"{info.redfish_tls_min_version}/{info.redfish_tls_ciphers}",
        )
        stream = by_service.get(key)
        if stream is None:
            stream = by_service[key] = ServiceStream(
                address, info.redfish_username or "", password, info.redfish_verify_ca, {}
            )
            stream.tls = tls
        # the gate as the node's driver takes it (RedfishDriver's limits, the node's own)
        if info.bmc_max_requests is not None:
            stream.cap = min(stream.cap, info.bmc_max_requests)
        if info.bmc_min_interval is not None:
            stream.spacing = max(stream.spacing, info.bmc_min_interval)
        system = info.redfish_system_id
        if system is not None and not system.startswith("/"):
            system = f"/redfish/v1/Systems/{system}"
        stream.nodes[(system or "*").rstrip("/")] = record.name
    for stream in by_service.values():
        if "*" in stream.nodes and len(set(stream.nodes.values())) > 1:
            # several nodes and one without a system path: nobody can tell
            # whose event it is; that node is polled
            left_out[stream.nodes.pop("*")] = "no redfish_system_id on a shared service"
    return list(by_service.values()), left_out


def describe(streams: Sequence[ServiceStream]) -> str:
    return ", ".join(s.key for s in streams)
