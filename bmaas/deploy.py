"""Deploy one node: the steps between "claimed" and "active".

1. **check**: the BMC answers, accepts our credentials, and knows the power
   state (``UNKNOWN`` is a fault here, never "off");
2. **boot device**: virtual media with the image when the driver offers it,
   else the node's ``deploy_boot_device`` (``driver_info``: PXE by default,
   or ``cdrom`` for a disc put in the drive outside bmaas -- the VM lab's
   IPMI nodes), once -- or persistent where the node's BMC is known to keep a
   one-time override as a persistent one (:attr:`Quirk.BOOT_ONCE_KEPT_PERSISTENT`,
   like Ironic's ``force_persistent_boot_device``; ``persistent_boot``). A
   BMC that reads back the right device with another persistence is a
   quirk the driver records, never a ``BootFailure``; the finalize step
   restores disk boot either way;
3. **power**: on, or a reboot if the node was already on (a cold cycle, off
   then on, where the BMC took the boot device while the node was on and
   shows it only after a cold start: :attr:`Quirk.BOOT_READS_RUNNING`,
   stock virtualbmc, whose reset is a warm one; the boot device is then
   read back and must show). A reboot's target
   (on) is the state the node already reads, so reading "on" proves nothing:
   the step waits for *evidence* that the restart happened — power seen
   leaving "on" and coming back, or BootProgress changing where the BMC
   reports it — or, where the protocol shows neither (IPMI's chassis status
   reads on all through a hard reset), waits out ``restart_grace``;
4. **settle**: the node must stay on for ``settle`` seconds (a node that falls
   back off is a ``BootFailure``) and, where the BMC reports ``BootProgress``
   (Redfish), reach ``OSRunning`` within ``boot_timeout``;
5. **ready**: an optional hook ("is the agent up?", an SSH check) is asked
   until it says yes; whatever it raises becomes a ``BootFailure``;
6. **finalize**: boot from disk from now on, eject the media. On a BMC that
   reads the boot device from the running machine
   (:attr:`Quirk.BOOT_READS_RUNNING`) the read-back is checked against the
   device the node runs with; the disk setting shows at its next cold start,
   which the report says (``unverified_boot``) and the log warns of.

With ``settings.to_disk`` the image is a *writer* (an installer, or Ironic's
direct deploy without an agent to talk to): it writes the machine's disk and
powers the machine off when done. Then the steps are check, boot device,
power, **write** (the machine must power itself off within
``write_timeout``: that is the writer's word that the disk is written),
finalize (disk boot, persistent, and the eject, while the machine is off, so
the next start is a cold one and the read-back is the real setting), **disk
boot** (power on, then the settle above: the machine runs from its disk) and
ready. Nothing here can tell *what* the disk holds: a ready hook that asks
the running machine (the VM lab reads its serial console for ``via=disk``)
is how a deploy proves the written image booted.

Every BMC request goes through :class:`~bmaas.retry.RetryingDriver`, so busy
or briefly unreachable BMCs are retried here and only faults that mean "this
node" escape. The whole deploy runs under one :class:`~bmaas.deadline.Deadline`
(``deadline=``, required: the request's), of which it takes a share of at
most ``settings.deadline`` seconds; each step hands that same Deadline to
every BMC call, retry and wait in it (each call then takes its own share, at
most ``bmc_timeout``), so a step never gives a call more than the deploy has
left and a BMC that hangs at any point ends the deploy by its deadline.
Steps' own limits (``power_timeout``, ``settle``, ``boot_timeout``) are what
the *hardware* is allowed, never a budget re-created in seconds. A fault
that escapes carries a note naming the step it happened in.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from enum import StrEnum
from typing import Literal, TypeVar

from bmaas.deadline import Deadline
from bmaas.driver import (
    BMCDriver,
    BootDevice,
    BootSetting,
    Capability,
    PowerAction,
    PowerState,
    Quirk,
)
from bmaas.faults import (
    BmaasError,
    BMCProtocolError,
    BootFailure,
    PowerFailure,
    UnsupportedOperation,
)
from bmaas.poll import PENDING, Pending, poll_until
from bmaas.retry import RetryingDriver, RetryLimits

__all__ = [
    "OS_RUNNING",
    "DeployReport",
    "DeploySettings",
    "ReadyHook",
    "Step",
    "WillNotBeReady",
    "deploy_node",
    "undeploy_node",
]

LOG = logging.getLogger(__name__)

T = TypeVar("T")

#: Redfish ``BootProgress.LastState`` once the operating system runs
OS_RUNNING = "OSRunning"

#: "is this node ready?" - called with the node name and its driver until it
#: returns True; exceptions are wrapped in a BootFailure
ReadyHook = Callable[[str, BMCDriver], bool]


class WillNotBeReady(Exception):
    """A ready hook's word that the node will never be ready this boot (its
    console printed a kernel panic): the deploy's ``BootFailure`` at once,
    with this message, instead of after ``ready_timeout``. The hook is the
    user's, so this is a plain exception it can raise without a node's
    context; the deploy adds that."""


class Step(StrEnum):
    CHECK = "check"
    BOOT_DEVICE = "boot_device"
    POWER = "power"
    SETTLE = "settle"
    READY = "ready"
    FINALIZE = "finalize"
    WRITE = "write"
    DISK_BOOT = "disk_boot"


@dataclasses.dataclass(frozen=True)
class DeploySettings:
    """Limits of one deploy, in seconds."""

    #: an image to boot by virtual media (PXE when None or unsupported)
    image_url: str | None = None
    #: power must land within this
    power_timeout: float = 60.0
    #: the node must stay on this long after power-on
    settle: float = 10.0
    #: BootProgress (where reported) must reach the OS this long after power-on
    boot_timeout: float = 180.0
    #: the ready hook must say yes within this
    ready_timeout: float = 300.0
    ready_interval: float = 5.0
    #: seconds between reads while settling
    poll_interval: float = 1.0
    #: after a reboot of a node that was on: how long to wait for evidence of
    #: the restart (power leaving on, BootProgress changing) before trusting a
    #: BMC that shows none (IPMI's hard reset reads on all through)
    restart_grace: float = 5.0
    #: the whole deploy, every step included
    deadline_s: float = 600.0
    #: ask for a persistent boot override (Ironic's force_persistent_boot_device):
    #: None = only where the BMC is known to keep one-time overrides persistent
    #: (a Quirk of the driver, from the node's record or seen this deploy)
    persistent_boot: bool | None = None
    #: the image writes the disk and powers the machine off; then boot from disk
    to_disk: bool = False
    #: with ``to_disk``: the writer must power the machine off within this
    #: many seconds of power-on
    write_timeout: float = 300.0


@dataclasses.dataclass(frozen=True)
class DeployReport:
    node: str
    #: "vmedia", "pxe" or "cdrom" (``driver_info.deploy_boot_device``)
    boot_method: str
    #: the last BootProgress seen, when the BMC reports one
    boot_progress: str | None
    #: seconds each step took
    steps: dict[str, float]
    #: a boot setting the BMC took while the node ran and shows only after
    #: its next cold start (:attr:`Quirk.BOOT_READS_RUNNING`), e.g.
    #: ``"disk (persistent)"``; None when every setting read back
    unverified_boot: str | None = None


class _DeployShare:
    """The deploy's share of the caller's :class:`~bmaas.deadline.Deadline`,
    read step by step: the Deadline every call in a step is handed (never a
    number of seconds), and how long a step may wait."""

    def __init__(
        self,
        node: str,
        limits: RetryLimits,
        deadline: Deadline,
        total: float,
        check: Callable[[Step], None] | None = None,
    ) -> None:
        self.node = node
        self.limits = limits
        self.clock = deadline.clock
        self.deadline = deadline
        self.total = total
        #: the caller's ``before_step`` hook, also run whenever a step asks how
        #: long it has left (before each wait), so a lost lease or a request to
        #: roll back is seen within one poll, not only between steps
        self.check = check

    def left(self, step: Step) -> float:
        if self.check is not None:
            self.check(step)
        remaining = self.deadline.left()
        if remaining <= 0:
            raise self.exceeded(step)
        return remaining

    def exceeded(self, step: Step) -> BootFailure:
        return BootFailure(
            f"deploy deadline of {self.total:g}s exceeded before {step}",
            node=self.node,
            operation=f"deploy.{step}",
        )

    def limit(self, step: Step, wanted: float) -> float:
        return min(wanted, self.left(step))

    def poll(
        self, step: Step, interval: float, predicate: Callable[[], T | Literal[Pending.PENDING]]
    ) -> T:
        """Ask ``predicate`` every ``interval`` seconds until it answers; the
        step's check (and the deadline) before each wait, which sleeps
        through the retry limits' (interruptible) sleep."""
        return poll_until(
            predicate,
            self.deadline,
            interval,
            sleep=self.limits.sleep,
            spent=lambda: self.exceeded(step),
            before_wait=lambda: self.left(step),
        )


def deploy_node(
    driver: BMCDriver,
    *,
    settings: DeploySettings = DeploySettings(),
    limits: RetryLimits | None = None,
    ready: ReadyHook | None = None,
    before_step: Callable[[Step], None] | None = None,
    deadline: Deadline,
) -> DeployReport:
    """Deploy ``driver``'s node; raise the typed fault that stopped it.

    The deploy ends by ``deadline`` (the request's; required: there is no
    default budget below the public edge) and never takes more than
    ``settings.deadline`` seconds of it. ``before_step`` is called before each step
    and before each wait inside one (the provisioner checks its leases and
    the cancellation token there; whatever it raises stops the deploy).
    """
    limits = limits or RetryLimits()
    total = min(settings.deadline_s, deadline.left())
    if total <= 0:  # the request's budget went before this node's turn: nothing was asked
        raise driver.slot_timeout(
            "no time left to deploy: the request's deadline was spent before this node's turn",
            "deploy",
            None,
        )
    share = _DeployShare(
        driver.node, limits, deadline.share(cap=settings.deadline_s), total, before_step
    )
    run = _Deploy(driver, settings, limits, share, ready, before_step)
    run.step(Step.CHECK, run.check)
    run.step(Step.BOOT_DEVICE, run.boot_device)
    run.step(Step.POWER, run.power)
    if settings.to_disk:
        run.step(Step.WRITE, run.await_written)
        run.step(Step.FINALIZE, run.finalize)
        run.step(Step.DISK_BOOT, run.disk_boot)
        if ready is not None:
            run.step(Step.READY, run.ready_check)
    else:
        run.step(Step.SETTLE, run.settle)
        if ready is not None:
            run.step(Step.READY, run.ready_check)
        run.step(Step.FINALIZE, run.finalize)
    return DeployReport(driver.node, run.method, run.progress, run.timings, run.unverified)


class _Deploy:
    """One deploy's steps (:func:`deploy_node`) and what they found."""

    def __init__(
        self,
        driver: BMCDriver,
        settings: DeploySettings,
        limits: RetryLimits,
        share: _DeployShare,
        ready: ReadyHook | None,
        before_step: Callable[[Step], None] | None,
    ) -> None:
        self.driver, self.settings, self.limits = driver, settings, limits
        self.share, self.dl = share, share.deadline
        self.ready, self.before_step = ready, before_step
        self.timings: dict[str, float] = {}
        self.power_state: PowerState | None = None
        self.method = "pxe"
        self.progress: str | None = None
        self.unverified: str | None = None

    def step(self, step: Step, body: Callable[[RetryingDriver], None]) -> None:
        if self.before_step is not None:
            self.before_step(step)
        clock = self.limits.clock
        start = clock()
        if self.dl.left() <= 0:
            # Earlier steps (a slow but answering BMC, a loaded client) spent
            # the budget: nothing is asked of the node for this step, and
            # nothing it did is counted against it (SlotTimeout's taxonomy:
            # the deadline spent before anything was sent). A wait inside a
            # step that runs out is the node's: BootFailure, as before.
            raise self.driver.slot_timeout(
                f"no time left for the deploy's {step} step: the request's deadline "
                "was spent by the steps before it",
                f"deploy.{step}",
                None,
            )
        rd = RetryingDriver(self.driver, self.limits)
        try:
            body(rd)
        except BmaasError as exc:
            exc.add_note(f"deploy step: {step}")
            raise
        finally:
            self.timings[str(step)] = round(clock() - start, 3)

    def check(self, rd: RetryingDriver) -> None:
        info = rd.probe(deadline=self.dl)
        self.power_state = info.power_state
        if info.power_state is PowerState.UNKNOWN:
            raise self.driver.fault(
                BMCProtocolError, "the BMC does not say whether power is on", operation="probe"
            )

    def boot_device(self, rd: RetryingDriver) -> None:
        driver, settings, dl = self.driver, self.settings, self.dl
        persistent = settings.persistent_boot
        if persistent is None:
            persistent = Quirk.BOOT_ONCE_KEPT_PERSISTENT in driver.quirks
        if settings.image_url and driver.supports(Capability.VIRTUAL_MEDIA):
            rd.insert_virtual_media(settings.image_url, deadline=dl)
            rd.set_boot_device(BootDevice.CDROM, persistent=persistent, deadline=dl)
            self.method = "vmedia"
        else:
            device = BootDevice(driver.info.deploy_boot_device or BootDevice.PXE)
            rd.set_boot_device(device, persistent=persistent, deadline=dl)
            self.method = str(device)

    def power(self, rd: RetryingDriver) -> None:
        driver, settings, share, dl = self.driver, self.settings, self.share, self.dl
        timeout = share.limit(Step.POWER, settings.power_timeout)
        if self.power_state not in (PowerState.ON, PowerState.POWERING_ON):
            rd.set_power_state(PowerAction.ON, wait=True, timeout=timeout, deadline=dl)
            return
        pending = driver.unverified_boot
        if pending is not None:
            # The BMC took the boot device while the node ran and shows it
            # only after a cold start (stock vbmc: its reset is a warm one,
            # which boots the running definition again): off, then on, then
            # the device must read back.
            rd.set_power_state(PowerAction.OFF, wait=True, timeout=timeout, deadline=dl)
            timeout = share.limit(Step.POWER, settings.power_timeout)
            rd.set_power_state(PowerAction.ON, wait=True, timeout=timeout, deadline=dl)
            driver.check_boot_readback(pending, rd.get_boot_device(deadline=dl))
            return
        # The target (on) is where the node already is: reading "on" proves
        # nothing. The safe reboot (never resent blindly) first, then evidence.
        before = _progress(driver, rd, dl)
        since = self.limits.clock()
        rd.set_power_state(PowerAction.REBOOT, wait=True, timeout=timeout, deadline=dl)
        _await_restart(driver, rd, settings, share, since=since, progress_before=before)

    def settle(self, rd: RetryingDriver) -> None:
        self.progress = _settle(self.driver, rd, self.settings, self.share)

    def await_written(self, rd: RetryingDriver) -> None:
        """The writer's word that the disk is written: the machine powers
        itself off. Still on after ``write_timeout`` is a ``BootFailure``:
        the writer hung, or the image was not one."""
        clock, since = self.share.clock, self.share.clock()
        limit = self.share.limit(Step.WRITE, self.settings.write_timeout)

        def powered_off() -> bool | Literal[Pending.PENDING]:
            if rd.get_power_state(deadline=self.dl) is PowerState.OFF:
                return True
            waited = clock() - since
            if waited + self.settings.poll_interval > limit:
                raise self.driver.fault(
                    BootFailure,
                    f"still on {waited:.0f}s after power-on: the image did not write the "
                    "disk and power the machine off (is it a writer?)",
                    operation="deploy.write",
                    elapsed=waited,
                )
            return PENDING

        self.share.poll(Step.WRITE, self.settings.poll_interval, powered_off)
        self.power_state = PowerState.OFF

    def disk_boot(self, rd: RetryingDriver) -> None:
        """Power on from the disk the writer wrote, and settle there."""
        timeout = self.share.limit(Step.DISK_BOOT, self.settings.power_timeout)
        rd.set_power_state(PowerAction.ON, wait=True, timeout=timeout, deadline=self.dl)
        self.progress = _settle(self.driver, rd, self.settings, self.share)

    def ready_check(self, rd: RetryingDriver) -> None:
        assert self.ready is not None
        _await_ready(self.driver, self.ready, self.settings, self.share)

    def finalize(self, rd: RetryingDriver) -> None:
        rd.set_boot_device(BootDevice.DISK, persistent=True, deadline=self.dl)
        pending = self.driver.unverified_boot
        if pending is not None:
            self.unverified = _setting_text(pending)
            LOG.warning(
                "%s: %s boot set while the node runs; the BMC shows it only after the node's "
                "next cold start (%s): read back as the running device, not yet verified",
                self.driver.node,
                self.unverified,
                Quirk.BOOT_READS_RUNNING,
            )
        if self.method == "vmedia":
            # the deploy's own image, never another tool's media (issue 47)
            rd.eject_virtual_media(deadline=self.dl, url=self.settings.image_url)


def _setting_text(setting: BootSetting) -> str:
    return f"{setting.device} ({'persistent' if setting.persistent else 'once'})"


def _progress(driver: BMCDriver, rd: RetryingDriver, deadline: Deadline) -> str | None:
    """BootProgress where the BMC reports it, else None."""
    if not driver.supports(Capability.BOOT_PROGRESS):
        return None
    try:
        return rd.get_boot_progress(deadline=deadline)
    except UnsupportedOperation:
        return None


def _await_restart(
    driver: BMCDriver,
    rd: RetryingDriver,
    settings: DeploySettings,
    share: _DeployShare,
    *,
    since: float,
    progress_before: str | None,
) -> str:
    """After a reboot of a node that was on, return once there is evidence it
    restarted and it reads on again; says which evidence (``"power"``,
    ``"progress"``, or ``"grace"`` when the BMC showed none for
    ``restart_grace`` seconds since the reboot was sent). ``PowerFailure`` if
    it is not back on within ``power_timeout``.

    A BMC that showed the off phase only while the safe reboot was waiting,
    and reports no BootProgress, costs the grace: rather wait a few seconds
    than settle on the old boot (the issue-14 bug: a settle that then saw the
    reset's off phase and fenced a good node)."""
    clock, deadline = share.clock, share.deadline
    left_on = False

    def restarted() -> str | Literal[Pending.PENDING]:
        nonlocal left_on
        state = rd.get_power_state(deadline=deadline)
        waited = clock() - since
        if state is not PowerState.ON:
            left_on = True
        else:
            if left_on:
                return "power"
            progress = _progress(driver, rd, deadline)
            if progress is not None and progress != progress_before:
                return "progress"
            if waited >= settings.restart_grace:
                LOG.info(
                    "%s: no sign of the restart after %.1fs (the BMC reads on all through); "
                    "going on",
                    driver.node,
                    waited,
                )
                return "grace"
        if waited >= settings.power_timeout:
            raise driver.fault(
                PowerFailure,
                f"power is {state}, not on, {waited:.0f}s after the reboot",
                operation="deploy.power",
                elapsed=waited,
            )
        return PENDING

    return share.poll(Step.POWER, settings.poll_interval, restarted)


def _settle(
    driver: BMCDriver, rd: RetryingDriver, settings: DeploySettings, share: _DeployShare
) -> str | None:
    """Watch the node for the settle window: it must stay on and, where
    reported, BootProgress must reach the OS. Returns the last progress."""
    clock, deadline = share.clock, share.deadline
    since = clock()
    reports_progress = driver.supports(Capability.BOOT_PROGRESS)
    progress: str | None = None

    def settled() -> str | Literal[Pending.PENDING] | None:
        nonlocal reports_progress, progress
        state = rd.get_power_state(deadline=deadline)
        up_for = clock() - since
        if state is not PowerState.ON:
            raise driver.fault(
                BootFailure,
                f"the node fell back to {state} {up_for:.1f}s after power-on",
                operation="deploy.settle",
                elapsed=up_for,
            )
        if reports_progress:
            try:
                progress = rd.get_boot_progress(deadline=deadline)
            except UnsupportedOperation:
                reports_progress = False  # this BMC lacks it after all: settle on power alone
        booted = progress is None or progress == OS_RUNNING
        if up_for >= settings.settle and booted:
            return progress
        if up_for >= settings.boot_timeout:
            raise driver.fault(
                BootFailure,
                f"BootProgress still {progress!r} {up_for:.0f}s after power-on",
                operation="deploy.settle",
                elapsed=up_for,
            )
        return PENDING

    return share.poll(Step.SETTLE, settings.poll_interval, settled)


def _await_ready(
    driver: BMCDriver, ready: ReadyHook, settings: DeploySettings, share: _DeployShare
) -> None:
    clock = share.clock
    start = clock()
    limit = share.limit(Step.READY, settings.ready_timeout)

    def is_ready() -> bool | Literal[Pending.PENDING]:
        try:
            if ready(driver.node, driver):
                return True
        except Exception as exc:  # the hook is the user's code: wrap, never leak
            said = isinstance(exc, WillNotBeReady)  # its word, not its failure
            raise driver.fault(
                BootFailure,
                f"will not be ready: {exc}"
                if said
                else f"ready check failed: {type(exc).__name__}: {exc}",
                operation="deploy.ready",
                elapsed=clock() - start,
            ) from exc
        waited = clock() - start
        if waited + settings.ready_interval > limit:
            raise driver.fault(
                BootFailure,
                f"not ready {waited:.0f}s after boot",
                operation="deploy.ready",
                elapsed=waited,
            )
        return PENDING

    share.poll(Step.READY, settings.ready_interval, is_ready)


def undeploy_node(
    driver: BMCDriver,
    *,
    limits: RetryLimits | None = None,
    power_timeout: float = 60.0,
    deadline: Deadline,
) -> None:
    """Power the node off and eject any virtual media (every CD slot's,
    whoever inserted it: the node is released). Idempotent. Ends by
    ``deadline`` (required), every request, retry and wait included;
    ``power_timeout`` is what the hardware is allowed to reach off.

    A BMC that cannot eject (``UnsupportedOperation``: no CD slot, or one its
    service links but does not serve) has nothing bmaas could have inserted
    there: the node is off, the eject is skipped with a warning, and the
    undeploy succeeds -- a capability the BMC lacks is no reason to fence it."""
    rd = RetryingDriver(driver, limits or RetryLimits())
    rd.set_power_state(PowerAction.OFF, wait=True, timeout=power_timeout, deadline=deadline)
    if driver.supports(Capability.VIRTUAL_MEDIA):
        try:
            # force: the deploy's insert was another process's (another
            # driver's record), and the node is being given back empty
            rd.eject_virtual_media(deadline=deadline, force=True)
        except UnsupportedOperation as exc:
            LOG.warning("%s: powered off; virtual media not ejected: %s", driver.node, exc)
