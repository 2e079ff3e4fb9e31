"""A Redfish call whose budget bmaas's own waits spent before its first
request went out is ``SlotTimeout`` ("nothing sent"), never the BMC's
``BMCTimeout``. At load 25 (``test.sh --load 20``) four healthy systems of
one service each waited for another node's login to that service, got the
lock as their deadline passed, and ended ``BMCTimeout: deadline passed
before GET /redfish/v1/`` -- counted toward fencing BMCs that were never
asked. A call that did send, and whose next request the deadline then
stops, is still the BMC's time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.faults import BMCTimeout, SlotTimeout
from bmaas.hwlab.redfish import RedfishServer
from tests.lab.redfish_support import Lab, lab_bmc
from tests.lab.test_redfish_effects import server

__all__ = ["server"]  # the fixture

pytestmark = pytest.mark.lab


@pytest.fixture
def cold(server: RedfishServer) -> Iterator[Lab]:
    """A driver that has not logged in yet (its first call reads the root)."""
    with lab_bmc(server, warm=False) as b:
        yield b


class Clock:
    """The deadline's clock: still at 0 until ``spend()``, then past it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def spend(self) -> None:
        self.now = 100.0


class SlowLogin:
    """The service's login lock, held by another node's login for the
    whole of this call's budget: granted, but only once it is spent."""

    def __init__(self, real: Any, clock: Clock) -> None:
        self.real, self.clock = real, clock

    def acquire(self, timeout: float = -1) -> bool:
        self.clock.spend()
        return bool(self.real.acquire())

    def release(self) -> None:
        self.real.release()


def test_a_call_whose_budget_a_wait_for_the_services_login_spent_sent_nothing(cold: Lab) -> None:
    clock = Clock()
    service = cold.driver._service()
    service.login_lock = SlowLogin(service.login_lock, clock)  # type: ignore[assignment]
    fault, _, sent = cold.fails(
        lambda: cold.driver.get_power_state(deadline=Deadline(10.0, clock=clock))
    )
    assert isinstance(fault, SlotTimeout), repr(fault)
    assert "nothing sent" in str(fault)
    assert sent == 0


def test_a_call_that_sent_and_then_ran_out_is_the_bmcs_timeout(cold: Lab) -> None:
    """The root is read (a request went out), the deadline then passes
    before the next: as before, the BMC's time."""
    clock = Clock()
    conn = cold.driver._service().conn
    real = conn._op
    calls = []

    def op(*args: Any, **kw: Any) -> Any:
        calls.append(args[0] if args else kw.get("method"))
        if len(calls) == 2:
            clock.spend()  # the first request's answer took the budget
        return real(*args, **kw)

    conn._op = op  # type: ignore[method-assign]
    fault, _, sent = cold.fails(
        lambda: cold.driver.get_power_state(deadline=Deadline(10.0, clock=clock))
    )
    assert isinstance(fault, BMCTimeout), repr(fault)
    assert sent == 1
