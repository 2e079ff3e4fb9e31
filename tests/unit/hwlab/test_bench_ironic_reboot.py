"""``hwlab bench ironic-reboot``'s plan, its wait for Ironic to let go of a
node, its 409 handling and its table, without an Ironic (the run itself is
``tests/ironic/test_bench_ironic_reboot.py``)."""

from __future__ import annotations

import types
from typing import Any

import pytest
from click.testing import CliRunner

from bmaas.hwlab.cli import cli as hwlab_cli
from bmaas.hwlab.harness import ironic as harness
from bmaas.hwlab.harness.bench import ironic_reboot as bench


def test_the_plan_is_rounds_by_windows_by_types_and_busy_for_ipmi() -> None:
    trials = bench.plan(bench.Options())
    # issue 35: 10 s and 45 s reboots and busy; issue 48: a 120 s reset as the field sees it
    assert len(trials) == 2 * (3 * 4 + 2)
    for r in (1, 2):
        mine = [t for t in trials if t.round == r]
        assert sorted((t.fault, t.driver) for t in mine) == sorted(
            [(f"reboot {w}s", d) for w in (10, 45, 120) for d in bench.TYPES]
            + [("busy x6", d) for d in ("bmaas-ipmi", "ipmi")]
        )
    reboot = next(t for t in trials if t.fault == "reboot 45s")
    assert reboot.rule == {"effect": "bmc_reboot", "duration": 45.0, "times": 1}
    busy = next(t for t in trials if t.fault == "busy x6")
    assert (busy.rule["incident"], busy.rule["times"]) == ("ipmi-node-busy", 6)
    assert not [t for t in bench.plan(bench.Options(busy=0)) if t.fault.startswith("busy")]


class _Clock:
    """time.monotonic and time.sleep for the bench module: sleeps advance it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class _Conflict(Exception):
    status_code = 409


class _Conn:
    """An openstacksdk connection whose node stays held for ``held`` reads
    and refuses ``refusals`` power requests with 409."""

    def __init__(self, held: int, refusals: int) -> None:
        self.held, self.refusals = held, refusals
        self.reads = 0
        self.asked: list[str] = []
        self.baremetal = self

    def get_node(self, ident: str) -> Any:
        self.reads += 1
        holding = self.reads <= self.held
        return types.SimpleNamespace(
            name="n",
            target_power_state="power on" if holding else None,
            target_provision_state=None,
            reservation="conductor" if holding else None,
        )

    def set_node_power_state(self, node: Any, target: str, wait: bool) -> None:
        self.asked.append(target)
        if self.refusals:
            self.refusals -= 1
            self.held = self.reads + 2  # a sync pass holds it for two more reads
            raise _Conflict("409 Conflict: Node n is locked by host conductor")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(bench, "time", fake)
    return fake


def test_a_trial_starts_only_once_ironic_holds_no_lock(clock: _Clock) -> None:
    conn = _Conn(held=3, refusals=0)
    node = types.SimpleNamespace(id="n")
    bench._released(conn, node, cap=10)
    assert conn.reads == 4
    assert clock.sleeps == [bench.POLL] * 3
    with pytest.raises(harness.IronicError, match="still held"):
        bench._released(_Conn(held=1000, refusals=0), node, cap=2)


def test_a_locked_node_is_asked_again_and_counted(clock: _Clock) -> None:
    conn = _Conn(held=0, refusals=2)
    node = types.SimpleNamespace(id="n")
    assert bench._ask(conn, node, "power on", end=60) == 2
    assert conn.asked == ["power on"] * 3
    # past the end: the 409 is the answer
    with pytest.raises(_Conflict):
        bench._ask(_Conn(held=0, refusals=5), node, "power on", end=-1)


def _row(driver: str, fault: str, on: bool, seconds: float, r: int = 1) -> dict[str, Any]:
    return {
        "round": r,
        "driver": driver,
        "fault": fault,
        "on": on,
        "settled": True,
        "seconds": seconds,
        "conflicts": 0,
        "fired": 1,
        "code": None if on else "bmc_unreachable",
        "last_error": None if on else "[bmaas bmc_unreachable retry=same_node] ...",
    }


def test_the_table_puts_bmaas_and_stock_side_by_side() -> None:
    o = bench.Options(rounds=2)
    rows = [
        _row("bmaas-ipmi", "reboot 10s", True, 12.3),
        _row("bmaas-ipmi", "reboot 10s", True, 14.0, r=2),
        _row("ipmi", "reboot 10s", True, 26.1),
        _row("ipmi", "reboot 10s", False, 70.0, r=2),
    ]
    report = bench._report(o, rows)
    overview = report.tables[0]
    assert overview.columns == ["fault", *bench.TYPES]
    assert overview.rows == [
        ["reboot 10s", "on 2/2, 12.3-14.0 s", "on 1/2, 26.1 s; bmc_unreachable", "-", "-"]
    ]
    assert report.headline["bmaas_on"] == 1.0
    assert report.headline["stock_on"] == 0.5
    assert report.headline["bmaas_on_within_operation_deadline"] == 1.0
    assert [row[3] for row in report.tables[1].rows] == ["on", "on", "on", "bmc_unreachable"]


@pytest.mark.parametrize(
    "args",
    [["--window", "0"], ["--rounds", "0"], ["--type", "fake-hardware"], ["--busy", "-1"]],
)
def test_bad_options_are_refused_before_anything_starts(args: list[str]) -> None:
    result = CliRunner().invoke(hwlab_cli, ["bench", "ironic-reboot", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_a_machine_seen_on_then_off_was_switched_off(clock: _Clock) -> None:
    reads = iter(["on", "on", "off", "off"])
    assert bench._switched_off(lambda: next(reads), seconds=10)
    assert clock.sleeps == [bench.WATCH_POLL] * 2
    # off all along (the BMC never took the power-on), or on all along: not switched off
    assert not bench._switched_off(lambda: "off", seconds=3)
    assert not bench._switched_off(lambda: "on", seconds=3)


def test_switched_off_machines_are_counted_in_the_table() -> None:
    rows = [
        {**_row("bmaas-redfish", "reboot 45s", False, 55.0), "switched_off": True},
        {**_row("redfish", "reboot 45s", True, 50.0), "switched_off": False},
    ]
    report = bench._report(bench.Options(), rows, ironic="35.1.0")
    assert report.tables[0].rows[0][3] == "on 0/1; bmc_unreachable; switched off 1"
    assert (report.headline["bmaas_switched_off"], report.headline["stock_switched_off"]) == (1, 0)
    assert any("Ironic 35.1.0" in note for note in report.notes)


def test_a_release_not_installed_says_how_to_install_it() -> None:
    with pytest.raises(harness.IronicError, match=r"ironic-env.sh --release 0.0.1"):
        harness.find_venv("0.0.1")


class _Locked(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"{status_code}: (sqlite3.OperationalError) database is locked")
        self.status_code = status_code


def test_a_node_read_the_api_refused_5xx_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 2 of a loaded run lost 7 of 14 trials to one 'database is locked'
    (HTTP 500) each on the bench's own reads of the node."""
    clock = _Clock()
    monkeypatch.setattr(harness, "time", clock)
    answers: list[Any] = [_Locked(500), _Locked(503), "node"]

    def get_node(ident: str) -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    conn = types.SimpleNamespace(baremetal=types.SimpleNamespace(get_node=get_node))
    assert harness.read_node(conn, "n") == "node"
    assert clock.sleeps == [0.5, 0.5]
    answers[:] = [_Locked(404)]  # not the database: the answer
    with pytest.raises(_Locked):
        harness.read_node(conn, "n")
