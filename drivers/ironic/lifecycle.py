"""One lifecycle operation of the bios, firmware and inspect interfaces:
the node's bmaas driver, retried by the policy table, under one deadline,
and leaving typed.

Ironic's own ``redfish`` bios, firmware and inspect interfaces reach the BMC
through sushy (``redfish_utils.get_system`` in every method): their own
session, retries and untyped errors, with no seam to put bmaas's driver
under them. So ``bmaas-redfish``'s implement Ironic's base interfaces on the
driver contract (:mod:`bmaas.hardware`, :mod:`bmaas.updates`) and keep of
stock what is Ironic's, not the BMC's: the step decorators and argsinfo, the
settings and firmware component tables, the inspection hooks and rules.

:func:`operate` is what each step runs in: the node's pooled driver
(:func:`bmaas.drivers.ironic.calls.session`) wrapped in a
:class:`~bmaas.retry.RetryingDriver` (each request retried by its fault class
and idempotency: a firmware image's POST is never sent twice), one
:class:`~bmaas.deadline.Deadline`, and a fault leaving as
``BmaasDriverError`` (``InvalidParameterValue``, ``UnsupportedDriverExtension``
by :data:`~bmaas.drivers.ironic.calls.IRONIC_ERRORS`) whose message starts
``[bmaas CODE retry=SCOPE]``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from bmaas.deadline import Deadline
from bmaas.drivers.ironic import calls, conf, host, info
from bmaas.drivers.ironic.power import protocol_of
from bmaas.retry import RetryingDriver

__all__ = ["Operation", "lifecycle_seconds", "operate", "properties", "validate"]


class Operation:
    """What a step holds inside :func:`operate`."""

    def __init__(self, driver: RetryingDriver, deadline: Deadline) -> None:
        self.driver = driver
        self.deadline = deadline


def lifecycle_seconds() -> float:
    """``[bmaas]lifecycle_deadline``: one firmware update or BIOS apply
    (refused options are named by :func:`operate` first)."""
    return float(conf.CONF.bmaas.lifecycle_deadline)


@contextlib.contextmanager
def operate(
    task: Any, what: str, deadline: Deadline | None = None, *, since: float | None = None
) -> Iterator[Operation]:
    """Run ``what`` on the task's node within ``deadline`` (default
    ``[bmaas]operation_deadline`` from now): see the module docstring.
    ``since`` (``time.monotonic()``): when the operation began, for an
    operation in parts (a BIOS apply lets go of the BMC while Ironic reboots
    the node), so its message says the whole operation's time."""
    budget = calls.Budget.from_conf()
    ran = calls.Ran(0.0 if since is None else time.monotonic() - since)
    deadline = deadline or Deadline.after(budget.operation)
    with (
        calls.translated(task, what, calls.BmaasDriverError, ran=ran),
        calls.session(task, protocol_of(task), budget, deadline, rt=host.runtime()) as drv,
    ):
        # the retry waits on the driver's clock (a rebooting BMC's window is time)
        limits = calls.limits(budget).replace(clock=drv.clock, sleep=drv.sleep)
        yield Operation(RetryingDriver(drv, limits), deadline)


def properties() -> dict[str, str]:
    """The driver_info keys the interfaces read (the Redfish ones)."""
    return info.properties("redfish")


def validate(task: Any) -> None:
    """driver_info complete and a driver buildable from it; no BMC call."""
    with calls.translated(task, "validate", calls.BmaasDriverError):
        calls.check(task, protocol_of(task))
