"""One policy: for each fault class, what every layer of bmaas does with it.

The taxonomy (:mod:`bmaas.faults`) says what a fault *means*; this table says
what each layer *does*, in one place, so that the operation retry, the
request reschedule, the ``[bmaas CODE retry=SCOPE]`` prefix, the power sync
(bmaas's and Ironic's), the clean-up after a failed deploy, fencing by either
provisioning backend, the fleet commands and ``bmaas status check`` cannot
drift apart::

    fault                        same node       reschedule     sync   off fence stream check
    BmaasError                   never           stop           -      yes -     soon   fault
    ├── InputError               never           stop           -      yes -     late   cannot_ask
    ├── BMCFault                 never           next_candidate count  yes yes   late   fault
    │   ├── BMCUnreachable       briefly         next_candidate count  -   yes   soon   unreachable
    │   ├── BMCTimeout           idempotent_only next_candidate count  -   yes   soon   timeout
    │   ├── BMCBusy              backoff         next_candidate -      yes -     soon   busy!
    │   │   └── BMCUpdating      backoff         next_candidate -      -   -     soon   busy!
    │   ├── BMCAuthError         never           next_candidate -      -   -     late   auth
    │   ├── BMCInternalError     once            next_candidate count  yes yes   soon   fault
    │   ├── BMCProtocolError     never           next_candidate count  yes yes   late   fault
    │   ├── UnsupportedOperation never           next_candidate -      yes -     late   fault
    │   ├── PowerFailure         never           next_candidate count  yes yes   late   fault
    │   ├── BootFailure          never           next_candidate count  yes yes   late   fault
    │   ├── SettingsNotApplied   never           next_candidate -      yes -     late   fault
    │   ├── TaskStuck            never           next_candidate -      -   -     late   fault
    │   ├── RequestRejected      never           stop           -      yes -     late   fault
    │   ├── BMCNotBack           never           next_candidate count  -   yes   soon   unreachable
    │   └── UnclassifiedFault    never           next_candidate count  yes yes   late   unclassified
    ├── SlotTimeout              backoff         next_candidate -      yes -     soon   busy!
    │   └── PowerPending         backoff         next_candidate -      -   -     soon   busy!
    ├── NodeUnavailable          never           next_candidate -      -   -     late   fault
    ├── LeaseLost                never           stop           -      -   -     late   fault
    ├── NoCandidates             never           stop           -      -   -     late   fault
    └── ProvisionFailed          never           stop           -      -   -     late   fault

(:func:`render_tree` draws this picture from :data:`POLICY`; a test keeps the
two equal, and another holds the table against the fault tree.)

What each column means and who reads it is docs/faults.md ("What each layer
does"): same node (:class:`SameNode`, :mod:`bmaas.retry`), reschedule
(:class:`Reschedule`), the derived ``retry`` scope, sync
(``counts_for_health``; never for a no-answer fault the client's own
lateness produced, issue 50), off, fence, fleet (:class:`FleetOutcome`),
check (:class:`CheckFinding`; ``late`` for such a fault) and stream (:class:`Reopen`). Three more
columns are sets beside the rows: :data:`OTHER_PROTOCOL_MAY_CURE`,
:data:`NO_ANSWER` and :data:`DROPS_SESSION`.

Classes not drawn here (``StoreError``, ``SegmentExhausted``, ``Interrupted``,
a driver's own subclass) follow their nearest ancestor in the table
(:func:`policy_for` walks the MRO). Anything that is not a ``BmaasError`` is
a bug, not a fault: it stops and is never retried.
"""

from __future__ import annotations

import dataclasses
import functools
from enum import StrEnum

from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCBusy,
    BMCFault,
    BMCInternalError,
    BMCNotBack,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    BMCUpdating,
    BootFailure,
    InputError,
    LeaseLost,
    NoCandidates,
    NodeUnavailable,
    PowerFailure,
    PowerPending,
    ProvisionFailed,
    RequestRejected,
    RetryScope,
    SettingsNotApplied,
    SlotTimeout,
    TaskStuck,
    UnclassifiedFault,
    UnsupportedOperation,
    derive_retry_scope,
)

__all__ = [
    "DROPS_SESSION",
    "NO_ANSWER",
    "OTHER_PROTOCOL_MAY_CURE",
    "POLICY",
    "CheckFinding",
    "FaultPolicy",
    "FleetOutcome",
    "Reopen",
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


class Reopen(StrEnum):
    """When an event listener (:class:`bmaas.reactor.Listening`, the one loop of
    ``bmaas sync`` and Ironic's conductor) opens a stream again after the
    fault refused or ended it; its nodes are polled meanwhile either way.
    How long each wait is stays numbers in :class:`bmaas.reactor.Pacing`."""

    #: paced by the back-off (1 s, 2 s, 4 s ... at most 60 s): the BMC may be back
    SOON = "soon"
    #: after the long wait (``Pacing.absent_retry``, 600 s): asking again soon
    #: cannot help (no EventService, a malformed stream) or harms (a rejected
    #: password: accounts lock)
    LATE = "late"


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
    #: the BMC took the action; its end state was not read before the
    #: deadline: look again (``power status``), or let the sync
    PENDING = "pending"
    #: the BMC refused the image or setting asked for: fix the request
    REJECTED = "rejected"
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


class CheckFinding(StrEnum):
    """What ``bmaas status check`` shows for a node whose BMC call raised the
    fault (the keys of its ``--json`` ``nodes``), and whether that is a
    Warning or a Failure. ``busy`` is a Warning: a BMC that said "later" is
    working. So is ``late``, no row's own: a no-answer fault the client's
    own lateness produced (:func:`policy_for`) says nothing about the BMC."""

    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    AUTH = "auth"
    BUSY = "busy"
    UNCLASSIFIED = "unclassified"
    CANNOT_ASK = "cannot_ask"
    FAULT = "fault"
    LATE = "late"

    @property
    def warning(self) -> bool:
        """A Warning (exit 1 at worst), not a Failure (exit 2)."""
        return self in (CheckFinding.BUSY, CheckFinding.LATE)


@dataclasses.dataclass(frozen=True)
class FaultPolicy:
    """One row of the table: what each layer does with ``fault``."""

    fault: type[BmaasError]
    same_node: SameNode
    reschedule: Reschedule
    #: the power sync counts it toward maintenance: bmaas's hysteresis, a
    #: failed deploy's streak, and Ironic's sync (a read inside Ironic's sync
    #: fails at once on it; one not counted is retried within sync_deadline)
    counts_for_health: bool
    #: a failed deploy powers the node off (not when the BMC is the problem:
    #: it could not act; not when our own claim on the node is in doubt)
    power_off_after_failure: bool
    #: a provisioning backend fences the node (embedded: counted toward its
    #: deploy-failure streak; Ironic: maintenance at once)
    fences: bool
    fleet: FleetOutcome
    #: what ``bmaas status check`` shows (busy is a Warning)
    check: CheckFinding
    #: when an event listener opens its stream again (nodes polled meanwhile)
    stream: Reopen
    #: one-line reason, shown in docs/faults.md
    why: str

    @property
    def retried_here(self) -> bool:
        return self.same_node is not SameNode.NEVER

    @property
    def other_protocol_may_cure(self) -> bool:
        """Whether the same BMC's other protocol may succeed where this one
        failed (the "other protocol" column, :data:`OTHER_PROTOCOL_MAY_CURE`)."""
        return self.fault in OTHER_PROTOCOL_MAY_CURE

    @property
    def no_answer(self) -> bool:
        """Whether the fault means the BMC gave no answer at all (the "no
        answer" column, :data:`NO_ANSWER`): the conductor probes such a BMC
        in the background (:mod:`bmaas.silence`), and the pool logs the
        session it drops out in the background."""
        return self.fault in NO_ANSWER

    @property
    def drops_session(self) -> bool:
        """Whether a pooled session that raised the fault is closed and never
        reused (the "drop session" column, :data:`DROPS_SESSION`, with why)."""
        return self.fault in DROPS_SESSION

    @property
    def retry(self) -> RetryScope:
        """The scope in ``[bmaas CODE retry=SCOPE]`` and ``fault.retry``,
        derived from the row: retried on the same node first when the
        operation retry takes it, else elsewhere when the reschedule moves
        on, else never."""
        if self.same_node is not SameNode.NEVER:
            return RetryScope.SAME_NODE
        if self.reschedule is Reschedule.NEXT_CANDIDATE:
            return RetryScope.OTHER_NODE
        return RetryScope.NEVER


_S, _R, _F, _C = SameNode, Reschedule, FleetOutcome, CheckFinding
_SOON, _LATE = Reopen.SOON, Reopen.LATE
_NEXT, _STOP = _R.NEXT_CANDIDATE, _R.STOP
_Y, _N = True, False

#: the table, in the fault tree's order (parents before children). Columns:
#: fault, same node, reschedule, sync (counts), power off after a failed
#: deploy, fence, fleet, check, stream (re-open), why
POLICY: tuple[FaultPolicy, ...] = (
    FaultPolicy(
        BmaasError, _S.NEVER, _STOP, _N, _Y, _N, _F.ERROR, _C.FAULT, _SOON,
        "our own state is in doubt (store, interrupted, a bug): stop; give the node back off",
    ),
    FaultPolicy(
        InputError, _S.NEVER, _STOP, _N, _Y, _N, _F.CONFIG, _C.CANNOT_ASK, _LATE,
        "bad input fails the same way on every node: fix it",
    ),
    FaultPolicy(
        BMCFault, _S.NEVER, _NEXT, _Y, _Y, _Y, _F.FAILED, _C.FAULT, _LATE,
        "a BMC fault no subclass names: this node's problem",
    ),
    FaultPolicy(
        BMCUnreachable, _S.BRIEFLY, _NEXT, _Y, _N, _Y, _F.FAILED, _C.UNREACHABLE, _SOON,
        "never delivered, so safe to resend; a BMC that stays away is down",
    ),
    FaultPolicy(
        BMCTimeout, _S.IDEMPOTENT_ONLY, _NEXT, _Y, _N, _Y, _F.FAILED, _C.TIMEOUT, _SOON,
        "outcome unknown: resend only what is idempotent (a reset is re-read first)",
    ),
    FaultPolicy(
        BMCBusy, _S.BACKOFF, _NEXT, _N, _Y, _N, _F.BUSY, _C.BUSY, _SOON,
        'the BMC said "later": ask again later; says nothing about the node',
    ),
    FaultPolicy(
        BMCUpdating, _S.BACKOFF, _NEXT, _N, _N, _N, _F.BUSY, _C.BUSY, _SOON,
        "the BMC is applying firmware: ask later; never counted, and never power the node "
        "off mid-update (a cut update can leave the firmware broken)",
    ),
    FaultPolicy(
        BMCAuthError, _S.NEVER, _NEXT, _N, _N, _N, _F.AUTH, _C.AUTH, _LATE,
        "repeating a bad login locks accounts; a credentials problem, not a broken node",
    ),
    FaultPolicy(
        BMCInternalError, _S.ONCE, _NEXT, _Y, _Y, _Y, _F.FAILED, _C.FAULT, _SOON,
        "the BMC failed itself: worth one more try, then elsewhere",
    ),
    FaultPolicy(
        BMCProtocolError, _S.NEVER, _NEXT, _Y, _Y, _Y, _F.FAILED, _C.FAULT, _LATE,
        "a malformed answer repeats; something is wrong with this BMC",
    ),
    FaultPolicy(
        UnsupportedOperation, _S.NEVER, _NEXT, _N, _Y, _N, _F.UNSUPPORTED, _C.FAULT, _LATE,
        "asking again never helps; another node may have the capability",
    ),
    FaultPolicy(
        PowerFailure, _S.NEVER, _NEXT, _Y, _Y, _Y, _F.FAILED, _C.FAULT, _LATE,
        "power accepted but not reached: the hardware is suspect",
    ),
    FaultPolicy(
        BootFailure, _S.NEVER, _NEXT, _Y, _Y, _Y, _F.FAILED, _C.FAULT, _LATE,
        "the node did not come up: the hardware is suspect",
    ),
    FaultPolicy(
        SettingsNotApplied, _S.NEVER, _NEXT, _N, _Y, _N, _F.FAILED, _C.FAULT, _LATE,
        "the reset came and the settings read otherwise: never success; asking again "
        "repeats it, another node may take them; says nothing about power, so not counted",
    ),
    FaultPolicy(
        TaskStuck, _S.NEVER, _NEXT, _N, _N, _N, _F.FAILED, _C.FAULT, _LATE,
        "the task may still end: never restarted here, never powered off under it; "
        "the BMC's task engine, not the node's power, so not counted",
    ),
    FaultPolicy(
        RequestRejected, _S.NEVER, _STOP, _N, _Y, _N, _F.REJECTED, _C.FAULT, _LATE,
        "the BMC refused the image or setting itself: another node refuses it too; "
        "fix the request",
    ),
    FaultPolicy(
        BMCNotBack, _S.NEVER, _NEXT, _Y, _N, _Y, _F.FAILED, _C.UNREACHABLE, _SOON,
        "the BMC stayed away past its bound after a reset or update: this node's BMC "
        "is down; it could not power the node off anyway",
    ),
    FaultPolicy(
        UnclassifiedFault, _S.NEVER, _NEXT, _Y, _Y, _Y, _F.FAILED, _C.UNCLASSIFIED, _LATE,
        "meaning unknown: treat as this node's, count it, fix the mapping table",
    ),
    FaultPolicy(
        SlotTimeout, _S.BACKOFF, _NEXT, _N, _Y, _N, _F.BUSY, _C.BUSY, _SOON,
        "bmaas's own wait or budget (a full cap, its spacing, a deadline spent before "
        "anything was sent): ask again; the BMC was never asked, never the node's fault",
    ),
    FaultPolicy(
        PowerPending, _S.BACKOFF, _NEXT, _N, _N, _N, _F.PENDING, _C.BUSY, _SOON,
        "the BMC took the action and the budget ended first: under way, not failed; "
        "ask this node again (or let the sync read it), never blame or power it off",
    ),
    FaultPolicy(
        NodeUnavailable, _S.NEVER, _NEXT, _N, _N, _N, _F.SKIPPED, _C.FAULT, _LATE,
        "claimed or in maintenance meanwhile: another node will do",
    ),
    FaultPolicy(
        LeaseLost, _S.NEVER, _STOP, _N, _N, _N, _F.ERROR, _C.FAULT, _LATE,
        "our lease expired and the node may be someone else's: hands off, stop",
    ),
    FaultPolicy(
        NoCandidates, _S.NEVER, _STOP, _N, _N, _N, _F.ERROR, _C.FAULT, _LATE,
        "nothing matches: no other node to try",
    ),
    FaultPolicy(
        ProvisionFailed, _S.NEVER, _STOP, _N, _N, _N, _F.ERROR, _C.FAULT, _LATE,
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

#: the "no answer" column: faults that say the BMC did not answer at all
#: (not sent an answer, not even "busy" or an error), so a host without a loop
#: of its own (Ironic's conductor) probes that BMC in the background and its
#: power reads fail at once while the silence lasts (:mod:`bmaas.silence`);
#: a periodic read cut at the BMC's silence bound is one of them, and so
#: starts that probe at once. The pooled session such a fault drops is
#: logged out in the background (:class:`bmaas.pool.DriverPool`): the
#: logout, a request to the same silent BMC, would wait as long again.
#: Every other fault is an answer, and proves the BMC is there.
NO_ANSWER: frozenset[type[BmaasError]] = frozenset({BMCTimeout, BMCUnreachable})

#: the "drop session" column: faults after which a pooled session
#: (:class:`bmaas.pool.DriverPool`) is closed and never reused, with why; the
#: next operation logs in afresh. Faults that prove the session works (busy,
#: internal error, unsupported, power/boot failure) keep it.
DROPS_SESSION: dict[type[BmaasError], str] = {
    BMCTimeout: "sent, no answer: a late answer could be read as the next one's",
    BMCProtocolError: "the session's framing or state can no longer be trusted",
    BMCUnreachable: "the BMC went away; its sessions with it",
    BMCAuthError: "the session or the credentials were rejected: log in afresh (new password?)",
    UnclassifiedFault: "nothing is known about the session's state",
}

_BY_CLASS: dict[type[BmaasError], FaultPolicy] = {row.fault: row for row in POLICY}


def policy_for(fault: BaseException | type[BaseException]) -> FaultPolicy:
    """The row for ``fault`` (an instance or a class): its own, else its
    nearest ancestor's. Not a ``BmaasError`` (a bug): the root row — stop,
    never retried, never counted.

    A no-answer fault whose ``late`` is set (the call's own thread waited
    for a CPU a large share of the call's bound: :mod:`bmaas.lateness`) is
    the client's lateness, not the BMC's silence: its row, with the sync
    not counting it, nothing fencing on it and ``status check`` warning
    ``late`` (still retried as its class)."""
    cls = fault if isinstance(fault, type) else type(fault)
    for base in cls.__mro__:
        row = _BY_CLASS.get(base)
        if row is not None:
            if row.no_answer and getattr(fault, "late", None) is not None:
                return _late(row)
            return row
    return _BY_CLASS[BmaasError]


@functools.cache
def _late(row: FaultPolicy) -> FaultPolicy:
    """``row`` for a fault the client's own lateness produced."""
    return dataclasses.replace(row, counts_for_health=False, fences=False, check=CheckFinding.LATE)


# ``fault.retry`` is this table's scope for the fault's class (bmaas.faults
# cannot import the table that imports it: the table registers itself).
derive_retry_scope(lambda cls: policy_for(cls).retry)


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


#: the tree's columns (docs/faults.md's table adds ``retry`` and ``fleet``)
_TREE_COLUMNS = (
    ("same node", 16),
    ("reschedule", 15),
    ("sync", 7),
    ("off", 4),
    ("fence", 6),
    ("stream", 7),
    ("check", 0),
)


def _cells(row: FaultPolicy) -> tuple[str, ...]:
    def yes(flag: bool, word: str) -> str:
        return word if flag else "-"

    return (
        str(row.same_node),
        str(row.reschedule),
        yes(row.counts_for_health, "count"),
        yes(row.power_off_after_failure, "yes"),
        yes(row.fences, "yes"),
        str(row.stream),
        f"{row.check}{'!' if row.check.warning else ''}",
    )


def render_tree() -> str:
    """The table as the module docstring draws it (a test compares them)."""
    names = _tree_names()
    header = f"{'fault':<29}" + "".join(f"{title:<{width}}" for title, width in _TREE_COLUMNS)
    lines = [header.rstrip()]
    for name, row in zip(names, POLICY, strict=True):
        cells = "".join(
            f"{cell:<{width}}" for cell, (_, width) in zip(_cells(row), _TREE_COLUMNS, strict=True)
        )
        lines.append(f"{name:<29}{cells}".rstrip())
    return "\n".join(lines)


def render_markdown() -> str:
    """The table as docs/faults.md shows it (a test compares them)."""
    lines = [
        "| fault | same node (`bmaas.retry`) | reschedule | `retry=` scope "
        "| counts for the power sync "
        "| powered off after a failed deploy | fenced by a backend | fleet | status check "
        "| event stream re-opened | why |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in POLICY:

        def yn(flag: bool) -> str:
            return "yes" if flag else "no"

        check = f"{row.check} ({'Warning' if row.check.warning else 'Failure'})"
        lines.append(
            f"| `{row.fault.__name__}` | {row.same_node} | {row.reschedule} | {row.retry} "
            f"| {yn(row.counts_for_health)} | {yn(row.power_off_after_failure)} "
            f"| {yn(row.fences)} | {row.fleet.label} | {check} | {row.stream} | {row.why} |"
        )
    return "\n".join(lines)
