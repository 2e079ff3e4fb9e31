"""What the checks share: the options, the database (opened once, only read),
the enrolled nodes, which drivers load, and the one BMC sweep.

Everything is computed on first use and kept, so ``--only tls`` never
touches a BMC and the bmc, power and boot checks share one sweep.

Time: ``deadline`` (a :class:`~bmaas.deadline.Deadline`, created where the
command starts) bounds the whole run. The sweep gets :attr:`sweep_deadline`,
a share of it (less a small reserve for the checks after it and the report),
and each BMC call a share of the sweep's of at most :attr:`bmc_timeout`, so a
silent BMC costs one share and ``CALL_SHARE`` rounds of silent BMCs per worker
still fit before the sweep gives up on the rest.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bmaas import __version__, registry
from bmaas.clock import ClockFn
from bmaas.deadline import Deadline
from bmaas.driver import DEFAULT_BMC_TIMEOUT, BMCDriver
from bmaas.faults import BmaasError, InputError
from bmaas.ops import DEFAULT_WORKERS, DriverFactory, driver_factory
from bmaas.status.fleet import FleetReport, sweep
from bmaas.store import NodeRecord, StoreError, resolve_url
from bmaas.store.migrate import head_revision, known_revision

if TYPE_CHECKING:  # SQLAlchemy (0.25-0.4 s to import) only once a check opens the store
    from bmaas.store import Store

__all__ = ["DEFAULT_CHECK_DEADLINE", "CheckContext", "DatabaseState", "NotChecked"]

LOG = logging.getLogger(__name__)

#: seconds the whole ``bmaas status check`` may take unless told otherwise
DEFAULT_CHECK_DEADLINE = 30.0
#: one BMC call gets at most 1/CALL_SHARE of the sweep's budget
CALL_SHARE = 4
#: and never less than this: a login on a slow BMC takes a few hundred ms
MIN_CALL_DEADLINE = 0.2
#: share of the deadline kept for the checks after the sweep and the report
RESERVE_SHARE = 0.1
MAX_RESERVE = 1.0


class NotChecked(BmaasError):
    """A check could not run because something it needs is unusable (the
    database). The runner reports it as a Failure with this reason."""

    code = "not_checked"
    summary = "not checked"


class DatabaseState:
    """Whether the database can be used, and if not, why and what fixes it."""

    def __init__(
        self,
        url: str,
        *,
        store: Store | None = None,
        current: str | None = None,
        problem: str | None = None,
    ) -> None:
        self.url = url
        self.store = store
        self.current = current
        self.head = head_revision()
        #: why the database cannot be used, naming the fix; None when it can
        self.problem = problem

    @property
    def usable(self) -> bool:
        return self.problem is None and self.store is not None


def _sqlite_file(url: str) -> Path | None:
    """The file behind a SQLite URL (None for other databases or memory)."""
    import sqlalchemy as sa

    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    return None if database.startswith("file:") else Path(database)


def _hide_password(url: str) -> str:
    import sqlalchemy as sa

    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "(not a database URL)"


class CheckContext:
    """The state one ``bmaas status check`` run works with."""

    def __init__(
        self,
        db: str | None = None,
        *,
        deadline: Deadline | None = None,
        bmc_timeout: float = DEFAULT_BMC_TIMEOUT,
        workers: int = DEFAULT_WORKERS,
        inventory: str | None = None,
        make_factory: Callable[..., DriverFactory] = driver_factory,
        wall_clock: Callable[[], float] = time.time,
        clock: ClockFn = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        selected: frozenset[str] | None = None,
    ) -> None:
        self.db = db
        #: the whole run's budget (DEFAULT_CHECK_DEADLINE from now when None)
        self.deadline = deadline or Deadline.after(DEFAULT_CHECK_DEADLINE, clock=clock)
        #: the most one BMC call may take (less when the deadline is short)
        self.max_bmc_timeout = bmc_timeout
        self.workers = workers
        self.inventory = inventory
        self.make_factory = make_factory
        #: the store's clock: leases and "expired 5m ago" are wall-clock times
        self.wall_clock = wall_clock
        #: the clock elapsed times are measured on (the deadline's own)
        self.clock = self.deadline.clock
        #: how a busy BMC's backoff waits (tests inject their fake clock's)
        self.sleep = sleep
        #: the checks being run (None: all); the sweep asks only what they need
        self.selected = selected
        self.started = self.clock()
        self._drivers: dict[str, type[BMCDriver] | InputError] = {}

    # -- time --------------------------------------------------------------------

    @functools.cached_property
    def sweep_deadline(self) -> Deadline:
        """When the BMC sweep stops waiting: the run's deadline less a reserve
        for the checks after it and the report."""
        total = self.deadline.at - self.started
        reserve = min(MAX_RESERVE, RESERVE_SHARE * total)
        return Deadline(self.deadline.at - reserve, self.deadline.clock)

    @functools.cached_property
    def bmc_timeout(self) -> float:
        """Seconds one BMC call may take: a share of the sweep's budget, at
        most ``--bmc-timeout``."""
        budget = self.sweep_deadline.at - self.started
        return min(self.max_bmc_timeout, max(MIN_CALL_DEADLINE, budget / CALL_SHARE))

    def wants(self, check: str) -> bool:
        return self.selected is None or check in self.selected

    # -- the database ------------------------------------------------------------

    @functools.cached_property
    def database(self) -> DatabaseState:
        """Open the database without creating or migrating anything; not even
        a connect when loading the database layer spent the deadline (at load
        25 that import took seconds, and a PostgreSQL connect started then
        still waits libpq's least timeout, 2 s, past the deadline)."""
        loading = self.clock()
        import sqlalchemy as sa

        from bmaas.store import Store

        url = resolve_url(self.db)
        if self.deadline.expired:
            return DatabaseState(
                _hide_password(url),
                problem=f"not asked: the deadline passed while the database layer loaded "
                f"({self.clock() - loading:.2f} s)",
            )
        path = _sqlite_file(url)
        if path is not None and not path.exists():
            # Opening it would create an empty file: a check changes nothing.
            return DatabaseState(
                str(path),
                problem=f"no database at {path}: `bmaas db upgrade` creates it, "
                "`bmaas enroll FILE` fills it",
            )
        try:
            store = Store.open(
                url, clock=self.wall_clock, check_schema=False, deadline=self.deadline
            )
        except InputError as exc:
            return DatabaseState(_hide_password(url), problem=str(exc))
        except (sa.exc.ArgumentError, ImportError) as exc:
            # an unknown dialect, or one whose DBAPI module is not installed
            return DatabaseState(_hide_password(url), problem=f"cannot open it: {exc}")
        try:
            current = store.schema_revision()
        except StoreError as exc:
            store.close()
            return DatabaseState(store.url, problem=f"cannot read it: {exc}")
        state = DatabaseState(store.url, store=store, current=current)
        if current is None:
            state.problem = f"{store.url} has no bmaas schema: run `bmaas db upgrade`"
        elif current != state.head and not known_revision(current):
            state.problem = (
                f"{store.url} is at schema {current}, which bmaas {__version__} does not "
                "know (a newer bmaas migrated it): upgrade bmaas, never downgrade the database"
            )
        elif current != state.head:
            state.problem = (
                f"{store.url} is at schema {current}, this bmaas needs {state.head}: "
                "run `bmaas db upgrade`"
            )
        return state

    def store(self) -> Store:
        """The store, or ``NotChecked`` naming what is wrong with the database."""
        state = self.database
        if not state.usable:
            # The database check prints the problem and its fix; say it once.
            why = "see database" if self.wants("database") else state.problem
            raise NotChecked(f"the database is not usable ({why})")
        assert state.store is not None
        return state.store

    @functools.cached_property
    def _nodes(self) -> list[NodeRecord]:
        return self.store().nodes.find()

    def nodes(self) -> list[NodeRecord]:
        """Every enrolled node, read once."""
        return self._nodes

    # -- drivers -----------------------------------------------------------------

    def driver_class(self, name: str) -> type[BMCDriver] | InputError:
        """The driver class named ``name``, or why it does not load (asked once)."""
        if name not in self._drivers:
            try:
                # Looked up through the module so tests can swap the registry out.
                self._drivers[name] = registry.load_driver(name)
            except InputError as exc:
                self._drivers[name] = exc
        return self._drivers[name]

    # -- the BMC sweep -------------------------------------------------------------

    @functools.cached_property
    def fleet(self) -> FleetReport:
        """Every node's BMC, asked once (see :mod:`bmaas.status.fleet`)."""
        return sweep(self)

    def close(self) -> None:
        state = self.__dict__.get("database")
        if state is not None and state.store is not None:
            state.store.close()
