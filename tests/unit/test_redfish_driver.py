"""RedfishDriver and its connector without sockets: input checks, one attempt per
request, the deadline shared by a call's requests, and no secret in reprs or logs."""

from __future__ import annotations

import json
import logging

import pytest
import requests
import sushy.connector
import sushy.exceptions as sushy_exc

from bmaas.deadline import Deadline
from bmaas.driver import Operation
from bmaas.drivers.redfish import RedfishDriver
from bmaas.drivers.redfish.connector import OPERATION_HEADER, BoundedConnector
from bmaas.drivers.redfish.faults import DeadlineExceeded
from bmaas.fakes.clock import FakeClock
from bmaas.faults import InputError
from bmaas.registry import build_driver

PASSWORD = "Unit-Passw0rd-31a"
INFO = {
    "redfish_address": "https://10.0.0.9",
    "redfish_username": "admin",
    "redfish_password": PASSWORD,
}


class StubSession:
    """Stands in for the requests session: records each request, answers or raises."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.calls: list[dict[str, object]] = []
        self.headers: dict[str, str] = {}
        self.auth = None

    def request(self, method: str, url: str, **kw: object) -> requests.Response:
        self.calls.append({"method": method, "url": url, **kw})
        if isinstance(self.answer, BaseException):
            raise self.answer
        assert isinstance(self.answer, requests.Response)
        return self.answer

    def close(self) -> None:
        pass


def reply(status: int, body: object) -> requests.Response:
    resp = requests.Response()
    resp.status_code = status
    resp._content = json.dumps(body).encode()
    resp.headers["Retry-After"] = "4"
    return resp


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """sushy sleeps between its own retries: any sleep here means a hidden retry."""

    def forbidden(seconds: float) -> None:
        raise AssertionError(f"sushy slept {seconds}s: a hidden retry")

    monkeypatch.setattr(sushy.connector.time, "sleep", forbidden)


def connector(clock: FakeClock, answer: object) -> tuple[BoundedConnector, StubSession]:
    conn = BoundedConnector("https://10.0.0.9", verify=True, bmc_timeout=10.0, clock=clock)
    stub = StubSession(answer)
    conn._session = stub  # type: ignore[assignment]
    return conn, stub


def test_a_500_on_get_is_one_request(no_sleep: None) -> None:
    clock = FakeClock()
    conn, stub = connector(clock, reply(500, {"error": {"message": "boom"}}))
    with (
        conn.within(Deadline.after(2.0, clock=clock), Operation.POWER_GET),
        pytest.raises(sushy_exc.ServerSideError) as info,
    ):
        conn.get("/redfish/v1/Systems/1")
    assert len(stub.calls) == 1
    assert stub.calls[0]["timeout"].deadline.left() == 2.0  # type: ignore[union-attr]
    assert stub.calls[0]["headers"][OPERATION_HEADER] == "power.get"  # type: ignore[index]
    assert info.value.response.headers["Retry-After"] == "4"  # kept for BMCBusy.retry_after


def test_a_connection_error_on_post_is_one_request(no_sleep: None) -> None:
    clock = FakeClock()
    conn, stub = connector(clock, requests.exceptions.ConnectionError("refused"))
    with (
        conn.within(Deadline.after(2.0, clock=clock), Operation.POWER_GET),
        pytest.raises(sushy_exc.ConnectionError),
    ):
        conn.post("/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", data={"ResetType": "On"})
    assert len(stub.calls) == 1  # sushy alone sends a reset up to 3 times
    assert OPERATION_HEADER not in stub.calls[0]["headers"]  # type: ignore[operator]


def test_requests_share_the_call_deadline() -> None:
    clock = FakeClock()
    conn, stub = connector(clock, reply(200, {}))
    deadline = Deadline.after(2.0, clock=clock)
    with conn.within(deadline, Operation.BOOT_GET):
        conn.get("/a")
        clock.advance(1.5)
        conn.get("/b")
        clock.advance(0.5)
        with pytest.raises(DeadlineExceeded):
            conn.get("/c")
    # each request carries the call's one Deadline (its transport ends by it)
    assert [c["timeout"].deadline for c in stub.calls] == [deadline, deadline]  # type: ignore[union-attr]


def test_outside_a_call_the_default_deadline_bounds_a_request() -> None:
    conn, stub = connector(FakeClock(), reply(200, {}))
    conn.get("/redfish/v1/")
    assert stub.calls[0]["timeout"].deadline.left() == 10.0  # type: ignore[union-attr]


# -- the driver's inputs ---------------------------------------------------------------


def test_built_through_the_entry_point() -> None:
    driver = build_driver("r1-n09", "redfish", INFO)
    assert isinstance(driver, RedfishDriver)
    assert driver.address == "https://10.0.0.9"


@pytest.mark.parametrize("missing", ["redfish_address", "redfish_username", "redfish_password"])
def test_required_keys_are_named(missing: str) -> None:
    raw = {k: v for k, v in INFO.items() if k != missing}
    with pytest.raises(InputError) as info:
        build_driver("r1-n09", "redfish", raw)
    assert info.value.field == f"driver_info.{missing}"
    assert info.value.node == "r1-n09"


def test_ipmi_keys_are_accepted_but_typos_are_not() -> None:
    # A BMC that speaks both protocols carries both key sets, as in Ironic.
    driver = build_driver("r1-n09", "redfish", {**INFO, "ipmi_address": "10.0.0.9"})
    assert driver.info.ipmi_address == "10.0.0.9"
    with pytest.raises(InputError, match=r"driver_info\.redfish_adress"):
        build_driver("r1-n09", "redfish", {**INFO, "redfish_adress": "https://x"})


def test_a_missing_ca_bundle_is_named(tmp_path) -> None:
    with pytest.raises(InputError) as info:
        build_driver("r1-n09", "redfish", {**INFO, "redfish_verify_ca": str(tmp_path / "no.pem")})
    assert info.value.field == "driver_info.redfish_verify_ca"


def test_verify_off_warns_once_without_secrets(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    driver = build_driver("r1-n09", "redfish", {**INFO, "redfish_verify_ca": "false"})
    driver.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "r1-n09" in warnings[0].getMessage()
    assert "https://10.0.0.9" in warnings[0].getMessage()
    assert PASSWORD not in caplog.text


def test_repr_shows_no_secret_and_close_before_connecting_is_safe() -> None:
    driver = build_driver("r1-n09", "redfish", INFO)
    assert PASSWORD not in repr(driver)
    assert PASSWORD not in repr(driver.info)
    driver.close()
    driver.close()
