"""One BMC operation inside Ironic: its deadline, its retry limits, its errors.

Every interface method goes through here, so each one:

* gets the node's bmaas driver through :func:`session`, from the pool of
  the conductor's runtime (:mod:`bmaas.drivers.ironic.host`), which the
  interface entry point passes down;
* runs under one :class:`~bmaas.deadline.Deadline` started from the
  ``[bmaas]`` options (``operation_deadline`` for an operator's request, its
  reads included; ``sync_deadline`` for Ironic's periodic reads: the rules
  are :mod:`bmaas.drivers.ironic.rules`), each BMC request capped at
  ``call_deadline``;
* retries only through :mod:`bmaas.retry`, by fault class;
* leaves as the Ironic exception the conductor expects, whose message starts
  with bmaas's ``[bmaas CODE retry=SCOPE]`` prefix (:mod:`bmaas.faulttext`)
  and ends with how long the whole operation took::

    [bmaas bmc_busy retry=same_node] node-3: power.set via ipmi 127.0.0.1:6231
    after 0.01s: BMC busy [0xC0]; power on gave up after 8.51s

=====================  ===========================================
bmaas fault            Ironic exception
=====================  ===========================================
MissingDriverInfo      MissingParameterValue (validate, API 400):
                       every problem a required driver_info key missing
InputError             InvalidParameterValue (validate, API 400); bad
                       driver_info names every problem, one a line
UnsupportedOperation   UnsupportedDriverExtension
any other, power       BmaasPowerFailure (a PowerStateFailure)
any other, management  BmaasDriverError (a DriverOperationError)
=====================  ===========================================

The exceptions carry ``bmaas_code`` and ``bmaas_retry`` too, for Python
callers; everything else reads the prefix.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, TypeVar

from ironic.common import exception

from bmaas import faulttext, retry
from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver, Operation
from bmaas.drivers.ironic import conf, host, learned, rules
from bmaas.drivers.ironic.host import label
from bmaas.drivers.ironic.info import MissingDriverInfo, parse_driver_info
from bmaas.faults import (
    BmaasError,
    BMCFault,
    InputError,
    UnsupportedOperation,
)
from bmaas.pool import PoolKey
from bmaas.registry import build_driver
from bmaas.retry import RetryLimits
from bmaas.runtime import Runtime
from bmaas.silence import Silence

__all__ = [
    "BmaasDriverError",
    "BmaasPowerFailure",
    "Budget",
    "Ran",
    "call",
    "check",
    "label",
    "limits",
    "session",
    "translated",
]

LOG = logging.getLogger(__name__)
T = TypeVar("T")


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
        """The options, or ``InvalidParameterValue`` naming every refused
        one (``[bmaas input_error retry=never] ironic.conf: [bmaas]...``)
        before the call touches a BMC."""
        found = conf.problems()
        if found:
            fault = InputError("; ".join(found), source="ironic.conf")
            raised = exception.InvalidParameterValue(faulttext.format_fault(fault))
            raised.bmaas_code = fault.code  # type: ignore[attr-defined]
            raised.bmaas_retry = str(fault.retry)  # type: ignore[attr-defined]
            raise raised
        group = conf.CONF.bmaas
        return cls(group.call_deadline, group.operation_deadline, group.sync_deadline)


@contextlib.contextmanager
def session(
    task: Any,
    protocol: str,
    budget: Budget,
    deadline: Deadline,
    *,
    read: bool = False,
    rt: Runtime | None = None,
) -> Iterator[BMCDriver]:
    """The node's pooled bmaas driver from ``rt``, the conductor's runtime
    the interface entry point passes down (its one holder's,
    :func:`bmaas.drivers.ironic.host.runtime`, when not given), held by this
    call alone until the block
    ends (another call on the same BMC waits, up to ``deadline``). A change
    of driver_info makes a new session. ``InputError`` on bad driver_info.

    ``read`` (a periodic read: Ironic's power sync, under the sync rule):
    when the BMC gave no answer lately and still gives none to the
    background probes (the runtime's silence book), fail at once with that fault, saying
    how long and when it is asked next (after the verdict of a first probe
    still running); a read that got its answer clears the silence. Each
    request of the read waits for its answer at most the BMC's silence
    bound (:meth:`SilentBMCs.bounded`: a few times its slowest recent
    answer; the whole ``call_deadline`` until its answer times are known),
    so the first pass after BMCs hang is not held by them one read at a
    time. An operator's request (a power action and the reads that belong
    to it) always asks the BMC itself, with the whole deadline."""
    node = task.node
    name = label(task)
    info = parse_driver_info(node.driver_info or {}, protocol, node=name)
    key = PoolKey.of(protocol, name, node.driver_info or {})
    rt = rt or host.runtime()
    if read:
        rt.silence.settle(key, deadline)  # a first probe running: its verdict, not its session
        known = rt.silence.evidence(key)
        if known is not None:
            raise _still_silent(known, key)
    group = conf.CONF.bmaas
    rt.gates.configure(cap=group.bmc_max_requests or None, spacing=group.bmc_min_interval or None)
    with (
        rt.session(
            key,
            lambda: build_driver(name, protocol, info, bmc_timeout=budget.call),
            deadline=deadline,
        ) as drv,
        # what the driver learned (a suite 3 downgrade): recorded however the call ends
        learned.reported(rt.part("quirks told", learned.Told), task, drv),
    ):
        if not read:
            yield drv
        else:
            with rt.silence.bounded(key, budget.call) as wait:
                token = _READ_WAIT.set(wait)
                try:
                    yield drv
                finally:
                    _READ_WAIT.reset(token)
    if read:  # the BMC answered a read
        rt.silence.heard(key)


#: the silence bound of the periodic read this thread is in (set by
#: :func:`session` with ``read``; :func:`limits` caps the sync rule's
#: requests at it): each thread's (context's) own, no process state
_READ_WAIT: Final[contextvars.ContextVar[float | None]] = contextvars.ContextVar(
    "bmaas_read_wait", default=None
)


def _still_silent(known: Silence, key: PoolKey) -> BMCFault:
    """The fault a read fails with while its BMC is known silent."""
    now = time.monotonic()
    return type(known.fault)(
        f"no answer from the BMC for {now - known.since:.0f}s (last asked {now - known.last:.0f}s "
        f"ago; bmaas asks it again in the background in {max(0.0, known.next_probe - now):.0f}s): "
        f"not asked again by this read. Last: {known.fault.message}",
        node=key.node,
        driver=key.driver,
        operation=str(Operation.POWER_GET),
        address=key.bmc,
    )


def check(task: Any, protocol: str) -> None:
    """What ``validate`` checks: the node's driver_info is complete and a
    driver can be built from it. No BMC call, no pooled driver, no wait for
    a slot: Ironic validates often, from the API and before every action."""
    name = label(task)
    info = parse_driver_info(task.node.driver_info or {}, protocol, node=name)
    build_driver(name, protocol, info).close()


def limits(budget: Budget, rule: rules.Rule = rules.Rule.ACTION) -> RetryLimits:
    """The operation retry for one conductor call under ``rule``
    (:func:`bmaas.drivers.ironic.rules.limits`): each BMC request capped at
    ``[bmaas]call_deadline``; the total is the Deadline each call passes.

    ``sync`` (Ironic's periodic reads): a fault the policy table's ``sync``
    column counts fails the read at once, so that Ironic's own failure
    counting sees it; one it does not count (busy) is retried as usual.
    ``action`` (everything an operator's request does, its reads included):
    the table's same-node column, a BMC that gives no answer asked again
    through a reboot window as long as the operation's budget.

    Inside a periodic read's :func:`session`, a ``sync`` call's requests
    wait at most the BMC's silence bound (:mod:`bmaas.silence`).
    """
    wait = _READ_WAIT.get() if rule is rules.Rule.SYNC else None
    each = budget.call if wait is None else min(wait, budget.call)
    return rules.limits(rule, call=each, operation=budget.operation)


def call(
    deadline: Deadline,
    budget: Budget,
    fn: Callable[..., T],
    *args: Any,
    rule: rules.Rule = rules.Rule.ACTION,
    **kwargs: Any,
) -> T:
    """``fn`` (a driver method) through ``bmaas.retry`` within ``deadline``."""
    return retry.call(limits(budget, rule), fn, *args, deadline=deadline, **kwargs)


#: the mapping table (the docstring's): bmaas faults that become a specific
#: Ironic exception; every other fault becomes the interface's own error
IRONIC_ERRORS: Final[Mapping[type[BmaasError], type[exception.IronicException]]] = {
    MissingDriverInfo: exception.MissingParameterValue,
    InputError: exception.InvalidParameterValue,
    UnsupportedOperation: exception.UnsupportedDriverExtension,
}


def _ironic_error(
    fault: BmaasError, default: type[exception.IronicException]
) -> type[exception.IronicException]:
    """The Ironic exception for ``fault``: its class's (or nearest ancestor's)
    entry in :data:`IRONIC_ERRORS`, else ``default``."""
    for base in type(fault).__mro__:
        found = IRONIC_ERRORS.get(base)
        if found is not None:
            return found
    return default


def message(fault: BmaasError, what: str, elapsed: float) -> str:
    """The prefixed text an Ironic exception carries for ``fault``: one
    line, then one line per problem when the fault carries several (a
    node's driver_info: :class:`~bmaas.drivers.ironic.info.DriverInfoProblems`)."""
    text = f"{faulttext.format_fault(fault)}; {what} gave up after {elapsed:.2f}s"
    problems = getattr(fault, "problems", None) or ()
    if len(problems) > 1:
        text += "".join("\n" + " ".join(str(p).split()) for p in problems)
    return text


@dataclasses.dataclass
class Ran:
    """How long an operation had run when a call inside it began (the read
    Ironic makes before an action opens the request): its messages say the
    whole operation's time, not the last call's (issue 48: "gave up after
    2.07s" hid a 55 s operation)."""

    before: float
    since: float = dataclasses.field(default_factory=time.monotonic)

    def seconds(self) -> float:
        return self.before + time.monotonic() - self.since


@contextlib.contextmanager
def translated(
    task: Any,
    what: str,
    error: type[exception.IronicException] = BmaasPowerFailure,
    *,
    ran: Ran | None = None,
) -> Iterator[None]:
    """Turn a bmaas fault raised inside into the Ironic exception for it;
    ``ran``: the operation's time so far, counted in the message."""
    ran = ran or Ran(0.0)
    try:
        yield
    except BmaasError as fault:
        elapsed = ran.seconds()
        cls = _ironic_error(fault, error)
        text = message(fault, what, elapsed)
        LOG.warning("bmaas: %s", text)
        raised = cls(text)
        raised.bmaas_code = fault.code  # type: ignore[attr-defined]
        raised.bmaas_retry = str(fault.retry)  # type: ignore[attr-defined]
        raise raised from fault
