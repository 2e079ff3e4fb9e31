"""The BMC sweep behind the bmc, power and boot checks: every enrolled node
asked once, in parallel, under the run's deadline.

Per node: ``probe`` (does the BMC answer, does it take our credentials),
then, for nodes not in maintenance, the power state and the boot device. A
probe that got no answer or was refused skips the rest: asking again would
fail the same way and spend the deadline. The sweep only reads: nothing is
written to the database and nothing is changed on any BMC.

Each fault becomes a :class:`Finding`, the operator's words for what to do
about it; the checks group nodes by finding.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, Protocol

from bmaas import retry
from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, BMCInfo, BootSetting, Capability, Operation, PowerState
from bmaas.faults import BmaasError, BMCTimeout, InputError
from bmaas.ops import DriverFactory, run_on_nodes
from bmaas.policy import CheckFinding, policy_for
from bmaas.status.result import Outcome, Result, listing
from bmaas.store import NodeRecord

__all__ = ["FINDINGS", "Finding", "FleetReport", "NodeCheck", "Problem", "report", "sweep"]

#: per-node messages shown for one finding; the rest are counted
SHOWN_MESSAGES = 5


class Finding(StrEnum):
    """What a failed call means to the operator (keys of ``--json``'s ``nodes``).

    A fault's finding, and whether it is a Warning or a Failure, is its row's
    ``check`` column in the policy table (:class:`bmaas.policy.CheckFinding`,
    whose values these repeat); ``not_asked`` and ``no_driver`` are the
    sweep's own (no call was made)."""

    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    NOT_ASKED = "not_asked"
    AUTH = "auth"
    BUSY = "busy"
    UNCLASSIFIED = "unclassified"
    NO_DRIVER = "no_driver"
    CANNOT_ASK = "cannot_ask"
    FAULT = "fault"
    LATE = "late"


@dataclasses.dataclass(frozen=True)
class FindingInfo:
    label: str
    result: Result
    #: print each node's message (the fault says what happened), not just names
    messages: bool = False


def _by_table(finding: CheckFinding) -> Result:
    return Result.WARNING if finding.warning else Result.FAILURE


FINDINGS: dict[Finding, FindingInfo] = {
    Finding.TIMEOUT: FindingInfo("did not answer in time", _by_table(CheckFinding.TIMEOUT)),
    Finding.UNREACHABLE: FindingInfo("unreachable", _by_table(CheckFinding.UNREACHABLE)),
    Finding.NOT_ASKED: FindingInfo(
        "not asked before the deadline (raise --deadline or --workers)", Result.FAILURE
    ),
    Finding.AUTH: FindingInfo(
        "rejected the credentials (rotated password? bad user or privilege?)",
        _by_table(CheckFinding.AUTH),
    ),
    Finding.BUSY: FindingInfo("busy (the BMC said to try later)", _by_table(CheckFinding.BUSY)),
    Finding.UNCLASSIFIED: FindingInfo(
        "unclassified fault (no mapping table knew it)",
        _by_table(CheckFinding.UNCLASSIFIED),
        messages=True,
    ),
    Finding.NO_DRIVER: FindingInfo("not asked: driver does not load (see drivers)", Result.FAILURE),
    Finding.CANNOT_ASK: FindingInfo(
        "could not be asked", _by_table(CheckFinding.CANNOT_ASK), messages=True
    ),
    Finding.FAULT: FindingInfo("faulted", _by_table(CheckFinding.FAULT), messages=True),
    Finding.LATE: FindingInfo(
        "not told: no answer while this client waited for a CPU (a loaded machine, "
        "bmaas.lateness), which says nothing about the BMC; check again",
        _by_table(CheckFinding.LATE),
        messages=True,
    ),
}

#: a probe that ended like this skips the node's other reads
_STOP_AFTER_PROBE = frozenset(
    {
        Finding.TIMEOUT,
        Finding.UNREACHABLE,
        Finding.NOT_ASKED,
        Finding.AUTH,
        Finding.CANNOT_ASK,
        Finding.LATE,
    }
)


def classify(error: BmaasError, *, started: bool = True) -> Finding:
    """The policy table's ``check`` for ``error``; a call no worker started
    before the deadline is ``not_asked`` whatever it raised."""
    if not started:
        return Finding.NOT_ASKED
    return Finding(policy_for(error).check)


@dataclasses.dataclass(frozen=True)
class Problem:
    """A call that did not give an answer, and what that means."""

    finding: Finding
    error: BmaasError
    #: the call it happened on ("probe", "power.get", "boot.get")
    operation: str = str(Operation.PROBE)


@dataclasses.dataclass(frozen=True)
class NodeCheck:
    """What one node's BMC said. ``None``: not asked (maintenance, capability)."""

    record: NodeRecord
    probe: BMCInfo | Problem
    power: PowerState | Problem | None = None
    boot: BootSetting | Problem | None = None
    #: what the driver learned about the BMC while asking (:class:`bmaas.driver.Quirk`)
    quirks: frozenset[str] = frozenset()

    @property
    def answered(self) -> bool:
        return not isinstance(self.probe, Problem)


@dataclasses.dataclass(frozen=True)
class FleetReport:
    nodes: list[NodeCheck]
    #: seconds each BMC call was allowed
    bmc_timeout: float
    elapsed: float


def _reads(deadline: Deadline, sleep: Callable[[float], None]) -> retry.RetryLimits:
    """How a sweep read is retried: like a power-sync read (``sync=True``),
    only what the policy table neither counts nor gives up on at once is
    asked again (a busy BMC, with backoff and its Retry-After), within the
    one call's share of the deadline; anything else is reported as it came."""
    return retry.RetryLimits(sync=True, clock=deadline.clock, sleep=sleep)


def _ask(
    driver: BMCDriver,
    *,
    records: Mapping[str, NodeRecord],
    bmc_timeout: float,
    deadline: Deadline,
    sleep: Callable[[float], None],
    power: bool,
    boot: bool,
) -> NodeCheck:
    """One node's reads, each handed a share of the sweep's ``deadline`` of at
    most ``bmc_timeout`` (a busy answer retried inside it, :func:`_reads`), so
    no call outlives the run."""
    record = records[driver.node]

    def step(operation: Operation, call: Callable[..., Any]) -> Any:
        if deadline.expired:
            late = driver.fault(
                BMCTimeout, "not asked: the deadline had passed", operation=operation, elapsed=0.0
            )
            return Problem(Finding.NOT_ASKED, late, str(operation))
        try:
            limits = _reads(deadline, sleep)
            return retry.call(limits, call, deadline=deadline.share(cap=bmc_timeout))
        except BmaasError as exc:
            return Problem(classify(exc), exc, str(operation))

    probe = step(Operation.PROBE, driver.probe)
    if isinstance(probe, Problem) and probe.finding in _STOP_AFTER_PROBE:
        return NodeCheck(record, probe, quirks=_quirks(driver))
    if record.maintenance:
        return NodeCheck(record, probe, quirks=_quirks(driver))
    state = step(Operation.POWER_GET, driver.get_power_state) if power else None
    setting = None
    if boot and driver.supports(Capability.BOOT_DEVICE):
        setting = step(Operation.BOOT_GET, driver.get_boot_device)
    return NodeCheck(record, probe, state, setting, quirks=_quirks(driver))


def _quirks(driver: BMCDriver) -> frozenset[str]:
    return frozenset(str(q) for q in driver.quirks)


class SweepSource(Protocol):
    """What a sweep reads from the run (:class:`bmaas.status.context.CheckContext`
    is one); stated here so this module needs not import the context."""

    clock: Callable[[], float]
    sleep: Callable[[float], None]
    workers: int
    make_factory: Callable[..., DriverFactory]

    @property
    def sweep_deadline(self) -> Deadline: ...

    @property
    def bmc_timeout(self) -> float: ...

    def nodes(self) -> list[NodeRecord]: ...

    def driver_class(self, name: str) -> type[BMCDriver] | InputError: ...

    def wants(self, check: str) -> bool: ...


def sweep(ctx: SweepSource) -> FleetReport:
    """Ask every enrolled node whose driver loads; the others are findings."""
    began = ctx.clock()
    records = ctx.nodes()
    checks: dict[str, NodeCheck] = {}
    askable: list[NodeRecord] = []
    for record in records:
        loaded = ctx.driver_class(record.driver)
        if isinstance(loaded, InputError):
            checks[record.name] = NodeCheck(record, Problem(Finding.NO_DRIVER, loaded))
        else:
            askable.append(record)
    bmc_timeout = ctx.bmc_timeout
    operation = functools.partial(
        _ask,
        records={r.name: r for r in askable},
        bmc_timeout=bmc_timeout,
        deadline=ctx.sweep_deadline,
        sleep=ctx.sleep,
        power=ctx.wants("power"),
        boot=ctx.wants("boot"),
    )
    results = run_on_nodes(
        askable,
        operation,
        factory=ctx.make_factory(bmc_timeout=bmc_timeout),
        workers=ctx.workers,
        clock=ctx.clock,
        deadline=ctx.sweep_deadline,
    )
    for record, result in zip(askable, results, strict=True):
        if result.value is not None:
            checks[record.name] = result.value
        else:
            # The driver could not be built, broke its contract, or ran out of time.
            assert result.error is not None
            finding = classify(result.error, started=result.started)
            checks[record.name] = NodeCheck(record, Problem(finding, result.error))
    return FleetReport([checks[r.name] for r in records], bmc_timeout, ctx.clock() - began)


def report(
    outcome: Outcome,
    problems: Iterable[tuple[NodeRecord, Problem]],
    *,
    bmc_timeout: float,
    demote: Callable[[NodeRecord], bool] = lambda record: False,
) -> None:
    """Add one line per finding to ``outcome``: how many nodes, which ones,
    and for findings whose details matter, each node's message.

    ``demote``: nodes for which a failure is only a Warning (in maintenance).
    """
    groups: dict[tuple[Finding, bool], list[tuple[NodeRecord, Problem]]] = {}
    for record, problem in problems:
        groups.setdefault((problem.finding, demote(record)), []).append((record, problem))
    order = list(Finding)

    def worst_first(group: tuple[tuple[Finding, bool], Any]) -> tuple[int, int]:
        (finding, demoted), _ = group
        result = Result.WARNING if demoted else FINDINGS[finding].result
        return (-int(result), order.index(finding))

    for (finding, demoted), items in sorted(groups.items(), key=worst_first):
        info = FINDINGS[finding]
        names = [record.name for record, _ in items]
        label = info.label
        if finding is Finding.TIMEOUT:
            label += f" ({bmc_timeout:.3g}s per call)"
        line = f"{len(names)} node(s){' in maintenance' if demoted else ''} {label}"
        result = Result.WARNING if demoted else info.result
        key = f"{finding}_in_maintenance" if demoted else str(finding)
        if not info.messages:
            outcome.add(result, f"{line}: {listing(names)}", key=key, nodes=names)
            continue
        outcome.add(result, f"{line}:", key=key, nodes=names)
        for _, problem in items[:SHOWN_MESSAGES]:
            outcome.details.append(f"  {problem.error}")
        if len(items) > SHOWN_MESSAGES:
            outcome.details.append(f"  ... and {len(items) - SHOWN_MESSAGES} more (--json)")
