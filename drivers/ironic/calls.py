"""One BMC operation inside Ironic: its budget, its retry policy, its errors.

Every interface method goes through here, so each one:

* gets the node's bmaas driver through :func:`session` (the pool seam);
* runs under one :class:`~bmaas.deadline.Deadline` started from the
  ``[bmaas]`` options (``operation_deadline``, or ``sync_deadline`` for a
  power-state read), each BMC request capped at ``call_deadline``;
* retries only through :mod:`bmaas.retry`, by fault class;
* leaves as the Ironic exception the conductor expects, whose message starts
  with bmaas's ``[bmaas CODE retry=SCOPE]`` prefix (:mod:`bmaas.faulttext`)
  and ends with how long the whole operation took::

    [bmaas bmc_busy retry=same_node] node-3: power.set via ipmi 127.0.0.1:6231
    after 0.01s: BMC busy [0xC0]; power on gave up after 8.51s

=====================  ===========================================
bmaas fault            Ironic exception
=====================  ===========================================
InputError             InvalidParameterValue (validate, API 400)
UnsupportedOperation   UnsupportedDriverExtension
any other, power       BmaasPowerFailure (a PowerStateFailure)
any other, management  BmaasDriverError (a DriverOperationError)
=====================  ===========================================

The exceptions carry ``bmaas_code`` and ``bmaas_retry`` too, for Python
callers; everything else reads the prefix.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterator
from typing import Any

from ironic.common import exception

from bmaas import faulttext
from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver
from bmaas.faults import (
    BmaasError,
    BMCAuthError,
    BMCProtocolError,
    BMCTimeout,
    BMCUnreachable,
    InputError,
    UnclassifiedFault,
    UnsupportedOperation,
)
from bmaas.retry import RetryPolicy
from drivers.ironic import conf, pool
from drivers.ironic.info import parse_driver_info

__all__ = [
    "BmaasDriverError",
    "BmaasPowerFailure",
    "Budget",
    "label",
    "policy",
    "session",
    "translated",
]

LOG = logging.getLogger(__name__)


class BmaasPowerFailure(exception.PowerStateFailure):
    """A power operation failed with a bmaas fault (the message says which)."""

    _msg_fmt = "%(err)s"


class BmaasDriverError(exception.DriverOperationError):
    """A management operation failed with a bmaas fault (the message says which)."""

    _msg_fmt = "%(err)s"


@dataclasses.dataclass(frozen=True)
class Budget:
    """The ``[bmaas]`` options, read once per operation (they may be reloaded)."""

    call: float
    operation: float
    sync: float

    @classmethod
    def from_conf(cls) -> Budget:
        group = conf.CONF.bmaas
        return cls(group.call_deadline, group.operation_deadline, group.sync_deadline)


def label(task: Any) -> str:
    """How faults name the node: its name when it has one, else its UUID."""
    node = task.node
    return str(node.name or node.uuid)


#: faults after which the node's session is not reused (it missed an answer,
#: or its state or credentials can no longer be trusted)
DROP_ON = (BMCTimeout, BMCUnreachable, BMCProtocolError, BMCAuthError, UnclassifiedFault)


@contextlib.contextmanager
def session(task: Any, protocol: str, budget: Budget) -> Iterator[BMCDriver]:
    """The node's bmaas driver for the length of one operation.

    The one seam to the driver pool: today a per-conductor cache
    (:mod:`drivers.ironic.pool`); ``bmaas.pool.DriverPool.session`` has the
    same shape (key, build, drop on a fault in ``DROP_ON``) and can replace
    the body. ``InputError`` on bad driver_info.
    """
    node = task.node
    info = parse_driver_info(node.driver_info or {}, protocol, node=label(task))
    drv = pool.driver_for(node.uuid, label(task), protocol, info, call_deadline=budget.call)
    try:
        yield drv
    except DROP_ON:
        pool.forget(node.uuid)
        raise


def policy(deadline: Deadline, budget: Budget, *, busy_only: bool = False) -> RetryPolicy:
    """The retry policy for what is left of ``deadline``.

    ``busy_only`` (the periodic power sync): a busy BMC is retried with
    backoff, every other fault fails the read at once so that Ironic's own
    failure counting sees it.
    """
    chosen = RetryPolicy(deadline=deadline.left(), call_deadline=budget.call, max_attempts=12)
    if busy_only:
        chosen = chosen.replace(
            unreachable_attempts=1, timeout_attempts=1, internal_error_attempts=1
        )
    return chosen


def message(fault: BmaasError, what: str, elapsed: float) -> str:
    """The prefixed text an Ironic exception carries for ``fault``."""
    return f"{faulttext.format_fault(fault)}; {what} gave up after {elapsed:.2f}s"


@contextlib.contextmanager
def translated(
    task: Any, what: str, error: type[exception.IronicException] = BmaasPowerFailure
) -> Iterator[None]:
    """Turn a bmaas fault raised inside into the Ironic exception for it."""
    start = time.monotonic()
    try:
        yield
    except BmaasError as fault:
        elapsed = time.monotonic() - start
        cls: type[exception.IronicException] = error
        if isinstance(fault, InputError):
            cls = exception.InvalidParameterValue
        elif isinstance(fault, UnsupportedOperation):
            cls = exception.UnsupportedDriverExtension
        text = message(fault, what, elapsed)
        LOG.warning("bmaas: %s", text)
        raised = cls(text)
        raised.bmaas_code = fault.code  # type: ignore[attr-defined]
        raised.bmaas_retry = str(fault.retry)  # type: ignore[attr-defined]
        raise raised from fault
