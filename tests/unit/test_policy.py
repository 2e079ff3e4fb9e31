"""The policy table: held against the fault tree, its docstring and docs/faults.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from bmaas import policy
from bmaas.faults import (
    FAULT_CLASSES,
    BmaasError,
    BMCBusy,
    BMCFault,
    NodeUnavailable,
    RetryScope,
)
from bmaas.policy import POLICY, FleetOutcome, Reschedule, SameNode, policy_for
from bmaas.store.errors import LeaseLost, SchemaOutOfDate, SegmentExhausted, StoreError

FAULTS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "faults.md"


def test_every_fault_class_has_its_own_row_and_no_row_is_an_orphan() -> None:
    in_faults = {cls for cls in FAULT_CLASSES.values() if cls.__module__ == "bmaas.faults"}
    rows = [row.fault for row in POLICY]
    assert len(rows) == len(set(rows)), "a class has two rows"
    assert set(rows) == in_faults
    for cls in in_faults:
        assert policy_for(cls).fault is cls


def test_rows_come_in_tree_order_parents_first() -> None:
    seen: set[type[BmaasError]] = set()
    for row in POLICY:
        parents = {b for b in row.fault.__mro__[1:] if b in {r.fault for r in POLICY}}
        assert parents <= seen, f"{row.fault.__name__} before its parent"
        seen.add(row.fault)


@pytest.mark.parametrize("row", POLICY, ids=lambda r: r.fault.__name__)
def test_the_table_agrees_with_each_class_retry_scope(row: policy.FaultPolicy) -> None:
    """faults.py's scope is the first thing to try; the table must not contradict it."""
    scope = row.fault.retry
    assert row.retried_here == (scope is RetryScope.SAME_NODE)
    if scope is RetryScope.OTHER_NODE:
        assert row.reschedule is Reschedule.NEXT_CANDIDATE
    if row.counts_for_health:
        assert issubclass(row.fault, BMCFault)  # only a BMC says something about a node
    if row.reschedule is Reschedule.STOP:  # no node to blame: not a node's failure
        # the request or bmaas itself is wrong (a rejected image: REJECTED)
        assert row.fleet in (FleetOutcome.ERROR, FleetOutcome.CONFIG, FleetOutcome.REJECTED)
        assert not row.counts_for_health
    assert row.why
    assert "\n" not in row.why


def test_subclasses_outside_the_tree_follow_their_nearest_ancestor() -> None:
    class VendorBusy(BMCBusy):
        pass

    assert policy_for(VendorBusy("x")).fault is BMCBusy
    assert policy_for(SegmentExhausted("x")).fault is NodeUnavailable
    for cls in (StoreError, SchemaOutOfDate, LeaseLost):
        assert policy_for(cls).reschedule is Reschedule.STOP
        assert policy_for(cls).same_node is SameNode.NEVER


def test_anything_else_is_a_bug_stopped_and_never_retried() -> None:
    row = policy_for(KeyError("oops"))
    assert row.same_node is SameNode.NEVER
    assert row.reschedule is Reschedule.STOP
    assert not row.counts_for_health


def test_health_counts_only_faults_that_say_something_about_the_node() -> None:
    counted = {row.fault.__name__ for row in POLICY if row.counts_for_health}
    assert counted == {
        "BMCFault",
        "BMCUnreachable",
        "BMCTimeout",
        "BMCInternalError",
        "BMCProtocolError",
        "PowerFailure",
        "BootFailure",
        "BMCNotBack",  # down past its bound after a reset or update (issue 51)
        "UnclassifiedFault",
    }


def test_module_docstring_draws_the_table() -> None:
    assert policy.__doc__ is not None
    drawn = "\n".join(line[4:] for line in policy.__doc__.splitlines() if line.startswith("    "))
    assert policy.render_tree() in drawn


def test_the_faults_page_shows_the_table() -> None:
    text = FAULTS_PAGE.read_text(encoding="utf-8")
    section = text.split("## What each layer does: the policy table", 1)[1].split("\n## ", 1)[0]
    assert policy.render_markdown() in section, (
        "docs/faults.md's policy table is stale; paste python -c "
        "'from bmaas.policy import render_markdown; print(render_markdown())'"
    )
