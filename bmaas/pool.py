"""Sessions that last: one pooled driver per node, one BMC session per service.

Without a pool every operation builds a driver, logs in, does one read and
logs out; a sync pass every minute logs in to every BMC every minute. That
costs the client most of its CPU (an RMCP+ RAKP exchange, or a Redfish
service-root read, session POST, system discovery and DELETE, against one
small request) and it is unkind to BMCs, which have few session slots (iLO
and iDRAC document small limits). Ironic's redfish hardware type keeps a
session cache for the same reason.

A :class:`DriverPool` keeps each node's driver, with its logged-in session,
between operations and sync passes (nodes behind one Redfish service share
that service's one session: :mod:`bmaas.drivers.redfish.service`)::

    pool = DriverPool()
    key = PoolKey.of("ipmi", node_name, driver_info)
    with pool.session(key, build=lambda: build_driver(...), deadline=deadline) as driver:
        state = driver.get_power_state(deadline=deadline.share(cap=driver.bmc_timeout))
    ...
    pool.close()                      # logs every session out

The rules, and why:

* **Keyed by node**: driver name, BMC address and a keyed digest of the whole
  ``driver_info`` (credentials included). Changed credentials or settings
  make a new key; the old driver is logged out before the new one logs in.
* **One user per node at a time**: a second user of the same node waits
  until the first is done, up to its deadline (required: the caller's
  budget, never a fresh one the pool makes), then gets
  :class:`~bmaas.faults.SlotTimeout` -- bmaas's own contention, not a BMC
  fault: retried with backoff, never counted, never "BMC busy".
  Nodes behind one BMC (the systems of one Redfish service) do *not* wait
  for each other here: their requests share the BMC's gate
  (:mod:`bmaas.gate`, up to its cap in flight) and, for Redfish, one
  session (the driver's service registry), so a BMC sees one session from
  a process however many of its systems are used at once.
* **A session that missed an answer is never reused**: on the faults of
  the policy table's "drop session" column (:data:`bmaas.policy.DROPS_SESSION`)
  the driver is closed and forgotten; the next operation builds a fresh one
  and logs in afresh. Faults that prove the session
  works (busy, internal error, unsupported, power/boot failure) keep it.
  A session dropped because its BMC gave **no answer** (the table's
  ``NO_ANSWER`` column) is logged out in the background, on up to
  :data:`LOGOUT_THREADS` threads: that logout, a request to the same silent
  BMC, waited out its ``bmc_timeout`` in the caller's thread, so a hung
  Redfish BMC's first read held a sync worker twice as long (issue 35).
  Its slot stays held until the logout is over, so the BMC still never
  sees the next session begin before this one was closed.
* **Re-login on expiry** is the driver's job (IPMI: a dead session is
  replaced inside the driver; Redfish: sushy logs in again on a 401), so the
  pool counts it through ``driver.logins`` rather than doing it twice.
* **Idle-out**: a session unused for ``idle`` seconds (capped by the
  driver's own ``session_idle``, since BMCs forget idle sessions) is logged
  out by :meth:`DriverPool.expire_idle` or when it is next asked for, in
  the background, its node's slot free at once: a courtesy to a BMC that
  has likely forgotten it, which to one whose API had since hung held the
  node's next read for ``bmc_timeout`` (issue 48).
* **Held longer**: :meth:`DriverPool.hold` names nodes whose driver is
  kept for a longer idle time, past the driver's own ``session_idle``: the
  sync holds the nodes whose BMC streams events, read only by the safety
  net every half hour or so (:mod:`bmaas.events`). Logging such a session
  out after 5 idle minutes and in again at the next read cost a Redfish
  BMC four requests (DELETE; root, session POST, system) for one read;
  kept, the read is one request, or three where the BMC forgot the
  session meanwhile (sushy logs in again on the 401).
* **Keepalive**: a session idle for its driver's ``session_keepalive``
  seconds gets :meth:`BMCDriver.keepalive` (IPMI: one Get Device ID) from
  :meth:`DriverPool.keepalive`, which the host's session keeper calls
  (:mod:`bmaas.keeper`). A round walks the sessions only once one may be
  due (:meth:`DriverPool.due_in`, a lower bound kept as sessions are given
  back; :meth:`DriverPool.keepalive_due_in` walks them for the exact time of
  the next keepalive). Its idle
  time starts again, so a session outlives any sync interval, as long as the
  BMC answers; one that does not answer, or has no trusted session left, is
  logged out. Keepalives are counted (``keepalives``), never as reads.
* **Close-all** on :meth:`DriverPool.close` (and ``with DriverPool() as p``).

The pool imports no protocol library: it needs only what every
:class:`~bmaas.driver.BMCDriver` offers (``close()``, ``logins``,
``session_idle``). Thread-safe; the clock is injected.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import hmac
import json
import logging
import math
import secrets
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from bmaas import clock as _clock
from bmaas import threads
from bmaas.deadline import Deadline
from bmaas.driver import DEFAULT_BMC_TIMEOUT, BMCDriver, Operation
from bmaas.faults import (
    BmaasError,
    BMCFault,
    SlotTimeout,
)
from bmaas.gate import bmc_of
from bmaas.policy import policy_for
from bmaas.silence import SilentBMCs

__all__ = [
    "DEFAULT_IDLE",
    "KEEPALIVE_EARLY",
    "KEEPALIVE_THREADS",
    "LOGOUT_THREADS",
    "DriverPool",
    "PoolKey",
    "PoolStats",
    "idle_for_interval",
]

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: seconds a pooled session may sit unused before it is logged out (a
#: driver's ``session_idle`` may cap it lower)
DEFAULT_IDLE = 60.0


def idle_for_interval(interval: float | None) -> float:
    """The pool ``idle`` that keeps sessions used once every ``interval``
    seconds (a sync loop): twice the interval, so a pass that runs long or
    starts late does not log every session out, and never below
    :data:`DEFAULT_IDLE`. The driver's own ``session_idle`` still caps it
    (what its BMCs are trusted to keep: Redfish 300 s; IPMI 20 s, kept
    alive by keepalives). Without it a Redfish session idle for a 120 s
    interval (Ironic's default) was logged out every pass."""
    if interval is None:
        return DEFAULT_IDLE
    if interval <= 0:
        raise ValueError("interval must be positive")
    return max(DEFAULT_IDLE, 2.0 * interval)


#: keepalives a round sends at once: a silent BMC holds one thread for its
#: ``bmc_timeout``, the others go on
KEEPALIVE_THREADS = 8

#: background logouts of sessions whose BMC gave no answer, at once
LOGOUT_THREADS = 16

#: a round also keeps sessions due within this share of their keepalive
#: period (IPMI: 1 s of 10): sessions used one after another in a pass fall
#: due one after another, and a round for each (every round scans the pool)
#: took 14 % of a 10,000-node sync's CPU between passes; now rounds of one
#: period's sessions come at least this far apart, each session at most
#: this much early
KEEPALIVE_EARLY = 0.1


@dataclasses.dataclass(frozen=True)
class PoolKey:
    """Which pooled driver serves a node. ``digest`` covers the whole
    driver_info (credentials included) under a per-process secret key, so
    it can be neither reversed nor compared across processes or logs."""

    node: str
    driver: str
    bmc: str
    digest: str = dataclasses.field(repr=False)

    @property
    def slot(self) -> str:
        """The pool holds one driver, used by one caller at a time, per value."""
        return f"{self.driver}:{self.node}"

    _SALT = secrets.token_bytes(16)

    @classmethod
    def of(cls, driver: str, node: str, driver_info: Mapping[str, Any]) -> PoolKey:
        """The key for ``node`` driven by ``driver`` with ``driver_info``
        (a mapping; secrets may be :class:`~bmaas.secrets.Secret` or str)."""
        info = {k: _plain(v) for k, v in driver_info.items()}
        canonical = json.dumps(
            {"driver": driver, "node": node, "info": info},
            sort_keys=True,
            default=str,
        )
        digest = hmac.new(cls._SALT, canonical.encode(), hashlib.sha256).hexdigest()
        return cls(node, driver, bmc_of(driver, node, driver_info), digest)


def _plain(value: Any) -> Any:
    reveal = getattr(value, "reveal", None)  # a Secret: its value, for the digest only
    return reveal() if callable(reveal) else value


@dataclasses.dataclass
class PoolStats:
    """What the pool did; ``reads_per_login`` is the figure that says
    whether sessions last (1.0: a login per operation, as without a pool)."""

    #: logins the drivers performed (first logins and re-logins)
    logins: int = 0
    #: operations run on pooled drivers
    reads: int = 0
    #: drivers built (a session to be)
    opened: int = 0
    #: sessions closed because they missed an answer (bmaas.policy.DROPS_SESSION)
    dropped: int = 0
    #: sessions logged out for idleness or changed settings
    idled: int = 0
    #: callers refused because another caller held the node until their deadline
    busy: int = 0
    #: keepalives sent on idle sessions (not reads: no operation asked for them)
    keepalives: int = 0

    @property
    def reads_per_login(self) -> float | None:
        return self.reads / self.logins if self.logins else None

    def to_dict(self) -> dict[str, Any]:
        rpl = self.reads_per_login
        return {
            **dataclasses.asdict(self),
            "reads_per_login": None if rpl is None else round(rpl, 2),
        }

    def add(self, other: PoolStats) -> None:
        """Sum another pool's counters into this one (one per process)."""
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass
class _Slot:
    """A node's pooled driver: who it is for, and whether someone holds it."""

    key: PoolKey
    driver: BMCDriver | None = None
    in_use: bool = True
    last_used: float = 0.0
    #: how its last user built a driver (a background probe builds the same)
    build: Callable[[], BMCDriver] | None = None


class DriverPool:
    """Pooled drivers, one per node. See the module docstring."""

    def __init__(
        self,
        *,
        idle: float = DEFAULT_IDLE,
        wait: float = DEFAULT_BMC_TIMEOUT,
        clock: _clock.ClockFn | None = None,
        silence: SilentBMCs | None = None,
        start: Callable[[Callable[[], None]], object] | None = None,
        group: threads.ThreadGroup | None = None,
    ) -> None:
        """``start`` runs a background logout (default: on up to
        :data:`LOGOUT_THREADS` daemon threads of the pool's own; tests
        collect the jobs and run them); ``group``: whose threads those are
        (a runtime's, joined at its close)."""
        if idle <= 0 or wait < 0:
            raise ValueError("idle must be positive and wait non-negative")
        #: no idle slot expires or needs a keepalive before this time (a
        #: lower bound: :meth:`due_in`): the keeper's rounds between cost a
        #: comparison, not a walk of every slot (at 200 nodes, two walks
        #: every 5 s were a quiet events sync's largest CPU)
        self._next_due = math.inf
        #: the bound :meth:`due_in` last told (the keeper sleeps until then)
        self._told = math.inf
        #: called, the lock held, when the bound moves before what was told
        #: (:meth:`on_sooner`: the keeper's wake)
        self._sooner: Callable[[], object] | None = None
        self._idle = idle
        #: where BMCs that gave no answer are noted and probed in the
        #: background (:mod:`bmaas.silence`); None: nothing is noted
        self.silence = silence
        #: seconds the pool's own background probe of a silent BMC may take
        #: (three of them): the one budget the pool starts itself
        self.wait = wait
        self._clock = clock or _clock.monotonic
        self._start = start
        #: every thread the pool starts (logouts, keepalives) is this group's
        self.group = group or threads.ThreadGroup()
        self._logouts: concurrent.futures.ThreadPoolExecutor | None = None
        self._cond = threading.Condition()
        self._slots: dict[str, _Slot] = {}
        self._closed = False
        self._keys: dict[tuple[str, str], tuple[Mapping[str, Any], PoolKey]] = {}
        #: the key each pooled driver is held under (:meth:`key_of`)
        self._key_of: weakref.WeakKeyDictionary[BMCDriver, PoolKey] = weakref.WeakKeyDictionary()
        #: nodes whose driver is kept longer (:meth:`hold`), and for how long
        self._held: frozenset[str] = frozenset()
        self._held_idle = 0.0
        self.stats = PoolStats()

    def hold(self, nodes: Iterable[str], idle: float) -> None:
        """Keep the drivers of ``nodes`` (node names) until they are ``idle``
        seconds unused, even past their driver's ``session_idle``; every
        other node's limit is as before. Replaces the last call's nodes."""
        if idle < 0:
            raise ValueError("idle must not be negative")
        held = frozenset(nodes)
        with self._cond:
            if idle < self._held_idle or not held >= self._held:
                # a node no longer held, or a shorter hold, may expire sooner
                self._lower(-math.inf)
            # else every limit stays or grows: the bound is still a lower one
            # (an events sync holds the same streamed nodes every pass)
            self._held, self._held_idle = held, idle

    @property
    def idle(self) -> float:
        """Seconds a session may stay unused before it is logged out."""
        return self._idle

    @idle.setter
    def idle(self, idle: float) -> None:
        with self._cond:
            self._idle = idle
            self._lower(-math.inf)  # a shorter limit may be due sooner

    def key_for(self, driver: str, node: str, driver_info: Mapping[str, Any]) -> PoolKey:
        """:meth:`PoolKey.of`, remembered per node while its driver_info stays
        equal (a sweep asks for every node's key on every pass)."""
        known = self._keys.get((driver, node))
        if known is not None and known[0] == driver_info:
            return known[1]
        key = PoolKey.of(driver, node, driver_info)
        self._keys[(driver, node)] = (dict(driver_info), key)
        return key

    def key_of(self, driver: BMCDriver) -> PoolKey | None:
        """The key ``driver`` is pooled under (None: not this pool's): its
        BMC's silence bound is asked by it (:mod:`bmaas.silence`)."""
        return self._key_of.get(driver)

    # -- taking and giving back -------------------------------------------------

    @contextlib.contextmanager
    def session(
        self,
        key: PoolKey,
        build: Callable[[], BMCDriver],
        *,
        deadline: Deadline,
    ) -> Iterator[BMCDriver]:
        """The node's pooled driver, held by this caller alone until the
        block ends, waiting for it at most until ``deadline`` (the caller's
        budget; required). ``build`` makes a new one when there is none (it may
        raise; nothing is held then). A fault the policy table says
        :attr:`~bmaas.policy.FaultPolicy.drops_session` of (or any
        non-bmaas exception) raised inside the block closes the driver."""
        slot, stale, idled = self._acquire(key, deadline)
        slot.build = build
        for old in stale:
            if idled:  # likely forgotten by its BMC: a courtesy, off the caller's time
                self._behind(functools.partial(self._logout, old))
            else:
                self._logout(old)
        driver = slot.driver
        try:
            if driver is None:
                driver = slot.driver = build()
                with self._cond:
                    self.stats.opened += 1
                    self._key_of[driver] = key
        except BaseException:
            self._release(slot, None, drop=True)
            raise
        before = driver.logins
        try:
            yield driver
        except BMCFault as fault:
            drop = policy_for(fault).drops_session
            self._release(slot, driver, before, drop=drop, why=fault)
            raise
        except BaseException as exc:
            # bmaas's other errors (bad input) say nothing about the session;
            # anything else is a broken contract, so nothing is trusted.
            self._release(slot, driver, before, drop=not isinstance(exc, BmaasError), why=exc)
            raise
        self._release(slot, driver, before, drop=False)

    def run(
        self,
        key: PoolKey,
        build: Callable[[], BMCDriver],
        operation: Callable[[BMCDriver], T],
        *,
        deadline: Deadline,
    ) -> T:
        """``operation(driver)`` on the node's pooled driver."""
        with self.session(key, build, deadline=deadline) as driver:
            return operation(driver)

    def _acquire(self, key: PoolKey, until: Deadline) -> tuple[_Slot, list[BMCDriver], bool]:
        """Take the BMC's slot (waiting while another caller holds it, until
        ``until``); also returns drivers to log out (stale or for other
        settings) and whether they were idle past their limit."""
        begun = self._clock()
        stale: list[BMCDriver] = []
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("the driver pool is closed")
                slot = self._slots.get(key.slot)
                if slot is None:
                    slot = self._slots[key.slot] = _Slot(key)
                    return slot, stale, False
                if not slot.in_use:
                    idled = self._expired(slot)
                    if slot.key != key or idled:
                        # Settings changed, or the BMC has likely forgotten it:
                        # log out, then start over with this caller's settings.
                        if slot.driver is not None:
                            stale.append(slot.driver)
                            self.stats.idled += 1
                        slot = self._slots[key.slot] = _Slot(key)
                        return slot, stale, idled
                    slot.in_use = True
                    return slot, stale, False
                left = until.left()
                if left <= 0:
                    self.stats.busy += 1
                    raise SlotTimeout(
                        "another operation on this node holds its pooled driver",
                        node=key.node,
                        driver=key.driver,
                        operation=str(Operation.LOGIN),
                        address=key.bmc,
                        waited=self._clock() - begun,
                    )
                # Wake at least every 0.1 s: an injected clock may move without us.
                self._cond.wait(min(left, 0.1))

    def _release(
        self,
        slot: _Slot,
        driver: BMCDriver | None,
        before: int = 0,
        *,
        drop: bool,
        why: BaseException | None = None,
    ) -> None:
        if driver is not None:
            self._note(slot, why)
        with self._cond:
            if driver is not None:
                self.stats.reads += 1
                self.stats.logins += max(0, driver.logins - before)
                if drop:
                    self.stats.dropped += 1
            if not (drop or self._closed):
                slot.in_use = False
                slot.last_used = self._clock()
                self._idled(slot)
                self._cond.notify_all()
                return
        if why is not None:
            LOG.debug("%s: session dropped after %s", slot.key.node, type(why).__name__)
        if isinstance(why, BmaasError) and policy_for(why).no_answer:
            # its BMC gave no answer: a logout would likely wait as long
            self._behind(lambda: self._retire([slot]))
            return
        self._retire([slot])

    def _behind(self, job: Callable[[], None]) -> None:
        """Run ``job`` (a logout) in the background; never raises."""

        def guarded() -> None:
            try:
                job()
            except Exception:  # _retire logs its own; never lose the thread
                LOG.warning("a background logout failed", exc_info=True)

        if self._start is not None:
            self._start(guarded)
            return
        with self._cond:
            closed = self._closed
            if not closed and self._logouts is None:
                self._logouts = self.group.pool(LOGOUT_THREADS, "bmaas-logout")
            logouts = self._logouts
        if closed or logouts is None:  # the pool is closing: its caller waits, as close() does
            guarded()
            return
        logouts.submit(guarded)

    def _retire(self, slots: list[_Slot]) -> None:
        """Log out held ``slots``, then free them: the BMC never sees the next
        session begin before this one has been closed."""
        for slot in slots:
            if slot.driver is not None:
                self._logout(slot.driver)
        with self._cond:
            for slot in slots:
                if self._slots.get(slot.key.slot) is slot:
                    del self._slots[slot.key.slot]
            self._cond.notify_all()

    # -- idleness and shutdown ------------------------------------------------------

    def _limit(self, slot: _Slot) -> float:
        own = slot.driver.session_idle if slot.driver is not None else math.inf
        limit = min(self.idle, own)
        if slot.key.node in self._held:
            return max(limit, self._held_idle)
        return limit

    def _expired(self, slot: _Slot) -> bool:
        return self._clock() - slot.last_used >= self._limit(slot)

    def _due(self, slot: _Slot) -> float:
        """When idle ``slot`` expires or needs a keepalive, whichever is first."""
        expires = slot.last_used + self._limit(slot)
        keep = self._keepalive_at(slot)
        return expires if keep is None else min(expires, keep)

    def _idled(self, slot: _Slot) -> None:
        """``slot`` was given back (the lock held): keep :attr:`_next_due` a
        lower bound. Its times only move later while it is used, so the
        bound needs no walk."""
        self._lower(self._due(slot))

    def _lower(self, due: float) -> None:
        """Move the bound to ``due`` if that is sooner (the lock held); wake
        whoever sleeps on what :meth:`due_in` told if it is sooner than that."""
        self._next_due = min(self._next_due, due)
        if self._next_due < self._told:
            self._told = self._next_due
            if self._sooner is not None:
                self._sooner()

    def on_sooner(self, wake: Callable[[], object]) -> None:
        """Call ``wake`` (quick, it runs under the pool's lock) whenever a
        session becomes due before what :meth:`due_in` last said: the
        keeper sleeps until then instead of waking in ticks to ask."""
        with self._cond:
            self._sooner = wake

    def due_in(self) -> float:
        """Seconds before which no idle session expires or needs a
        keepalive (0: one may now; :data:`math.inf`: none pooled). A lower
        bound kept as sessions are given back: asking costs no walk. What
        it tells is remembered: anything due sooner calls :meth:`on_sooner`'s
        ``wake``."""
        with self._cond:
            self._told = self._next_due
            return max(0.0, self._next_due - self._clock())

    def expire_idle(self) -> int:
        """Forget every session idle past its limit, its slot free at once,
        each logged out in the background; returns how many. (One after the
        other, slots held, a round meeting two hung BMCs held all its nodes'
        reads for two ``bmc_timeout``.) Walks the slots only once one may
        be due (:meth:`due_in`)."""
        with self._cond:
            now = self._clock()
            if now < self._next_due:
                return 0
            gone, soonest = [], math.inf
            for s in self._slots.values():
                if s.in_use:
                    continue  # it is bounded again when given back
                if now - s.last_used >= self._limit(s):
                    gone.append(s)
                else:
                    soonest = min(soonest, self._due(s))
            self._next_due = soonest
            for slot in gone:
                del self._slots[slot.key.slot]
            self.stats.idled += sum(1 for slot in gone if slot.driver is not None)
            self._cond.notify_all()
        for slot in gone:
            if slot.driver is not None:
                self._behind(functools.partial(self._logout, slot.driver))
        return len(gone)

    def _keepalive_at(self, slot: _Slot, *, early: float = 0.0) -> float | None:
        every = slot.driver.session_keepalive if slot.driver is not None else None
        return None if every is None else slot.last_used + every * (1.0 - early)

    def keepalive_due_in(self) -> float | None:
        """Seconds until the next idle session needs a keepalive (0: now);
        None when no pooled session keeps alive."""
        with self._cond:
            due = [
                at
                for s in self._slots.values()
                if not s.in_use and (at := self._keepalive_at(s)) is not None
            ]
        return max(0.0, min(due) - self._clock()) if due else None

    def keepalive(self, deadline: Deadline, *, parallel: int = KEEPALIVE_THREADS) -> int:
        """Send a keepalive on every idle session that is due (or within
        :data:`KEEPALIVE_EARLY` of its period of being due), up to
        ``parallel`` at once, each within ``deadline`` (its BMC request a
        share of at most the driver's ``bmc_timeout``); returns how many
        were kept. A session that gets no answer, or has none left to keep,
        is logged out. One after the other, a handful of silent BMCs (each
        holding the round for its ``bmc_timeout``) ran the round's budget
        out, and every healthy session behind them was logged out unasked:
        now a silent BMC holds one of ``parallel`` threads, and a session
        the round had no time left to ask is given back as it was."""
        if parallel < 1:
            raise ValueError("parallel must be at least 1")
        now = self._clock()
        with self._cond:
            due = [
                s
                for s in self._slots.values()
                if not s.in_use
                and (at := self._keepalive_at(s, early=KEEPALIVE_EARLY)) is not None
                and at <= now
            ]
            for slot in due:
                slot.in_use = True
        if len(due) <= 1 or parallel == 1:
            return sum(self._keep(slot, deadline) for slot in due)
        with self.group.pool(min(parallel, len(due)), "bmaas-keepalive") as workers:
            return sum(workers.map(lambda slot: self._keep(slot, deadline), due))

    def _keep(self, slot: _Slot, deadline: Deadline) -> bool:
        """One held slot's keepalive; the slot is given back or retired."""
        driver = slot.driver
        assert driver is not None
        if deadline.expired:  # not asked: says nothing about the session
            self._give_back(slot, used=False)
            return False
        try:
            alive = driver.keepalive(deadline=driver.call_deadline(deadline))
        except BmaasError as fault:
            LOG.debug("%s: keepalive failed: %s", slot.key.node, fault)
            self._note(slot, fault)
            alive = False
        if not alive:
            with self._cond:
                self.stats.dropped += 1
            self._retire([slot])
            return False
        with self._cond:
            self.stats.keepalives += 1
        if self.silence is not None:
            self.silence.heard(slot.key)
        self._give_back(slot, used=True)
        return True

    def _give_back(self, slot: _Slot, *, used: bool) -> None:
        with self._cond:
            slot.in_use = False
            if used:
                slot.last_used = self._clock()
            self._idled(slot)
            self._cond.notify_all()

    # -- silent BMCs (bmaas.silence) -------------------------------------------------

    def _note(self, slot: _Slot, why: BaseException | None) -> None:
        """Tell :attr:`silence` what the BMC did: no answer, or a fault the
        BMC itself sent (an answer). A clean end says nothing: the caller
        may not have asked the BMC at all (it says :meth:`SilentBMCs.heard`
        itself when it did), a probe and a keepalive do."""
        if self.silence is None or not isinstance(why, BMCFault):
            return
        if policy_for(why).no_answer:
            self.silence.silent(slot.key, why, self._prober(slot.key, slot.build))
        else:
            self.silence.heard(slot.key)

    def _prober(self, key: PoolKey, build: Callable[[], BMCDriver] | None) -> Callable[[], None]:
        """A background probe of ``key``'s BMC: one power read through the
        pool (an answer leaves its session pooled for the next user), within
        three of the pool's ``wait``. Settings changed meanwhile: forgotten."""

        def probe() -> None:
            assert self.silence is not None
            with self._cond:
                slot = self._slots.get(key.slot)
                current = slot.key if slot is not None else key
            if build is None or current != key or self._closed:
                self.silence.heard(key)  # nothing to ask it with, or not this node's BMC now
                return
            deadline = Deadline.after(3 * self.wait, clock=self._clock)
            try:
                with self.session(key, build, deadline=deadline) as driver:
                    driver.get_power_state(deadline=driver.call_deadline(deadline))
            except BmaasError as exc:  # noted by session() (silence, or an answer)
                LOG.debug("%s: background probe: %s", key.node, exc)
                return
            self.silence.heard(key)

        return probe

    def open_sessions(self) -> int:
        """Pooled drivers (held or idle) right now: at most one per node."""
        with self._cond:
            return sum(1 for slot in self._slots.values() if slot.driver is not None)

    def close(self, deadline: Deadline | None = None) -> None:
        """Log every idle session out, and wait for the background logouts
        (each bounded by its driver's ``bmc_timeout``); sessions in use are
        logged out as their holders give them back. Safe to call twice.

        ``deadline`` (a command's budget): logging out is a best effort
        within it. The idle sessions are logged out on the pool's logout
        threads, waited for only until it passes; once it has passed, none
        is started. The background logouts of sessions whose BMC gave no
        answer are not waited for at all (a silent BMC holds one for its
        whole ``bmc_timeout``). A session not logged out is left to its BMC,
        which expires it (Redfish after its ``SessionTimeout``, IPMI after
        its inactivity timeout). A command's end never waits on a BMC past
        its ``--deadline`` (issue 36: without one, closing logged the idle
        sessions out one after another, each up to ``bmc_timeout``, and
        waited for every background logout)."""
        with self._cond:
            self._closed = True
            idle = [s for s in self._slots.values() if not s.in_use]
            for slot in idle:
                slot.in_use = True
            self._cond.notify_all()
            logouts, self._logouts = self._logouts, None
        if deadline is None:
            self._retire(idle)
            if logouts is not None:
                logouts.shutdown(wait=True)
            return
        self._close_by(deadline, idle, logouts)

    def _close_by(
        self,
        deadline: Deadline,
        idle: list[_Slot],
        logouts: concurrent.futures.ThreadPoolExecutor | None,
    ) -> None:
        """:meth:`close` within ``deadline``: nothing waited for past it."""
        if deadline.expired:
            self._forget(idle)
            if logouts is not None:
                logouts.shutdown(wait=False)
            return
        with_driver = [slot for slot in idle if slot.driver is not None]
        self._forget([slot for slot in idle if slot.driver is None])
        if with_driver:
            if logouts is None:
                logouts = self.group.pool(min(LOGOUT_THREADS, len(with_driver)), "bmaas-logout")
            jobs = [logouts.submit(self._retire, [slot]) for slot in with_driver]
            while not deadline.expired:
                _, pending = concurrent.futures.wait(jobs, timeout=min(deadline.left(), 0.1))
                if not pending:
                    break
        if logouts is not None:
            # not joined: a logout still out is the BMC's to expire, and its
            # thread ends within its driver's bmc_timeout (the process may
            # leave first: bmaas.leave)
            logouts.shutdown(wait=False, cancel_futures=True)

    def _forget(self, slots: list[_Slot]) -> None:
        """Drop ``slots`` without logging their sessions out (their BMCs
        expire them)."""
        with self._cond:
            for slot in slots:
                if self._slots.get(slot.key.slot) is slot:
                    del self._slots[slot.key.slot]
            self._cond.notify_all()
        if slots:
            LOG.debug("%d pooled session(s) left to their BMCs to expire", len(slots))

    def __enter__(self) -> DriverPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _logout(driver: BMCDriver) -> None:
        try:
            driver.close()
        except Exception:  # logging out is a courtesy: the BMC expires the session anyway
            LOG.warning("%s: closing a pooled session failed", driver.node, exc_info=True)
