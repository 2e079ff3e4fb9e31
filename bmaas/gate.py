"""BMC protection: a per-BMC cap on requests in flight and a minimum spacing
between them, shared by every path of one process.

Field reports (Supermicro BMCs that stop answering after a burst of IPMI
commands, iDRACs that refuse sessions at their limit) say a BMC is a small
computer that falls over when asked too much. Ironic spaces IPMI commands
per address (``[ipmi]min_command_interval``) and nothing else; sushy has no
per-BMC cap at all. bmaas gates every BMC request through one :class:`Gate`
per BMC (the BMC's label: ``ipmi:10.0.0.5:623``, ``redfish:https://10.0.0.5``)
taken from one registry per process (:data:`GATES`), so sync passes, sweeps,
fleet commands, deploys and an Ironic conductor's interfaces in the same
process share the BMC's budget::

    driver call ──▶ gate.hold(deadline) ──▶ in flight < cap?  (wait, bounded by the deadline)
                         │                       │
                         └── pace(deadline) ──▶ next start >= last start + spacing
                                                 (every HTTP request, every IPMI command;
                                                  a login and its call's first command: one
                                                  turn, charged as two)

A BMC's ``Retry-After`` holds the whole gate (:meth:`Gate.defer`): the other
nodes behind that BMC wait too instead of asking at once.

Running out of deadline while waiting -- for a slot, or for a turn that
bmaas's own spacing puts past the deadline -- is
:class:`~bmaas.faults.SlotTimeout`: bmaas's own doing, never a BMC fault (the
policy table retries it with backoff, never counts it toward the node's
health and never fences the node for it).

The numbers: each driver class declares its protocol's defaults
(``max_requests``, ``min_interval``); ``driver_info``, the environment and
Ironic's ``[bmaas]`` options tighten them (docs/operator.md). The strictest
value asked for a BMC wins: a gate never loosens while it lives.

Across processes a gate does not reach: a sharded sweep and the sync
workers sharing one database assign each BMC (:func:`bmc_of`) to one
process, so no two of them talk to the same BMC. Separate commands started
at once each keep their own gates (see docs/operator.md, "Sessions, caps
and spacing per BMC").
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from bmaas import clock as _clock
from bmaas import validate
from bmaas.deadline import Deadline
from bmaas.faults import InputError, SlotTimeout

__all__ = [
    "ENV_MAX_REQUESTS",
    "ENV_MIN_INTERVAL",
    "ENV_SETTINGS",
    "GATES",
    "PACE_RESERVE",
    "Gate",
    "GateRegistry",
    "GateStats",
    "bmc_of",
    "environment_problems",
]

LOG = logging.getLogger(__name__)

ENV_MAX_REQUESTS = "BMAAS_BMC_MAX_REQUESTS"
ENV_MIN_INTERVAL = "BMAAS_BMC_MIN_INTERVAL"

#: how often a waiter looks at the clock again (an injected clock may move
#: without anyone notifying the condition)
_WAKE = 0.05

#: seconds of the deadline a paced request must still have after waiting its
#: turn (or the spacing, when that is smaller). A wait that would leave less
#: is not taken (``SlotTimeout``): the request would be cut off by its own
#: deadline, a ``BMCTimeout`` counted against a BMC that was never given the
#: time to answer. A request that needs no wait is sent whatever is left (its
#: slowness is the BMC's). Never more than the spacing: with the default
#: spacings (0.05 s, 0.1 s) a short budget's last turns are taken as before.
PACE_RESERVE = 0.1


@dataclasses.dataclass
class GateStats:
    """What one gate did: requests let through, how many waited, and the
    most ever in flight at once (at most the cap, by construction)."""

    held: int = 0
    paced: int = 0
    waited: int = 0
    refused: int = 0
    peak: int = 0


class Gate:
    """One BMC's request budget in this process. Thread-safe; clock and sleep
    are injected."""

    def __init__(
        self,
        label: str,
        *,
        cap: int,
        spacing: float,
        clock: _clock.ClockFn | None = None,
        sleep: _clock.SleepFn | None = None,
    ) -> None:
        if cap < 1 or spacing < 0 or math.isnan(spacing):
            raise ValueError("cap must be at least 1 and spacing non-negative")
        self.label = label
        self.cap = cap
        self.spacing = spacing
        self._clock = clock or _clock.monotonic
        self._sleep = sleep or _clock.sleep
        self._cond = threading.Condition()
        self._in_flight = 0
        self._next = -math.inf
        self.stats = GateStats()

    def __repr__(self) -> str:
        return f"<Gate {self.label} cap={self.cap} spacing={self.spacing:g}s>"

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def tighten(self, cap: int, spacing: float) -> None:
        """Apply a stricter cap or spacing (a looser one is ignored)."""
        with self._cond:
            self.cap = max(1, min(self.cap, cap))
            self.spacing = max(self.spacing, spacing)

    @contextlib.contextmanager
    def hold(
        self,
        deadline: Deadline,
        *,
        node: str | None = None,
        operation: str | None = None,
        pace: bool = True,
        too_late: Callable[[], BaseException] | None = None,
    ) -> Iterator[None]:
        """One of the BMC's ``cap`` slots for the block, taken no sooner than
        ``spacing`` after the previous request start (``pace=False``: the
        caller paces each of its wire requests itself). ``SlotTimeout`` when
        neither comes before ``deadline``."""
        start = self._clock()
        with self._cond:
            waited = False
            while self._in_flight >= self.cap:
                left = deadline.left()
                if left <= 0:
                    self.stats.refused += 1
                    raise self._refuse(node, operation, start, f"{self._in_flight} in flight")
                waited = True
                self._cond.wait(min(left, _WAKE))
            self._in_flight += 1
            self.stats.held += 1
            self.stats.waited += waited
            self.stats.peak = max(self.stats.peak, self._in_flight)
        try:
            if pace:
                self.pace(deadline, node=node, operation=operation, too_late=too_late)
            yield
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify()

    def pace(
        self,
        deadline: Deadline,
        *,
        node: str | None = None,
        operation: str | None = None,
        too_late: Callable[[], BaseException] | None = None,
        requests: int = 1,
    ) -> None:
        """Wait for this request's turn: at least ``spacing`` after the last
        request start on this BMC. The turn is reserved before sleeping, so
        concurrent callers line up instead of all waking at once.

        ``requests``: how many requests the turn sends back to back (an IPMI
        login and its call's first command: 2). They go at once, and the next
        turn comes ``requests`` spacings later, so the BMC's rate over any
        second stays what the spacing promises (a login is a request to it).

        A turn beyond the deadline, or one that would leave the request less
        than :data:`PACE_RESERVE` of it (at most the spacing), is not taken:
        the wait is bmaas's own, so running out is ``SlotTimeout`` (never
        counted against the node). When only the spacing after the last request stands before the
        turn, the driver's ``too_late()`` builds it ("the deadline passed
        before the call: nothing sent", naming the driver) if given; when
        other callers' turns do, it names the contention."""
        now = self._clock()
        if self.spacing <= 0 and self._next <= now:
            return
        with self._cond:
            turn = max(now, self._next)
            wait, left = turn - now, deadline.left()
            if wait > left or (wait > 0 and left - wait < min(PACE_RESERVE, self.spacing)):
                self.stats.refused += 1
                if too_late is not None and wait <= self.spacing:
                    raise too_late()
                raise self._refuse(node, operation, now, f"next turn in {wait:.2f}s")
            self._next = turn + self.spacing * max(1, requests)
            self.stats.paced += 1
        if turn > now:
            self._sleep(turn - now)

    def defer(self, seconds: float) -> None:
        """The BMC said "later" (Redfish ``Retry-After``): no request of this
        process starts on it before ``seconds`` from now, whichever node asks."""
        if seconds > 0:
            with self._cond:
                self._next = max(self._next, self._clock() + seconds)

    def _refuse(
        self, node: str | None, operation: str | None, start: float, why: str
    ) -> SlotTimeout:
        return SlotTimeout(
            f"{why}, cap {self.cap}, spacing {self.spacing:g}s",
            node=node,
            operation=operation,
            address=self.label,
            waited=self._clock() - start,
        )


#: what each environment variable must be: (variable, checker of its text)
ENV_SETTINGS: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    (ENV_MAX_REQUESTS, lambda text: validate.count(text, low=1)),
    (ENV_MIN_INTERVAL, lambda text: validate.seconds(validate.numeric(text), high=3600.0)),
)


def environment_problems(environ: Mapping[str, str] | None = None) -> list[InputError]:
    """Every bad ``BMAAS_BMC_*`` value, one problem each (the CLIs check this
    before any work, so a bad value is exit 2 up front, not a line per node).
    An empty variable is unset, as the shell's ``VAR= command`` means."""
    environ = os.environ if environ is None else environ
    problems = []
    for name, check in ENV_SETTINGS:
        try:
            validate.setting(name, environ.get(name) or None, check)
        except ValueError as exc:
            problems.append(InputError(str(exc), source="environment"))
    return problems


def _env_limits(environ: Mapping[str, str]) -> tuple[int | None, float | None]:
    """The process-wide overrides, every problem at once."""
    problems = environment_problems(environ)
    if problems:
        raise InputError("\n".join(p.message for p in problems), source="environment")
    (cap_name, cap_check), (gap_name, gap_check) = ENV_SETTINGS
    cap = validate.setting(cap_name, environ.get(cap_name) or None, cap_check)
    spacing = validate.setting(gap_name, environ.get(gap_name) or None, gap_check)
    return cap, spacing


class GateRegistry:
    """Every BMC's gate in this process, by label."""

    def __init__(
        self,
        *,
        environ: Mapping[str, str] | None = None,
        clock: _clock.ClockFn | None = None,
        sleep: _clock.SleepFn | None = None,
    ) -> None:
        self._environ = environ
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._gates: dict[str, Gate] = {}
        #: process-wide limits (:meth:`configure`; an Ironic conductor's options)
        self.cap: int | None = None
        self.spacing: float | None = None

    def configure(self, *, cap: int | None = None, spacing: float | None = None) -> None:
        """Process-wide limits for every BMC (applied to gates made from now on,
        and tightening the ones that exist). The same limits again are a
        no-op: an Ironic conductor calls this on every BMC call, and walking
        every gate each time made a 10,000-node sync pass quadratic."""
        with self._lock:
            if (cap, spacing) == (self.cap, self.spacing):
                return
            self.cap, self.spacing = cap, spacing
            gates = list(self._gates.values())
        for gate in gates:
            gate.tighten(cap or gate.cap, spacing or 0.0)

    def gate(self, label: str, *, cap: int, spacing: float) -> Gate:
        """The gate of BMC ``label``, made with the driver's ``cap`` and
        ``spacing`` (and the process-wide overrides) the first time it is
        asked for, tightened by every stricter ask after that."""
        env_cap, env_spacing = _env_limits(os.environ if self._environ is None else self._environ)
        for limit in (env_cap, self.cap):
            if limit is not None:
                cap = min(cap, limit)
        for gap in (env_spacing, self.spacing):
            if gap is not None:
                spacing = max(spacing, gap)
        with self._lock:
            found = self._gates.get(label)
            if found is None:
                found = self._gates[label] = Gate(
                    label, cap=cap, spacing=spacing, clock=self._clock, sleep=self._sleep
                )
                return found
        found.tighten(cap, spacing)
        return found

    def get(self, label: str) -> Gate | None:
        with self._lock:
            return self._gates.get(label)

    def all(self) -> dict[str, Gate]:
        with self._lock:
            return dict(self._gates)


#: the process's gates: every driver built in this process takes its BMC's gate here
GATES = GateRegistry()


def bmc_of(driver: str, node: str, info: Mapping[str, Any]) -> str:
    """The BMC a node's requests go to, from its raw driver_info (what
    sweeps and sync workers split a fleet by, so that every node behind one
    BMC -- every system of one Redfish service -- goes to one process).
    The same label as the driver's ``bmc_label`` for IPMI and Redfish."""
    if info.get("ipmi_address") and driver == "ipmi":
        host = str(info["ipmi_address"])
        host = f"[{host}]" if ":" in host else host
        return f"ipmi:{host}:{info.get('ipmi_port', 623)}"
    if info.get("redfish_address") and driver == "redfish":
        return f"redfish:{str(info['redfish_address']).rstrip('/')}"
    # unknown drivers: without an address we know of, the node is its own BMC
    return f"{driver}:{info.get('fake_machine') or node}"
