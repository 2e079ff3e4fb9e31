"""HealthRule for node health: when repeated faults put a node into
maintenance, and when good reads take it back out.

Ironic's power sync puts a node into maintenance with ``fault="power
failure"`` after ``power_state_sync_max_retries`` failed reads and takes it
out after one good read. One good read is not enough on a flaky rack: a BMC
that answers every other call would flap in and out of maintenance, and each
flap lets the scheduler pick it again. So bmaas asks for ``fault_after``
consecutive faulted reads to go in and ``recover_after`` consecutive good
reads to come out.

Rules, all in :func:`step` (a pure function; the store applies it inside one
transaction per node):

* a faulted read counts toward ``fault_after`` and breaks any good streak;
* a good read (on, off, or in transition) resets the fault streak and, on a
  node faulted by this policy, counts toward ``recover_after``;
* an UNKNOWN read is neither: the BMC answered but could not tell. It breaks
  the good streak (unknown is not good) without counting as a fault;
* maintenance set by a person is never cleared here; if a person's node
  faults, it gets the fault on top, and recovering clears only the fault.
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum

from bmaas.store.records import POWER_FAILURE, SYSTEM

__all__ = ["Change", "Health", "HealthRule", "Outcome", "step"]


@dataclasses.dataclass(frozen=True)
class HealthRule:
    """How many reads in a row put a node into fault, and take it out."""

    fault_after: int = 3
    recover_after: int = 2
    #: the fault this policy sets and the only one it clears
    fault: str = POWER_FAILURE

    def __post_init__(self) -> None:
        if self.fault_after < 1 or self.recover_after < 1:
            raise ValueError("fault_after and recover_after must be at least 1")


class Outcome(StrEnum):
    GOOD = "good"
    UNKNOWN = "unknown"
    FAULT = "fault"


class Change(StrEnum):
    NONE = "none"
    FAULTED = "faulted"  # the node went into maintenance with the policy's fault
    RECOVERED = "recovered"  # the policy's fault was cleared


@dataclasses.dataclass(frozen=True)
class Health:
    """The part of a node record that hysteresis reads and writes."""

    maintenance: bool = False
    maintenance_by: str | None = None
    maintenance_reason: str | None = None
    fault: str | None = None
    fault_count: int = 0
    good_count: int = 0


def step(
    health: Health, outcome: Outcome, health_rule: HealthRule, *, detail: str = ""
) -> tuple[Health, Change]:
    """The node's health after one more read, and what changed."""
    replace = dataclasses.replace
    if outcome is Outcome.FAULT:
        count = health.fault_count + 1
        if health.fault is None and count >= health_rule.fault_after:
            after = replace(health, fault=health_rule.fault, fault_count=count, good_count=0)
            if not health.maintenance:
                reason = f"{health_rule.fault}: {count} faults in a row"
                if detail:
                    reason += f"; last: {detail}"
                after = replace(
                    after, maintenance=True, maintenance_by=SYSTEM, maintenance_reason=reason
                )
            return after, Change.FAULTED
        return replace(health, fault_count=count, good_count=0), Change.NONE
    if outcome is Outcome.UNKNOWN:
        return replace(health, good_count=0), Change.NONE
    if health.fault == health_rule.fault:
        good = health.good_count + 1
        if good < health_rule.recover_after:
            return replace(health, fault_count=0, good_count=good), Change.NONE
        after = replace(health, fault=None, fault_count=0, good_count=0)
        if health.maintenance_by == SYSTEM:
            after = replace(after, maintenance=False, maintenance_by=None, maintenance_reason=None)
        return after, Change.RECOVERED
    return replace(health, fault_count=0, good_count=0), Change.NONE
