"""One table test: for each fault class, what every layer does with it, with an
injected clock and sleep (no real sleeps).

Driven by :data:`bmaas.policy.POLICY` (one case per row, and a check that the
expectations below cover exactly the table's rows); the expectations are
written out by hand, so a change to the table that changes behaviour fails
here until someone writes down the new behaviour on purpose.

Columns: wire calls and sleeps of the operation retry for an idempotent call
and for a reset (not idempotent); whether the request moves to the next
candidate; whether a sync read failing this way counts toward "power
failure"; the word a fleet command prints; the derived ``retry=`` scope (and
the ``[bmaas CODE retry=SCOPE]`` prefix); wire calls of a read in Ironic's
power sync (``sync=True``: a counted fault fails at once); whether the
embedded backend powers the node off after a failed deploy, and whether it
counts the fault toward fencing; what ``bmaas status check`` shows and
whether that is a Warning.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from bmaas import faulttext, retry
from bmaas.cli.app import outcome
from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.fakes.clock import FakeClock
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
    SettingsNotApplied,
    SlotTimeout,
    TaskStuck,
    UnclassifiedFault,
    UnsupportedOperation,
)
from bmaas.health import HealthRule
from bmaas.ops import NodeResult
from bmaas.policy import POLICY, FaultPolicy, policy_for
from bmaas.provision import Request, should_reschedule
from bmaas.provision.cancel import CancelToken
from bmaas.status.fleet import FINDINGS, classify
from bmaas.status.result import Result
from bmaas.store import Store
from bmaas.sync import SyncParts, SyncSettings, sync_pass
from tests.budgets import per_operation, unbounded
from tests.unit.test_provision import Rack


@dataclasses.dataclass(frozen=True)
class Layers:
    #: operation retry, idempotent call: wire calls, then the sleep sequence
    calls: int
    sleeps: list[float]
    #: operation retry, a reset (not idempotent)
    reset_calls: int
    reset_sleeps: list[float]
    #: request reschedule: True = next candidate, False = stop
    next_candidate: bool
    #: sync hysteresis counts it
    counted: bool
    #: the word on a fleet command's line
    fleet: str
    #: the ``retry=`` scope (derived from the row)
    retry: str = "other_node"
    #: wire calls of one read in Ironic's power sync (None: as ``calls``)
    sync_calls: int | None = None
    #: a failed deploy powers the node off (embedded backend)
    off: bool = True
    #: a backend counts it toward fencing the node
    fenced: bool = True
    #: what ``status check`` shows; only busy is a Warning
    check: str = "fault"


BACKOFF = [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0]  # capped at busy_max
NONE = Layers(1, [], 1, [], True, True, "FAIL")  # a BMC fault retried nowhere: elsewhere
STOP = Layers(1, [], 1, [], False, False, "ERROR", retry="never", fenced=False)

EXPECTED: dict[type[BmaasError], Layers] = {
    BmaasError: STOP,
    InputError: dataclasses.replace(STOP, fleet="CONFIG", check="cannot_ask"),
    BMCFault: NONE,
    BMCUnreachable: Layers(
        3,
        [1.0, 1.0],
        3,
        [1.0, 1.0],
        True,
        True,
        "FAIL",
        "same_node",
        1,
        check="unreachable",
        off=False,
    ),
    BMCTimeout: Layers(
        3, [0.5, 0.5], 1, [], True, True, "FAIL", "same_node", 1, check="timeout", off=False
    ),
    BMCBusy: Layers(
        10, BACKOFF, 10, BACKOFF, True, False, "BUSY", "same_node", fenced=False, check="busy"
    ),
    # the BMC was never asked, so even a reset is retried; never counted
    SlotTimeout: Layers(
        10, BACKOFF, 10, BACKOFF, True, False, "BUSY", "same_node", fenced=False, check="busy"
    ),
    # issue 48: the BMC took the power action, the budget ended before its
    # state was read: asked again here, never counted, fenced or powered off
    PowerPending: Layers(
        10,
        BACKOFF,
        10,
        BACKOFF,
        True,
        False,
        "PENDING",
        "same_node",
        fenced=False,
        check="busy",
        off=False,
    ),
    BMCAuthError: dataclasses.replace(
        NONE, counted=False, fleet="AUTH", fenced=False, check="auth", off=False
    ),
    BMCInternalError: Layers(2, [1.0], 2, [1.0], True, True, "FAIL", "same_node", 1),
    BMCProtocolError: NONE,
    UnsupportedOperation: dataclasses.replace(
        NONE, counted=False, fleet="UNSUPPORTED", fenced=False
    ),
    PowerFailure: NONE,
    BootFailure: NONE,
    UnclassifiedFault: dataclasses.replace(NONE, check="unclassified"),
    # issue 51: the hardware's life cycle. Updating is busy that never powers
    # the node off (an update must not be cut)
    BMCUpdating: Layers(
        10,
        BACKOFF,
        10,
        BACKOFF,
        True,
        False,
        "BUSY",
        "same_node",
        fenced=False,
        check="busy",
        off=False,
    ),
    SettingsNotApplied: dataclasses.replace(NONE, counted=False, fenced=False),
    TaskStuck: dataclasses.replace(NONE, counted=False, fenced=False, off=False),
    RequestRejected: dataclasses.replace(STOP, fleet="REJECTED"),
    BMCNotBack: dataclasses.replace(NONE, off=False, check="unreachable"),
    NodeUnavailable: Layers(1, [], 1, [], True, False, "SKIPPED", fenced=False, off=False),
    LeaseLost: dataclasses.replace(STOP, off=False),
    NoCandidates: dataclasses.replace(STOP, off=False),
    ProvisionFailed: dataclasses.replace(STOP, off=False),
}


def test_the_expectations_cover_exactly_the_table() -> None:
    assert set(EXPECTED) == {row.fault for row in POLICY}


def always(make: Callable[[], BmaasError], wire: list[str]) -> Callable[..., None]:
    """A BMC call that fails with a fresh fault every time, as a driver does."""

    def call(*_args: object, deadline: float | None = None) -> None:
        wire.append("call")
        raise make()

    return call


def operation_retry(
    cls: type[BmaasError], *, idempotent: bool, sync: bool = False
) -> tuple[int, list[float]]:
    clock = FakeClock()
    policy = retry.RetryLimits(sleep=clock.sleep, clock=clock, jitter=0.0, total=60.0, sync=sync)
    wire: list[str] = []
    with pytest.raises(cls):
        retry.call(
            policy,
            always(lambda: cls("injected"), wire),
            idempotent=idempotent,
            deadline=per_operation(policy),
        )
    return len(wire), clock.sleeps


class Raising:
    """A driver whose power read fails with one fault."""

    bmc_timeout = 10.0

    def __init__(self, fault: BmaasError) -> None:
        self.fault = fault

    def call_deadline(self, deadline: Deadline) -> Deadline:
        return deadline.share(cap=self.bmc_timeout)

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        raise self.fault

    def close(self) -> None:
        pass


@pytest.mark.parametrize("row", POLICY, ids=lambda r: r.fault.__name__)
def test_each_fault_class_at_every_layer(
    row: FaultPolicy, store: Store, enroll: Callable[..., list[str]]
) -> None:
    want = EXPECTED[row.fault]
    fault = row.fault("injected")

    # operation retry: wire calls and the exact sleep sequence
    assert operation_retry(row.fault, idempotent=True) == (want.calls, want.sleeps)
    assert operation_retry(row.fault, idempotent=False) == (want.reset_calls, want.reset_sleeps)

    # request reschedule
    assert should_reschedule(fault) is want.next_candidate

    # node health: one sync pass whose read fails this way
    (name,) = enroll(1)
    report = sync_pass(
        store,
        SyncSettings(health_rule=HealthRule(fault_after=3)),
        SyncParts(lambda _record: Raising(fault)),  # type: ignore[arg-type,return-value]
        deadline=unbounded(),
    )
    assert [r.node for r in report.failed] == [name]
    record = store.nodes.get(name)
    assert record.fault_count == (1 if want.counted else 0)
    assert record.last_error  # counted or not, the operator sees why

    # fleet command outcome
    assert outcome(NodeResult(name, "fake", error=fault)).label == want.fleet

    # the retry scope operators read, derived from the row
    assert (str(row.fault.retry), str(fault.retry)) == (want.retry, want.retry)
    assert faulttext.prefix(fault) == f"[bmaas {fault.code} retry={want.retry}] "

    # a read in Ironic's power sync: a counted fault fails the read at once
    sync_calls = want.calls if want.sync_calls is None else want.sync_calls
    assert operation_retry(row.fault, idempotent=True, sync=True)[0] == sync_calls

    # what `bmaas status check` shows, and whether it is a Warning
    finding = classify(fault)
    assert str(finding) == want.check
    assert FINDINGS[finding].result is (Result.WARNING if want.check == "busy" else Result.FAILURE)


@pytest.mark.parametrize("row", POLICY, ids=lambda r: r.fault.__name__)
def test_each_fault_class_after_a_failed_deploy(row: FaultPolicy, store: Store) -> None:
    """The embedded backend's release: powered off or not, counted toward
    fencing or not, all by the row."""
    want = EXPECTED[row.fault]
    rack = Rack(store, count=1, power=PowerState.ON)
    backend = rack.provisioner.backend
    budget = Deadline.after(60, clock=rack.fleet.clock.monotonic)
    job = backend.open(Request("r1"))
    claim = backend.claim(job, "n01", number=1, deadline=budget)
    # the deploy went through every step (the node is on, booted off its
    # override), then failed: what the row says is undone of what it left
    backend.deploy(claim, deadline=budget, cancel=CancelToken())
    fault = row.fault("injected")
    backend.release(claim, fault, policy_for(fault), deadline=budget)
    power = rack.fleet.machine("n01").power_state()
    assert (power is not PowerState.ON) is want.off, power
    assert store.nodes.get("n01").fault_count == (1 if want.fenced else 0)


def test_busy_backoff_honours_retry_after_and_stays_inside_the_deadline() -> None:
    clock = FakeClock()
    policy = retry.RetryLimits(sleep=clock.sleep, clock=clock, jitter=0.0, total=10.0)
    wire: list[str] = []
    with pytest.raises(BMCBusy):
        retry.call(
            policy,
            always(lambda: BMCBusy("later", retry_after=3.0), wire),
            deadline=per_operation(policy),
        )
    assert clock.sleeps == [3.0, 3.0, 3.0]  # never less than Retry-After; a 4th would cross 10 s
    assert len(wire) == 4


def test_a_foreign_exception_is_a_bug_never_retried() -> None:
    clock = FakeClock()
    policy = retry.RetryLimits(sleep=clock.sleep, clock=clock)
    calls: list[int] = []

    def broken(*, deadline: Deadline) -> None:
        calls.append(1)
        raise KeyError("bug")

    with pytest.raises(KeyError):
        retry.call(policy, broken, deadline=per_operation(policy))
    assert (calls, clock.sleeps) == ([1], [])
    assert not should_reschedule(KeyError("bug"))
