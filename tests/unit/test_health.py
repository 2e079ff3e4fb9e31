"""HealthRule: N faulted reads in a row to go in, M good reads to come out,
a person's maintenance untouched, UNKNOWN neither good nor faulted."""

from __future__ import annotations

import pytest

from bmaas.health import Change, Health, HealthRule, Outcome, step
from bmaas.store import POWER_FAILURE, SYSTEM

F, G, U = Outcome.FAULT, Outcome.GOOD, Outcome.UNKNOWN


def run(
    outcomes: list[Outcome], *, start: Health | None = None, health_rule: HealthRule | None = None
):
    health = start or Health()
    changes = []
    for outcome in outcomes:
        health, change = step(health, outcome, health_rule or HealthRule(), detail="boom")
        changes.append(change)
    return health, changes


def test_three_faults_in_a_row_put_a_node_into_system_maintenance() -> None:
    health, changes = run([F, F, F])
    assert changes == [Change.NONE, Change.NONE, Change.FAULTED]
    assert health.fault == POWER_FAILURE
    assert health.maintenance
    assert health.maintenance_by == SYSTEM
    assert health.maintenance_reason == "power failure: 3 faults in a row; last: boom"


def test_a_good_read_breaks_the_fault_streak() -> None:
    health, changes = run([F, F, G, F, F, G, F, F])
    assert Change.FAULTED not in changes
    assert health.fault is None
    assert health.fault_count == 2


def test_two_good_reads_in_a_row_to_recover_so_it_does_not_flap() -> None:
    faulted, _ = run([F, F, F])
    health, changes = run([G, F, G, U, G, G], start=faulted)
    assert changes == [Change.NONE] * 5 + [Change.RECOVERED]
    assert health == Health()


def test_unknown_is_neither_good_nor_a_fault() -> None:
    health, changes = run([F, F, U, F])
    assert changes[-1] is Change.FAULTED  # UNKNOWN did not reset the fault streak
    health, _ = run([U, U, U, U], start=Health())
    assert health == Health()


def test_a_persons_maintenance_is_kept_in_and_out_of_fault() -> None:
    person = Health(maintenance=True, maintenance_by="alice", maintenance_reason="bios update")
    faulted, changes = run([F, F, F], start=person)
    assert changes[-1] is Change.FAULTED
    assert faulted.fault == POWER_FAILURE
    assert (faulted.maintenance_by, faulted.maintenance_reason) == ("alice", "bios update")
    healed, changes = run([G, G], start=faulted)
    assert changes[-1] is Change.RECOVERED
    assert healed.fault is None
    assert healed.maintenance
    assert healed.maintenance_by == "alice"


def test_a_fault_set_by_someone_else_is_not_cleared_by_good_reads() -> None:
    other = Health(maintenance=True, maintenance_by=SYSTEM, fault="deploy failure")
    health, changes = run([G, G, G], start=other)
    assert changes == [Change.NONE] * 3
    assert health.fault == "deploy failure"


@pytest.mark.parametrize(("n", "m"), [(1, 1), (5, 3)])
def test_thresholds_are_configurable(n: int, m: int) -> None:
    policy = HealthRule(fault_after=n, recover_after=m)
    _, changes = run([F] * n + [G] * m, health_rule=policy)
    assert changes.index(Change.FAULTED) == n - 1
    assert changes.index(Change.RECOVERED) == n + m - 1


def test_thresholds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        HealthRule(fault_after=0)
