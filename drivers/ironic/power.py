"""``bmaas`` power interface: bounded, typed, and sync-aware.

Differences from bmaas's own driver contract, because of how Ironic uses it:

* **Reads never deadlock recovery.** Ironic reads the power state before
  every action, during sync and during recovery. bmaas's IPMI driver raises
  ``PowerFailure`` on a read when the BMC latches a power fault; inside
  Ironic that would block the very chassis control that clears it. Here a
  read that hits a latched fault reads the state anyway (``probe``), reports
  the fault as a node history event (type ``monitoring``, not an error) and a
  conductor warning, and returns the state so Ironic can act.
* **An action's reads are the action's.** Ironic reads power through one
  entry point, :meth:`BmaasPower.get_power_state`, for its periodic sync and
  before every action alike; which rule a read runs under is decided by the
  lock its task holds (:mod:`bmaas.drivers.ironic.rules`: shared for
  Ironic's periodic reads, exclusive for everything that acts):

  - an **action's** read (the one ``node_power_action`` makes before acting,
    a deploy step's, an API call's) opens the request's Deadline of
    ``[bmaas]operation_deadline``, which the action that follows continues
    (the read, the request and the wait after it share one budget), and is
    retried by the policy table's same-node column: busy with back-off,
    unreachable and timeout briefly, a BMC that gives no answer through a
    reboot window as long as the budget. It always asks the BMC;
  - a **sync** read (``_sync_power_states``, power failure recovery) runs
    under ``[bmaas]sync_deadline``: a fault the table's ``sync`` column does
    not count (busy) is retried within it, any fault it counts fails the read
    at once, so ``[conductor]power_state_sync_max_retries`` counts passes
    whose read failed for a reason other than "busy"; a BMC known silent
    (:mod:`bmaas.silence`) fails it without being asked. For a
    ``bmaas-redfish`` node whose Redfish service streams its events, it is
    answered from the stream while that is up, and the BMC is read only
    as the safety net (:mod:`bmaas.drivers.ironic.streams`).

  Nothing reads Ironic's private ``task._purpose``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from ironic.common import exception, states
from ironic.conductor import utils as conductor_utils
from ironic.conf import CONF as IRONIC_CONF
from ironic.drivers import base

from bmaas import faulttext, retry
from bmaas.deadline import Deadline
from bmaas.driver import (
    BMCDriver,
    Capability,
    Operation,
    PowerAction,
    PowerState,
    soft_reboot,
)
from bmaas.drivers.ironic import calls, host, info, news, rules
from bmaas.drivers.ironic.powerstates import ironic_state
from bmaas.faults import PowerFailure, PowerPending

__all__ = ["PROTOCOLS", "BmaasPower", "ironic_state", "protocol_of"]

LOG = logging.getLogger(__name__)

#: which bmaas protocol each bmaas hardware type speaks
PROTOCOLS: Final = {"bmaas-ipmi": "ipmi", "bmaas-redfish": "redfish"}

_ACTIONS: Final = {
    states.POWER_ON: PowerAction.ON,
    states.POWER_OFF: PowerAction.OFF,
    states.REBOOT: PowerAction.REBOOT,
    states.SOFT_POWER_OFF: PowerAction.SOFT_OFF,
    states.SOFT_REBOOT: PowerAction.SOFT_REBOOT,
}


def protocol_of(task: Any) -> str:
    """ "ipmi" or "redfish", from the node's hardware type."""
    try:
        return PROTOCOLS[task.node.driver]
    except KeyError:
        raise exception.InvalidParameterValue(
            f"the bmaas interfaces need hardware type bmaas-ipmi or bmaas-redfish, "
            f"not {task.node.driver!r}"
        ) from None


def read_power(
    task: Any, drv: BMCDriver, budget: calls.Budget, *, deadline: Deadline, rule: rules.Rule
) -> PowerState:
    """One power-state read by ``deadline`` under ``rule`` (see the module doc)."""
    try:
        return calls.call(deadline, budget, drv.get_power_state, rule=rule)
    except PowerFailure as fault:
        if fault.operation != Operation.POWER_GET:
            raise
        seen = calls.call(deadline, budget, drv.probe, rule=rule)
        report_latched_fault(task, fault)
        return seen.power_state


def report_latched_fault(task: Any, fault: PowerFailure) -> None:
    """Tell the operator about a latched power fault without failing the read."""
    text = faulttext.format_fault(fault) + "; power state read anyway so Ironic can act"
    LOG.warning("bmaas: %s", text)
    try:
        conductor_utils.node_history_record(task.node, event=text, event_type="monitoring")
    except Exception:  # history is advisory; the read must not fail for it
        LOG.debug("could not record node history for %s", task.node.uuid, exc_info=True)


class BmaasPower(base.PowerInterface):
    """Power through bmaas's IPMI or Redfish driver (by hardware type)."""

    def get_properties(self) -> dict[str, str]:
        return {**info.properties("ipmi"), **info.properties("redfish")}

    def validate(self, task: Any) -> None:
        """Check driver_info; no BMC call (Ironic validates often)."""
        with calls.translated(task, "validate"):
            calls.check(task, protocol_of(task))

    def get_power_state(self, task: Any) -> str:
        """Ironic's entry point for every power read it makes. A periodic
        read (a shared lock: the sync, power failure recovery) runs under the
        sync rule and ``[bmaas]sync_deadline``, and for a ``bmaas-redfish``
        node whose service streams its events it is answered from the
        stream while that is up (:mod:`bmaas.drivers.ironic.streams`: the
        BMC read once its last read is ``[bmaas]events_safety_interval``
        old); any other (an
        exclusive lock: the read before an action, a deploy step's) is the
        action's, under the request's Deadline
        (``[bmaas]operation_deadline``, continued by the action that
        follows) and the action rule, and always asks the BMC
        (:mod:`bmaas.drivers.ironic.rules`)."""
        budget = calls.Budget.from_conf()
        rule = rules.rule_of(task)
        protocol = protocol_of(task)
        rt = host.runtime()
        streams = host.streams(rt) if protocol == "redfish" and rule is rules.Rule.SYNC else None
        token = None
        if streams is not None:
            with calls.translated(task, "power state read"):
                found = host.answer(streams, task)
            if found is not None:
                return ironic_state(found.power)
            token = streams.reading(str(task.node.uuid))
        if rule is rules.Rule.SYNC:
            deadline = Deadline.after(budget.sync)
        else:
            deadline = rt.requests.open(task, budget.operation)
        try:
            with (
                calls.translated(task, "power state read"),
                calls.session(
                    task, protocol, budget, deadline, read=rule is rules.Rule.SYNC, rt=rt
                ) as drv,
            ):
                state = read_power(task, drv, budget, deadline=deadline, rule=rule)
        finally:
            rt.requests.idle(task)
        if streams is not None:
            streams.learned(str(task.node.uuid), token, state)
        return ironic_state(state)

    def set_power_state(self, task: Any, power_state: str, timeout: int | None = None) -> None:
        """Ironic's entry point for a power action: the whole action (the
        read Ironic made just before it, reads, request, wait) under one
        Deadline of ``[bmaas]operation_deadline``."""
        action = _ACTIONS.get(power_state)
        if action is None:
            raise exception.InvalidParameterValue(f"unsupported power state {power_state!r}")
        budget = calls.Budget.from_conf()
        rt = host.runtime()
        deadline = rt.requests.open(task, budget.operation)
        wait = float(timeout or IRONIC_CONF.conductor.power_state_change_timeout)
        streams = host.streams(rt) if protocol_of(task) == "redfish" else None
        # the whole operation's time, the read before the action included
        ran = calls.Ran(budget.operation - deadline.left())
        try:
            with (
                calls.translated(task, f"power {action}", ran=ran),
                calls.session(task, protocol_of(task), budget, deadline, rt=rt) as drv,
            ):
                try:
                    if not action.idempotent:
                        self._restart(task, drv, budget, deadline, action, wait)
                    else:
                        _act(drv, budget, deadline, action, wait)
                except PowerPending as pending:
                    _accepted(task, action, pending, ran.seconds())
        finally:
            rt.requests.close(task)
            if streams is not None:  # its next periodic read asks the BMC
                streams.acted(str(task.node.uuid))

    @news.periodic
    def record_event_news(self, manager: Any, context: Any) -> None:
        """Ironic's periodic: what the event streams hear, recorded on the
        nodes as it comes instead of at the next power-sync pass
        (:mod:`bmaas.drivers.ironic.news`), each run watching for
        ``[bmaas]events_apply_interval`` seconds. No BMC request; nothing
        done while no news comes."""
        rt = host.runtime()
        news.watch(context, host.streams(rt), news.interval())

    def reboot(self, task: Any, timeout: int | None = None) -> None:
        self.set_power_state(task, states.REBOOT, timeout)

    def get_supported_power_states(self, task: Any) -> list[str]:
        supported = [states.POWER_ON, states.POWER_OFF, states.REBOOT]
        budget = calls.Budget.from_conf()
        with (
            calls.translated(task, "supported power states"),
            # no BMC call: the session only builds the driver
            calls.session(
                task, protocol_of(task), budget, Deadline.after(budget.call), rt=host.runtime()
            ) as drv,
        ):
            if drv.supports(Capability.SOFT_POWER):
                supported += [states.SOFT_POWER_OFF, states.SOFT_REBOOT]
        return supported

    @staticmethod
    def _restart(
        task: Any,
        drv: BMCDriver,
        budget: calls.Budget,
        deadline: Deadline,
        action: PowerAction,
        wait: float,
    ) -> None:
        """Ironic expects a reboot of an off node to power it on. The first
        read is the operation's (``deadline``), not a sync read of its own."""
        state = read_power(task, drv, budget, deadline=deadline, rule=rules.Rule.ACTION)
        if state is PowerState.OFF:
            _act(drv, budget, deadline, PowerAction.ON, wait)
        elif action is PowerAction.SOFT_REBOOT:
            soft_reboot(lambda step, _waits: _act(drv, budget, deadline, step, wait))
        else:
            retry.reboot(
                drv, calls.limits(budget, rules.Rule.ACTION), timeout=wait, deadline=deadline
            )


def _act(
    drv: BMCDriver, budget: calls.Budget, deadline: Deadline, action: PowerAction, wait: float
) -> PowerState:
    """Request one idempotent power action and wait for its target state,
    every request and read retried within what is left of ``deadline``."""
    calls.call(deadline, budget, drv.request_power, action, idempotent=True)

    def read(*, deadline: Deadline) -> PowerState:
        return calls.call(deadline, budget, drv.get_power_state)

    # The hardware's window is Ironic's power_state_change_timeout from the
    # moment the BMC took the request, whatever the operation spent before
    # (a BMC reboot): a window cut to what the budget had left blamed the
    # node for bmaas's budget (issue 48: power_failure 2 s after a power-on
    # accepted 53 s into 60). The budget ending first is PowerPending.
    return drv.wait_for_power(action.target, timeout=wait, deadline=deadline, read=read)


def _accepted(task: Any, action: PowerAction, pending: PowerPending, ran: float) -> None:
    """The BMC took the action and the budget ended before its state was
    read: the action is under way, not failed. Returning lets Ironic record
    the target state, so neither its record nor its power sync (with
    ``force_power_state_during_sync``) undoes what the BMC is doing; the
    sync's next read says what became of it. Told as a warning and a node
    history event, with how long the whole operation ran."""
    text = (
        f"{faulttext.format_fault(pending)}; power {action} was taken by the BMC and is "
        f"not confirmed after {ran:.2f}s (the whole operation): Ironic records "
        f"{action.target}, its power sync reads what became of it"
    )
    LOG.warning("bmaas: %s", text)
    try:
        conductor_utils.node_history_record(task.node, event=text, event_type="monitoring")
    except Exception:  # history is advisory; the action stands
        LOG.debug("could not record node history for %s", task.node.uuid, exc_info=True)
