"""``--deadline`` is the whole command, ``--bmc-timeout`` one BMC call, in
every fleet command. The command's Deadline is made on the fake fleet's
clock, so the tests read exact times and never sleep."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bmaas.cli import App, cli
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.fleet import FakeFleet
from bmaas.ops import driver_factory
from tests.fleet import write_inventory


class Rig:
    def __init__(self, tmp_path: Path, count: int = 3) -> None:
        self.clock = FakeClock(start=0.0)
        self.fleet = FakeFleet(clock=self.clock)
        self.timeouts: list[float] = []

        def make_factory(*, bmc_timeout: float) -> object:
            self.timeouts.append(bmc_timeout)
            return driver_factory(fleet=self.fleet, bmc_timeout=bmc_timeout)

        self.app = App(
            db=str(tmp_path / "b.db"),
            make_factory=make_factory,  # type: ignore[arg-type]
            deadline_clock=self.clock.monotonic,
        )
        self.names = [f"q{i}" for i in range(count)]
        inventory = write_inventory(
            tmp_path / "inv.yaml", [{"name": n, "driver": "fake"} for n in self.names]
        )
        assert self.invoke("enroll", str(inventory)).exit_code == 0

    def invoke(self, *args: str) -> Result:
        return CliRunner().invoke(cli, list(args), obj=self.app)

    def hang(self, operation: str) -> None:
        for name in self.names:
            self.fleet.machine(name).plan.add(
                FaultRule.from_dict({"effect": "hang", "operation": operation})
            )


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def test_bmc_timeout_bounds_each_call(rig: Rig) -> None:
    rig.hang("power.get")
    result = rig.invoke(
        "power", "status", "--all", "--workers", "1", "--bmc-timeout", "4", "--no-retry"
    )
    assert result.exit_code == 1
    assert result.stdout.count("BMCTimeout") == 3
    assert rig.clock.sleeps == [4.0, 4.0, 4.0]  # each hung node costs one call's bound
    assert rig.timeouts == [4.0]


@pytest.mark.parametrize(
    "command",
    [
        ("power", "status"),
        ("power", "on", "--no-wait"),
        ("boot-device", "get"),
        ("boot-device", "set", "--device", "pxe"),
        ("vmedia", "eject"),
        ("sync",),
    ],
    ids=" ".join,
)
def test_deadline_bounds_the_whole_command(rig: Rig, command: tuple[str, ...]) -> None:
    for name in rig.names:
        rig.fleet.machine(name).plan.add(FaultRule.from_dict({"effect": "hang"}))
    base = [*command] if command == ("sync",) else [*command, "--all"]
    result = rig.invoke(*base, "--workers", "1", "--deadline", "9", "--bmc-timeout", "4")
    assert result.exit_code == 1
    # the first node's attempts hang 4 s + 4 s, then its third is handed the 1 s
    # left, never its 4 s
    assert rig.clock.sleeps == [4.0, 4.0, 1.0]
    assert rig.clock.monotonic() == pytest.approx(9.0)
    assert result.stdout.count("BMCTimeout") == 1
    # the other two were never asked: the deadline was spent before their calls,
    # bmaas's own budget -- SlotTimeout, never a BMC timeout counted against
    # them (issue 36: sync fenced healthy nodes this way)
    assert result.stdout.count("SlotTimeout") == 2
    # whichever came first: a worker reached them with the budget spent
    # ("nothing sent"), or the deadline came before any worker did
    assert result.stdout.count("nothing sent") + result.stdout.count("not started") == 2


def test_status_check_hands_each_call_a_share_of_its_deadline(rig: Rig) -> None:
    rig.hang("probe")
    result = rig.invoke("status", "check", "--only", "bmc", "--deadline", "10", "--workers", "1")
    assert result.exit_code == 2
    # the sweep's 9 s (10 less the reserve), a quarter per call; the last gets what is left
    assert rig.clock.sleeps == [2.25, 2.25, 2.25]
    assert rig.clock.monotonic() <= 10.0
