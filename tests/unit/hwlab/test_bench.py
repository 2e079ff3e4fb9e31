"""The benchmark machinery without a lab: Ironic's ipmitool retry loop on a
fake clock, statistics, call counting, the report's outputs, and the
command line a report quotes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from bmaas.driver import PowerAction
from bmaas.fakes.clock import FakeClock
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.faults import BMCTimeout
from bmaas.hwlab.harness.bench import fault_detection, ipmitool
from bmaas.hwlab.harness.bench.cli import _command, bench_options
from bmaas.hwlab.harness.bench.common import CallCounter, percentile, summary
from bmaas.hwlab.harness.bench.goodput import counting_factory
from bmaas.hwlab.harness.bench.report import (
    Report,
    Table,
    fmt_ratio,
    fmt_seconds,
    markdown,
    rounded,
    write_report,
)
from bmaas.retry import RetryingDriver, RetryLimits
from tests.budgets import ask, no_budget

JOB: ipmitool.Job = (["ipmitool", "power", "status"], {})


class FakeIpmitool:
    """``subprocess.run`` for ipmitool on a fake clock: each call takes
    ``takes`` seconds and answers from ``answers`` (the last one repeats)."""

    def __init__(self, clock: FakeClock, answers: list[Any], takes: float = 0.0) -> None:
        self.clock = clock
        self.answers = answers
        self.takes = takes
        self.started: list[float] = []

    def __call__(self, job: ipmitool.Job, timeout: float) -> subprocess.CompletedProcess[str]:
        self.started.append(self.clock.monotonic())
        answer = self.answers[min(len(self.started), len(self.answers)) - 1]
        if answer == "timeout":
            self.clock.advance(timeout)
            raise subprocess.TimeoutExpired(job[0], timeout)
        self.clock.advance(self.takes)
        rc, err = answer
        return subprocess.CompletedProcess(job[0], rc, "", err)


def ironic(clock: FakeClock, tool: FakeIpmitool, **kw: Any) -> ipmitool.IronicResult:
    return ipmitool.ironic_power_status(
        JOB, clock=clock.monotonic, sleep=clock.sleep, run=tool, **kw
    )


def test_ironic_retries_every_error_5s_apart_up_to_12_tries() -> None:
    clock = FakeClock(start=0.0)
    tool = FakeIpmitool(clock, [(1, "Error: Unable to establish IPMI v2 / RMCP+ session\n")])
    result = ironic(clock, tool)
    assert result.ok is False
    assert result.tries == 12
    assert tool.started == [5.0 * i for i in range(12)]
    assert result.elapsed == 55.0
    assert result.error == "Error: Unable to establish IPMI v2 / RMCP+ session"


def test_ironic_stops_after_60s_when_each_try_is_slow() -> None:
    clock = FakeClock(start=0.0)
    tool = FakeIpmitool(clock, [(1, "Get Chassis Power Status failed: Node busy")], takes=2.0)
    result = ironic(clock, tool)
    # Tries start 5 s after the previous one ended: 0, 7, ... 63. Ironic checks
    # the clock only after a failure, so the try started at 63 still runs.
    assert tool.started == [7.0 * i for i in range(10)]
    assert (result.tries, result.elapsed) == (10, 65.0)


def test_ironic_returns_the_answer_once_a_try_works() -> None:
    clock = FakeClock(start=0.0)
    tool = FakeIpmitool(clock, [(1, "Node busy"), (0, "")], takes=0.5)
    result = ironic(clock, tool)
    assert (result.ok, result.tries, result.elapsed) == (True, 2, 6.0)


def test_ironic_is_cut_short_at_the_benchmark_cap_and_says_so() -> None:
    clock = FakeClock(start=0.0)
    tool = FakeIpmitool(clock, [(1, "Node busy")], takes=1.0)
    result = ironic(clock, tool, cap=3.0)
    assert (result.ok, result.gave_up, result.elapsed, result.tries) == (False, True, 3.0, 1)
    assert clock.monotonic() == 1.0  # it did not sleep past the cap to find out


def test_a_hung_ipmitool_is_killed_after_60s_and_ends_the_call() -> None:
    clock = FakeClock(start=0.0)
    result = ironic(clock, FakeIpmitool(clock, ["timeout"]))
    assert (result.ok, result.gave_up, result.tries) == (False, False, 1)
    assert result.elapsed == 60.0
    assert "killed" in result.error


def test_ipmitool_jobs_keep_the_password_off_the_command_line(monkeypatch) -> None:
    monkeypatch.setattr(ipmitool.shutil, "which", lambda _: "/usr/bin/ipmitool")
    info = {"ipmi_address": "127.0.0.1", "ipmi_port": 6230, "ipmi_username": "admin"}
    argv, env = ipmitool.ipmitool_job(info, password="s3cret-pw")
    assert "s3cret-pw" not in " ".join(argv)
    assert env["IPMI_PASSWORD"] == "s3cret-pw"
    assert argv[-6:] == ["-R", "1", "-N", "1", "power", "status"]
    assert argv[argv.index("-p") : argv.index("-p") + 2] == ["-p", "6230"]


def test_percentile_and_summary() -> None:
    values = [0.5, 0.1, 0.4, 0.2, 0.3]
    assert percentile(values, 0.5) == 0.3
    assert percentile(values, 0.95) == 0.5
    assert percentile([], 0.5) is None
    assert summary(values) == {"median": 0.3, "p95": 0.5, "max": 0.5}
    assert summary([]) == {"median": None, "p95": None, "max": None}


def test_counted_drivers_count_internal_calls_and_keep_their_deadline() -> None:
    fleet = FakeFleet(clock=FakeClock(start=0.0))
    fleet.add("n1")
    fleet.add("n2", rules=[{"effect": "hang"}])
    counter = CallCounter()
    build = counting_factory(lambda r: FakeDriver(r.name, fleet=fleet, bmc_timeout=2.0), counter)
    driver = build(type("Record", (), {"name": "n1"})())
    driver.set_power_state(PowerAction.ON, wait=True, timeout=30, deadline=no_budget(driver))
    counts = counter.counts()
    assert counts["bmc.request_power"] == 1
    assert counts["bmc.get_power_state"] >= 2  # the reads while waiting, made on self
    # The retry layer must still see the driver's own 2 s deadline, not the default 10 s.
    dead = build(type("Record", (), {"name": "n2"})())
    policy = RetryLimits.no_retry(clock=fleet.clock.monotonic, sleep=fleet.clock.sleep)
    start = fleet.clock.monotonic()
    with pytest.raises(BMCTimeout):
        ask(RetryingDriver(dead, policy).get_power_state)
    assert fleet.clock.monotonic() - start == pytest.approx(2.0)


def test_a_fault_detection_cell_marks_capped_figures_as_lower_bounds() -> None:
    capped = {"gave_up": True, "elapsed": 90.0}
    fast = {"gave_up": False, "ok": False, "result": "BMCBusy", "elapsed": 0.01}
    mostly_capped = fault_detection._cell([capped, capped, fast], cap=90.0)
    assert mostly_capped["lower_bound"] is True
    assert mostly_capped["median_s"] == 90.0
    assert mostly_capped["got"] == ["BMCBusy"]
    once = fault_detection._cell([capped, fast, fast], cap=90.0)
    assert (once["lower_bound"], once["max_lower_bound"]) == (False, True)
    never = fault_detection._cell([capped], cap=3.0)
    assert never["got"] == ["nothing within 3 s"]


def test_formatting() -> None:
    assert fmt_seconds(0.00123) == "1.23 ms"
    assert fmt_seconds(0.25) == "250.0 ms"
    assert fmt_seconds(61.5) == "61.50 s"
    assert fmt_seconds(90.0, lower_bound=True) == "≥ 90.00 s"
    assert fmt_seconds(None) == "—"
    assert fmt_ratio(2.345) == "2.35x"
    assert fmt_ratio(12000, lower_bound=True) == "≥ 12,000x"


def sample_report() -> Report:
    def plot(fig: Any, report: Report) -> None:
        ax = fig.subplots()
        ax.plot([1, 2], [report.data["y"], 2])

    return Report(
        scenario="sample",
        title="Sample | scenario",
        command="hwlab bench sample --smoke",
        smoke=True,
        params={"runs": 1},
        tables=[Table("figures", ["client", "median"], [["bmaas", "1.0 ms"]])],
        headline={"x / bmaas": 3.0},
        notes=["a note"],
        data={"y": 1, "driver_info": {"ipmi_password": "s3cret-pw"}},
        env={"date": "2026-11-21T10:00:00+00:00", "cpus": 2, "other_cpu_busy_before": 3.0},
        elapsed=1.0,
        plot=plot,
    )


def test_a_report_writes_chart_summary_and_json(tmp_path: Path) -> None:
    paths = write_report(sample_report(), tmp_path)
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = paths["md"].read_text()
    assert "| client | median |" in text
    assert "| bmaas | 1.0 ms |" in text
    assert "![Sample | scenario](sample.png)" in text
    assert "`hwlab bench sample --smoke`" in text
    saved = json.loads(paths["json"].read_text())
    assert saved["headline"] == {"x / bmaas": 3.0}
    assert "s3cret-pw" not in paths["json"].read_text()


def test_markdown_says_when_the_machine_was_loaded() -> None:
    report = sample_report()
    report.env["loaded"] = True
    assert "machine loaded by other work" in markdown(report)


def test_the_quoted_command_has_the_options_that_were_given() -> None:
    seen: list[str] = []

    @click.command("sample")
    @click.option("--runs", type=int, default=None)
    @click.option("--size", "sizes", multiple=True, type=int)
    @click.option("--fence/--no-fence", default=None)
    @bench_options
    @click.pass_context
    def sample(ctx: click.Context, **_: Any) -> None:
        seen.append(_command(ctx))

    result = CliRunner().invoke(sample, ["--runs", "3", "--size", "10", "--size", "20", "--smoke"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(sample, ["--no-fence"])  # a switched-off flag is named too
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(sample, ["--runs", "0"])  # 0 is a value (0 == False)
    assert result.exit_code == 0, result.output
    assert seen == [
        "sample --runs 3 --size 10 --size 20 --smoke",
        "sample --no-fence",
        "sample --runs 0",
    ]


def test_a_headline_keeps_two_significant_figures_of_a_small_value() -> None:
    # the sync-cpu smoke's quiet ratio at load 24 was 0.04, reported as 0.0
    assert rounded(0.0437, 1) == 0.044
    assert rounded(0.5, 1) == 0.5
    assert rounded(53.27, 1) == 53.3
    assert rounded(-0.004, 1) == -0.004
    assert rounded(0.0, 1) == 0.0
    assert rounded(None, 1) is None
