"""``hwlab bench lifecycle``'s verdicts and table without an Ironic (the run
itself is ``tests/ironic/test_bench_lifecycle.py``): a pending setting is
right only when the run said it failed, a wait at the cap is a lower bound,
a fault is typed only with a code, and stock's firmware row says why it is
not run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bmaas.hwlab.harness.bench import lifecycle as bench


def _trial(what: str, way: str, **given: Any) -> dict[str, Any]:
    r = {"trial": 1, "what": what, "way": way, "settled": True, "applied": False}
    r.update({"end": "manageable", "seconds": 5.0, "fault": None, "code": None, **given})
    row = next(x for x in bench.ROWS if (x.what, x.way) == (what, way))
    r["right"] = bench._right(row, r)
    return r


def test_a_pending_setting_is_right_only_when_reported_failed() -> None:
    pending = bench.PENDING
    assert _trial(pending, "bmaas-redfish", end="clean failed", fault="x")["right"]
    assert _trial(pending, "bmaas CLI", end="failed", fault="x")["right"]
    assert not _trial(pending, "redfish", end="clean wait", settled=False)["right"]
    assert not _trial(pending, "redfish", end="manageable")["right"]  # said success
    assert _trial(bench.BIOS, "redfish", applied=True)["right"]
    assert not _trial(bench.BIOS, "redfish", applied=False)["right"]


def test_the_table_gives_rate_median_ends_and_typed_faults() -> None:
    results = [
        _trial(bench.PENDING, "redfish", end="clean wait", settled=False, seconds=60.2),
        _trial(
            bench.PENDING,
            "bmaas-redfish",
            end="clean failed",
            seconds=4.0,
            fault="[bmaas",
            code="settings_not_applied",
        ),
        _trial(bench.PENDING, "bmaas-redfish", end="clean failed", seconds=6.0, fault="boom"),
        _trial(bench.BIOS, "bmaas CLI", end="ok", applied=True, seconds=9.0),
    ]
    report = bench._report(bench.Options(), results, ironic="39.0.0")
    rows = {(r[0], r[1]): r for r in report.tables[0].rows}
    assert rows[bench.PENDING, "redfish"][2:5] == ["0/1", "≥ 60.20 s", "clean wait (at the cap)"]
    assert rows[bench.PENDING, "bmaas-redfish"][2:] == [
        "2/2",
        "5.00 s",
        "clean failed",
        "settings_not_applied: typed; untyped",
    ]
    assert rows[bench.BIOS, "bmaas CLI"][2:] == ["1/1", "9.00 s", "ok", "-"]
    assert "ramdisk" in rows[bench.FIRMWARE, "redfish"][-1]
    assert rows[bench.BIOS, "redfish"][-1] == "not measured"
    assert report.headline["bmaas_right"] == 1.0
    assert report.headline["stock_right"] == 0.0


def test_stock_firmware_is_measured_by_servicing_an_active_node() -> None:
    """Stock's firmware clean step boots IPA; its service step does not: the
    servicing rows ask both types for it on an active node (API 1.87)."""
    serviced = [r for r in bench.ROWS if r.what == bench.SERVICE]
    assert [(r.way, r.via, r.skip) for r in serviced] == [
        ("redfish", "service", ""),
        ("bmaas-redfish", "service", ""),
    ]
    request = bench._request(serviced[0])
    assert request["microversion"] == "1.87"
    assert request["json"] == {
        "target": "service",
        "service_steps": [
            {
                "interface": "firmware",
                "step": "update",
                "args": {"settings": [{"component": "bmc", "url": bench.IMAGE}]},
            }
        ],
    }
    clean = next(r for r in bench.ROWS if (r.what, r.way) == (bench.FIRMWARE, "bmaas-redfish"))
    assert bench._request(clean)["json"]["disable_ramdisk"] is True


def test_a_failed_end_is_settled_though_it_keeps_its_target() -> None:
    """Ironic's ``clean failed`` keeps its target (``manageable``); servicing
    starts in ``active`` with a target and ends there without one."""

    def node(state: str, target: str | None) -> Any:
        return SimpleNamespace(provision_state=state, target_provision_state=target)

    clean = next(r for r in bench.ROWS if r.what == bench.PENDING)
    serviced = next(r for r in bench.ROWS if r.what == bench.SERVICE)
    assert bench._settled(clean, node("clean failed", "manageable"))
    assert bench._settled(clean, node("manageable", None))
    assert not bench._settled(clean, node("clean wait", "manageable"))
    assert not bench._settled(serviced, node("active", "active"))
    assert bench._settled(serviced, node("active", None))
    assert bench._settled(serviced, node("service failed", "active"))
