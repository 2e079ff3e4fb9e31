"""The lean Redfish power read (bmaas.drivers.redfish.lean), against a tiny Redfish
service on 127.0.0.1 that records every request it gets.

What would break: the field parsed, ``$select`` used only where advertised and
dropped for good when refused, ``If-None-Match``/304 answered from the kept
fields, a kept connection, HTTP faults mapped as through sushy, the deadline
ending a read against a server that never answers."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.drivers.redfish.service import ServiceRegistry
from bmaas.faults import BmaasError, BMCAuthError, BMCProtocolError, BMCTimeout
from bmaas.registry import build_driver
from tests.httpserve import send_json, serving_handler

SYSTEM = "/redfish/v1/Systems/1"


#: what the power read selects
_SELECTED = ("PowerState", "Status")


class Fake:
    """What the fake service answers, and what it was asked."""

    def __init__(self, *, select: bool = False, honour_select: bool = True) -> None:
        self.select = select
        self.honour_select = honour_select
        self.etag: str | None = None
        self.power = "On"
        #: the system's Status.Health (None: the system has no Status)
        self.health: str | None = None
        #: status and extra for the system's GETs (None: answer normally)
        self.fail: int | None = None
        self.hang = threading.Event()
        #: bytes the system's GET answers (200) instead of its document
        self.raw: bytes | None = None
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.connections: set[int] = set()

    def system_gets(self) -> list[tuple[str, dict[str, str]]]:
        return [r for r in self.requests if r[0].startswith(SYSTEM)]


def _handler(fake: Fake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if fake.raw is not None and self.path.startswith(SYSTEM):
                fake.requests.append((self.path, dict(self.headers)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(fake.raw)))
                self.end_headers()
                self.wfile.write(fake.raw)
                return
            answer = self._answer()
            if answer is not None:
                self._send(*answer)

        def _answer(self) -> tuple[int, dict[str, Any] | None] | None:
            fake.requests.append((self.path, dict(self.headers)))
            fake.connections.add(self.client_address[1])
            path, _, query = self.path.partition("?")
            if path.rstrip("/") == "/redfish/v1":
                body: dict[str, Any] = {
                    "@odata.id": "/redfish/v1/",
                    "Id": "RootService",
                    "RedfishVersion": "1.6.0",
                    "Systems": {"@odata.id": "/redfish/v1/Systems"},
                    "ProtocolFeaturesSupported": {"SelectQuery": fake.select},
                }
                return (200, body)
            if path == SYSTEM:
                if fake.hang.is_set():
                    fake.hang.wait(30)  # until the test ends; the client must not wait
                    return None
                if fake.fail is not None:
                    return (fake.fail, {"error": {"code": "Base.1.0.GeneralError"}})
                if fake.etag and self.headers.get("If-None-Match") == fake.etag:
                    return (304, None)
                if query.startswith("$select") and fake.select and not fake.honour_select:
                    return (400, {"error": {"code": "Base.1.0.QueryNotSupported"}})
                full = {
                    "@odata.id": SYSTEM,
                    "Id": "1",
                    "PowerState": fake.power,
                    "Manufacturer": "hwlab",
                    "Boot": {"BootSourceOverrideEnabled": "Disabled"},
                    # sushy < 5.10 refuses a ComputerSystem without Actions
                    "Actions": {
                        "#ComputerSystem.Reset": {
                            "target": f"{SYSTEM}/Actions/ComputerSystem.Reset"
                        }
                    },
                    "Links": {},
                }
                if fake.health is not None:
                    full["Status"] = {"State": "Enabled", "Health": fake.health}
                if query.startswith("$select") and fake.select:
                    full = {k: v for k, v in full.items() if k in ("@odata.id", *_SELECTED)}
                return (200, full)
            return (404, {"error": {"code": "Base.1.0.ResourceMissingAtURI"}})

        def _send(self, status: int, body: dict[str, Any] | None) -> None:
            etag = {"ETag": fake.etag} if fake.etag and status == 200 else {}
            send_json(self, status, body, etag)

    return Handler


@contextlib.contextmanager
def serving(fake: Fake) -> Iterator[str]:
    with serving_handler(_handler(fake), before_stop=fake.hang.set) as url:
        yield url


def driver(address: str) -> Any:
    d: Any = build_driver(
        "n1",
        "redfish",
        {
            "redfish_address": address,
            "redfish_username": "admin",
            "redfish_password": "pw",
            "redfish_auth_type": "basic",
            "redfish_system_id": SYSTEM,
        },
    )
    d.services = ServiceRegistry()  # this test's own, not the process's
    return d


def reads(d: Any, n: int) -> list[PowerState]:
    return [d.get_power_state(deadline=Deadline.after(10.0)) for _ in range(n)]


def test_the_power_state_is_read_from_its_one_field() -> None:
    fake = Fake()
    with serving(fake) as url:
        d = driver(url)
        assert reads(d, 3) == [PowerState.ON] * 3  # connect, then lean
        fake.power = "Off"
        assert reads(d, 1) == [PowerState.OFF]
        fake.power = "Sideways"
        assert reads(d, 1) == [PowerState.UNKNOWN]
        d.close()
    gets = fake.system_gets()
    assert len(gets) == 5  # one GET a read, the first by sushy while connecting
    assert all("$select" not in path for path, _ in gets)  # not advertised: not used
    first, lean = gets[1][1], gets[2][1]
    assert first["Connection"].lower() == "close"  # the first of a burst: not kept
    assert lean["X-Bmaas-Operation"] == "power.get"
    assert lean["Authorization"].startswith("Basic ")
    assert lean["Accept-Encoding"] == "identity"
    assert lean.get("Connection", "").lower() != "close"  # a kept connection
    assert len(fake.connections) < len(fake.requests)


def test_select_is_used_where_advertised() -> None:
    fake = Fake(select=True)
    with serving(fake) as url:
        d = driver(url)
        assert reads(d, 3) == [PowerState.ON] * 3
        d.close()
    lean = [path for path, _ in fake.system_gets()[1:]]
    assert lean == [f"{SYSTEM}?$select=PowerState,Status"] * 2


def test_select_refused_falls_back_once_for_good() -> None:
    fake = Fake(select=True, honour_select=False)
    with serving(fake) as url:
        d = driver(url)
        assert reads(d, 3) == [PowerState.ON] * 3
        d.close()
    lean = [path for path, _ in fake.system_gets()[1:]]
    # refused once, read whole at once in the same call, never asked again
    assert lean == [f"{SYSTEM}?$select=PowerState,Status", SYSTEM, SYSTEM]


def test_an_etag_answers_unchanged_reads_from_the_kept_fields() -> None:
    fake = Fake()
    fake.etag = '"v1"'
    with serving(fake) as url:
        d = driver(url)
        assert reads(d, 3) == [PowerState.ON] * 3
        fake.power, fake.etag = "Off", '"v2"'
        assert reads(d, 1) == [PowerState.OFF]
        lean = d._service().conn.lean
        assert (lean.sent, lean.not_modified) == (3, 1)
        d.close()
    inm = [h.get("If-None-Match") for _, h in fake.system_gets()[1:]]
    assert inm == [None, '"v1"', '"v1"']


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 500, 503])
def test_http_faults_map_as_through_sushy(status: int) -> None:
    """The same answer to the lean read and to sushy's own GET (probe) is
    the same bmaas fault, raised from the original exception."""
    fake = Fake()
    with serving(fake) as url:
        d = driver(url)
        reads(d, 1)
        fake.fail = status
        with pytest.raises(BmaasError) as lean:
            reads(d, 1)
        with pytest.raises(BmaasError) as through_sushy:
            d.probe(deadline=Deadline.after(10.0))
        d.close()
    assert type(lean.value) is type(through_sushy.value)
    assert lean.value.__cause__ is not None
    if status in (401, 403):
        assert isinstance(lean.value, BMCAuthError)


def test_an_answer_nested_too_deep_is_a_protocol_error_not_a_recursion_error() -> None:
    """200,000 levels of ``[`` raise RecursionError in json.loads (no
    ``except ValueError`` catches it); the lean read parses through
    framing.loads_bounded: a BMC that answers garbage is a protocol fault."""
    fake = Fake()
    with serving(fake) as url:
        d = driver(url)
        reads(d, 1)
        fake.raw = b"[" * 200_000 + b"]" * 200_000
        with pytest.raises(BMCProtocolError) as caught:
            reads(d, 1)
        d.close()
    assert "deeper than" in str(caught.value.__cause__)


def test_the_deadline_ends_a_read_the_bmc_never_answers() -> None:
    fake = Fake()
    with serving(fake) as url:
        d = driver(url)
        reads(d, 1)
        fake.hang.set()
        with pytest.raises(BMCTimeout):
            d.get_power_state(deadline=Deadline.after(0.3))
        d.close()


def test_past_the_services_limit_the_connection_is_not_kept() -> None:
    fake = Fake()
    with serving(fake) as url:
        d = driver(url)
        d.keep_alive_services = 0  # one open service is already past it
        assert reads(d, 3) == [PowerState.ON] * 3
        d.close()
    lean = [h for _, h in fake.system_gets()[1:]]
    assert [h.get("Connection", "").lower() for h in lean] == ["close", "close"]


@pytest.mark.parametrize("select", [False, True])
def test_health_comes_with_the_power_read(select: bool) -> None:
    """Ironic reads node health right after the sync's power read: that
    read's GET carries Status.Health, so the health costs no request."""
    fake = Fake(select=select)
    fake.health = "Warning"
    with serving(fake) as url:
        d = driver(url)
        reads(d, 2)  # connect, then lean
        asked = len(fake.system_gets())
        assert d.get_health(deadline=Deadline.after(10.0), max_age=60.0) == "Warning"
        assert len(fake.system_gets()) == asked  # answered from the power read
        fake.health = "Critical"
        assert d.get_health(deadline=Deadline.after(10.0)) == "Critical"  # not fresh: one GET
        assert len(fake.system_gets()) == asked + 1
        fake.health = None  # a system without Status: the read stays lean
        assert reads(d, 1) == [PowerState.ON]
        assert d.get_health(deadline=Deadline.after(10.0), max_age=60.0) is None
        d.close()
    if select:
        assert all("$select=PowerState,Status" in p for p, _ in fake.system_gets()[1:])
