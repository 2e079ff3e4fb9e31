"""A virtual media insert on a BMC that is busy now and then (issue 50): the
operation retry sends again the request the BMC answered "later" to, not the
whole insert (read, eject, read, insert, read back) from its first request.

Restarted whole, an insert of k requests on a BMC busy on each request with
probability p succeeds per attempt with (1-p)^k; on a BMC busy on every third
request it never does (every attempt meets a 503 by its third request).
"""

from __future__ import annotations

import json
import random
import urllib.parse
from types import SimpleNamespace
from typing import Any

import pytest
import requests

from bmaas.deadline import Deadline
from bmaas.driver_info import DriverInfo
from bmaas.drivers.redfish import RedfishDriver
from bmaas.drivers.redfish.connector import BoundedConnector
from bmaas.drivers.redfish.service import RedfishService, ServiceKey
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCBusy, Resume
from bmaas.gate import GateRegistry
from bmaas.retry import RetryingDriver, RetryLimits, call

SLOT = "/redfish/v1/Managers/1/VirtualMedia/Cd"
INSERT = f"{SLOT}/Actions/VirtualMedia.InsertMedia"
EJECT = f"{SLOT}/Actions/VirtualMedia.EjectMedia"
URL = "http://10.0.0.1/deploy.iso"


def _reply(status: int, body: object = None) -> requests.Response:
    resp = requests.Response()
    resp.status_code = status
    resp._content = b"" if body is None else json.dumps(body).encode()
    if body is not None:
        resp.headers["Content-Type"] = "application/json"
    return resp


class BusyEveryNth:
    """A BMC with one CD slot, standing in for the connector's requests
    session: every ``nth`` request is answered 503 and not carried out."""

    def __init__(self, nth: int, image: str | None = None) -> None:
        self.nth = nth
        self.image = image
        self.calls: list[str] = []
        self.headers: dict[str, str] = {}
        self.auth = None

    def request(self, method: str, url: str, **kw: Any) -> requests.Response:
        path = urllib.parse.urlsplit(url).path
        self.calls.append(f"{method} {path}")
        if len(self.calls) % self.nth == 0:
            return _reply(503, {"error": {"code": "Base.1.8.ServiceTemporarilyUnavailable"}})
        if method == "GET" and path == SLOT:
            return _reply(200, self._slot())
        if method == "POST" and path == INSERT:
            self.image = kw["json"]["Image"]
            return _reply(204)
        if method == "POST" and path == EJECT:
            self.image = None
            return _reply(204)
        raise AssertionError(f"unexpected {method} {path}")

    def _slot(self) -> dict[str, Any]:
        return {
            "@odata.id": SLOT,
            "Id": "Cd",
            "MediaTypes": ["CD", "DVD"],
            "Image": self.image,
            "Inserted": self.image is not None,
            "Actions": {
                "#VirtualMedia.InsertMedia": {"target": INSERT},
                "#VirtualMedia.EjectMedia": {"target": EJECT},
            },
        }

    def close(self) -> None:
        pass


def _driver(bmc: BusyEveryNth, clock: FakeClock) -> RedfishDriver:
    """A Redfish driver already connected (logged in, system and CD slot
    found): what is left is the insert's own requests."""
    info = DriverInfo(
        redfish_address="https://10.0.0.9", redfish_username="u", redfish_password="p"
    )
    driver = RedfishDriver("n1", info, bmc_timeout=5.0, clock=clock, sleep=clock.sleep)
    # the gate's spacing lets time pass; clock.sleeps holds the retry's waits
    driver.gates = GateRegistry(environ={}, clock=clock, sleep=clock.advance)
    conn = BoundedConnector("https://10.0.0.9", verify=True, bmc_timeout=5.0, clock=clock)
    conn._session = bmc  # type: ignore[assignment]
    service = RedfishService(ServiceKey.of(info), conn)
    service.root = SimpleNamespace(json={})  # type: ignore[assignment]
    driver._svc = service
    driver._system = SimpleNamespace(path="/redfish/v1/Systems/1")  # type: ignore[assignment]
    driver._vmedia_paths = [SLOT]
    return driver


def _limits(clock: FakeClock, **changes: Any) -> RetryLimits:
    return RetryLimits(clock=clock, sleep=clock.sleep, jitter=0.0, rng=random.Random(0)).replace(
        **changes
    )


def test_a_busy_answer_resends_that_request_not_the_whole_insert() -> None:
    clock = FakeClock()
    bmc = BusyEveryNth(3, image="http://10.0.0.1/other.iso")
    retried = RetryingDriver(_driver(bmc, clock), _limits(clock))
    retried.insert_virtual_media(URL, deadline=Deadline.after(60.0, clock=clock))
    assert bmc.image == URL
    assert bmc.calls == [
        f"GET {SLOT}",  # holds another image
        f"POST {EJECT}",
        f"GET {SLOT}",  # 503: read again, and only that
        f"GET {SLOT}",
        f"POST {INSERT}",
        f"GET {SLOT}",  # the read back: 503
        f"GET {SLOT}",  # read back again; nothing ejected or inserted twice
    ]
    # each refused request is backed off from the first wait: the BMC took
    # the steps in between, it is not the same request refused again
    assert clock.sleeps == [0.5, 0.5]


def test_a_busy_insert_request_is_sent_again_once() -> None:
    clock = FakeClock()
    bmc = BusyEveryNth(2)
    retried = RetryingDriver(_driver(bmc, clock), _limits(clock))
    retried.insert_virtual_media(URL, deadline=Deadline.after(60.0, clock=clock))
    assert bmc.calls == [
        f"GET {SLOT}",  # empty
        f"POST {INSERT}",  # 503: not inserted
        f"POST {INSERT}",
        f"GET {SLOT}",  # 503
        f"GET {SLOT}",
    ]
    assert bmc.image == URL


def test_without_retries_the_first_busy_answer_is_the_outcome() -> None:
    clock = FakeClock()
    bmc = BusyEveryNth(2)
    retried = RetryingDriver(_driver(bmc, clock), _limits(clock, max_attempts=1))
    with pytest.raises(BMCBusy):
        retried.insert_virtual_media(URL, deadline=Deadline.after(60.0, clock=clock))
    assert bmc.calls == [f"GET {SLOT}", f"POST {INSERT}"]
    assert clock.sleeps == []


def test_a_new_insert_starts_afresh_after_a_failed_one() -> None:
    """What an operation left undone is its own: the next insert (a new
    operation) reads the slot and ejects first, as every insert does."""
    clock = FakeClock()
    bmc = BusyEveryNth(5, image="http://10.0.0.1/other.iso")
    driver = _driver(bmc, clock)
    with pytest.raises(BMCBusy):  # the read back is refused: no retry here
        RetryingDriver(driver, _limits(clock, max_attempts=1)).insert_virtual_media(
            URL, deadline=Deadline.after(60.0, clock=clock)
        )
    bmc.calls.clear()
    bmc.nth = 100
    driver.insert_virtual_media(URL, deadline=Deadline.after(60.0, clock=clock))
    assert bmc.calls == [
        f"GET {SLOT}",
        f"POST {EJECT}",
        f"GET {SLOT}",
        f"POST {INSERT}",
        f"GET {SLOT}",
    ]


def test_the_retry_calls_what_a_fault_says_resumes_the_operation() -> None:
    """bmaas.retry.call, for any operation: after a fault carrying a
    ``Resume``, the next attempt is its call; after one without, the
    operation again from its start."""
    clock = FakeClock()
    asked: list[str] = []

    def rest(*, deadline: Deadline) -> str:
        asked.append("rest")
        return "done"

    def whole(*, deadline: Deadline) -> str:
        asked.append("whole")
        fault = BMCBusy("later", node="n1")
        if len(asked) == 2:
            fault.resume = Resume(rest, at=1)
        raise fault

    result = call(_limits(clock), whole, deadline=Deadline.after(60.0, clock=clock))
    assert (result, asked) == ("done", ["whole", "whole", "rest"])


def _refused_at(points: list[int]) -> Any:
    """An operation of several steps refused once at each of ``points`` (a
    point again: refused again at the same step)."""
    refusals = iter(points)

    def step(*, deadline: Deadline) -> str:
        at = next(refusals, None)
        if at is None:
            return "done"
        fault = BMCBusy("later", node="n1")
        fault.resume = Resume(step, at=at)
        raise fault

    return step


def test_each_refused_request_has_its_own_attempts_and_backoff() -> None:
    clock = FakeClock()
    op = _refused_at([0, 0, 1, 2, 3, 3, 3])
    limits = _limits(clock, max_attempts=4)
    assert call(limits, op, deadline=Deadline.after(60.0, clock=clock)) == "done"
    assert clock.sleeps == [0.5, 1.0, 0.5, 0.5, 0.5, 1.0, 2.0]


def test_one_request_refused_over_and_over_stops_at_max_attempts() -> None:
    clock = FakeClock()
    op = _refused_at([0, 1, 1, 1, 1])
    with pytest.raises(BMCBusy) as info:
        call(_limits(clock, max_attempts=3), op, deadline=Deadline.after(60.0, clock=clock))
    assert info.value.resume is not None
    assert info.value.resume.at == 1
    assert clock.sleeps == [0.5, 0.5, 1.0]  # step 1's third refusal is the last


def test_a_fault_with_a_resume_pickles_and_prints_without_it() -> None:
    import pickle

    fault = BMCBusy("later", node="n1")
    fault.resume = Resume(lambda *, deadline: None, at=2)
    assert pickle.loads(pickle.dumps(fault)).resume is None
    assert "resume" not in fault.to_dict()


MANAGER = "/redfish/v1/Managers/1"
MEDIA = f"{MANAGER}/VirtualMedia"
FLOPPY = f"{MEDIA}/Floppy"
MOVED = f"{MEDIA}/Dvd"  # where the slot is after a reset
#: the search for the CD slot on a BMC busy every third request
SEARCH_BUSY_EVERY_THIRD = [
    f"GET {MANAGER}",
    f"GET {MEDIA}",
    f"GET {SLOT}",  # 503: that slot is read again, not the links before it
    f"GET {SLOT}",
    f"GET {FLOPPY}",
]


class BusyEveryNthWithLinks(BusyEveryNth):
    """The same BMC, its CD slot not yet found: the Manager, its
    VirtualMedia collection and each slot in it are read first."""

    def request(self, method: str, url: str, **kw: Any) -> requests.Response:
        path = urllib.parse.urlsplit(url).path
        linked = {
            MANAGER: {"VirtualMedia": {"@odata.id": MEDIA}},
            MEDIA: {"Members": [{"@odata.id": SLOT}, {"@odata.id": FLOPPY}]},
            FLOPPY: {"Id": "Floppy", "MediaTypes": ["Floppy", "USBStick"]},
        }
        if method != "GET" or path not in linked:
            return super().request(method, url, **kw)
        self.calls.append(f"{method} {path}")
        if len(self.calls) % self.nth == 0:
            return _reply(503, {"error": {"code": "Base.1.8.ServiceTemporarilyUnavailable"}})
        return _reply(200, {"@odata.id": path, **linked[path]})


def _unfound(driver: RedfishDriver) -> RedfishDriver:
    """``driver`` with its CD slot not yet found: its system links Manager 1."""
    driver._vmedia_paths = None
    driver._system = SimpleNamespace(  # type: ignore[assignment]
        path="/redfish/v1/Systems/1",
        json={"Links": {"ManagedBy": [{"@odata.id": MANAGER}]}},
    )
    return driver


def test_finding_the_slots_goes_on_from_the_refused_read() -> None:
    """The first insert of a driver finds the CD slot first (Manager,
    collection, each slot: issue 50's lab BMCs read 4 links before the
    insert's own 3 requests). A read refused part way is sent again, not
    the links read before it: restarted whole, a BMC busy on every third
    request never let the insert start, and on a lab BMC busy on 15% of
    requests about one insert in seventy ran out of its six attempts."""
    clock = FakeClock()
    bmc = BusyEveryNthWithLinks(3)
    driver = _unfound(_driver(bmc, clock))
    retried = RetryingDriver(driver, _limits(clock, max_attempts=3))
    retried.insert_virtual_media(URL, deadline=Deadline.after(60.0, clock=clock))
    assert bmc.image == URL
    assert bmc.calls == [
        *SEARCH_BUSY_EVERY_THIRD,
        f"GET {SLOT}",  # the insert's own read: 503
        f"GET {SLOT}",
        f"POST {INSERT}",
        f"GET {SLOT}",  # the read back: 503
        f"GET {SLOT}",
    ]
    # three requests refused once each: each backed off from the first wait
    assert clock.sleeps == [0.5, 0.5, 0.5]
    assert driver._vmedia_paths == [SLOT]


class SlotMovesWhenBusy(BusyEveryNthWithLinks):
    """Busy once, on the insert's first read of the slot, and reset then:
    the slot is linked under a new path, the old one answers 404."""

    moved = False

    def request(self, method: str, url: str, **kw: Any) -> requests.Response:
        path = urllib.parse.urlsplit(url).path
        if not self.moved and method == "GET" and path == SLOT and f"GET {SLOT}" in self.calls:
            self.calls.append(f"{method} {path}")
            self.moved = True
            return _reply(503, {"error": {"code": "Base.1.8.ServiceTemporarilyUnavailable"}})
        if self.moved and path.startswith(SLOT):
            self.calls.append(f"{method} {path}")
            return _reply(404, {"error": {"code": "Base.1.8.ResourceMissingAtURI"}})
        if self.moved and path.startswith(MOVED):
            answer = super().request(method, url.replace(MOVED, SLOT), **kw)
            self.calls[-1] = f"{method} {path}"
            return answer
        if self.moved and method == "GET" and path == MEDIA:
            self.calls.append(f"{method} {path}")
            return _reply(200, {"@odata.id": path, "Members": [{"@odata.id": MOVED}]})
        return super().request(method, url, **kw)

    def _slot(self) -> dict[str, Any]:
        body = super()._slot()
        return json.loads(json.dumps(body).replace(SLOT, MOVED)) if self.moved else body


def test_a_slot_moved_between_attempts_is_found_afresh() -> None:
    """What one attempt read while finding the slots is not used again once
    a link it found answers 404: the links are read afresh."""
    clock = FakeClock()
    bmc = SlotMovesWhenBusy(1000)
    driver = _unfound(_driver(bmc, clock))
    RetryingDriver(driver, _limits(clock)).insert_virtual_media(
        URL, deadline=Deadline.after(60.0, clock=clock)
    )
    assert bmc.image == URL
    assert driver._vmedia_paths == [MOVED]
    assert bmc.calls[4:] == [
        f"GET {SLOT}",  # the insert's read: 503, and the slot moves
        f"GET {SLOT}",  # 404: the links are read again
        f"GET {MANAGER}",
        f"GET {MEDIA}",
        f"GET {MOVED}",
        f"GET {MOVED}",
        f"POST {MOVED}/Actions/VirtualMedia.InsertMedia",
        f"GET {MOVED}",
    ]


def test_an_eject_s_search_for_the_slots_goes_on_from_the_refused_read() -> None:
    clock = FakeClock()
    bmc = BusyEveryNthWithLinks(3, image=URL)
    retried = RetryingDriver(_unfound(_driver(bmc, clock)), _limits(clock, max_attempts=3))
    retried.eject_virtual_media(url=URL, deadline=Deadline.after(60.0, clock=clock))
    assert bmc.image is None
    assert bmc.calls == [
        *SEARCH_BUSY_EVERY_THIRD,
        f"GET {SLOT}",  # the eject's own read: 503 (the eject, idempotent, goes on whole)
        f"GET {SLOT}",
        f"POST {EJECT}",
    ]
    assert clock.sleeps == [0.5, 0.5]
