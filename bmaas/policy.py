"""One policy: for each fault class, what every layer of bmaas does with it.

The taxonomy (:mod:`bmaas.faults`) says what a fault *means*; this table says
what each layer *does*, in one place, so that the operation retry, the
request reschedule, node health and the fleet commands cannot drift apart::

    fault                         same node        reschedule      health  fleet
    BmaasError                    never            stop            -       error
    ├── InputError                never            stop            -       config
    ├── BMCFault                  never            next_candidate  counts  failed
    │   ├── BMCUnreachable        briefly          next_candidate  counts  failed
    │   ├── BMCTimeout            idempotent_only  next_candidate  counts  failed
    │   ├── BMCBusy               backoff          next_candidate  -       busy
    │   ├── BMCAuthError          never            next_candidate  -       auth
    │   ├── BMCInternalError      once             next_candidate  counts  failed
    │   ├── BMCProtocolError      never            next_candidate  counts  failed
    │   ├── UnsupportedOperation  never            next_candidate  -       unsupported
    │   ├── PowerFailure          never            next_candidate  counts  failed
    │   ├── BootFailure           never            next_candidate  counts  failed
    │   └── UnclassifiedFault     never            next_candidate  counts  failed
    ├── SlotTimeout               backoff          next_candidate  -       busy
    ├── NodeUnavailable           never            next_candidate  -       skipped
    ├── NoCandidates              never            stop            -       error
    └── ProvisionFailed           never            stop            -       error

(:func:`render_tree` draws this picture from :data:`POLICY`; a test keeps the
two equal, and another holds the table against the fault tree.)

The columns, and who reads them:

* **same node** (:class:`SameNode`) — :mod:`bmaas.retry` decides *whether*
  and *which kind* of retry from here; *how many* attempts and *how long* to
  wait stay numbers in :class:`bmaas.retry.RetryPolicy`.
* **reschedule** (:class:`Reschedule`) — the request-level loop
  (:func:`bmaas.provision.should_reschedule`): move on to the next candidate,
  or stop the request.
* **health** (``counts_for_health``) — whether the sync's hysteresis (and a
  failed deploy) counts the fault toward putting the node into maintenance.
  Only faults that say something about the node count; a busy BMC or a
  rejected password never does.
* **fleet** (:class:`FleetOutcome`) — how ``bmaas power|boot-device|vmedia``
  and a one-shot ``sync`` report a node whose call still failed after the
  operation retry.

Classes not drawn here (``StoreError``, ``LeaseLost``, ``SegmentExhausted``,
a driver's own subclass) follow their nearest ancestor in the table
(:func:`policy_for` walks the MRO). Anything that is not a ``BmaasError`` is
a bug, not a fault: it stops and is never retried.
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum

from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCBusy,
    BMCFault,
    BMCInternalError,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    BootFailure,
    InputError,
    NoCandidates,
    NodeUnavailable,
    PowerFailure,
    ProvisionFailed,
    SlotTimeout,
    UnclassifiedFault,
    UnsupportedOperation,
)

__all__ = [
    "OTHER_PROTOCOL_MAY_CURE",
    "POLICY",
    "FaultPolicy",
    "FleetOutcome",
    "Reschedule",
    "SameNode",
    "policy_for",
    "render_markdown",
    "render_tree",
]


class SameNode(StrEnum):
    """What the operation retry (:mod:`bmaas.retry`) does on the same node."""

    #: not retried here (the fault will not go away by asking again)
    NEVER = "never"
    #: a few attempts, a short fixed wait apart (``unreachable_*``)
    BRIEFLY = "briefly"
    #: retried only when the operation is idempotent (``timeout_*``)
    IDEMPOTENT_ONLY = "idempotent_only"
    #: jittered exponential backoff, at least the BMC's Retry-After (``busy_*``)
    BACKOFF = "backoff"
    #: one more attempt after a fixed wait (``internal_error_*``)
    ONCE = "once"


class Reschedule(StrEnum):
    """What the request-level loop does once the operation retry gave up."""

    NEXT_CANDIDATE = "next_candidate"
    STOP = "stop"


class FleetOutcome(StrEnum):
    """How a fleet command reports a node whose call failed after retries.

    Every outcome but ``OK`` is a failure (exit 1): the label tells the
    operator what to do about it.
    """

    OK = "ok"
    #: the node or its BMC failed: look at the node
    FAILED = "failed"
    #: the BMC kept saying "later" for the whole deadline: run again later
    BUSY = "busy"
    #: credentials or privilege rejected: fix the password or the account
    AUTH = "auth"
    #: this node (its driver or BMC) cannot do the operation
    UNSUPPORTED = "unsupported"
    #: the node cannot even be asked (bad driver_info, unset password variable)
    CONFIG = "config"
    #: the node was not worked on (maintenance, claimed)
    SKIPPED = "skipped"
    #: bmaas's own trouble (store, lease): nothing is known about the node
    ERROR = "error"

    @property
    def label(self) -> str:
        """The word on a result line: ``ok``, else upper case (``FAIL`` keeps
        its historical spelling), so failures stand out in a long listing."""
        if self is FleetOutcome.OK:
            return "ok"
        return "FAIL" if self is FleetOutcome.FAILED else self.value.upper()


@dataclasses.dataclass(frozen=True)
class FaultPolicy:
    """One row of the table: what each layer does with ``fault``."""

    fault: type[BmaasError]
    same_node: SameNode
    reschedule: Reschedule
    #: does node power-health hysteresis count it toward maintenance
    counts_for_health: bool
    fleet: FleetOutcome
    #: one-line reason, shown in the README
    why: str

    @property
    def retried_here(self) -> bool:
        return self.same_node is not SameNode.NEVER

    @property
    def other_protocol_may_cure(self) -> bool:
        """Whether the same BMC's other protocol may succeed where this one
        failed (the "other protocol" column, :data:`OTHER_PROTOCOL_MAY_CURE`)."""
        return self.fault in OTHER_PROTOCOL_MAY_CURE


_S, _R, _F = SameNode, Reschedule, FleetOutcome
_NEXT, _STOP = _R.NEXT_CANDIDATE, _R.STOP

#: the table, in the fault tree's order (parents before children)
POLICY: tuple[FaultPolicy, ...] = (
    FaultPolicy(
        BmaasError, _S.NEVER, _STOP, False, _F.ERROR,
        "our own state is in doubt (store, lease): stop before acting on it",
    ),
    FaultPolicy(
        InputError, _S.NEVER, _STOP, False, _F.CONFIG,
        "bad input fails the same way on every node: fix it",
    ),
    FaultPolicy(
        BMCFault, _S.NEVER, _NEXT, True, _F.FAILED,
        "a BMC fault no subclass names: this node's problem",
    ),
    FaultPolicy(
        BMCUnreachable, _S.BRIEFLY, _NEXT, True, _F.FAILED,
        "never delivered, so safe to resend; a BMC that stays away is down",
    ),
    FaultPolicy(
        BMCTimeout, _S.IDEMPOTENT_ONLY, _NEXT, True, _F.FAILED,
        "outcome unknown: resend only what is idempotent (a reset is re-read first)",
    ),
    FaultPolicy(
        BMCBusy, _S.BACKOFF, _NEXT, False, _F.BUSY,
        'the BMC said "later": ask again later; says nothing about the node',
    ),
    FaultPolicy(
        BMCAuthError, _S.NEVER, _NEXT, False, _F.AUTH,
        "repeating a bad login locks accounts; a credentials problem, not a broken node",
    ),
    FaultPolicy(
        BMCInternalError, _S.ONCE, _NEXT, True, _F.FAILED,
        "the BMC failed itself: worth one more try, then elsewhere",
    ),
    FaultPolicy(
        BMCProtocolError, _S.NEVER, _NEXT, True, _F.FAILED,
        "a malformed answer repeats; something is wrong with this BMC",
    ),
    FaultPolicy(
        UnsupportedOperation, _S.NEVER, _NEXT, False, _F.UNSUPPORTED,
        "asking again never helps; another node may have the capability",
    ),
    FaultPolicy(
        PowerFailure, _S.NEVER, _NEXT, True, _F.FAILED,
        "power accepted but not reached: the hardware is suspect",
    ),
    FaultPolicy(
        BootFailure, _S.NEVER, _NEXT, True, _F.FAILED,
        "the node did not come up: the hardware is suspect",
    ),
    FaultPolicy(
        UnclassifiedFault, _S.NEVER, _NEXT, True, _F.FAILED,
        "meaning unknown: treat as this node's, count it, fix the mapping table",
    ),
    FaultPolicy(
        SlotTimeout, _S.BACKOFF, _NEXT, False, _F.BUSY,
        "bmaas's own calls filled the BMC's request cap: wait, ask again; the BMC was never asked",
    ),
    FaultPolicy(
        NodeUnavailable, _S.NEVER, _NEXT, False, _F.SKIPPED,
        "claimed or in maintenance meanwhile: another node will do",
    ),
    FaultPolicy(
        NoCandidates, _S.NEVER, _STOP, False, _F.ERROR,
        "nothing matches: no other node to try",
    ),
    FaultPolicy(
        ProvisionFailed, _S.NEVER, _STOP, False, _F.ERROR,
        "the request already tried its candidates",
    ),
)  # fmt: skip

#: The "other protocol" column: faults after which a node whose BMC speaks
#: both IPMI and Redfish may try the other protocol for power and boot-device
#: operations (bmaas.failover), within the same deadline. Only faults that
#: say *nothing happened on this protocol*, so a non-idempotent reset is never
#: sent twice: the operation is missing or licence-gated here
#: (UnsupportedOperation: iDRAC LIC501, Supermicro DCMS, a Redfish service
#: without the action), or this protocol's service never got the request
#: (BMCUnreachable: the Redfish service down while IPMI answers). Never busy
#: (the same BMC is busy either way), auth (one account on both), timeout
#: (it may have acted), or hardware faults (the node is the same).
OTHER_PROTOCOL_MAY_CURE: frozenset[type[BmaasError]] = frozenset(
    {UnsupportedOperation, BMCUnreachable}
)

_BY_CLASS: dict[type[BmaasError], FaultPolicy] = {row.fault: row for row in POLICY}


def policy_for(fault: BaseException | type[BaseException]) -> FaultPolicy:
    """The row for ``fault`` (an instance or a class): its own, else its
    nearest ancestor's. Not a ``BmaasError`` (a bug): the root row — stop,
    never retried, never counted."""
    cls = fault if isinstance(fault, type) else type(fault)
    for base in cls.__mro__:
        row = _BY_CLASS.get(base)
        if row is not None:
            return row
    return _BY_CLASS[BmaasError]


# -- rendering -------------------------------------------------------------------------


def _parent(row: FaultPolicy) -> type[BmaasError] | None:
    for base in row.fault.__mro__[1:]:
        if base in _BY_CLASS:
            return base
    return None


def _tree_names() -> list[str]:
    """Each row's class name with its tree prefix (``├── ``, ``│   └── ``)."""
    children: dict[type[BmaasError] | None, list[FaultPolicy]] = {}
    for row in POLICY:
        children.setdefault(_parent(row), []).append(row)
    names: dict[type[BmaasError], str] = {}

    def walk(parent: type[BmaasError], indent: str) -> None:
        kids = children.get(parent, [])
        for i, row in enumerate(kids):
            last = i == len(kids) - 1
            names[row.fault] = indent + ("└── " if last else "├── ") + row.fault.__name__
            walk(row.fault, indent + ("    " if last else "│   "))

    for root in children[None]:
        names[root.fault] = root.fault.__name__
        walk(root.fault, "")
    return [names[row.fault] for row in POLICY]


def render_tree() -> str:
    """The table as the module docstring draws it (a test compares them)."""
    names = _tree_names()
    lines = [f"{'fault':<30}{'same node':<17}{'reschedule':<16}{'health':<8}fleet"]
    for name, row in zip(names, POLICY, strict=True):
        health = "counts" if row.counts_for_health else "-"
        lines.append(
            f"{name:<30}{row.same_node:<17}{row.reschedule:<16}{health:<8}{row.fleet}".rstrip()
        )
    return "\n".join(lines)


def render_markdown() -> str:
    """The table as the README's Faults section shows it (a test compares them)."""
    lines = [
        "| fault | same node (`bmaas.retry`) | reschedule | counts for health | fleet | why |",
        "|---|---|---|---|---|---|",
    ]
    for row in POLICY:
        health = "yes" if row.counts_for_health else "no"
        lines.append(
            f"| `{row.fault.__name__}` | {row.same_node} | {row.reschedule} | {health} "
            f"| {row.fleet.label} | {row.why} |"
        )
    return "\n".join(lines)
