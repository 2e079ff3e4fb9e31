"""Fixtures for the readiness checks: a store with fake nodes, a fake fleet on
a fake clock that is also the check's deadline clock, and contexts on them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.fleet import FakeFleet
from bmaas.ops import DriverFactory, driver_factory
from bmaas.status import CheckContext, CheckResult, run_checks, select

MakeContext = Callable[..., CheckContext]


@pytest.fixture
def clock() -> FakeClock:
    """The deadline's clock, and the fake BMCs' too: a hanging fake BMC moves
    it by the call's deadline, as a real one would take that long."""
    return FakeClock(start=500.0)


@pytest.fixture
def fleet(clock: FakeClock) -> FakeFleet:
    return FakeFleet(clock=clock)


@pytest.fixture
def make_factory(fleet: FakeFleet) -> Callable[..., DriverFactory]:
    def make(bmc_timeout: float) -> DriverFactory:
        return driver_factory(bmc_timeout=bmc_timeout, fleet=fleet)

    return make


@pytest.fixture
def make_ctx(
    db_url: str,
    store: Any,
    wall: FakeClock,
    clock: FakeClock,
    make_factory: Callable[..., DriverFactory],
) -> Iterator[MakeContext]:
    """``make_ctx(deadline=..., workers=...)``: a context on the test's store."""
    made: list[CheckContext] = []

    def make(**kw: Any) -> CheckContext:
        if "deadline" in kw:  # seconds, from now on the test's clock
            kw["deadline"] = Deadline.after(kw["deadline"], clock=clock.monotonic)
        kw.setdefault("make_factory", make_factory)
        kw.setdefault("db", db_url)
        kw.setdefault("sleep", clock.sleep)
        ctx = CheckContext(wall_clock=wall, clock=clock.monotonic, **kw)
        made.append(ctx)
        return ctx

    yield make
    for ctx in made:
        ctx.close()


def run(ctx: CheckContext, *names: str) -> dict[str, CheckResult]:
    """Run the named checks (all when none), results by name."""
    chosen = select(names)
    if names:
        ctx.selected = frozenset(c.name for c in chosen)
    return {r.name: r for r in run_checks(ctx, chosen, debug=True)}
