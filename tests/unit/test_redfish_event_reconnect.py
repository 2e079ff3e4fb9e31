"""A Redfish event stream's reconnect costs the BMC one request (issue 37):
the SSE URI the first open found is opened again directly; the EventService
is read again only when that fails. Against a tiny service on 127.0.0.1
that records every request; the stream answers one frame and closes."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.drivers.redfish.events import ServiceStream
from bmaas.faults import BMCUnreachable, UnsupportedOperation
from bmaas.secrets import Secret
from tests.httpserve import send_json, serving_handler
from tests.unit.stepped import read_when_ready

EVENT = (
    'data: {"Events": [{"MessageId": "ResourceEvent.1.3.0.ResourcePoweredOff",'
    ' "OriginOfCondition": {"@odata.id": "/redfish/v1/Systems/1"}}]}\n\n'
)


class Service:
    def __init__(self) -> None:
        self.requests: list[str] = []
        self.sse = "/redfish/v1/EventService/SSE"
        #: the stream's path answers 404 (the BMC moved it, or lost its EventService)
        self.gone = False


def _handler(service: Service) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            service.requests.append(path)
            if path == "/redfish/v1/EventService":
                body = {"ServiceEnabled": True, "ServerSentEventUri": service.sse}
                send_json(self, 200, body)
            elif path == service.sse and not service.gone:
                data = EVENT.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True
            else:
                send_json(self, 404, {"error": {"code": "Base.1.0.ResourceMissingAtURI"}})

    return Handler


def _stream(url: str) -> ServiceStream:
    return ServiceStream(url, "admin", Secret("pw"), False, {"*": "n1"})


def _one_life(stream: ServiceStream) -> None:
    """Open, take the frame, meet the close (what the listener does)."""
    stream.open(Deadline.after(5.0))
    news = read_when_ready(stream, 5.0)
    assert [(n.node, n.power) for n in news] == [("n1", PowerState.OFF)]
    with pytest.raises(BMCUnreachable):
        read_when_ready(stream, 5.0)  # the BMC closed the stream


def test_a_reconnect_opens_the_known_stream_with_one_request() -> None:
    service = Service()
    with serving_handler(_handler(service)) as url:
        stream = _stream(url)
        for _ in range(3):
            _one_life(stream)
        stream.close()
    sse = service.sse
    assert service.requests == ["/redfish/v1/EventService", sse, sse, sse]


def test_a_known_stream_that_is_gone_sends_it_back_to_the_event_service() -> None:
    service = Service()
    with serving_handler(_handler(service)) as url:
        stream = _stream(url)
        _one_life(stream)
        service.gone = True  # the SSE path 404s: read the EventService again
        with pytest.raises(UnsupportedOperation):
            stream.open(Deadline.after(5.0))
        service.gone, service.sse = False, "/redfish/v1/EventService/Stream"
        _one_life(stream)  # no known URI any more: the EventService says where now
        stream.close()
    assert service.requests == [
        "/redfish/v1/EventService",
        "/redfish/v1/EventService/SSE",
        "/redfish/v1/EventService/SSE",  # the reconnect, at once: 404
        "/redfish/v1/EventService",  # asked again, in the same open
        "/redfish/v1/EventService/SSE",  # still gone (the flag): that open fails
        "/redfish/v1/EventService",
        "/redfish/v1/EventService/Stream",
    ]


def test_every_request_of_the_stream_takes_its_turn_at_the_bmcs_gate() -> None:
    """The stream's requests keep to the spacing the node's driver keeps
    (bmaas.gate, shared in the process): counted on the gate, and the
    node's own bmc_min_interval reaches the stream."""
    from bmaas.drivers.redfish.events import services
    from bmaas.gate import GATES

    service = Service()
    with serving_handler(_handler(service)) as url:
        (stream,), _ = services(
            [
                type(
                    "R",
                    (),
                    {
                        "name": "n1",
                        "driver": "redfish",
                        "driver_info": {
                            "redfish_address": url,
                            "redfish_username": "admin",
                            "redfish_password": "pw",
                            "bmc_min_interval": 0.01,
                        },
                    },
                )()
            ]
        )
        assert (stream.cap, stream.spacing) == (4, 0.05)  # the stricter of the two
        # the process's gate for this BMC (a port reused by an earlier test: counted from here)
        gate = GATES.gate(f"redfish:{url}", cap=4, spacing=0.05)
        before = gate.stats.paced
        _one_life(stream)
        _one_life(stream)
        stream.close()
    assert gate.stats.paced - before == len(service.requests) == 3  # EventService, SSE, SSE
