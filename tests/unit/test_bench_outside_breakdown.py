"""The events bench's steady requests by operation (``bench.outside``):
where a row's requests beyond its reads go (issue 46: the 10,000-node
Ironic row's 0.87 requests a node-hour beyond its liveness reads were not
attributed). A lab stand-in whose rules' fired counts the test moves."""

from __future__ import annotations

from typing import Any

from bmaas.hwlab.harness.bench import events as events_bench
from bmaas.hwlab.harness.bench.outside import (
    BREAKDOWN,
    COUNT_ALL,
    COUNT_SUBSCRIBE,
    Measured,
    by_operation,
    count_requests,
    steady_window,
)


class Lab:
    """The lab's fault API and status, as the bench uses them."""

    def __init__(self, names: list[str]) -> None:
        self.rules: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        self.fired: dict[str, dict[str, int]] = {n: {} for n in names}

    def clear_faults(self, name: str) -> None:
        self.rules[name] = []

    def add_faults(self, name: str, rules: list[dict[str, Any]]) -> None:
        self.rules[name] += rules

    def status(self) -> dict[str, Any]:
        return {"nodes": {n: {"fired": dict(f)} for n, f in self.fired.items()}}

    def serve(self, name: str, operation: str) -> None:
        """One request of ``operation`` at ``name``'s BMC: every matching rule fires."""
        for rule in self.rules[name]:
            op = rule["operation"]
            event = operation.startswith("event.")
            if (op == "*" and not event) or op == operation:
                self.fired[name][rule["name"]] = self.fired[name].get(rule["name"], 0) + 1


def test_each_counted_operation_has_a_zero_delay_rule_beside_the_total() -> None:
    lab = Lab(["n1"])
    count_requests(lab, ["n1"])
    rules = lab.rules["n1"]
    assert {r["name"] for r in rules} == {
        COUNT_ALL,
        COUNT_SUBSCRIBE,
        *(f"bench-count-{op}" for op in BREAKDOWN),
    }
    assert all(r["effect"] == "delay" and r["seconds"] == 0 for r in rules)


def test_the_steady_window_breaks_its_requests_down_and_other_is_the_rest() -> None:
    names = ["n1", "n2"]
    lab = Lab(names)
    count_requests(lab, names)
    lab.serve("n1", "login")  # before the window: not counted in it
    measured = Measured("events")

    def during(end: Any) -> int:
        for op in ("power.get", "power.get", "login", "login", "probe", "boot.set"):
            lab.serve("n2", op)
        lab.serve("n1", "event.subscribe")
        end()
        lab.serve("n1", "power.get")  # after the window
        return 0

    steady_window(lab, names, measured, lambda: 0.0, 0.0, during)
    assert measured.steady_by_operation == {
        "probe": 1,
        "login": 2,
        "power.get": 2,
        "subscribe": 1,
        "other": 1,
    }
    assert measured.steady_requests == 7  # every request, the subscription included
    assert by_operation(lab, names)["power.get"] == 3


def test_the_report_gives_the_breakdown_per_node_hour() -> None:
    m = Measured("events", steady_seconds=1800.0, steady_by_operation={"power.get": 10, "login": 2})
    report = events_bench._report(events_bench.Options(nodes=10), {"events": m})
    shares = report.data["events"]["steady_requests_by_operation_per_node_hour"]
    assert shares == {"power.get": 2.0, "login": 0.4}
    assert any("events: power.get 2.00, login 0.40" in note for note in report.notes)
