"""TEMPORARY SHIM (branch ``reschedule``): the API of branch ``policy``'s
``bmaas/policy.py`` as announced, so the reschedule loop can be written
against it. Replaced by the real table before this branch's last commit."""

from __future__ import annotations

import dataclasses
from enum import StrEnum

from bmaas.faults import BMCAuthError, BMCBusy, BMCFault, NodeUnavailable

__all__ = ["FaultPolicy", "Reschedule", "policy_for"]


class Reschedule(StrEnum):
    NEXT_CANDIDATE = "next_candidate"
    STOP = "stop"


@dataclasses.dataclass(frozen=True)
class FaultPolicy:
    same_node: str
    reschedule: Reschedule
    counts_for_health: bool
    fleet: str
    why: str


def policy_for(fault: BaseException) -> FaultPolicy:
    if isinstance(fault, BMCFault | NodeUnavailable):
        counts = isinstance(fault, BMCFault) and not isinstance(fault, BMCBusy | BMCAuthError)
        return FaultPolicy("", Reschedule.NEXT_CANDIDATE, counts, "fail", "this node")
    return FaultPolicy("", Reschedule.STOP, False, "fail", "not about this node")
