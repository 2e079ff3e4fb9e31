"""``DeploySettings.to_disk``: the image writes the machine's disk and powers
it off; the deploy then boots the machine from that disk (issue 49). On a
fake machine whose CD boot "writes" for a few seconds and powers off, and one
whose CD boot never does (not a writer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bmaas.cli import cli
from bmaas.cli import deploy as cli_deploy
from bmaas.deadline import Deadline
from bmaas.deploy import DeploySettings, Step, deploy_node
from bmaas.driver import BootDevice, PowerState
from bmaas.driver_info import DriverInfo
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.fakes.machine import FakeMachine, Hardware
from bmaas.faults import BootFailure, InputError
from bmaas.retry import RetryLimits
from tests.fleet import enrolled_app

HW = Hardware(power_on_time=1, power_off_time=1, soft_off_time=1, os_boot_time=1, reset_time=0.5)
SETTINGS = DeploySettings(
    image_url="http://127.0.0.1/writer.iso",
    power_timeout=30,
    settle=2,
    boot_timeout=30,
    deadline_s=300,
    to_disk=True,
    write_timeout=60,
)


class Writer(FakeMachine):
    """Booted from its CD, it writes the disk for ``write_s`` seconds and
    powers itself off (``write_s`` None: it never does); booted from disk, it
    runs what was written."""

    write_s: float | None = 5.0
    written = False
    booted: list[BootDevice | None]

    def power_state(self) -> PowerState:
        state = super().power_state()
        since = self.power_window()[1]
        if (
            state is PowerState.ON
            and self.last_boot_device is BootDevice.CDROM
            and self.write_s is not None
            and since >= self.write_s
        ):
            self.written = True
            self.force_power(PowerState.OFF)
            return PowerState.OFF
        return state


def deploy(write_s: float | None) -> tuple[Writer, FakeDriver, Any]:
    clock = FakeClock(start=0.0)
    machine = Writer("n1", HW, clock=clock, power=PowerState.OFF)
    machine.write_s = write_s
    driver = FakeDriver("n1", DriverInfo.parse({}), machine=machine, clock=clock, sleep=clock.sleep)
    report = deploy_node(
        driver,
        settings=SETTINGS,
        limits=RetryLimits(sleep=clock.sleep, clock=clock),
        deadline=Deadline.after(600, clock=clock),
    )
    return machine, driver, report


def test_the_writer_powers_off_then_the_machine_boots_its_disk() -> None:
    machine, driver, report = deploy(write_s=5.0)
    assert machine.written
    assert machine.boots == 2  # the writer, then the disk
    assert machine.last_boot_device is BootDevice.DISK
    assert machine.power_state() is PowerState.ON
    assert machine.media is None  # ejected before the disk boot
    assert list(report.steps) == [
        Step.CHECK,
        Step.BOOT_DEVICE,
        Step.POWER,
        Step.WRITE,
        Step.FINALIZE,
        Step.DISK_BOOT,
    ]
    # the eject and the disk boot setting came while the machine was off
    calls = driver.wire_calls
    assert calls.index("vmedia.eject") < len(calls) - calls[::-1].index("power.set") - 1


def test_an_image_that_never_powers_off_is_a_boot_failure_of_the_write_step() -> None:
    with pytest.raises(BootFailure) as caught:
        deploy(write_s=None)
    assert caught.value.operation == "deploy.write"
    assert "did not write the disk and power the machine off" in str(caught.value)
    assert "deploy step: write" in caught.value.__notes__


def test_the_cli_flags_reach_the_deploy_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bmaas deploy --to-disk --write-timeout 42`` (and ``--ready-timeout
    90``, the ready step's bound): the provisioner's settings say so (the
    deploy itself is what the tests above hold)."""
    fleet = FakeFleet(clock=FakeClock())
    fleet.add("d01", power=PowerState.OFF)
    app = enrolled_app(tmp_path, fleet, ["d01"])
    seen: list[DeploySettings] = []

    class Captured(Exception):
        pass

    def provisioner(*args: Any, settings: DeploySettings, **kw: Any) -> Any:
        seen.append(settings)
        raise Captured

    monkeypatch.setattr(cli_deploy, "Provisioner", provisioner)
    runner = CliRunner()
    argv = ["deploy", "--to-disk", "--write-timeout", "42", "--ready-timeout", "90"]
    runner.invoke(cli, argv, obj=app)
    runner.invoke(cli, ["deploy"], obj=app)
    got = [(s.to_disk, s.write_timeout, s.ready_timeout) for s in seen]
    assert got == [(True, 42.0, 90.0), (False, 300.0, 300.0)]


def test_to_disk_is_refused_on_ironic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_deploy, "chosen_backend", lambda **kw: object())
    with pytest.raises(InputError) as caught:
        cli_deploy.make_provisioner(
            Any,  # type: ignore[arg-type]  # never read on this path
            max_attempts=1,
            deadline=10,
            bmc_timeout=1,
            power_timeout=1,
            settle=1,
            command_deadline=Deadline.after(10),
            to_disk=True,
        )
    assert caught.value.field == "--to-disk"
