"""Long BMC work followed to its end: a firmware update and a BMC reset
(issue 51), protocol-free, on the driver contract's one-request steps.

A firmware update is three things a BMC does in its own time, each followed
under the caller's :class:`~bmaas.deadline.Deadline`::

    start (one POST: not idempotent) -> the task (read every ``poll``
    seconds until it ends, at most ``task`` seconds) -> the version read
    back (every target changed, else SettingsNotApplied)

    a read that gets no answer (the policy table's "no answer" column:
    the BMC rebooting into its new firmware) -> wait for the BMC

Waiting for a BMC (after ``Manager.Reset``, or one that went away
mid-update) asks it every ``interval`` seconds until ``good`` answers in a
row, at most ``back`` seconds: Ironic's firmware interface waits for 3 good
answers 30 s apart within 300 s (its ``[redfish]firmware_update_*``
options), and so do these defaults. A BMC that answers once while it is
still going down is not back. Past ``back`` (or the deadline) the wait
ends :class:`~bmaas.faults.BMCNotBack`, chained from the last no-answer.

What each ending is (``TaskStuck``, never restarted nor powered off under;
``RequestRejected``, raised by the driver's task read; ``BMCNotBack``;
``SettingsNotApplied`` naming the target): docs/lifecycle.md, "Firmware
updates and BMC resets".

Retrying is not done here: the callables handed in are the driver's own
(one attempt each) or :class:`bmaas.retry.RetryingDriver`'s (the policy
table's retries). Clock and sleep are the driver's, so unit tests assert the
exact sleep sequence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from bmaas import clock as _clock
from bmaas.deadline import Deadline
from bmaas.faults import BmaasError, BMCFault, BMCNotBack, SettingsNotApplied, TaskStuck
from bmaas.hardware import FirmwareComponent, TaskStatus, UpdateTask
from bmaas.policy import policy_for

__all__ = ["UpdateBounds", "UpdateSteps", "follow_update", "wait_back"]

#: what a progress line goes to (the CLI prints it with the node's name)
Progress = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class UpdateBounds:
    """How long each part of an update or reset may take (the deadline
    bounds them all)."""

    #: seconds a task may run (from the update's start) before it is stuck
    task: float = 1800.0
    #: seconds between two reads of a running task
    poll: float = 5.0
    #: seconds a BMC may stay away (after a reset, or mid-update)
    back: float = 300.0
    #: answers in a row that make a BMC back
    good: int = 3
    #: seconds between two asks while waiting for a BMC
    interval: float = 30.0


class _Fault(Protocol):
    def __call__(
        self, cls: type[BMCFault], message: str, *, operation: str, elapsed: float, **kw: Any
    ) -> BMCFault: ...


@dataclasses.dataclass(frozen=True)
class UpdateSteps:
    """The one-request steps of an update, each called with ``deadline=``:
    the driver's own or the retrying driver's."""

    start: Callable[..., UpdateTask]
    read_task: Callable[..., TaskStatus]
    read_firmware: Callable[..., list[FirmwareComponent]]
    #: any cheap read that says the BMC answers (a probe)
    ask: Callable[..., Any]
    #: builds a fault naming the node, driver and address (``BMCDriver.fault``)
    fault: _Fault
    clock: _clock.ClockFn
    sleep: _clock.SleepFn


def _no_answer(exc: BmaasError) -> bool:
    return policy_for(exc).no_answer


def wait_back(
    steps: UpdateSteps,
    bounds: UpdateBounds,
    *,
    deadline: Deadline,
    operation: str,
    last: BaseException | None = None,
    progress: Progress | None = None,
) -> float:
    """Wait until the BMC gives ``bounds.good`` answers in a row, asked
    ``bounds.interval`` apart (the first ask one interval from now), within
    ``bounds.back`` seconds and the deadline. Returns the seconds waited;
    ``BMCNotBack`` past the bound. A fault that is an answer (auth,
    unsupported...) is raised as it is: the BMC is back, and unhappy."""
    start = steps.clock()
    good = 0
    while good < bounds.good:
        waited = steps.clock() - start
        if waited + bounds.interval > bounds.back or not deadline.allows(bounds.interval):
            fault = steps.fault(
                BMCNotBack,
                f"the BMC gave {good} of {bounds.good} answers in a row within "
                f"{min(bounds.back, waited + deadline.left()):g}s (last: {last or 'none'})",
                operation=operation,
                elapsed=waited,
            )
            raise fault from last
        deadline.sleep(bounds.interval, steps.sleep)
        try:
            steps.ask(deadline=deadline)
        except BmaasError as exc:
            if not _no_answer(exc):
                raise
            if good and progress is not None:
                progress(f"BMC away again after {good} answer(s)")
            good, last = 0, exc
            continue
        good += 1
        if progress is not None:
            progress(f"BMC answers ({good} of {bounds.good})")
    return steps.clock() - start


def follow_update(
    steps: UpdateSteps,
    image: str,
    targets: Sequence[str],
    bounds: UpdateBounds,
    *,
    deadline: Deadline,
    operation: str,
    progress: Progress | None = None,
) -> list[FirmwareComponent]:
    """Start the update, follow its task to the end, wait for the BMC when
    it goes away, and read the versions back: every target (every
    updateable component when none is named) must read another version
    than before. Returns the firmware inventory as it reads after."""
    note = progress or (lambda _line: None)
    start = steps.clock()
    before = {c.id: c.version for c in steps.read_firmware(deadline=deadline)}
    task = steps.start(image, targets=tuple(targets), deadline=deadline)
    note(f"update taken ({task.kind}{': ' + task.path if task.path else ''})")
    if task.kind != "none":
        _follow_task(steps, task, bounds, deadline=deadline, start=start, note=note, op=operation)
    after = _read_firmware(steps, bounds, deadline=deadline, note=note, op=operation)
    _check_versions(steps, before, after, task.targets, op=operation, start=start)
    return after


def _follow_task(
    steps: UpdateSteps,
    task: UpdateTask,
    bounds: UpdateBounds,
    *,
    deadline: Deadline,
    start: float,
    note: Progress,
    op: str,
) -> TaskStatus:
    shown: tuple[str, int | None] | None = None
    while True:
        try:
            status = steps.read_task(task, deadline=deadline)
        except BmaasError as exc:
            if not _no_answer(exc):
                raise
            note("BMC not answering (rebooting?): waiting for it")
            wait_back(steps, bounds, deadline=deadline, operation=op, last=exc, progress=note)
            continue
        if (status.state, status.percent) != shown:
            shown = (status.state, status.percent)
            percent = f" {status.percent}%" if status.percent is not None else ""
            note(f"task {status.state}{percent}")
        if status.ended:
            return status
        ran = steps.clock() - start
        pause = min(bounds.poll, max(0.0, bounds.task - ran))
        if ran >= bounds.task or not deadline.sleep(pause, steps.sleep) or deadline.expired:
            why = "its bound" if ran >= bounds.task else "the deadline"
            raise steps.fault(
                TaskStuck,
                f"the task still reads {status.state} after {ran:.1f}s ({why}; bound "
                f"{bounds.task:g}s): left running, the node untouched",
                operation=op,
                elapsed=ran,
            )


def _read_firmware(
    steps: UpdateSteps, bounds: UpdateBounds, *, deadline: Deadline, note: Progress, op: str
) -> list[FirmwareComponent]:
    try:
        return steps.read_firmware(deadline=deadline)
    except BmaasError as exc:
        if not _no_answer(exc):
            raise
        note("BMC not answering after the update: waiting for it")
        wait_back(steps, bounds, deadline=deadline, operation=op, last=exc, progress=note)
        return steps.read_firmware(deadline=deadline)


def _check_versions(
    steps: UpdateSteps,
    before: dict[str, str | None],
    after: list[FirmwareComponent],
    targets: Sequence[str],
    *,
    op: str,
    start: float,
) -> None:
    now = {c.id: c.version for c in after}
    wanted = list(targets) or [c.id for c in after if c.updateable]
    same = {t: now.get(t) for t in wanted if t in before and now.get(t) == before[t]}
    # named targets must each change; the BMC's own choice, at least one
    if same and (targets or len(same) == len(wanted)):
        shown = ", ".join(f"{t} still reads {v!r}" for t, v in same.items())
        raise steps.fault(
            SettingsNotApplied,
            f"the update reported done and the version did not change: {shown}",
            operation=op,
            elapsed=steps.clock() - start,
            attributes={t: {"wanted": "a new version", "current": v} for t, v in same.items()},
        )
