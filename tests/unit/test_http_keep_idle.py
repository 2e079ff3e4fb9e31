"""The one HTTP engine reuses a kept connection only within ``KEEP_IDLE``
seconds of its last answer: a server closes an idle kept connection on its
own clock, and a request sent as that close is on its way is never answered.

The server here (127.0.0.1, HTTP/1.1 keep-alive) closes unanswered every
request that arrives on a connection idle past its own bound by the test's
clock -- the race, made certain. Time is a fake clock the engine and the
server both read; nothing sleeps."""

from __future__ import annotations

import math
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import requests
from keystoneauth1 import session as ks_session

from bmaas.deadline import Deadline
from bmaas.drivers.ironic_backend import transport as ironic_transport
from bmaas.drivers.ironic_backend.api import (
    Api,
    IronicTimeout,
    IronicUnreachable,
    connect,
    map_errors,
)
from bmaas.drivers.ironic_backend.transport import IronicConnectionFailed
from bmaas.drivers.redfish import transport
from bmaas.drivers.redfish.faults import map_exception
from bmaas.drivers.redfish.transport import KEEP_IDLE, DeadlineAdapter, ExchangeDeadline
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCTimeout
from bmaas.hwlab.proxy.stock import free_port
from tests.httpserve import ironic_versions, send_json, serving_handler

#: the server's idle close (cheroot's, under Ironic's API)
SERVER_IDLE = 10.0

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK50Warning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK60Warning"),
]


class Served:
    """What the server saw: connections opened, requests answered, requests
    it closed unanswered."""

    def __init__(self) -> None:
        self.connections = 0
        self.answered = 0
        self.dropped = 0


def _handler(clock: FakeClock, served: Served) -> type[BaseHTTPRequestHandler]:
    class KeepAlive(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        answered_at: float | None = None

        def setup(self) -> None:
            super().setup()
            served.connections += 1

        def do_GET(self) -> None:
            answer = (
                {"PowerState": "On"}
                if "/redfish/" in self.path or "/nodes/" in self.path
                else ironic_versions(self.headers["Host"])
            )
            last = self.answered_at
            if last is not None and clock() - last > SERVER_IDLE:
                served.dropped += 1
                self.close_connection = True  # its idle close, racing the request
                return
            served.answered += 1
            # Noted before the answer leaves: once it has, the client may
            # advance the clock, and a later note would read that time.
            self.answered_at = clock()
            send_json(self, 200, answer)

        def log_message(self, *_args: Any) -> None:
            pass

    return KeepAlive


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock(start=0.0)
    monkeypatch.setattr(transport, "_clock", fake)
    return fake


@pytest.fixture
def served() -> Served:
    return Served()


@pytest.fixture
def base(clock: FakeClock, served: Served) -> Iterator[str]:
    with serving_handler(_handler(clock, served)) as served_at:
        yield served_at


@pytest.fixture
def url(base: str) -> str:
    return f"{base}/redfish/v1/Systems/1"


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as http:
        http.trust_env = False
        http.mount("http://", DeadlineAdapter())
        yield http


def _get(session: requests.Session, url: str) -> requests.Response:
    timeout = ExchangeDeadline(Deadline.after(20.0))
    return session.get(url, timeout=timeout)  # type: ignore[arg-type]


def test_a_connection_is_reused_within_keep_idle(
    session: requests.Session, url: str, clock: FakeClock, served: Served
) -> None:
    for _ in range(3):
        assert _get(session, url).json() == {"PowerState": "On"}
        clock.advance(KEEP_IDLE - 0.5)
    assert (served.connections, served.answered, served.dropped) == (1, 3, 0)


def test_a_connection_idle_past_keep_idle_is_replaced_not_raced(
    session: requests.Session, url: str, clock: FakeClock, served: Served
) -> None:
    assert _get(session, url).ok
    clock.advance(SERVER_IDLE + 1)
    assert _get(session, url).json() == {"PowerState": "On"}
    assert (served.connections, served.answered, served.dropped) == (2, 2, 0)


def test_without_the_bound_the_race_is_a_fault(
    session: requests.Session,
    url: str,
    clock: FakeClock,
    served: Served,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the bound prevents: the reused connection's request is sent and
    closed unanswered, ``BMCTimeout`` (sent: outcome unknown)."""
    monkeypatch.setattr(transport, "KEEP_IDLE", math.inf)
    assert _get(session, url).ok
    clock.advance(SERVER_IDLE + 1)
    with pytest.raises(requests.ConnectionError) as caught:
        _get(session, url)
    assert (served.connections, served.answered, served.dropped) == (1, 1, 1)
    fault = map_exception(caught.value, lambda cls, message, **_: cls(message), node="n1")
    assert isinstance(fault, BMCTimeout)


def test_ironic_reads_past_the_apis_idle_close_each_find_a_live_connection(
    base: str, clock: FakeClock, served: Served
) -> None:
    """bmaas's own Ironic client (``--cloud``) goes through the same engine:
    a read after the API's idle close is answered on a new connection."""
    api = Api(connect(auth_type="none", endpoint=base))
    for _ in range(2):
        assert api.call("node.get", api.bm.get_node, "n-1").name is None
        clock.advance(SERVER_IDLE + 1)
    assert served.dropped == 0
    assert served.answered >= 3  # version discovery, then the two reads
    assert served.connections >= 2


def test_an_ironic_read_closed_unanswered_is_one_attempt_and_outcome_unknown(
    base: str,
    clock: FakeClock,
    served: Served,
    keystoneauth_sleeps: list[float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the bound the race happens: the read was sent, so it is an
    ``IronicTimeout`` (not "unreachable": nothing sent), and it is one
    attempt -- openstacksdk 4.1-4.14 would resend it after a 0.5 s sleep of
    keystoneauth's (their per-request ``connect_retries=1``)."""
    monkeypatch.setattr(transport, "KEEP_IDLE", math.inf)
    api = Api(connect(auth_type="none", endpoint=base))
    api.call("node.get", api.bm.get_node, "n-1")
    clock.advance(SERVER_IDLE + 1)
    with pytest.raises(IronicTimeout) as caught:
        api.call("node.get", api.bm.get_node, "n-1")
    assert "closed without an answer" in str(caught.value)
    assert served.dropped == 1
    assert keystoneauth_sleeps == []
    assert api.calls["node.get"] == 2


def test_a_refused_ironic_connect_is_one_attempt_whatever_the_request_asks(
    keystoneauth_sleeps: list[float],
) -> None:
    """A request that asks keystoneauth for a connect retry of its own (what
    openstacksdk 4.1-4.14 do for every request) still makes one attempt:
    the failure reaches keystoneauth as bmaas's, which its loop does not
    retry. Nothing was sent: ``IronicUnreachable``."""
    port = free_port()  # nothing listens on it
    session = ks_session.Session()
    ironic_transport.mount(session.session, None, exchange_timeout=5.0)
    url = f"http://127.0.0.1:{port}/v1/nodes"
    with pytest.raises(IronicConnectionFailed) as caught:
        session.get(url, connect_retries=1, authenticated=False)
    assert not caught.value.sent
    assert keystoneauth_sleeps == []
    with pytest.raises(IronicUnreachable), map_errors("node.list"):
        raise caught.value
