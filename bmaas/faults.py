"""The bmaas fault taxonomy: every failure says what the caller can do next.

Faults are classified by *what to do next*, not by protocol. A driver maps a
third-party exception once, at its edge, to the most specific class below and
raises it ``from`` the original; nothing above ``drivers/`` ever sees a pyghmi
or sushy exception::

    BmaasError                      .code (stable snake_case), .retry scope
    ├── InputError(ValueError)      bad inventory/config/arguments      never
    ├── BMCFault                    .node .driver .operation .address .elapsed, chained cause
    │   ├── BMCUnreachable          request never delivered: refused, no route,
    │   │                           DNS, connect timeout                 same node briefly, then elsewhere
    │   ├── BMCTimeout              sent, no answer in time: outcome
    │   │                           unknown                              same node only if idempotent
    │   ├── BMCBusy                 BMC said "later": IPMI 0xC0/0xC3,
    │   │   │                       Redfish 503/429 (+Retry-After),
    │   │   │                       session limit                        same node with backoff
    │   │   └── BMCUpdating         the BMC is applying firmware         same node with backoff
    │   ├── BMCAuthError            bad credentials / privilege          never here (do not lock
    │   │                                                                accounts), elsewhere
    │   ├── BMCInternalError        BMC reported its own failure:
    │   │                           IPMI 0xFF, Redfish 500               once here, then elsewhere
    │   ├── BMCProtocolError        malformed or unexpected reply        elsewhere
    │   ├── UnsupportedOperation    IPMI 0xC1, Redfish 405/501,
    │   │                           missing action                       never here, elsewhere
    │   ├── PowerFailure            action accepted but target power
    │   │                           state not reached, or power fault    elsewhere
    │   ├── BootFailure             boot device not applied / node
    │   │                           did not come up                      elsewhere
    │   ├── SettingsNotApplied      settings read back otherwise after
    │   │                           the reset that was to apply them     elsewhere
    │   ├── TaskStuck               a BMC task still running past its
    │   │                           bound                                elsewhere
    │   ├── RequestRejected         the BMC refused the image or setting
    │   │                           asked for                            never (fix the request)
    │   ├── BMCNotBack              the BMC did not answer again within
    │   │                           the bound after its reset or update  elsewhere
    │   └── UnclassifiedFault       anything the tables missed: kept
    │                               honest, logged, counted              elsewhere
    ├── SlotTimeout                 bmaas's own wait or budget ended the
    │                               call (a full cap, its spacing, a
    │                               deadline spent before anything was
    │                               sent): not a BMC fault               same node with backoff
    │   └── PowerPending            the BMC accepted a power action; the
    │                               budget ended before its state was
    │                               read: not confirmed yet              same node; the sync reconciles
    ├── NodeUnavailable             maintenance, claimed, faulted        pick another
    ├── LeaseLost                   our lease expired; another run
    │                               reclaimed what we held               never (hands off)
    ├── NoCandidates                nothing matches the request          never
    └── ProvisionFailed             retries exhausted; .attempts history, chained from the last fault

``retry`` is the *first* thing to try: ``same_node`` faults are retried on the
same node by the operation-level retry (``bmaas.retry``) and, once that
gives up, the request moves elsewhere; ``other_node`` faults skip straight to
the next candidate; ``never`` faults stop the operation. It is not written
on the classes: it is derived from the class's row of the policy table
(:attr:`bmaas.policy.FaultPolicy.retry`), so the scope Ironic operators read
in ``[bmaas CODE retry=SCOPE]`` is what bmaas does. The right-hand column
of the tree above is the gist of that table.

Every fault pickles (hwlab runs BMCs in subprocesses). Pickling keeps the
structured attributes and a one-line description of the chained cause, since
third-party exceptions do not always pickle. No fault stores a credential:
addresses are stripped of any ``user:password@`` part on the way in.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from enum import StrEnum
from typing import Any, ClassVar

__all__ = [
    "FAULT_CLASSES",
    "Attempt",
    "BMCAuthError",
    "BMCBusy",
    "BMCFault",
    "BMCInternalError",
    "BMCNotBack",
    "BMCProtocolError",
    "BMCTimeout",
    "BMCUnreachable",
    "BMCUpdating",
    "BmaasError",
    "BootFailure",
    "InputError",
    "LeaseLost",
    "NoCandidates",
    "NodeUnavailable",
    "PowerFailure",
    "PowerPending",
    "ProvisionFailed",
    "RequestRejected",
    "Resume",
    "RetryScope",
    "SettingsNotApplied",
    "SlotTimeout",
    "TaskStuck",
    "UnclassifiedFault",
    "UnsupportedOperation",
    "derive_retry_scope",
]


class RetryScope(StrEnum):
    """Where a failed call may be tried again."""

    SAME_NODE = "same_node"
    OTHER_NODE = "other_node"
    NEVER = "never"


_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


def _strip_userinfo(address: str | None) -> str | None:
    """Drop ``user:password@`` from a URL so a fault can never carry it."""
    if address is None:
        return None
    return _USERINFO.sub("", address)


class _DerivedScope:
    """``fault.retry`` and ``FaultClass.retry``: the scope of the class's row
    in :data:`bmaas.policy.POLICY`.

    The table imports this module, so this module cannot import the table:
    :mod:`bmaas.policy` registers its derivation here when it loads
    (:func:`derive_retry_scope`), and :mod:`bmaas` loads the table with the
    package, so every fault has its scope wherever it is imported from. The
    taxonomy stays the leaf of the import graph; the decision stays in the
    table.
    """

    derive: ClassVar[Callable[[type[BmaasError]], RetryScope] | None] = None

    def __get__(self, obj: object, owner: type[BmaasError]) -> RetryScope:
        derive = _DerivedScope.derive
        if derive is None:  # only if bmaas/__init__ was bypassed: a packaging bug
            raise RuntimeError("bmaas.policy is not loaded: no fault has a retry scope")
        return derive(owner)


def derive_retry_scope(derive: Callable[[type[BmaasError]], RetryScope]) -> None:
    """Called once by :mod:`bmaas.policy`: how ``fault.retry`` is derived."""
    _DerivedScope.derive = derive


class BmaasError(Exception):
    """Root of every error bmaas raises on purpose.

    ``code`` is stable and snake_case: scripts, metrics and the lab's fault
    matrix key on it. ``retry`` says where the call may be retried.
    """

    code: ClassVar[str] = "bmaas_error"
    #: where the call may be retried: derived from the policy table's row
    retry = _DerivedScope()
    summary: ClassVar[str] = "error"

    def __init__(self, message: str = "", *, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.message = message
        if cause is not None:
            self.__cause__ = cause

    @property
    def cause_text(self) -> str | None:
        """One line describing the chained cause; survives pickling."""
        cause = self.__cause__
        if cause is not None:
            text = str(cause)
            return f"{type(cause).__name__}: {text}" if text else type(cause).__name__
        return self.__dict__.get("_cause_text")

    def __reduce__(self) -> tuple[Any, ...]:
        state = dict(self.__dict__)
        state.pop("resume", None)  # a driver's own continuation: this process's only
        state["_cause_text"] = self.cause_text
        return (type(self), (self.message,), state)

    def __setstate__(self, state: dict[str, Any] | None) -> None:
        self.__dict__.update(state or {})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record of the fault, for ``--json`` output and event logs."""
        record: dict[str, Any] = {"code": self.code, "class": type(self).__name__}
        record["retry"] = str(self.retry)
        record["message"] = str(self)
        for key, value in self.__dict__.items():
            if key.startswith("_") or key == "message":
                continue
            if dataclasses.is_dataclass(value) or isinstance(value, list):
                continue
            record[key] = value
        if self.cause_text:
            record["cause"] = self.cause_text
        return record

    def __str__(self) -> str:
        return self.message or self.summary


class InputError(BmaasError, ValueError):
    """Bad inventory, configuration or arguments. Fix the input; never retried.

    ``source``/``line``/``field``/``node`` locate the problem so an operator can
    go straight to it: ``inventory.yaml:12: node 'r1-n04': ipmi_port: ...``.
    """

    code = "input_error"
    summary = "invalid input"

    def __init__(
        self,
        message: str = "",
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
        node: str | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message, cause=cause)
        self.source = source
        self.line = line
        self.field = field
        self.node = node

    def __str__(self) -> str:
        where = ""
        if self.source:
            where = f"{self.source}:{self.line}: " if self.line else f"{self.source}: "
        parts = [where.rstrip(": ")] if where else []
        if self.node:
            parts.append(f"node {self.node!r}")
        if self.field:
            parts.append(self.field)
        parts.append(self.message or self.summary)
        return ": ".join(parts)


@dataclasses.dataclass(frozen=True)
class Resume:
    """The rest of a driver call of several requests, from the one the BMC
    refused ("later": nothing was done there), carried by the fault as
    :attr:`BMCFault.resume`. The operation retry (:func:`bmaas.retry.call`)
    calls ``call(deadline=...)`` next, not the whole call again: restarted
    whole, a call of k requests on a BMC busy with probability p per request
    succeeds per attempt only with (1-p)^k (issue 50)."""

    call: Callable[..., Any]
    #: how many of the call's steps the BMC had carried out: a refusal
    #: further on is another request, whose attempts and backoff start afresh
    at: int


class BMCFault(BmaasError):
    """A BMC call failed. Carries where (node, driver, address), what
    (operation) and how long it took (elapsed, seconds)."""

    code = "bmc_fault"
    summary = "BMC fault"
    #: seconds this call's thread waited for a CPU, set at the driver edge
    #: when that was a large share of the call's bound and the BMC gave no
    #: answer (:mod:`bmaas.lateness`): the client's own lateness, which the
    #: policy table never counts against the node (in ``to_dict`` once set)
    late: float | None = None
    #: set by a driver whose call is several requests (a virtual media
    #: insert) when the BMC refused one of them: the call from there
    resume: Resume | None = None

    def __init__(
        self,
        message: str = "",
        *,
        node: str | None = None,
        driver: str | None = None,
        operation: str | None = None,
        address: str | None = None,
        elapsed: float | None = None,
        status: str | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message, cause=cause)
        self.node = node
        self.driver = driver
        self.operation = operation
        self.address = _strip_userinfo(address)
        self.elapsed = elapsed
        #: protocol-level status as the BMC gave it ("0xC0", "503"), if any
        self.status = status

    def __str__(self) -> str:
        head = self.node or "?"
        if self.operation:
            head += f": {self.operation}"
        if self.driver or self.address:
            head += " via " + _via(self.driver, self.address)
        if self.elapsed is not None:
            head += f" after {self.elapsed:.2f}s"
        tail = self.summary
        if self.message:
            tail += f": {self.message}"
        if self.status:
            tail += f" [{self.status}]"
        if self.late is not None:
            tail += f" (the client was late: {self.late:.2f}s waiting for a CPU)"
        return f"{head}: {tail}"


def _via(driver: str | None, address: str | None) -> str:
    """``redfish https://bmc``: the protocol once, whether the fault was
    given the BMC's address or its label (``redfish:https://bmc``: the gate's,
    the pool's and the silence book's name for a BMC, :func:`bmaas.gate.bmc_of`),
    which already says it (issue 48: "via redfish redfish:http://...")."""
    if driver and address and address.startswith(f"{driver}:"):
        address = address[len(driver) + 1 :]
    return " ".join(p for p in (driver, address) if p)


class BMCUnreachable(BMCFault):
    """The request never reached the BMC (refused, no route, DNS, connect
    timeout). Nothing happened on the node, so any operation may be retried;
    briefly here, then elsewhere."""

    code = "bmc_unreachable"
    summary = "BMC unreachable"


class BMCTimeout(BMCFault):
    """The request was sent and no answer came in time: the outcome is
    unknown. Retry only idempotent operations; after a timed-out REBOOT,
    re-read the power state before acting again."""

    code = "bmc_timeout"
    summary = "BMC did not answer in time"


class BMCBusy(BMCFault):
    """The BMC said "later" (IPMI 0xC0/0xC3, Redfish 503/429, session limit).
    Retry on the same node with backoff, honouring ``retry_after``."""

    code = "bmc_busy"
    summary = "BMC busy"

    def __init__(self, message: str = "", *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after

    def __str__(self) -> str:
        text = super().__str__()
        if self.retry_after is not None:
            text += f" (retry after {self.retry_after:g}s)"
        return text


class BMCAuthError(BMCFault):
    """Credentials or privilege rejected. Never retried: repeating a bad login
    locks accounts on many BMCs."""

    code = "bmc_auth_error"
    summary = "BMC rejected credentials"


class BMCInternalError(BMCFault):
    """The BMC reported its own failure (IPMI 0xFF, Redfish 500). Worth one
    more try here, then elsewhere. ``message_id`` is Redfish's
    ``@Message.ExtendedInfo`` MessageId when the BMC gave one."""

    code = "bmc_internal_error"
    summary = "BMC internal error"

    def __init__(self, message: str = "", *, message_id: str | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.message_id = message_id

    def __str__(self) -> str:
        text = super().__str__()
        if self.message_id:
            text += f" ({self.message_id})"
        return text


class BMCProtocolError(BMCFault):
    """The BMC answered, but the reply was malformed or not what the protocol
    allows. Something is wrong with this BMC: go elsewhere."""

    code = "bmc_protocol_error"
    summary = "malformed BMC reply"


class UnsupportedOperation(BMCFault):
    """The driver or the BMC cannot do this (IPMI 0xC1, Redfish 405/501, a
    missing action or a value outside AllowableValues). Never retried."""

    code = "unsupported_operation"
    summary = "operation not supported"


class PowerFailure(BMCFault):
    """The BMC accepted a power action but the node did not reach the target
    state in time, or reported a power fault. The hardware is suspect."""

    code = "power_failure"
    summary = "power state not reached"


class BootFailure(BMCFault):
    """The boot device did not apply, or the node did not stay up."""

    code = "boot_failure"
    summary = "boot failed"


class BMCUpdating(BMCBusy):
    """The BMC is applying firmware (Redfish Update registry
    ``UpdateInProgress``; bmclib's ``ErrBMCUpdating``): it answers, and asks
    for later. Retried on the same node with backoff; never counted against
    the node, and the node is never powered off for it (an update must not
    be cut)."""

    code = "bmc_updating"
    summary = "BMC is updating firmware"


class SettingsNotApplied(BMCFault):
    """Settings the BMC took (pending) read back otherwise after the reset
    that was to apply them: a BIOS change that did not apply, or applied
    partly. Never reported as success. ``attributes``: name -> (wanted, read
    back), the attributes that did not apply."""

    code = "settings_not_applied"
    summary = "settings did not apply"

    def __init__(
        self, message: str = "", *, attributes: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        super().__init__(message, **kw)
        self.attributes: dict[str, Any] = dict(attributes or {})


class TaskStuck(BMCFault):
    """A task the BMC runs (a firmware update, a settings job) still reads
    running past its bound: its outcome is unknown and it may still end.
    Never restarted here; the node is not powered off under it."""

    code = "task_stuck"
    summary = "BMC task still running past its bound"


class RequestRejected(BMCFault):
    """The BMC refused the image or setting asked for (Update registry
    ``VerificationFailed``, ``UpdateNotApplicable``): the request is wrong,
    and another node of the same kind would refuse it too. Never retried."""

    code = "request_rejected"
    summary = "BMC rejected the request"


class BMCNotBack(BMCFault):
    """The BMC did not answer again within the bound after a reset or an
    update that restarts it: down longer than it should be."""

    code = "bmc_not_back"
    summary = "BMC not back in time"


class UnclassifiedFault(BMCFault):
    """Anything a driver's mapping table missed. Honest rather than hidden:
    the lab's fault matrix counts these, and the target count is zero."""

    code = "unclassified_fault"
    summary = "unclassified BMC fault"


class SlotTimeout(BmaasError):
    """bmaas's own waiting or budget ended the call, not the BMC: a fault
    bmaas caused itself. Raised when, before the caller's deadline,

    * no request slot came free: bmaas's own calls to the BMC (or to the
      node) filled the per-BMC cap the whole time (:mod:`bmaas.gate`, the
      driver's one-call-per-node lock, the driver pool);
    * the BMC's turn did not come: bmaas's own spacing between requests
      (``bmc_min_interval``, ``BMAAS_BMC_MIN_INTERVAL``) put it past the
      deadline;
    * the deadline was spent before anything was sent (by earlier work of the
      command, its start-up, or waits before the call);
    * the deadline ended a wait for power before the node's own power window
      did (:meth:`bmaas.driver.BMCDriver.wait_for_power`).

    Not a fault of the BMC or the node: the BMC was never asked (or its time
    was not up), so it is retried on the same node with backoff within the
    deadline, never counted toward the node's health, never fences it, and is
    never reported as "BMC busy" (issue 36: as ``BMCTimeout`` it put healthy
    nodes into maintenance). ``address`` is the BMC's label
    (``redfish:https://10.0.0.5``), ``waited`` how long the caller waited.
    """

    code = "slot_timeout"
    summary = "bmaas's own wait or budget ran out (local, not a BMC fault)"

    def __init__(
        self,
        message: str = "",
        *,
        node: str | None = None,
        driver: str | None = None,
        operation: str | None = None,
        address: str | None = None,
        waited: float | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message, cause=cause)
        self.node = node
        self.driver = driver
        self.operation = operation
        self.address = _strip_userinfo(address)
        self.waited = waited
        #: the retry layer's backoff reads it (a local wait has no Retry-After)
        self.retry_after: float | None = None

    def __str__(self) -> str:
        head = self.node or "?"
        if self.operation:
            head += f": {self.operation}"
        if self.address:
            head += f" via {self.address}"
        if self.waited is not None:
            head += f" after waiting {self.waited:.2f}s"
        tail = self.summary + (f": {self.message}" if self.message else "")
        return f"{head}: {tail}"


class PowerPending(SlotTimeout):
    """The BMC accepted a power action, and the caller's budget ended before
    the node read its target state while the node's own power window was
    still open: the action is under way, not failed (issue 48: a power-on
    accepted 53 s into a 60 s budget after a BMC reboot was reported as
    ``power_failure retry=other_node``, and Ironic then switched the booting
    machine off).

    Neither the BMC's fault nor the node's: retried on the same node (ON and
    OFF are idempotent; a reboot is re-read first), never counted toward the
    node's health, never fences it. Inside Ironic the action counts as done
    (Ironic records its target state, so its sync never undoes it) and the
    sync reads what became of it. ``waited``: how long the whole operation
    had run; ``accepted``: seconds into it the BMC took the action."""

    code = "power_pending"
    summary = "power action accepted, its state not confirmed yet"

    def __init__(
        self,
        message: str = "",
        *,
        accepted: float | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(message, **kw)
        self.accepted = accepted


class NodeUnavailable(BmaasError):
    """The node cannot be used now (maintenance, claimed, faulted): pick another.

    ``taken``: another owner holds it (a parallel request won the race for
    it). That says nothing about the node, so the reschedule loop moves on
    without writing a refusal into the request's history."""

    code = "node_unavailable"
    summary = "node unavailable"

    def __init__(
        self,
        message: str = "",
        *,
        node: str | None = None,
        reason: str | None = None,
        taken: bool = False,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message, cause=cause)
        self.node = node
        self.reason = reason
        self.taken = taken

    def __str__(self) -> str:
        head = f"node {self.node}" if self.node else "node"
        text = f"{head} unavailable"
        if self.reason:
            text += f" ({self.reason})"
        if self.message:
            text += f": {self.message}"
        return text


class LeaseLost(BmaasError):
    """The owner is gone: its lease expired and another run reclaimed what it
    held. Its holder must stop working on those nodes (and never power them
    off: they may be someone else's now). Raised by the store
    (:mod:`bmaas.store`, which re-exports it); defined here so the policy
    table can give it a row without importing the store."""

    code = "lease_lost"
    summary = "lease lost"

    def __init__(self, message: str = "", *, owner: str | None = None) -> None:
        super().__init__(message)
        self.owner = owner

    def __str__(self) -> str:
        head = f"owner {self.owner}" if self.owner else "owner"
        return f"{head}: {self.message or self.summary}"


class NoCandidates(BmaasError):
    """Nothing matches the request (or every match was tried)."""

    code = "no_candidates"
    summary = "no candidate node"

    def __init__(
        self,
        message: str = "",
        *,
        request: str | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message, cause=cause)
        self.request = request

    def __str__(self) -> str:
        head = f"request {self.request}: " if self.request else ""
        return head + (self.message or self.summary)


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One entry of a request's history, oldest first: a try on one node that
    failed (``outcome="failed"``), the try that worked (``"succeeded"``, always
    last, no fault), or a candidate that could not be claimed (``"refused"``:
    in maintenance, not matching; not an attempt). ``decision`` says what the
    request did next and why (from the policy table).

    ``attempts`` means the same everywhere: a result's ``attempts`` lists every
    node tried, the one that worked included, so a first-try success has one
    entry; the CLI's ATTEMPTS column and ``--json``'s ``attempts`` count the
    entries that are not refusals (:attr:`tried`)."""

    node: str
    #: the fault's stable code and class; ``None`` for the attempt that succeeded
    fault_code: str | None
    fault_class: str | None
    message: str
    elapsed: float
    outcome: str = "failed"
    decision: str = ""

    @classmethod
    def from_fault(
        cls,
        node: str,
        fault: BmaasError,
        elapsed: float,
        *,
        outcome: str = "failed",
        decision: str = "",
    ) -> Attempt:
        return cls(node, fault.code, type(fault).__name__, str(fault), elapsed, outcome, decision)

    @classmethod
    def success(cls, node: str, elapsed: float, message: str = "deployed") -> Attempt:
        """The try that worked: the last entry of a result's history."""
        return cls(node, None, None, message, elapsed, "succeeded", "done")

    @property
    def refused(self) -> bool:
        return self.outcome == "refused"

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"

    @property
    def succeeded(self) -> bool:
        return self.outcome == "succeeded"

    @property
    def tried(self) -> bool:
        """A deploy was tried on the node (failed or succeeded): an attempt."""
        return not self.refused

    def __str__(self) -> str:
        if self.refused:
            text = f"{self.node}: refused ({self.message})"
        elif self.succeeded:
            return f"{self.node}: succeeded after {self.elapsed:.2f}s ({self.message})"
        else:
            text = f"{self.node}: {self.fault_class} after {self.elapsed:.2f}s ({self.message})"
        return f"{text} -> {self.decision}" if self.decision else text


class ProvisionFailed(BmaasError):
    """A request ran out of attempts, candidates or time. ``attempts`` lists
    every node tried and why it failed (and every candidate refused); the
    exception is chained from the last fault.

    ``message`` says which stop condition ended the request; when there was
    nothing to try at all it is the reason, with counts ("no node of resource
    class 'gpu' is available (3 enrolled, 0 of that class)"). ``cause_text``
    (on every :class:`BmaasError`) is the chained cause in one line, kept
    across pickling: ``"NoCandidates: request r1: ..."``, or the last node's
    fault."""

    code = "provision_failed"
    summary = "provisioning failed"

    def __init__(
        self,
        message: str = "",
        *,
        request: str | None = None,
        attempts: list[Attempt] | tuple[Attempt, ...] = (),
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message, cause=cause)
        self.request = request
        self.attempts = list(attempts)

    def to_dict(self) -> dict[str, Any]:
        record = super().to_dict()
        record["attempts"] = [dataclasses.asdict(a) for a in self.attempts]
        return record

    def __str__(self) -> str:
        head = f"request {self.request}" if self.request else "request"
        tried = [a for a in self.attempts if a.tried]
        text = f"{head} failed after {len(tried)} attempt(s)"
        if len(tried) < len(self.attempts):
            text += f" and {len(self.attempts) - len(tried)} refused candidate(s)"
        if self.message:
            text += f": {self.message}"
        if self.attempts:
            text += "; " + "; ".join(str(a) for a in self.attempts)
        return text


def _all_subclasses(cls: type[BmaasError]) -> list[type[BmaasError]]:
    found: list[type[BmaasError]] = [cls]
    for sub in cls.__subclasses__():
        found.extend(_all_subclasses(sub))
    return found


#: every fault class by its stable code, for decoding JSON records and reports
FAULT_CLASSES: dict[str, type[BmaasError]] = {c.code: c for c in _all_subclasses(BmaasError)}
