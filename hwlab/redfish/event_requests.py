"""The EventService's requests: its resources, the SSE stream, push delivery.

:func:`answer` serves every request under ``/redfish/v1/EventService`` for
the hub (:mod:`bmaas.hwlab.redfish.events`) of the service it arrives at:
``GET``/``PATCH`` the EventService, the SSE stream (a response that stays
open: headers, then one frame per Event, a comment every
the keeper BMC's ``sse_keepalive`` seconds, 30 by default, none when it is
None), the subscriptions
(POST makes a :class:`Subscription` whose task POSTs each Event to its
destination, retried by its ``DeliveryRetryPolicy``), and
``SubmitTestEvent``. The ``event.subscribe`` fault rules are carried out
here by the executor every Redfish request uses
(:func:`bmaas.hwlab.answers.carry_out`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from bmaas.fakes.effects import Effect, Firing, decide
from bmaas.hwlab import answers
from bmaas.hwlab.http import Request, Response, redfish_error
from bmaas.hwlab.redfish import events, standard
from bmaas.hwlab.redfish.bmc import Bmc, RequestRecord
from bmaas.hwlab.redfish.events import (
    PREFIX,
    SSE_PATH,
    SUBSCRIPTIONS,
    TEST_ACTION,
    EventFilter,
    Hub,
    Sink,
    hub_for,
)

__all__ = ["Subscription", "answer", "serves"]

LOG = logging.getLogger(__name__)

_POLICIES = ("TerminateAfterRetries", "SuspendRetries", "RetryForever")
serves = events.serves


# -- push subscriptions ----------------------------------------------------------


class Subscription(Sink):
    """An EventDestination: Events POSTed to ``destination`` by a task of its own."""

    def __init__(self, hub: Hub, sid: str, body: dict[str, Any], wanted: EventFilter) -> None:
        super().__init__(hub, wanted)
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
            for attempt in range(events.RETRY_ATTEMPTS + 1):
                if await _post(self.destination, data):
                    self.delivered += 1
                    break
                if attempt < events.RETRY_ATTEMPTS:
                    await sleep(events.RETRY_INTERVAL)
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
        async with asyncio.timeout(events.DELIVERY_TIMEOUT):
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
        wanted = _filter_of(request)
    except ValueError as exc:
        bad = redfish_error(400, "Base.1.8.QueryParameterValueFormatError", str(exc))
        await answers.send(writer, bad.encode(keep_alive=False), None)
        return
    sink = Sink(hub, wanted)
    hub.sinks.add(sink)
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "OData-Version: 4.0\r\nConnection: close\r\n\r\n"
    )
    gone = asyncio.ensure_future(reader.read(1))  # the client hung up (or sent junk)
    keepalive = hub.keeper.sse_keepalive  # None: never a comment (bmcweb's way)
    try:
        writer.write(head.encode("latin-1") + b": hwlab event stream\n\n")
        await writer.drain()
        while True:
            get = asyncio.ensure_future(sink.queue.get())
            done, _ = await asyncio.wait(
                {get, gone}, timeout=keepalive, return_when=asyncio.FIRST_COMPLETED
            )
            if gone in done:
                get.cancel()
                return
            if get not in done:
                get.cancel()
                if not sink.stalled and _wedged(hub):
                    sink.stalled = True
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


def _wedged(hub: Hub) -> bool:
    """Whether a ``hang`` of the whole service (``scope: all``) stalls the
    stream at this keepalive (``event.keepalive``): open and silent from
    then on, as a wedged web server's; without such a rule the stream lives
    on, whatever hangs the API."""
    return any(
        firing.effect is Effect.HANG
        for bmc in hub.keeper.peers
        for firing in bmc.machine.plan.evaluate("event.keepalive", protocol="redfish")
    )


def _resource(hub: Hub, request: Request, path: str) -> Response:
    if path == PREFIX:
        return _service(hub, request)
    if path == SUBSCRIPTIONS:
        return _collection(hub, request)
    if path.startswith(SUBSCRIPTIONS + "/"):
        return _subscription(hub, request, path)
    if path == TEST_ACTION and request.method == "POST":
        return _test_event(hub, request)
    return redfish_error(404, "Base.1.8.ResourceMissingAtURI", f"no {path}")


def _body(request: Request) -> Any:
    try:
        return json.loads(request.body or b"{}")
    except ValueError:
        return None


def _service(hub: Hub, request: Request) -> Response:
    """``GET``/``PATCH`` the EventService (``ServiceEnabled``)."""
    if request.method == "GET":
        return _json(200, hub.resource())
    if request.method != "PATCH":
        return _not_allowed("GET, PATCH")
    body = _body(request)
    enabled = body.get("ServiceEnabled") if isinstance(body, dict) else None
    if not isinstance(enabled, bool):
        return redfish_error(400, "Base.1.8.PropertyValueTypeError", "ServiceEnabled")
    hub.enabled = enabled
    if not enabled:
        for sink in list(hub.sinks):
            if not isinstance(sink, Subscription):
                sink.close()
    return _json(200, hub.resource())


def _collection(hub: Hub, request: Request) -> Response:
    if request.method == "POST":
        return _subscribe(hub, request)
    if request.method != "GET":
        return _not_allowed("GET, POST")
    members = [f"{SUBSCRIPTIONS}/{s}" for s in hub.subscriptions]
    return _json(
        200, standard.collection(SUBSCRIPTIONS, "EventDestination", members, "Event Subscriptions")
    )


def _subscription(hub: Hub, request: Request, path: str) -> Response:
    found = hub.subscriptions.get(path.rsplit("/", 1)[1])
    if not isinstance(found, Subscription):
        return redfish_error(404, "Base.1.8.ResourceMissingAtURI", f"no {path}")
    if request.method == "GET":
        return _json(200, found.resource())
    if request.method != "DELETE":
        return _not_allowed("GET, DELETE")
    hub.subscriptions.pop(found.id, None)
    hub.sinks.discard(found)
    found.close()
    return Response(204, [("OData-Version", "4.0")])


def _test_event(hub: Hub, request: Request) -> Response:
    """``SubmitTestEvent``: one Event of the body's message, to every listener."""
    body = _body(request)
    body = body if isinstance(body, dict) else {}
    origin = str(body.get("OriginOfCondition") or hub.keeper.system_path)
    message = str(body.get("MessageId") or "Base.1.0.Success")
    record = events.event_record(message, list(body.get("MessageArgs") or []), origin, "OK", 0.0)
    record["Message"] = str(body.get("Message") or "Test event")
    hub.publish(hub.keeper, "test", [record])
    return Response(204, [("OData-Version", "4.0")])


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
    wanted = EventFilter(
        prefixes=tuple(str(p) for p in body.get("RegistryPrefixes") or []),
        origins=tuple(origins),
    )
    sid = str(next(hub._sub_ids))
    subscription = Subscription(hub, sid, body, wanted)
    hub.subscriptions[sid] = subscription
    hub.sinks.add(subscription)
    subscription.task = asyncio.get_running_loop().create_task(subscription.run())
    location = f"{SUBSCRIPTIONS}/{sid}"
    return _json(201, subscription.resource(), [("Location", location)])


def _not_allowed(allow: str) -> Response:
    error = redfish_error(405, "Base.1.8.ActionNotSupported", "method not allowed")
    error.headers.append(("Allow", allow))
    return error
