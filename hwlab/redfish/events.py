"""A lab BMC that tells: Redfish's EventService, over SSE and push.

Every Redfish service of the lab (one endpoint: one system, or the systems
of a shared service) has one :class:`Hub`, made when a client first asks for
``/redfish/v1/EventService``. The hub watches each system's machine
(:attr:`~bmaas.fakes.machine.FakeMachine.watchers`), so it sees *every*
change, whoever made it: a Redfish reset, an IPMI chassis control, the
lab's control API (a console power-off, ``hwlab health``), a ``power_lost``
or ``boot_crash`` effect, a transition landing seconds after it was
accepted. For each landed power change it sends one Event with two
records, as DMTF's ResourceEvent registry has them (``ResourcePoweredOn``
/ ``ResourcePoweredOff`` and ``ResourceChanged``, both with the system as
``OriginOfCondition``); for a health change ``ResourceStatusChanged<Health>``
and ``ResourceChanged``.

What a client gets:

* ``GET /redfish/v1/EventService``: ``ServiceEnabled``,
  ``ServerSentEventUri`` (``/redfish/v1/EventService/SSE``), the delivery
  retry settings, ``EventFormatTypes``, ``RegistryPrefixes``, the
  subscriptions and the ``SubmitTestEvent`` action. ``PATCH``
  ``ServiceEnabled: false`` closes every stream and refuses new ones (503).
* ``GET /redfish/v1/EventService/SSE[?$filter=...]``: a ``text/event-stream``
  that stays open: one ``id:``/``data:`` frame per Event, a ``:`` comment
  every :data:`KEEPALIVE` seconds when nothing happens. ``$filter`` takes
  ``and``-ed ``eq`` terms over ``EventFormatType`` (``Event``),
  ``RegistryPrefixes``, ``OriginResource`` and ``ResourceTypes``.
* ``POST /redfish/v1/EventService/Subscriptions`` (an EventDestination with
  ``Destination``, ``Context``, ``RegistryPrefixes``, ``DeliveryRetryPolicy``):
  each Event is POSTed to the destination; a failed delivery is retried
  ``DeliveryRetryAttempts`` times ``DeliveryRetryIntervalSeconds`` apart,
  then the policy decides (``TerminateAfterRetries``: the subscription is
  deleted; ``SuspendRetries``: it is ``Suspended``; ``RetryForever``).
  ``GET``/``DELETE`` ``Subscriptions/<id>``; a BMC reboot forgets them all,
  as real BMCs without persistent subscriptions do.
* ``POST .../Actions/EventService.SubmitTestEvent``: one Event to everyone.

Faults on the event path are ordinary fault rules whose operation names it
(:data:`bmaas.fakes.faults.EVENT_PREFIX`; a rule on ``*`` never meets it):

============================  ===============================================
operation                     effects
============================  ===============================================
``event.subscribe``           any request effect on the EventService's own
                              requests: ``unsupported`` (no EventService),
                              ``busy``, ``internal_error``, ``drop``, ``hang``
``event.stream``              per event and stream, first: ``drop`` closes
                              the stream (TCP reset; the event is lost with
                              it), ``hang`` stalls it (open, silent)
``event.power``,              per event and stream: ``drop`` loses it,
``event.health``,             ``delay`` sends it ``seconds`` later (so out of
``event.test``                order), ``duplicate`` sends it 1 + ``copies``
                              times, ``hang`` stalls the stream from there
============================  ===============================================
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import itertools
import json
import logging
import time
import urllib.parse
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from bmaas.driver import PowerState
from bmaas.fakes.effects import Effect, Firing, decide
from bmaas.hwlab import answers
from bmaas.hwlab.http import Request, Response, redfish_error
from bmaas.hwlab.redfish.bmc import Bmc, RequestRecord

__all__ = ["KEEPALIVE", "PREFIX", "SSE_PATH", "Hub", "answer", "forget", "hub_for", "serves"]

LOG = logging.getLogger(__name__)

PREFIX = "/redfish/v1/EventService"
SSE_PATH = f"{PREFIX}/SSE"
SUBSCRIPTIONS = f"{PREFIX}/Subscriptions"
TEST_ACTION = f"{PREFIX}/Actions/EventService.SubmitTestEvent"
#: the DMTF registry the lab's messages come from (ResourcePoweredOn/Off
#: arrived in ResourceEvent 1.3.0)
REGISTRY = "ResourceEvent.1.3.0"
#: seconds between keepalive comments on an idle stream
KEEPALIVE = 30.0
#: Events a stream holds for a client that does not read; past it the stream closes
MAX_QUEUE = 4096
#: push delivery: attempts after the first, and seconds between them
RETRY_ATTEMPTS = 3
RETRY_INTERVAL = 1.0
#: seconds a push delivery may take (connect, send, status line)
DELIVERY_TIMEOUT = 5.0
_HEALTH_MESSAGE = {"OK": "OK", "Warning": "Warning", "Critical": "Critical"}
_FILTER_KEYS = {"EventFormatType", "RegistryPrefixes", "OriginResource", "ResourceTypes"}
_POLICIES = ("TerminateAfterRetries", "SuspendRetries", "RetryForever")


def serves(path: str) -> bool:
    """Whether ``path`` is the EventService's (answered here, not by sushy-tools)."""
    return path == PREFIX or path.startswith(PREFIX + "/")


# -- events --------------------------------------------------------------------


def _stamp(age: float) -> str:
    at = datetime.datetime.fromtimestamp(time.time() - max(0.0, age), tz=datetime.UTC)
    return at.isoformat(timespec="milliseconds")


def _record(
    message: str, args: list[str], origin: str, severity: str, age: float
) -> dict[str, Any]:
    return {
        "EventType": "Other",
        "EventTimestamp": _stamp(age),
        "MessageId": message,
        "MessageArgs": args,
        "MessageSeverity": severity,
        "Severity": severity,
        "OriginOfCondition": {"@odata.id": origin},
    }


def power_records(bmc: Bmc, state: PowerState, age: float) -> list[dict[str, Any]]:
    """ResourcePoweredOn/Off and ResourceChanged for ``bmc``'s system."""
    word = "On" if state is PowerState.ON else "Off"
    origin = bmc.system_path
    return [
        _record(f"{REGISTRY}.ResourcePowered{word}", [origin], origin, "OK", age)
        | {"Message": f"The resource {origin} has powered {word.lower()}."},
        _record(f"{REGISTRY}.ResourceChanged", [], origin, "OK", age)
        | {"Message": "One or more resource properties have changed."},
    ]


def health_records(bmc: Bmc, health: str) -> list[dict[str, Any]]:
    origin = bmc.system_path
    word = _HEALTH_MESSAGE.get(health, "Critical")
    return [
        _record(f"{REGISTRY}.ResourceStatusChanged{word}", [origin, health], origin, health, 0.0)
        | {"Message": f"The health of resource {origin} has changed to {health}."},
        _record(f"{REGISTRY}.ResourceChanged", [], origin, "OK", 0.0)
        | {"Message": "One or more resource properties have changed."},
    ]


@dataclasses.dataclass(frozen=True)
class EventFilter:
    """What one stream or subscription takes (``$filter`` / EventDestination)."""

    prefixes: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()

    def accepts(self, records: list[dict[str, Any]]) -> bool:
        if self.formats and "Event" not in self.formats:
            return False
        for record in records:
            prefix = str(record["MessageId"]).split(".", 1)[0]
            origin = str(record["OriginOfCondition"]["@odata.id"])
            if self.prefixes and prefix not in self.prefixes:
                continue
            if self.origins and not any(
                origin == o.rstrip("/") or origin.startswith(o.rstrip("/") + "/")
                for o in self.origins
            ):
                continue
            if self.types and "ComputerSystem" not in self.types:
                continue
            return True
        return False

    @classmethod
    def parse(cls, text: str) -> EventFilter:
        """``$filter``: ``and``-ed ``Property eq 'value'`` terms; ValueError names the bad one."""
        found: dict[str, list[str]] = {k: [] for k in _FILTER_KEYS}
        for term in (t.strip() for t in text.split(" and ") if t.strip()):
            name, op, value = [*term.split(None, 2), "", ""][:3]
            if op != "eq" or name not in _FILTER_KEYS or len(value) < 2 or value[0] != "'":
                raise ValueError(f"cannot filter on {term!r}")
            found[name].append(value.strip("'"))
        return cls(
            prefixes=tuple(found["RegistryPrefixes"]),
            origins=tuple(found["OriginResource"]),
            types=tuple(found["ResourceTypes"]),
            formats=tuple(found["EventFormatType"]),
        )


# -- the hub -------------------------------------------------------------------


class _Sink:
    """A stream or a subscription: the fault plan decides, per event, what reaches it."""

    def __init__(self, hub: Hub, events: EventFilter) -> None:
        self.hub = hub
        self.filter = events
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.stalled = False
        self.closed = False

    def offer(self, bmc: Bmc, kind: str, document: dict[str, Any], records: list[Any]) -> None:
        if self.closed or not self.filter.accepts(records):
            return
        plan = bmc.machine.plan
        for firing in plan.evaluate("event.stream", protocol="redfish"):
            if firing.effect is Effect.DROP:
                self.close()
                return
            if firing.effect is Effect.HANG:
                self.stalled = True
        copies, delay = 0, 0.0
        for firing in plan.evaluate(f"event.{kind}", protocol="redfish"):
            if firing.effect is Effect.DROP:
                return
            if firing.effect is Effect.HANG:
                self.stalled = True
            elif firing.effect is Effect.DELAY:
                delay += float(firing.params["seconds"])
            elif firing.effect is Effect.DUPLICATE:
                copies += int(firing.params["copies"])
        data = json.dumps(document).encode()
        for _ in range(copies + 1):
            if delay:
                asyncio.get_running_loop().call_later(delay, self._put, data)
            else:
                self._put(data)

    def _put(self, data: bytes | None) -> None:
        if self.closed and data is not None:
            return
        if self.queue.qsize() >= MAX_QUEUE:
            self.close()
            return
        self.queue.put_nowait(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


class Hub:
    """One Redfish service's EventService: its streams, subscriptions, and
    the watch on its systems' machines."""

    def __init__(self, keeper: Bmc) -> None:
        self.keeper = keeper
        self.enabled = True
        self.sinks: set[_Sink] = set()
        self.subscriptions: dict[str, Subscription] = {}
        self._ids = itertools.count(1)
        self._sub_ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last: dict[Bmc, tuple[PowerState, str]] = {}
        self._timers: dict[Bmc, asyncio.TimerHandle] = {}
        #: Events sent (one per change, whoever listens)
        self.sent = 0

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start watching the service's machines (once, on the server's loop)."""
        if self._loop is not None:
            return
        self._loop = loop
        for bmc in self.keeper.peers:
            self._last[bmc] = (bmc.machine.settled_power, bmc.machine.health)
            bmc.machine.watchers.append(functools.partial(self._poke, bmc))
            self._arm(bmc)

    def _poke(self, bmc: Bmc, power: PowerState, health: str, age: float) -> None:
        """A machine changed (any thread, under its lock): what it is at this
        instant goes to the loop, so two quick changes are two events."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(self._apply, bmc, power, health, age)

    def _apply(self, bmc: Bmc, power: PowerState, health: str, age: float) -> None:
        last_power, last_health = self._last[bmc]
        self._last[bmc] = (power, health)
        if power != last_power:
            self.publish(bmc, "power", power_records(bmc, power, age))
        if health != last_health:
            self.publish(bmc, "health", health_records(bmc, health))
        self._arm(bmc)

    def _arm(self, bmc: Bmc) -> None:
        """Look again when the machine's next transition is due: nobody may
        be reading the machine then; the BMC is (landing it notifies)."""
        due = bmc.machine.next_change_in()
        old = self._timers.pop(bmc, None)
        if old is not None:
            old.cancel()
        if due is not None and self._loop is not None:
            self._timers[bmc] = self._loop.call_later(due + 0.001, self._arm, bmc)

    def publish(self, bmc: Bmc, kind: str, records: list[dict[str, Any]]) -> None:
        number = next(self._ids)
        for i, record in enumerate(records):
            record.update(EventId=f"{number}.{i}", MemberId=str(i))
        document = {
            "@odata.type": "#Event.v1_7_0.Event",
            "Id": str(number),
            "Name": "Event Array",
            "Events": records,
        }
        self.sent += 1
        for sink in list(self.sinks):
            sink.offer(bmc, kind, document, records)

    def forget(self) -> None:
        """The BMC rebooted: streams end, subscriptions are forgotten."""
        for sink in list(self.sinks):
            sink.close()
        self.subscriptions.clear()

    # -- resources --------------------------------------------------------------

    def resource(self) -> dict[str, Any]:
        return {
            "@odata.type": "#EventService.v1_10_0.EventService",
            "@odata.id": PREFIX,
            "Id": "EventService",
            "Name": "Event Service",
            "ServiceEnabled": self.enabled,
            "Status": {"State": "Enabled" if self.enabled else "Disabled", "Health": "OK"},
            "DeliveryRetryAttempts": RETRY_ATTEMPTS,
            "DeliveryRetryIntervalSeconds": int(RETRY_INTERVAL),  # an Int64 in the schema
            "EventFormatTypes": ["Event"],
            "RegistryPrefixes": ["ResourceEvent"],
            "ResourceTypes": ["ComputerSystem"],
            "ServerSentEventUri": SSE_PATH,
            "SSEFilterPropertiesSupported": {
                "EventFormatType": True,
                "MessageId": False,
                "MetricReportDefinition": False,
                "OriginResource": True,
                "RegistryPrefix": True,
                "ResourceType": True,
            },
            "Subscriptions": {"@odata.id": SUBSCRIPTIONS},
            "Actions": {
                "#EventService.SubmitTestEvent": {
                    "target": TEST_ACTION,
                    "@Redfish.ActionInfo": None,
                }
            },
        }


_HUBS: weakref.WeakKeyDictionary[Bmc, Hub] = weakref.WeakKeyDictionary()


def forget(keeper: Bmc) -> None:
    """``keeper``'s BMC rebooted: its streams end, its subscriptions are gone."""
    hub = _HUBS.get(keeper)
    if hub is not None:
        hub.forget()


def hub_for(keeper: Bmc) -> Hub:
    """The EventService of the service ``keeper`` answers for (made on first use)."""
    hub = _HUBS.get(keeper)
    if hub is None:
        hub = _HUBS[keeper] = Hub(keeper)
    return hub


# -- push subscriptions ----------------------------------------------------------


class Subscription(_Sink):
    """An EventDestination: Events POSTed to ``destination`` by a task of its own."""

    def __init__(self, hub: Hub, sid: str, body: dict[str, Any], events: EventFilter) -> None:
        super().__init__(hub, events)
        self.id = sid
        self.destination = str(body["Destination"])
        self.context = str(body.get("Context") or "")
        self.policy = str(body.get("DeliveryRetryPolicy") or "TerminateAfterRetries")
        self.state = "Enabled"
        self.delivered = 0
        self.task: asyncio.Task[None] | None = None

    def resource(self) -> dict[str, Any]:
        return {
            "@odata.type": "#EventDestination.v1_13_0.EventDestination",
            "@odata.id": f"{SUBSCRIPTIONS}/{self.id}",
            "Id": self.id,
            "Name": f"Subscription {self.id}",
            "Destination": self.destination,
            "Context": self.context,
            "Protocol": "Redfish",
            "SubscriptionType": "RedfishEvent",
            "EventFormatType": "Event",
            "DeliveryRetryPolicy": self.policy,
            "RegistryPrefixes": list(self.filter.prefixes),
            "OriginResources": [{"@odata.id": o} for o in self.filter.origins],
            "Status": {"State": self.state, "Health": "OK"},
        }

    async def run(self, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        while True:
            data = await self.queue.get()
            if data is None:
                return
            if self.state != "Enabled":
                continue  # suspended: events are not sent
            if self.context:
                document = json.loads(data)
                document["Context"] = self.context
                data = json.dumps(document).encode()
            for attempt in range(RETRY_ATTEMPTS + 1):
                if await _post(self.destination, data):
                    self.delivered += 1
                    break
                if attempt < RETRY_ATTEMPTS:
                    await sleep(RETRY_INTERVAL)
            else:
                if self.policy == "TerminateAfterRetries":
                    LOG.info("subscription %s to %s deleted", self.id, self.destination)
                    self.hub.subscriptions.pop(self.id, None)
                    self.hub.sinks.discard(self)
                    return
                if self.policy == "SuspendRetries":
                    self.state = "Suspended"


async def _post(destination: str, data: bytes) -> bool:
    """POST one Event to a listener; True on a 2xx."""
    url = urllib.parse.urlsplit(destination)
    if url.scheme not in ("http", "https") or not url.hostname:
        return False
    port = url.port or (443 if url.scheme == "https" else 80)
    head = (
        f"POST {url.path or '/'} HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode("latin-1")
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(DELIVERY_TIMEOUT):
            reader, writer = await asyncio.open_connection(
                url.hostname, port, ssl=url.scheme == "https" or None
            )
            writer.write(head + data)
            await writer.drain()
            status = (await reader.readline()).split()
            return len(status) >= 2 and status[1].startswith(b"2")
    except (OSError, TimeoutError, ValueError):
        return False
    finally:
        if writer is not None:
            writer.close()


# -- requests ------------------------------------------------------------------


def _json(
    status: int, body: dict[str, Any], headers: list[tuple[str, str]] | None = None
) -> Response:
    base = [
        ("Content-Type", "application/json"),
        ("OData-Version", "4.0"),
        ("Cache-Control", "no-cache"),
    ]
    return Response(status, [*base, *(headers or [])], json.dumps(body).encode())


async def answer(
    keeper: Bmc,
    request: Request,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    authenticate: Callable[[Request], Response | None],
) -> bool:
    """Answer a request under ``/redfish/v1/EventService``; False when the
    connection must close (always, after a stream)."""
    keeper.count_request()
    hub = hub_for(keeper)
    hub.bind(asyncio.get_running_loop())
    firings = keeper.machine.plan.evaluate("event.subscribe", protocol="redfish")
    fired = tuple(str(f.effect) for f in firings)
    action = decide(firings)
    path = request.path.rstrip("/")

    def record(status: int | None) -> None:
        keeper.record(RequestRecord(request.method, path, "event.subscribe", status, fired))

    plain = action.silent is None and action.answer is None and action.corrupt is None
    if request.method == "GET" and path == SSE_PATH and plain:
        if action.delay:
            await asyncio.sleep(action.delay)
        refused = authenticate(request) or _refuse_stream(hub, request)
        if refused is not None:
            record(refused.status)
            await answers.send(writer, refused.encode(keep_alive=False), None)
            return False
        record(200)
        keeper.in_flight -= 1  # a stream is not load (overload counts answers)
        try:
            await _stream(hub, request, reader, writer)
        finally:
            keeper.in_flight += 1
        return False

    async def serve(copies: int) -> tuple[Response, bool]:
        refused = authenticate(request)
        if refused is not None:
            return refused, False
        for _ in range(copies):
            _resource(hub, request, path)
        return _resource(hub, request, path), True

    return await answers.carry_out(
        action,
        request,
        reader,
        writer,
        forge=lambda firing: _forged(firing, request),
        serve=serve,
        drop=lambda: None,
        answered=lambda response: record(None if response is None else response.status),
    )


def _forged(firing: Firing, request: Request) -> Response | None:
    if firing.effect is Effect.UNSUPPORTED:
        # no EventService at all (older firmware, a licence tier without it)
        return redfish_error(404, "Base.1.8.ResourceMissingAtURI", "no EventService here")
    return answers.redfish_forged(firing, request)


def _refuse_stream(hub: Hub, request: Request) -> Response | None:
    if not hub.enabled:
        return redfish_error(503, "Base.1.8.ServiceDisabled", "the EventService is disabled")
    return None


def _filter_of(request: Request) -> EventFilter:
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(request.target).query)
    text = (query.get("$filter") or [""])[0]
    return EventFilter.parse(text)


async def _stream(
    hub: Hub, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        events = _filter_of(request)
    except ValueError as exc:
        bad = redfish_error(400, "Base.1.8.QueryParameterValueFormatError", str(exc))
        await answers.send(writer, bad.encode(keep_alive=False), None)
        return
    sink = _Sink(hub, events)
    hub.sinks.add(sink)
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "OData-Version: 4.0\r\nConnection: close\r\n\r\n"
    )
    gone = asyncio.ensure_future(reader.read(1))  # the client hung up (or sent junk)
    try:
        writer.write(head.encode("latin-1") + b": hwlab event stream\n\n")
        await writer.drain()
        while True:
            get = asyncio.ensure_future(sink.queue.get())
            done, _ = await asyncio.wait(
                {get, gone}, timeout=KEEPALIVE, return_when=asyncio.FIRST_COMPLETED
            )
            if gone in done:
                get.cancel()
                return
            if get not in done:
                get.cancel()
                if not sink.stalled:
                    writer.write(b": keepalive\n\n")
                    await writer.drain()
                continue
            data = get.result()
            if data is None:  # closed by a fault, the BMC, or a full queue
                answers.reset(writer)
                return
            if sink.stalled:
                continue  # the stream hangs: open, silent
            number = json.loads(data)["Id"]
            writer.write(b"id: " + str(number).encode() + b"\ndata: " + data + b"\n\n")
            await writer.drain()
    finally:
        gone.cancel()
        sink.close()
        hub.sinks.discard(sink)


def _resource(hub: Hub, request: Request, path: str) -> Response:
    method = request.method
    if path == PREFIX:
        if method == "GET":
            return _json(200, hub.resource())
        if method == "PATCH":
            try:
                body = json.loads(request.body or b"{}")
            except ValueError:
                body = None
            enabled = body.get("ServiceEnabled") if isinstance(body, dict) else None
            if not isinstance(enabled, bool):
                return redfish_error(400, "Base.1.8.PropertyValueTypeError", "ServiceEnabled")
            hub.enabled = enabled
            if not enabled:
                for sink in list(hub.sinks):
                    if not isinstance(sink, Subscription):
                        sink.close()
            return _json(200, hub.resource())
        return _not_allowed("GET, PATCH")
    if path == SUBSCRIPTIONS:
        if method == "GET":
            members = [{"@odata.id": f"{SUBSCRIPTIONS}/{s}"} for s in hub.subscriptions]
            return _json(
                200,
                {
                    "@odata.type": "#EventDestinationCollection.EventDestinationCollection",
                    "@odata.id": SUBSCRIPTIONS,
                    "Name": "Event Subscriptions",
                    "Members": members,
                    "Members@odata.count": len(members),
                },
            )
        if method == "POST":
            return _subscribe(hub, request)
        return _not_allowed("GET, POST")
    if path.startswith(SUBSCRIPTIONS + "/"):
        found = hub.subscriptions.get(path.rsplit("/", 1)[1])
        if found is None:
            return redfish_error(404, "Base.1.8.ResourceMissingAtURI", f"no {path}")
        if method == "GET":
            return _json(200, found.resource())
        if method == "DELETE":
            hub.subscriptions.pop(found.id, None)
            hub.sinks.discard(found)
            found.close()
            return Response(204, [("OData-Version", "4.0")])
        return _not_allowed("GET, DELETE")
    if path == TEST_ACTION and method == "POST":
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        origin = str(body.get("OriginOfCondition") or hub.keeper.system_path)
        message = str(body.get("MessageId") or "Base.1.0.Success")
        record = _record(message, list(body.get("MessageArgs") or []), origin, "OK", 0.0)
        record["Message"] = str(body.get("Message") or "Test event")
        hub.publish(hub.keeper, "test", [record])
        return Response(204, [("OData-Version", "4.0")])
    return redfish_error(404, "Base.1.8.ResourceMissingAtURI", f"no {path}")


def _subscribe(hub: Hub, request: Request) -> Response:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        return redfish_error(400, "Base.1.8.MalformedJSON", "the body is not JSON")
    if not isinstance(body, dict) or not isinstance(body.get("Destination"), str):
        return redfish_error(400, "Base.1.8.PropertyMissing", "Destination is required")
    if body.get("Protocol", "Redfish") != "Redfish":
        return redfish_error(400, "Base.1.8.PropertyValueNotInList", "Protocol must be Redfish")
    if body.get("DeliveryRetryPolicy", "TerminateAfterRetries") not in _POLICIES:
        return redfish_error(400, "Base.1.8.PropertyValueNotInList", "DeliveryRetryPolicy")
    origins = [
        str(o.get("@odata.id")) for o in body.get("OriginResources") or [] if isinstance(o, dict)
    ]
    events = EventFilter(
        prefixes=tuple(str(p) for p in body.get("RegistryPrefixes") or []),
        origins=tuple(origins),
    )
    sid = str(next(hub._sub_ids))
    subscription = Subscription(hub, sid, body, events)
    hub.subscriptions[sid] = subscription
    hub.sinks.add(subscription)
    subscription.task = asyncio.get_running_loop().create_task(subscription.run())
    location = f"{SUBSCRIPTIONS}/{sid}"
    return _json(201, subscription.resource(), [("Location", location)])


def _not_allowed(allow: str) -> Response:
    error = redfish_error(405, "Base.1.8.ActionNotSupported", "method not allowed")
    error.headers.append(("Allow", allow))
    return error
