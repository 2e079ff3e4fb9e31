"""Which rule a BMC call inside Ironic runs under: an operator's request, or
Ironic's periodic sync.

=============  ==========================================  ==========================
rule           what                                        budget and retry
=============  ==========================================  ==========================
``action``     a power action and every read that belongs  ``operation_deadline``, the
               to it: Ironic's read before the action      policy table's same-node
               (``node_power_action``), the wait after it,  column (busy with back-off,
               a deploy step's reads, an API call          unreachable and timeout
                                                           briefly, a rebooting BMC
                                                           through its window); always
                                                           asks the BMC
``sync``       Ironic's periodic reads: the power sync     ``sync_deadline``; a fault
               (``_sync_power_states``), power failure     the table's sync column
               recovery, the health it caches              counts fails at once (so
                                                           Ironic counts it); a BMC
                                                           known silent is not asked
                                                           (:mod:`bmaas.silence`)
=============  ==========================================  ==========================

**How a read is told apart** (:func:`rule_of`): by the lock its task holds.
Ironic's periodic tasks take a *shared* lock (``_sync_power_states``:
``acquire(..., shared=True)``; ``power failure recovery``: ``node_periodic``'s
``shared_task=True``) and upgrade it only after the read, when they must
write; every power action needs an *exclusive* one
(``node_power_action`` is ``@require_exclusive_lock``), and so do the reads
it makes before and after acting, a deploy's and an API call's. ``shared`` is
a public attribute of Ironic's ``TaskManager`` (its constructor argument),
unlike ``task._purpose``, whose text may change in any release. The one
shared-lock read before an action is Ironic's look at a parent or child
node's power (``_handle_child_power_on``/``_off``, for DPUs); it keeps the
sync rule.

**One budget for the request** (the runtime's
:class:`~bmaas.runtime.RequestDeadlines`): Ironic calls ``get_power_state``
and then ``set_power_state`` on the same task; the read opens the request's
Deadline and the action that follows it (within
:data:`~bmaas.runtime.JOIN` seconds of the read's end) continues it, so the
read, the action and its wait together stay within ``operation_deadline``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from bmaas.retry import RetryLimits

__all__ = ["MAX_ATTEMPTS", "Rule", "limits", "rule_of"]

#: attempts in all of one conductor call (a rebooting BMC's window is time,
#: not a count: :class:`bmaas.retry.stop_after_attempts`)
MAX_ATTEMPTS = 12


class Rule(StrEnum):
    """The rule a BMC call inside Ironic runs under (the module's table)."""

    ACTION = "action"
    SYNC = "sync"


def rule_of(task: Any) -> Rule:
    """``sync`` for a task on a shared lock (Ironic's periodic reads), else
    ``action`` (see the module docstring for why the lock)."""
    return Rule.SYNC if getattr(task, "shared", False) is True else Rule.ACTION


def limits(rule: Rule, *, call: float, operation: float) -> RetryLimits:
    """The operation retry for one conductor call under ``rule``: each BMC
    request capped at ``call`` seconds; the total is the Deadline the call
    passes. An action asks a BMC that gives no answer again for as long as
    its budget (``reboot_window``): a BMC rebooting for a firmware update
    comes back within it, a dead one fails at the deadline, typed."""
    if rule is Rule.SYNC:
        return RetryLimits(total=operation, bmc_timeout=call, max_attempts=MAX_ATTEMPTS, sync=True)
    return RetryLimits(
        total=operation, bmc_timeout=call, max_attempts=MAX_ATTEMPTS, reboot_window=operation
    )
