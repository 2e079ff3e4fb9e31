"""Operation-level retry: one driver call, on the same node, by fault class.

This is the only place bmaas retries a BMC call. Drivers make one bounded
attempt and classify what went wrong; this module decides whether to try again
on the same node, and how long to wait first. *Whether*, and which kind of
retry, is the "same node" column of the policy table (:mod:`bmaas.policy`);
the numbers are this module's :class:`RetryLimits` (each kind's attempts and
waits: docs/faults.md, "Same-node kinds").

**A rebooting BMC, through its window** (``RetryLimits.reboot_window``, 0 by
default: briefly only). A BMC that gives no answer at all (the policy
table's "no answer" column, :data:`~bmaas.policy.NO_ANSWER`: unreachable,
or a timeout where the table retries it, i.e. an idempotent call) may be
rebooting, for a firmware update say: with a window, such a fault is asked
again past its brief attempts for up to ``reboot_window`` seconds after the
call's first no-answer, the waits doubling from ``unreachable_wait`` up to
``reboot_wait_max``; the window is time, not a count (``max_attempts`` does
not end it). Inside Ironic an operator's request (a power action and
the reads that belong to it) gets a window as long as its budget; a periodic
sync read never does (it fails at once on what the sync counts).

Every operation runs under a total :class:`~bmaas.deadline.Deadline`, handed
in by the caller (``deadline=``, a required keyword: there is no default
budget below the public edge), of which it takes at most ``RetryLimits.total``
seconds and never overruns, sleeps included: a wait that would cross it
stops the retrying instead, and each attempt gets ``deadline.share(cap=bmc
timeout)``, passed to it explicitly, so no attempt gets more than what is
left. Sleep, clock and the jitter source are injectable so tests assert the
exact sleep sequence.

**A call of several requests** (a Redfish virtual media insert: read, eject,
read, insert, read back) that the BMC refuses part way ("later") carries a
:class:`~bmaas.faults.Resume`: the next attempt goes on from the refused
request, and each request has its own attempts and backoff
(:func:`this_request`), as if sent on its own.

The pieces are tenacity strategies (``retry_if_fault``, ``wait_for_fault``,
``stop_before_deadline``) composed by :func:`retrying`, usable on any callable
through ``@retry_bmc(limits)``. A non-idempotent REBOOT gets special care in
:func:`reboot`: after a timeout, the power state is read before acting again.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import random
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

import tenacity
from tenacity import RetryCallState

from bmaas import clock as _clock
from bmaas.deadline import Deadline
from bmaas.driver import (
    DEFAULT_BMC_TIMEOUT,
    BiosSettings,
    BMCDriver,
    BMCInfo,
    BootDevice,
    BootSetting,
    FirmwareComponent,
    Inventory,
    PowerAction,
    PowerState,
    soft_reboot,
)
from bmaas.faults import BmaasError, BMCFault, BMCTimeout, SlotTimeout
from bmaas.policy import SameNode, policy_for
from bmaas.updates import UpdateBounds, UpdateSteps

__all__ = [
    "RetryLimits",
    "RetryingDriver",
    "call",
    "faults_seen",
    "reboot",
    "retry_bmc",
    "retry_if_fault",
    "retrying",
    "stop_after_attempts",
    "stop_before_deadline",
    "this_request",
    "wait_for_fault",
]

LOG = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

# Attribute on tenacity's per-call RetryCallState that holds the faults seen so
# far in this call. Strategies stay stateless; the history belongs to the call.
_HISTORY = "bmaas_faults"


#: the process's jitter source (see ``RetryLimits.rng``), seeded afresh in
#: a forked child (sweep workers): copies would jitter in step
_RNG = random.Random()
os.register_at_fork(after_in_child=_RNG.seed)


@dataclasses.dataclass(frozen=True)
class RetryLimits:
    """How hard to try one operation on one node. Immutable; derive variants
    with :meth:`replace`."""

    #: the most seconds one operation (every attempt and sleep included) takes
    #: of the Deadline it is handed; a public edge that makes a Deadline for
    #: one operation may start it from this
    total: float = 60.0
    #: attempts in all, whatever the faults (per request of a call that
    #: resumes further on: :func:`this_request`)
    max_attempts: int = 10
    #: bound of one BMC call (None: the driver's ``bmc_timeout``), clipped to time left
    bmc_timeout: float | None = None
    #: BMCBusy: first wait, growth factor, cap, and jitter (share of the wait)
    busy_initial: float = 0.5
    busy_multiplier: float = 2.0
    busy_max: float = 8.0
    jitter: float = 0.25
    #: BMCUnreachable: "briefly" — this many attempts in all, this far apart
    unreachable_attempts: int = 3
    unreachable_wait: float = 1.0
    #: BMCTimeout (idempotent operations only)
    timeout_attempts: int = 3
    timeout_wait: float = 0.5
    #: BMCInternalError: "once here, then elsewhere"
    internal_error_attempts: int = 2
    internal_error_wait: float = 1.0
    #: the shortest attempt worth starting; less time left than this stops
    min_attempt: float = 0.05
    #: seconds after a call's first no-answer (the table's "no answer" column)
    #: that it is still asked again past the brief attempts: a BMC rebooting
    #: (a firmware update) answers again within it. 0: briefly only
    reboot_window: float = 0.0
    #: the longest wait between two asks inside the reboot window
    reboot_wait_max: float = 8.0
    #: a power sync's read: a fault the policy table's ``sync`` column
    #: (``counts_for_health``) counts is not retried here (it fails the read
    #: at once, so the sync counts it); one it does not count (busy) is
    #: retried as usual
    sync: bool = False
    sleep: _clock.SleepFn = dataclasses.field(default=_clock.sleep, compare=False)
    clock: _clock.ClockFn = dataclasses.field(default=_clock.monotonic, compare=False)
    #: jitter's source: one per process unless a test seeds its own (a new
    #: ``Random()`` seeds itself from the OS, ~10 us, and limits are made
    #: for every call: each power read of an Ironic conductor's sync)
    rng: random.Random = dataclasses.field(default=_RNG, compare=False)

    def replace(self, **changes: Any) -> RetryLimits:
        return dataclasses.replace(self, **changes)

    @classmethod
    def no_retry(cls, **changes: Any) -> RetryLimits:
        """One attempt, whatever happens (for comparisons and dry runs)."""
        return cls(max_attempts=1, **changes)

    def limit_for(self, fault: BaseException, *, idempotent: bool) -> int:
        """How many attempts in all a call may make while this fault class keeps
        recurring (1 means: do not retry it here). *Whether* comes from the
        policy table (:mod:`bmaas.policy`); *how many* from these limits."""
        row = policy_for(fault)
        if self.sync and row.counts_for_health:
            return 1
        kind = row.same_node
        if kind is SameNode.BACKOFF:
            return self.max_attempts
        if kind is SameNode.BRIEFLY:
            return self.unreachable_attempts
        if kind is SameNode.IDEMPOTENT_ONLY:
            return self.timeout_attempts if idempotent else 1
        if kind is SameNode.ONCE:
            return self.internal_error_attempts
        return 1

    def windowed(self, fault: BaseException, *, idempotent: bool) -> bool:
        """Whether ``fault`` may be a rebooting BMC asked again through
        :attr:`reboot_window`: a no-answer fault (the table's "no answer"
        column) that the table retries here for this call at all (a timeout
        only when the call is idempotent), outside a sync read."""
        if self.reboot_window <= 0 or self.sync:
            return False
        return policy_for(fault).no_answer and self.limit_for(fault, idempotent=idempotent) > 1


#: attribute on the RetryCallState: when (``RetryLimits.clock``) this call first
#: met a BMC that gave no answer (the start of a possible reboot window)
_SILENT_SINCE = "bmaas_silent_since"


def _silent_since(retry_state: RetryCallState, now: float) -> float:
    since: float | None = getattr(retry_state, _SILENT_SINCE, None)
    if since is None:
        since = now
        setattr(retry_state, _SILENT_SINCE, since)
    return since


def faults_seen(retry_state: RetryCallState) -> list[BaseException]:
    """Every exception this call has raised so far, oldest first."""
    history: list[BaseException] = getattr(retry_state, _HISTORY, None) or []
    outcome = retry_state.outcome
    if outcome is not None and outcome.failed:
        exc = outcome.exception()
        if exc is not None and (not history or history[-1] is not exc):
            history.append(exc)
    setattr(retry_state, _HISTORY, history)
    return history


def this_request(history: list[BaseException]) -> list[BaseException]:
    """The faults of the request the last fault refused: ``history`` since
    the call last moved on. A call of several requests that the BMC refused
    at one step and then at a later one (its :class:`~bmaas.faults.Resume`
    further on) made progress in between: the later request gets its own
    attempts and its own backoff from the first, as a request of its own
    would (issue 50: a busy lab's vmedia insert backed off as if every
    refusal were the same request's). Without a resume: the whole history."""
    at = _resumed_at(history[-1]) if history else None
    if at is None:
        return history
    for i in range(len(history) - 1, -1, -1):
        earlier = _resumed_at(history[i])
        if earlier is not None and earlier < at:
            return history[i + 1 :]
    return history


def _resumed_at(fault: BaseException) -> int | None:
    resume = fault.resume if isinstance(fault, BMCFault) else None
    return resume.at if resume is not None else None


class stop_after_attempts(tenacity.stop.stop_base):  # noqa: N801 - tenacity's naming style
    """Stop after ``limit`` attempts at one request (:func:`this_request`):
    for a call that never resumes further on, its attempts in all.

    A BMC that gives no answer inside its reboot window (``limits``'
    :meth:`RetryLimits.windowed`) is not stopped by the count: the window is
    time (``reboot_window`` and the deadline), and once its waits have grown
    it is asked at most once per ``reboot_wait_max``. Counted, it ended
    early for a BMC that refuses connections at once (issue 48: 12 asks,
    64 s into a 120 s reset, ``bmc_unreachable`` where stock Ironic waited
    the reset out)."""

    def __init__(
        self, limit: int, limits: RetryLimits | None = None, *, idempotent: bool = True
    ) -> None:
        self.limit = limit
        self.limits = limits
        self.idempotent = idempotent

    def __call__(self, retry_state: RetryCallState) -> bool:
        asked = this_request(faults_seen(retry_state))
        window = self.limits
        if asked and window is not None and window.windowed(asked[-1], idempotent=self.idempotent):
            return False  # retry_if_fault ends the window, stop_before_deadline the budget
        return len(asked) >= self.limit


class retry_if_fault(tenacity.retry_base):  # noqa: N801 - tenacity's naming style
    """Retry when the last fault's class may be retried on the same node,
    given the operation's idempotency and how often that class has recurred."""

    def __init__(self, limits: RetryLimits, *, idempotent: bool) -> None:
        self.limits = limits
        self.idempotent = idempotent

    def __call__(self, retry_state: RetryCallState) -> bool:
        outcome = retry_state.outcome
        if outcome is None or not outcome.failed:
            return False
        fault = outcome.exception()
        if not isinstance(fault, BmaasError):
            return False  # a bug, not a BMC fault: never hide it behind retries
        history = faults_seen(retry_state)
        windowed = self.limits.windowed(fault, idempotent=self.idempotent)
        if windowed:  # the window opens at the call's first no-answer
            now = self.limits.clock()
            since = _silent_since(retry_state, now)
        same_class = sum(1 for f in this_request(history) if type(f) is type(fault))
        if same_class < self.limits.limit_for(fault, idempotent=self.idempotent):
            return True
        # past its brief attempts: a BMC that gives no answer may be
        # rebooting; ask it again while its window lasts
        return windowed and now - since < self.limits.reboot_window


class wait_for_fault(tenacity.wait.wait_base):  # noqa: N801 - tenacity's naming style
    """Wait by the kind of same-node retry the policy table gives the fault:
    jittered exponential backoff for ``backoff`` (busy BMCs; never less than
    the BMC's ``retry_after``), fixed short waits otherwise.

    The backoff grows with the number of backoff faults in this call, so
    other faults in between do not inflate it. Jitter spreads out clients that
    hit the same busy BMC at once.
    """

    def __init__(self, limits: RetryLimits) -> None:
        self.limits = limits

    def __call__(self, retry_state: RetryCallState) -> float:
        p = self.limits
        history = faults_seen(retry_state)
        fault = history[-1] if history else None
        if fault is None:
            return 0.0
        kind = policy_for(fault).same_node
        if kind is SameNode.BACKOFF:
            asked = this_request(history)
            backoffs = sum(1 for f in asked if policy_for(f).same_node is SameNode.BACKOFF)
            backoff = min(p.busy_max, p.busy_initial * p.busy_multiplier ** (backoffs - 1))
            backoff *= 1 + p.jitter * (2 * p.rng.random() - 1)
            return round(max(backoff, getattr(fault, "retry_after", None) or 0.0), 6)
        if p.windowed(fault, idempotent=True):
            silent = sum(1 for f in history if policy_for(f).no_answer)
            past = silent - p.limit_for(fault, idempotent=True)
            if past >= 0:  # past the brief attempts: inside the reboot window
                return float(min(p.reboot_wait_max, p.unreachable_wait * 2 ** (past + 1)))
        if kind is SameNode.BRIEFLY:
            return p.unreachable_wait
        if kind is SameNode.IDEMPOTENT_ONLY:
            return p.timeout_wait
        if kind is SameNode.ONCE:
            return p.internal_error_wait
        return 0.0


class stop_before_deadline(tenacity.stop.stop_base):  # noqa: N801 - tenacity's naming style
    """Stop when sleeping the upcoming wait would leave less than
    ``min_attempt`` seconds before ``deadline``: the retry never overruns
    its deadline, sleep included."""

    def __init__(self, deadline: Deadline, min_attempt: float) -> None:
        self.deadline = deadline
        self.min_attempt = min_attempt

    def __call__(self, retry_state: RetryCallState) -> bool:
        upcoming = retry_state.upcoming_sleep or 0.0
        return not self.deadline.allows(upcoming + self.min_attempt)


def _log_retry(retry_state: RetryCallState) -> None:
    outcome = retry_state.outcome
    fault = outcome.exception() if outcome is not None else None
    LOG.info(
        "retrying after %s (attempt %d, waiting %.2fs): %s",
        type(fault).__name__,
        retry_state.attempt_number,
        retry_state.upcoming_sleep,
        fault,
    )


def retrying(
    limits: RetryLimits, *, idempotent: bool = True, deadline: Deadline
) -> tenacity.Retrying:
    """A tenacity ``Retrying`` for one operation under ``limits``, ending by
    ``deadline``. The last fault is re-raised as itself when retrying stops."""
    return tenacity.Retrying(
        retry=retry_if_fault(limits, idempotent=idempotent),
        wait=wait_for_fault(limits),
        stop=stop_after_attempts(limits.max_attempts, limits, idempotent=idempotent)
        | stop_before_deadline(deadline, limits.min_attempt),
        sleep=limits.sleep,
        before_sleep=_log_retry,
        reraise=True,
    )


def call(
    limits: RetryLimits,
    fn: Callable[..., R],
    *args: Any,
    deadline: Deadline,
    bmc_timeout: float | None = None,
    idempotent: bool = True,
    **kwargs: Any,
) -> R:
    """Call ``fn(*args, **kwargs, deadline=...)`` under ``limits``.

    ``deadline`` bounds the operation, of which it takes at most
    ``limits.total`` seconds. Each attempt is passed ``deadline.share(cap=...)``: at most
    one BMC call's bound (``limits.bmc_timeout``, else ``bmc_timeout``, else
    :data:`~bmaas.driver.DEFAULT_BMC_TIMEOUT`) and never more than what is
    left, so the last attempt cannot run past the operation's deadline.
    ``fn`` must take a ``deadline`` keyword (every driver method does).

    A fault that carries :attr:`~bmaas.faults.BMCFault.resume` (a driver's
    call of several requests, refused at one of them) is retried by calling
    the rest of the call from the refused request, rather than ``fn`` from
    its first request; attempts and backoff count per request
    (:func:`this_request`).

    When the last attempt ends in a :class:`~bmaas.faults.SlotTimeout`
    (refused inside bmaas: it says nothing about the BMC) after an earlier
    attempt's BMC fault, that BMC fault is raised: the operation's outcome is
    what the BMC last said, not bmaas's own refusal.
    """
    deadline = deadline.share(cap=limits.total)
    cap = limits.bmc_timeout or bmc_timeout or DEFAULT_BMC_TIMEOUT
    answered: BMCFault | None = None  # the BMC's last answer that was a fault
    whole: Callable[..., R] = functools.partial(fn, *args, **kwargs)
    step = whole  # what the next attempt calls
    try:
        for attempt in retrying(limits, idempotent=idempotent, deadline=deadline):
            with attempt:
                try:
                    result = step(deadline=deadline.share(cap=cap))
                except BMCFault as fault:
                    answered = fault
                    # a call of several requests goes on from the one refused
                    step = fault.resume.call if fault.resume is not None else whole
                    raise
    except SlotTimeout:
        # The last attempt was refused inside bmaas (no slot, no turn, no time
        # left): it says nothing about the BMC. What the BMC itself said last
        # is the operation's outcome, so a hung BMC's timeouts are still
        # counted when a retry of them ran out of budget locally.
        if answered is None:
            raise
        raise answered  # noqa: B904 - its own cause is the driver edge's; context: the refusal
    return result


def retry_bmc(
    limits: RetryLimits | None = None, *, idempotent: bool = True
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator form of :func:`call`: each call of the decorated function is
    one retried operation, each attempt handed a share of its ``deadline``::

        @retry_bmc(RetryLimits(total=30))
        def read_power(driver, *, deadline):
            return driver.get_power_state(deadline=deadline)

        read_power(driver, deadline=Deadline.after(60))  # the operation's, required
    """
    chosen = limits or RetryLimits()

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            given: dict[str, Any] = dict(kwargs)  # a ``deadline`` here is the operation's
            return call(chosen, fn, *args, idempotent=idempotent, **given)

        return wrapper

    return decorate


def reboot(
    driver: BMCDriver,
    limits: RetryLimits,
    *,
    action: PowerAction = PowerAction.REBOOT,
    timeout: float | None = None,
    deadline: Deadline,
) -> PowerState:
    """Restart ``driver``'s node once, safely, and wait until it is on, all by
    ``deadline``.

    REBOOT (and SOFT_REBOOT) is not idempotent, so it is never resent blindly.
    After a ``BMCTimeout`` (sent, answer lost) the power state is read first:

    * off or in transition: the restart landed; only make sure power comes on
      (ON is idempotent);
    * on: the restart may not have landed, or may already be over; finish the
      job with idempotent steps, OFF then ON. Worst case the node restarts
      twice; never an unbounded number of times;
    * unreadable: re-raise the timeout, since acting blind is the one wrong move.
    """
    if action.idempotent:
        raise ValueError(f"{action} is idempotent; use set_power_state")
    rd = RetryingDriver(driver, limits)
    try:
        call(
            limits,
            driver.request_power,
            action,
            deadline=deadline,
            bmc_timeout=driver.bmc_timeout,
            idempotent=False,
        )
    except BMCTimeout as lost:
        LOG.warning("%s: %s answer lost; reading power state before acting", driver.node, action)
        try:
            state = rd.get_power_state(deadline=deadline)
        except BMCFault:
            raise lost from None
        if state is PowerState.ON:
            rd.set_power_state(PowerAction.OFF, wait=True, timeout=timeout, deadline=deadline)
        return rd.set_power_state(PowerAction.ON, wait=True, timeout=timeout, deadline=deadline)
    return driver.wait_for_power(
        PowerState.ON, timeout=timeout, deadline=deadline, read=rd.get_power_state
    )


class RetryingDriver:
    """A driver whose every BMC request runs under a :class:`RetryLimits`,
    with each method's idempotency applied. Waiting for power polls through
    retried reads, and restarts go through :func:`reboot`.

    Every method takes the operation's ``deadline`` (a
    :class:`~bmaas.deadline.Deadline`, required); each BMC attempt gets a
    share of it of at most ``limits.bmc_timeout``, else the driver's
    ``bmc_timeout``.
    """

    def __init__(self, driver: BMCDriver, limits: RetryLimits) -> None:
        self.driver = driver
        self.limits = limits

    @property
    def node(self) -> str:
        return self.driver.node

    def _call(self, fn: Callable[..., R], *args: Any, deadline: Deadline, **kw: Any) -> R:
        return call(
            self.limits, fn, *args, deadline=deadline, bmc_timeout=self.driver.bmc_timeout, **kw
        )

    def probe(self, *, deadline: Deadline) -> BMCInfo:
        return self._call(self.driver.probe, deadline=deadline)

    def get_power_state(self, *, deadline: Deadline) -> PowerState:
        return self._call(self.driver.get_power_state, deadline=deadline)

    def set_power_state(
        self,
        action: PowerAction,
        *,
        wait: bool = False,
        timeout: float | None = None,
        deadline: Deadline,
    ) -> PowerState:
        """Like ``BMCDriver.set_power_state``; a restart with ``wait`` is a
        :func:`reboot`. ``deadline`` bounds the request and the wait together."""
        if action is PowerAction.SOFT_REBOOT and wait:
            # Two idempotent steps, each retried here, that every driver can do.
            return soft_reboot(
                lambda step, waits: self.set_power_state(
                    step, wait=waits, timeout=timeout, deadline=deadline
                )
            )
        if action is PowerAction.REBOOT and wait:
            return reboot(self.driver, self.limits, timeout=timeout, deadline=deadline)
        self._call(
            self.driver.request_power, action, deadline=deadline, idempotent=action.idempotent
        )
        if not wait:
            return self.get_power_state(deadline=deadline)
        return self.driver.wait_for_power(
            action.target, timeout=timeout, deadline=deadline, read=self.get_power_state
        )

    def get_boot_device(self, *, deadline: Deadline) -> BootSetting:
        return self._call(self.driver.get_boot_device, deadline=deadline)

    def set_boot_device(
        self, device: BootDevice, *, persistent: bool = False, deadline: Deadline
    ) -> None:
        self._call(self.driver.set_boot_device, device, persistent=persistent, deadline=deadline)

    def insert_virtual_media(self, url: str, *, deadline: Deadline) -> None:
        self._call(self.driver.insert_virtual_media, url, deadline=deadline)

    def eject_virtual_media(
        self, *, deadline: Deadline, url: str | None = None, force: bool = False
    ) -> None:
        self._call(self.driver.eject_virtual_media, deadline=deadline, url=url, force=force)

    def get_boot_progress(self, *, deadline: Deadline) -> str | None:
        return self._call(self.driver.get_boot_progress, deadline=deadline)

    def get_inventory(self, *, deadline: Deadline, detail: bool = False) -> Inventory:
        return self._call(self.driver.get_inventory, deadline=deadline, detail=detail)

    def get_firmware_inventory(self, *, deadline: Deadline) -> list[FirmwareComponent]:
        return self._call(self.driver.get_firmware_inventory, deadline=deadline)

    def get_bios(self, *, deadline: Deadline) -> BiosSettings:
        return self._call(self.driver.get_bios, deadline=deadline)

    def set_bios(
        self, changes: Mapping[str, Any], *, deadline: Deadline, apply_time: str = "OnReset"
    ) -> dict[str, Any]:
        """Idempotent (the same changes again stage the same settings)."""
        return self._call(self.driver.set_bios, changes, deadline=deadline, apply_time=apply_time)

    def verify_bios(self, expected: Mapping[str, Any], *, deadline: Deadline) -> BiosSettings:
        """One read, retried as any read; ``SettingsNotApplied`` is never retried."""
        return self._call(self.driver.verify_bios, expected, deadline=deadline)

    def update_steps(self) -> UpdateSteps:
        """The driver's update steps, each BMC request retried by the policy
        table: the image's POST as a non-idempotent request (never resent
        after a timeout), the task and inventory reads as reads. Waiting for
        a BMC asks once per ask: the wait is its own retry."""
        d = self.driver
        return d.update_steps(
            start=lambda image, *, targets, deadline: self._call(
                d.start_firmware_update, image, targets=targets, deadline=deadline, idempotent=False
            ),
            read_task=lambda task, *, deadline: self._call(
                d.get_update_task, task, deadline=deadline
            ),
            read_firmware=lambda *, deadline: self._call(
                d.get_firmware_inventory, deadline=deadline
            ),
        )

    def update_firmware(
        self,
        image_uri: str,
        *,
        targets: tuple[str, ...] = (),
        deadline: Deadline,
        bounds: UpdateBounds | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> list[FirmwareComponent]:
        """``BMCDriver.update_firmware`` on retried steps."""
        return self.driver.update_firmware(
            image_uri,
            targets=targets,
            deadline=deadline,
            bounds=bounds,
            progress=progress,
            steps=self.update_steps(),
        )

    def reset_bmc(
        self,
        *,
        deadline: Deadline,
        bounds: UpdateBounds | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> float:
        """``BMCDriver.reset_bmc``: the reset is one request, never resent
        (a timed-out reset may have restarted the BMC: the wait tells)."""
        return self.driver.reset_bmc(deadline=deadline, bounds=bounds, progress=progress)
