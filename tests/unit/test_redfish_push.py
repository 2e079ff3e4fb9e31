"""bmaas as a push listener (issue 37): a Redfish service without SSE is
subscribed with an EventDestination whose Destination is bmaas's listener
and whose Context is a per-subscription secret; Events carrying it are
news, anything else is refused. Against a tiny service on 127.0.0.1 that
records every request and POSTs Events as a BMC does; the listener on
127.0.0.1, a free port (HTTP, and HTTPS with hwlab's throwaway CA)."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.drivers.redfish.events import PowerNews, ServiceStream
from bmaas.drivers.redfish.push import PATH, PushListener, PushStream
from bmaas.faults import BMCUnreachable, UnsupportedOperation
from bmaas.reactor import Inbox
from bmaas.secrets import Secret
from tests.httpserve import send_json, serving_handler

SUBS = "/redfish/v1/EventService/Subscriptions"
OFF = {
    "Events": [
        {
            "MessageId": "ResourceEvent.1.3.0.ResourcePoweredOff",
            "OriginOfCondition": {"@odata.id": "/redfish/v1/Systems/1"},
        }
    ]
}


class Service:
    """A Redfish service with push subscriptions and no SSE."""

    def __init__(self, *, sse: bool = False, absent: bool = False) -> None:
        self.requests: list[tuple[str, str]] = []
        self.subscriptions: dict[str, dict[str, Any]] = {}
        self.sse = sse
        #: no EventService at all (404)
        self.absent = absent
        #: subscriptions made so far (their ids)
        self.made = 0

    def post_event(self, document: dict[str, Any], *, context: str | None = None) -> int:
        """What the BMC does for each subscription: POST the Event to its
        Destination with its Context (or the one given)."""
        (sub,) = self.subscriptions.values()
        return _post(sub["Destination"], {**document, "Context": context or sub["Context"]})


def _post(destination: str, document: Any, *, raw: bytes | None = None) -> int:
    url = urllib.parse.urlsplit(destination)
    if url.scheme == "https":
        context = ssl.create_default_context(cafile=str(CA[0])) if CA else None
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            url.hostname or "", url.port, timeout=5, context=context
        )
    else:
        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=5)
    body = raw if raw is not None else json.dumps(document).encode()
    conn.request("POST", url.path, body=body, headers={"Content-Type": "application/json"})
    status = conn.getresponse().status
    conn.close()
    return status


def _announced(destination: str, length: int) -> int:
    """A POST whose head announces ``length`` bytes and sends none of them:
    the listener answers from the head alone."""
    url = urllib.parse.urlsplit(destination)
    with socket.create_connection((url.hostname or "", url.port or 80), timeout=5) as sock:
        head = (
            f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
        )
        sock.sendall(head.encode("latin-1"))
        with sock.makefile("rb") as answer:
            status = answer.readline().split()
    return int(status[1])


#: the CA of the HTTPS test (set by it)
CA: list[Path] = []


def _handler(service: Service) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            service.requests.append(("GET", self.path))
            if self.path == "/redfish/v1/EventService" and not service.absent:
                body: dict[str, Any] = {
                    "ServiceEnabled": True,
                    "Subscriptions": {"@odata.id": SUBS},
                }
                if service.sse:
                    body["ServerSentEventUri"] = "/redfish/v1/EventService/SSE"
                send_json(self, 200, body)
            elif self.path == SUBS:
                members = [{"@odata.id": path} for path in service.subscriptions]
                send_json(self, 200, {"Members": members, "Members@odata.count": len(members)})
            elif self.path in service.subscriptions:
                sub = service.subscriptions[self.path]
                send_json(
                    self,
                    200,
                    {"Id": self.path.rsplit("/", 1)[1], "Destination": sub["Destination"]},
                )
            else:
                send_json(self, 404, {"error": {"code": "Base.1.0.ResourceMissingAtURI"}})

        def do_POST(self) -> None:
            service.requests.append(("POST", self.path))
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            service.made += 1
            path = f"{SUBS}/{service.made}"
            service.subscriptions[path] = body
            send_json(self, 201, {"@odata.id": path}, {"Location": path})

        def do_DELETE(self) -> None:
            service.requests.append(("DELETE", self.path))
            service.subscriptions.pop(self.path, None)
            send_json(self, 204, None)

    return Handler


@contextlib.contextmanager
def serving(service: Service) -> Iterator[str]:
    with serving_handler(_handler(service)) as url:
        yield url


@pytest.fixture
def listener() -> Iterator[PushListener]:
    lst = PushListener("127.0.0.1", 0)
    yield lst
    lst.close()


def _stream(url: str, listener: PushListener, **kw: Any) -> PushStream:
    sse = ServiceStream(url, "admin", Secret("pw-Push-1"), False, {"*": "n1"})
    return PushStream(sse, listener, **kw)


def _pushed(stream: PushStream) -> list[PowerNews]:
    """What was pushed to ``stream``'s Inbox, once something was (as the
    reactor reads it when the Inbox wakes it)."""
    arrived = threading.Event()
    box = stream.selectable()
    assert isinstance(box, Inbox)
    box.bind(arrived.set)
    assert arrived.wait(5.0), "nothing was pushed"
    box.bind(None)
    return stream.read_ready() or []


def test_a_service_without_sse_is_subscribed_and_its_pushed_event_is_news(
    listener: PushListener,
) -> None:
    service = Service()
    with serving(service) as url:
        stream = _stream(url, listener)
        stream.open(Deadline.after(5.0))
        assert stream.mode == "push"
        (sub,) = service.subscriptions.values()
        assert sub["Destination"] == listener.url == f"http://127.0.0.1:{listener.port}{PATH}"
        assert sub["Protocol"] == "Redfish"
        assert sub["EventFormatType"] == "Event"
        assert sub["DeliveryRetryPolicy"] == "TerminateAfterRetries"
        assert len(sub["Context"]) == 64  # 32 random bytes, hex
        assert service.post_event(OFF) == 204
        news = _pushed(stream)
        # pushed: a reason to read n1, never its state (issue 46, finding 5)
        assert [(n.node, n.power, n.pushed) for n in news] == [("n1", PowerState.OFF, True)]
        stream.close()
        listener.drain(5.0)  # the DELETE runs on the listener's pool
        assert service.subscriptions == {}  # deleted on close
    assert service.requests == [
        ("GET", "/redfish/v1/EventService"),  # the SSE open finds none
        ("GET", SUBS),  # nothing left by an earlier run
        ("POST", SUBS),  # no second EventService read: the document is kept
        ("DELETE", f"{SUBS}/1"),
    ]
    assert (listener.received, listener.refused) == (1, 0)


def test_subscriptions_an_earlier_run_left_are_deleted_before_subscribing(
    listener: PushListener,
) -> None:
    """A process killed before it could delete its subscription (SIGKILL, a
    conductor whose exit hooks never ran) left it on the BMC: the next run's
    first subscription deletes every one with this listener's Destination,
    and leaves other listeners' alone."""
    service = Service()
    theirs = {"Destination": "https://other.example:8789/events", "Context": "b" * 64}
    service.subscriptions = {
        f"{SUBS}/1": {"Destination": listener.url, "Context": "a" * 64},  # ours, dead run
        f"{SUBS}/2": theirs,
    }
    service.made = 2
    with serving(service) as url:
        stream = _stream(url, listener)
        stream.open(Deadline.after(5.0))
        assert service.subscriptions == {
            f"{SUBS}/2": theirs,
            f"{SUBS}/3": service.subscriptions[f"{SUBS}/3"],
        }
        assert service.subscriptions[f"{SUBS}/3"]["Destination"] == listener.url
        # a second open of the same stream (the BMC forgot it) does not look again
        stream.close()
        listener.drain(5.0)
        stream.open(Deadline.after(5.0))
        stream.close()
        listener.drain(5.0)
    assert service.requests == [
        ("GET", "/redfish/v1/EventService"),
        ("GET", SUBS),
        ("GET", f"{SUBS}/1"),
        ("DELETE", f"{SUBS}/1"),
        ("GET", f"{SUBS}/2"),
        ("POST", SUBS),
        ("DELETE", f"{SUBS}/3"),
        ("GET", "/redfish/v1/EventService"),
        ("POST", SUBS),
        ("DELETE", f"{SUBS}/4"),
    ]


def test_a_bmc_that_will_not_list_its_subscriptions_is_subscribed_all_the_same(
    listener: PushListener,
) -> None:
    service = Service()
    service.subscriptions = {f"{SUBS}/1": {"Destination": listener.url, "Context": "a" * 64}}
    service.made = 1
    with serving(service) as url:
        stream = _stream(url, listener)
        failing = stream._request

        def refuse_the_list(method: str, path: str, *args: Any) -> Any:
            if method == "GET" and path == SUBS:
                raise BMCUnreachable("the list timed out")
            return failing(method, path, *args)

        stream._request = refuse_the_list  # type: ignore[method-assign]
        stream.open(Deadline.after(5.0))
        assert stream.mode == "push"
        assert f"{SUBS}/2" in service.subscriptions
        stream.close()


def test_sse_is_preferred_where_offered_unless_push_is(listener: PushListener) -> None:
    service = Service(sse=True)
    with serving(service) as url:
        stream = _stream(url, listener, prefer_push=True)
        stream.open(Deadline.after(5.0))
        assert stream.mode == "push"
        stream.close()
    assert ("POST", SUBS) in service.requests


def test_events_without_our_context_or_not_json_or_too_big_are_refused(
    listener: PushListener,
) -> None:
    """Whose a body is comes first: one without a Context of ours is 403
    whatever else it is (not parsed at all); one of ours that is not JSON
    is 400."""
    service = Service()
    with serving(service) as url:
        stream = _stream(url, listener)
        stream.open(Deadline.after(5.0))
        (sub,) = service.subscriptions.values()
        ours = sub["Context"]
        assert service.post_event(OFF, context="0" * 64) == 403  # not one of ours
        assert _post(listener.url, None, raw=b"{not json") == 403  # no Context: not read
        assert _post(listener.url, None, raw=b'{"Context": "%s", not json' % ours.encode()) == 400
        assert _announced(listener.url, 1024 * 1024 + 1) == 413  # refused before reading
        assert _post(listener.url.replace(PATH, "/elsewhere"), OFF) == 404
        stream.close()
        assert _post(listener.url, {**OFF, "Context": ours}) == 403  # closed
    assert listener.received == 0
    assert listener.refused == 5


def test_a_forgotten_subscription_is_noticed_at_the_check_and_made_again(
    listener: PushListener,
) -> None:
    """Nothing pushed for ``verify_every``: one GET of the subscription (the
    reactor runs its Inbox's check that often); the BMC rebooted and forgot
    it (404): the stream faults, and the next open subscribes again (the
    listener reconciles its nodes)."""
    service = Service()
    with serving(service) as url:
        stream = _stream(url, listener, verify_every=600.0)
        stream.open(Deadline.after(5.0))
        box = stream.selectable()
        assert isinstance(box, Inbox)
        assert box.quiet == 600.0
        box.check(Deadline.after(5.0))  # checked, still there
        service.subscriptions.clear()  # the BMC's reboot
        with pytest.raises(BMCUnreachable, match="forgot the subscription"):
            box.check(Deadline.after(5.0))
        stream.close()
        stream.open(Deadline.after(5.0))
        assert list(service.subscriptions) == [f"{SUBS}/2"]
        stream.close()
    gets = [p for m, p in service.requests if m == "GET" and p.startswith(SUBS)]
    assert gets == [SUBS, f"{SUBS}/1", f"{SUBS}/1"]  # the first: an earlier run's? none


def test_no_event_service_at_all_is_unsupported(listener: PushListener) -> None:
    service = Service(absent=True)
    with serving(service) as url:
        stream = _stream(url, listener)
        with pytest.raises(UnsupportedOperation):
            stream.open(Deadline.after(5.0))
    assert service.requests == [("GET", "/redfish/v1/EventService")]  # no subscription tried


def test_the_listener_serves_https_with_a_certificate(tmp_path: Path) -> None:
    from bmaas.hwlab.tls import make_certificate

    cert = make_certificate(tmp_path)
    lst = PushListener("127.0.0.1", 0, certfile=str(cert.cert_path), keyfile=str(cert.key_path))
    CA[:] = [cert.ca_path]
    try:
        service = Service()
        with serving(service) as url:
            stream = _stream(url, lst)
            stream.open(Deadline.after(5.0))
            assert lst.url.startswith("https://127.0.0.1:")
            assert service.post_event(OFF) == 204
            assert [n.power for n in _pushed(stream)] == [PowerState.OFF]
            stream.close()
    finally:
        CA.clear()
        lst.close()


def test_the_token_is_in_no_repr(listener: PushListener) -> None:
    stream = _stream("http://127.0.0.1:9", listener)
    assert stream._token not in repr(stream)
    assert "pw-Push-1" not in repr(stream)


def test_the_listener_waits_for_requests_without_waking_and_stops_at_once() -> None:
    """No poll for a shutdown flag while idle (serve_forever's 0.2 s tick
    was most of an idle push listener's CPU): with no connection open the
    selector waits without a timeout, and close() wakes it at once."""
    lst = PushListener("127.0.0.1", 0)
    server = lst._server
    selector = server._selector
    waits: list[float | None] = []
    plain = selector.select

    def counted(timeout: float | None = None) -> Any:
        waits.append(timeout)
        return plain(timeout)

    selector.select = counted  # type: ignore[method-assign]
    try:
        assert _post(lst.url, {**OFF, "Context": "0" * 64}) == 403
        assert _post(lst.url, {**OFF, "Context": "0" * 64}) == 403
    finally:
        lst.close()
    assert not lst._thread.is_alive()
    # each request: its accept, its read (a deadline: a connection is open),
    # and the wait after it (none: nothing open); the first wait may have
    # started before the counter was put in
    assert None in waits
    assert len(waits) <= 10
    assert lst.refused == 2
