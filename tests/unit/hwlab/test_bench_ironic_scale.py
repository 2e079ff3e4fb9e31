"""``hwlab bench ironic-scale``'s arithmetic and its statsd ear, without an Ironic."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from bmaas.faults import InputError
from bmaas.hwlab.harness.bench import ironic_scale
from bmaas.hwlab.harness.bench.ironic_scale import SYNC_TIMER, _Pass, _passes, _Watch, parse_conf
from bmaas.hwlab.harness.statsd import Metric, StatsdSink, parse
from bmaas.hwlab.labspec import loopback_hosts


def test_statsd_lines_are_parsed_and_garbage_is_skipped() -> None:
    datagram = (
        b"ironic.conductor.manager.ConductorManager._sync_power_states:1532.5|ms\n"
        b"PowerSyncNodesCount:1000|g\nnot a metric\nx:notanumber|ms\ncount:1|c|@0.5"
    )
    got = parse(datagram, at=7.0)
    assert [(m.name.rsplit(".", 1)[-1], m.value, m.kind) for m in got] == [
        ("_sync_power_states", 1532.5, "ms"),
        ("PowerSyncNodesCount", 1000.0, "g"),
        ("count", 1.0, "c"),
    ]
    assert all(m.at == 7.0 for m in got)


def test_the_sink_keeps_only_what_it_wants_and_calls_back() -> None:
    heard: list[Metric] = []
    got_one = threading.Event()

    def on_metric(metric: Metric) -> None:
        heard.append(metric)
        got_one.set()

    with (
        StatsdSink([SYNC_TIMER], on_metric) as sink,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender,
    ):
        sender.sendto(b"do_sync_power_state:3|ms", ("127.0.0.1", sink.port))
        sender.sendto(f"a.{SYNC_TIMER}:250|ms".encode(), ("127.0.0.1", sink.port))
        assert got_one.wait(10)
    assert [m.value for m in heard] == [250.0]
    assert [m.value for m in sink.named(SYNC_TIMER)] == [250.0]
    assert sink.dropped == 1


class _FakeIronic:
    def __init__(self) -> None:
        self.cpu = 0.0

    def cpu_seconds(self) -> float:
        return self.cpu


def test_a_pass_is_dated_by_its_end_minus_its_duration_with_the_cpu_at_its_end() -> None:
    ironic = _FakeIronic()
    watch = _Watch(ironic)  # type: ignore[arg-type]
    ironic.cpu = 4.0
    watch.heard(Metric(100.0, f"x.{SYNC_TIMER}", 2500.0, "ms"))
    watch.heard(Metric(101.0, f"x.{SYNC_TIMER}", 1.0, "g"))  # not a timer: ignored
    assert watch.passes == [_Pass(97.5, 100.0, 4.0)]
    assert watch.after(97.0, 1, cap=0) == [_Pass(97.5, 100.0, 4.0)]
    assert watch.after(98.0, 1, cap=0) == []  # started before: not clean


def test_cpu_per_node_per_pass_is_end_to_end_minus_the_idle_rate() -> None:
    passes = [_Pass(0.0, 2.0, 10.0), _Pass(30.0, 33.0, 13.1), _Pass(60.0, 64.0, 16.6)]
    # 100 nodes, idle conductor at 0.01 CPU-s per s: (3.1 - 0.31) and (3.5 - 0.31) over 100
    got = _passes(passes, size=100, idle=0.01)
    assert got["passes"] == 2
    assert got["pass_s"] == [3.0, 4.0]
    assert got["pass_median_s"] == 3.5
    assert got["cpu_per_node_pass_ms"] == pytest.approx(29.9, abs=0.1)


def test_loopback_hosts_are_distinct_and_in_127_slash_8() -> None:
    names = [f"node-{i}" for i in range(600)]
    hosts = loopback_hosts(names)
    assert len(set(hosts.values())) == 600
    assert hosts["node-0"] == "127.1.0.1"
    assert hosts["node-253"] == "127.1.0.254"
    assert hosts["node-254"] == "127.1.1.1"
    for address in hosts.values():
        octets = [int(o) for o in address.split(".")]
        assert octets[0] == 127
        assert 1 <= octets[3] <= 254


def test_conf_settings_are_parsed_and_every_bad_one_is_named() -> None:
    assert parse_conf(("bmaas.keep_sessions = false", "ipmi.min_command_interval=1")) == [
        ("bmaas", "keep_sessions", "false"),
        ("ipmi", "min_command_interval", "1"),
    ]
    with pytest.raises(InputError) as caught:
        parse_conf(("nodot=1", "a.b=c", "missing.equals"))
    assert "'nodot=1'" in str(caught.value)
    assert "'missing.equals'" in str(caught.value)


def test_the_stretch_cell_shows_the_first_the_longest_and_the_median_hung_pass() -> None:
    cell = ironic_scale._stretch_cell
    assert cell({"stretch_first": 1.3, "stretch": 2.24, "stretch_median": 1.4}) == (
        "first 1.3, longest 2.24 (median 1.4)"
    )
    assert cell({"stretch": 2.24, "stretch_median": 1.4}) == "longest 2.24 (median 1.4)"
    assert cell({"stretch": 1.1}) == "longest 1.1"  # a report from before
    assert cell({}) == "—"


def test_the_first_hung_pass_is_the_first_that_began_after_the_hang() -> None:
    """Issue 35's figure: not the pass the hang fell into (it met only the
    BMCs it had not read yet), the next one, which meets every one."""
    passes = [_Pass(0.0, 2.0, 0.0), _Pass(20.0, 22.5, 0.0), _Pass(40.0, 46.0, 0.0)]
    passes.append(_Pass(60.0, 62.0, 0.0))
    during, first = ironic_scale._hung_passes(passes, start=21.0)
    assert during == [2.5, 6.0, 2.0]
    assert first == 6.0
    assert ironic_scale._hung_passes(passes, start=70.0) == ([], None)


def test_the_floor_runs_only_when_asked_and_its_ironic_enables_fake_power(tmp_path: Path) -> None:
    """``--type fake-hardware``: Ironic's own pass with no BMC asked. Not a
    default row (it measures Ironic, not a driver); the harness's Ironic
    loads it and its fake power; the report says what the row is."""
    from bmaas.hwlab.harness import ironic as harness

    assert ironic_scale.FLOOR not in ironic_scale.TYPES
    assert ironic_scale.FLOOR in harness.HARDWARE_TYPES
    conf = harness.IronicService(tmp_path, venv=tmp_path).config()
    assert "fake" in conf["DEFAULT"]["enabled_power_interfaces"].split(",")
    assert "fake" in conf["DEFAULT"]["enabled_management_interfaces"].split(",")
    options = ironic_scale.Options(types=(ironic_scale.FLOOR,))
    trial = {"nodes": 10, "driver": ironic_scale.FLOOR, "pass_median_s": 1.0}
    notes = ironic_scale._report(options, [trial]).notes
    assert any(n.startswith("fake-hardware: Ironic's own fake power") for n in notes)
    without = ironic_scale._report(ironic_scale.Options(), [trial]).notes
    assert not any(n.startswith("fake-hardware") for n in without)
