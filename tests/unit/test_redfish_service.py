"""One Redfish client per service: keyed by root URL, credentials and TLS
settings (never showing the password); shared by reference; the last
reference logs out. No sockets: a stand-in connector records what happens."""

from __future__ import annotations

from typing import Any

from bmaas.deadline import Deadline
from bmaas.driver_info import DriverInfo
from bmaas.drivers.redfish.service import RedfishService, ServiceKey, ServiceRegistry
from bmaas.fakes.clock import FakeClock

BASE = {
    "redfish_address": "https://chassis.example:8443/",
    "redfish_username": "admin",
    "redfish_password": "Chassis-Pw-9",
}


def info(**changes: Any) -> DriverInfo:
    return DriverInfo.parse({**BASE, **changes})


class StubConnector:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_systems_of_one_service_share_a_key_other_settings_do_not() -> None:
    one = ServiceKey.of(info(redfish_system_id="/redfish/v1/Systems/1"))
    two = ServiceKey.of(info(redfish_system_id="/redfish/v1/Systems/2"))
    assert one == two
    assert one.address == "https://chassis.example:8443"
    assert ServiceKey.of(info(redfish_password="other")) != one
    assert ServiceKey.of(info(redfish_verify_ca=False)) != one
    assert ServiceKey.of(info(redfish_auth_type="basic")) != one
    assert "Chassis-Pw-9" not in repr(one)
    assert "Chassis-Pw-9" not in one.digest


def test_the_last_reference_logs_out_and_a_new_one_starts_afresh() -> None:
    registry, made = ServiceRegistry(), []

    def make() -> Any:
        made.append(StubConnector())
        return made[-1]

    key = ServiceKey.of(info())
    first = registry.acquire(key, make)
    second = registry.acquire(key, make)
    assert first is second
    assert len(made) == 1
    assert registry.open_services() == 1
    deadline = Deadline.after(1, clock=FakeClock())
    registry.release(first, deadline)
    assert made[0].closed == 0  # another system still uses it
    registry.release(second, deadline)
    assert made[0].closed == 1
    assert registry.open_services() == 0
    third = registry.acquire(key, make)
    assert third is not first
    assert len(made) == 2


def test_close_before_login_only_drops_the_connection() -> None:
    conn = StubConnector()
    service = RedfishService(ServiceKey.of(info()), conn)  # type: ignore[arg-type]
    service.close(Deadline.after(1, clock=FakeClock()))
    assert conn.closed == 1
