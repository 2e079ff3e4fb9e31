"""What every ``bmaas`` command shares: the store, the driver factory, node
selection, per-node result lines, progress, and output formats.

:class:`App` is click's context object. Tests pass their own
(``CliRunner().invoke(cli, args, obj=App(make_factory=...))``) to drive fake
fleets; ``bmaas`` itself uses the real driver factory.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import click

from bmaas.cliutil import EXIT_FAILURE, Seconds, WholeNumber, echo_rows
from bmaas.deadline import Deadline
from bmaas.driver import DEFAULT_BMC_TIMEOUT, Quirk
from bmaas.faults import BmaasError, InputError
from bmaas.ops import DEFAULT_WORKERS, DriverFactory, NodeResult, driver_factory
from bmaas.policy import FleetOutcome, policy_for
from bmaas.secrets import mask

if TYPE_CHECKING:
    # The store (SQLAlchemy), its records and the retry (tenacity) load when the
    # command uses them, after its --deadline is made: what a fleet command
    # imports before that first look: tests/unit/test_cli_deadline_imports.py
    from bmaas.retry import RetryLimits
    from bmaas.store import NodeRecord, Store

__all__ = [
    "DEFAULT_FLEET_DEADLINE",
    "PROGRESS_MIN_NODES",
    "App",
    "Decorator",
    "bmc_timeout_option",
    "check_selection",
    "deadline_option",
    "emit",
    "fleet_options",
    "fleet_run_options",
    "json_option",
    "node_selection",
    "options",
    "outcome",
    "output_options",
    "pass_app",
    "print_results",
    "progress",
    "progress_lines",
    "retry_option",
    "seconds_option",
    "select_nodes",
    "whoami",
    "workers_option",
]

LOG = logging.getLogger(__name__)

#: the quirk names a node's record may hold that this bmaas knows
_QUIRKS = frozenset(str(q) for q in Quirk)

#: below this many nodes a run is quick enough that a bar is noise
PROGRESS_MIN_NODES = 10


@dataclasses.dataclass
class App:
    """The state one ``bmaas`` invocation works with."""

    db: str | None = None
    #: builds a DriverFactory for a per-call bound, ``bmc_timeout`` (tests: a fake fleet)
    make_factory: Callable[..., DriverFactory] = driver_factory
    #: wall clock for the store (leases, timestamps)
    clock: Callable[[], float] = time.time
    #: how fleet commands retry each node's call (tests: a fake clock and sleep;
    #: None: :class:`~bmaas.retry.RetryLimits`' defaults)
    retry: RetryLimits | None = None
    #: the clock a command's Deadline is made on (tests: the fake fleet's)
    deadline_clock: Callable[[], float] = time.monotonic
    #: where the command's budget starts, on ``deadline_clock``: the ``bmaas``
    #: process's start (``main()`` sets it, :func:`bmaas.clock.process_started`),
    #: so start-up and imports spend the budget too; None: when the command
    #: makes its deadline (an App made in-process, by tests or a library)
    started: float | None = None
    _store: Store | None = None
    #: the command's deadline (the first :meth:`deadline` made), which bounds the store
    _command_deadline: Deadline | None = None
    #: the drivers :meth:`factory` built, with their nodes: what they learned
    #: about their BMCs (quirks) is recorded on the nodes when the command ends
    _built: list[tuple[NodeRecord, Any]] = dataclasses.field(default_factory=list)

    def store(self, *, check_schema: bool = True, create: bool = False) -> Store:
        """The store, opened once. Only ``bmaas enroll`` and ``bmaas db
        upgrade`` create a missing database (``create=True``); every other
        command says "no database at X; run `bmaas enroll`". Its connects
        and statements end by the command's ``--deadline`` when it has one
        (else within the store's own ``BUSY_TIMEOUT`` each)."""
        if self._store is None:
            from bmaas.store import Store

            self._store = Store.open(
                self.db,
                clock=self.clock,
                check_schema=check_schema,
                create=create,
                deadline=self._command_deadline,
            )
        return self._store

    def deadline(self, seconds: float) -> Deadline:
        """The command's deadline: made once, where the command starts. The
        first one made also bounds the store, if it is opened after it (a
        command that loops, ``sync --interval``, opens the store first: each
        pass's deadline then bounds that pass's BMC work, and each database
        call its own ``BUSY_TIMEOUT``).

        The first one counts from :attr:`started` when it is set (``bmaas``'s
        ``exec``): ``--deadline 0.1`` means 0.1 s from ``exec``, start-up,
        imports and the store's opening included, as a person timing the
        command sees it. A start-up that already spent it ends the command
        at once, before anything heavy is loaded or any BMC asked: one
        ``error:`` line, exit 1 (the rest -- the database, the drivers --
        would only add their own loading time past the deadline)."""
        if self._command_deadline is None and self.started is not None:
            now = self.deadline_clock()
            begun = min(self.started, now)
            made = Deadline(begun + seconds, self.deadline_clock)
            if made.expired:
                from bmaas.cli.budget import say_spent

                say_spent(seconds, now - begun)
                raise click.exceptions.Exit(EXIT_FAILURE)
        else:
            made = Deadline.after(seconds, clock=self.deadline_clock)
        if self._command_deadline is None:
            self._command_deadline = made
        return made

    def factory(self, bmc_timeout: float) -> DriverFactory:
        """The command's driver factory. The process's TLS settings and the
        store's key are checked first: a bad ``BMAAS_REDFISH_TLS_*`` value, a
        missing or wrong key file is one line and exit 2 before any BMC is
        asked, not a failure per node (:meth:`bmaas.store.keys.KeysRepo.check`)."""
        from bmaas import tlspolicy
        from bmaas.cliutil import InputProblems
        from bmaas.store.records import QUIRKS_KEY

        problems = tlspolicy.environment_problems()  # BMAAS_REDFISH_TLS_*: exit 2 up front
        if problems:
            raise InputProblems(problems)
        if self._store is not None:
            self._store.keys.check()
        made = self.make_factory(bmc_timeout=bmc_timeout)

        def build(record: NodeRecord) -> Any:
            driver = made(record)
            # what the node's BMC showed before (a BMC that reads the boot
            # device from the running machine): judged as such from the start
            known = getattr(driver, "quirks", None)
            if isinstance(known, set):
                known |= {Quirk(q) for q in record.extra.get(QUIRKS_KEY) or () if q in _QUIRKS}
            self._built.append((record, driver))
            return driver

        return build

    def record_quirks(self) -> None:
        """Record on each node what its driver learned about the BMC
        (``extra.bmc_quirks``: a downgrade such as IPMI cipher suite 3 is
        never silent), once, when the command ends."""
        built, self._built = self._built, []
        if self._store is None:
            return
        from bmaas.store.records import QUIRKS_KEY

        for record, driver in built:
            learned = {str(q) for q in getattr(driver, "quirks", ())}
            if not learned - set(record.extra.get(QUIRKS_KEY) or ()):
                continue
            try:
                self._store.nodes.record_quirks(record.name, learned)
            except BmaasError as exc:  # the command's own result stands
                LOG.warning("%s: could not record BMC quirks %s: %s", record.name, learned, exc)

    def retry_limits(self, *, no_retry: bool = False) -> RetryLimits:
        """The operation retry a fleet command gives each node's calls;
        ``--no-retry``: one attempt, the BMC's raw first answer."""
        from bmaas.retry import RetryLimits

        limits = RetryLimits() if self.retry is None else self.retry
        return limits.replace(max_attempts=1) if no_retry else limits

    def close(self) -> None:
        self.record_quirks()
        if self._store is not None:
            self._store.close()
            self._store = None
        self._command_deadline = None  # the next command (tests reuse an App) makes its own


pass_app = click.make_pass_decorator(App, ensure=True)


def whoami() -> str:
    """Who a person's action is recorded as (``maintenance_by``, events)."""
    import getpass  # termios: loaded by the command that records an action

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


# -- options ----------------------------------------------------------------------
#
# Each flag is made in one place; a command lists the groups it takes. A group
# is a list of click options applied in the order they read in ``--help``.

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def options(*decorators: Decorator) -> Decorator:
    """One decorator applying ``decorators`` so that they read in ``--help``
    in the order given (as if stacked top to bottom over the function)."""

    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


def json_option(help: str = "Print JSON.") -> Decorator:
    """``--json`` (as ``as_json``)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def output_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    return options(
        json_option(), click.option("--yaml", "as_yaml", is_flag=True, help="Print YAML.")
    )(fn)


#: seconds a fleet command (power, boot-device, vmedia, sync) may take in all
DEFAULT_FLEET_DEADLINE = 300.0

_FLEET_DEADLINE_HELP = (
    "Seconds the whole command may take, every node, retry and wait included; "
    "nodes not done by then are reported as timeouts."
)
_BMC_TIMEOUT_HELP = "Seconds one BMC call may take (each gets at most what --deadline has left)."


def seconds_option(flag: str, default: float, least: float, help_text: str) -> Decorator:
    """A number of seconds, at least ``least`` (``10``, ``1.5``; never NaN or inf)."""
    return click.option(
        flag, type=Seconds(min=least), default=default, show_default=True, help=help_text
    )


def deadline_option(
    *, default: float = DEFAULT_FLEET_DEADLINE, least: float = 0.1, help: str = _FLEET_DEADLINE_HELP
) -> Decorator:
    """``--deadline``: the seconds the whole command may take (its one Deadline)."""
    return seconds_option("--deadline", default, least, help)


def bmc_timeout_option(help: str = _BMC_TIMEOUT_HELP) -> Decorator:
    """``--bmc-timeout``: the bound of one BMC call (never more than what the
    command's ``--deadline`` has left)."""
    return click.option(
        "--bmc-timeout",
        type=Seconds(min=0.1),
        default=DEFAULT_BMC_TIMEOUT,
        show_default=True,
        help=help,
    )


def workers_option(
    *, default: int = DEFAULT_WORKERS, most: int = 512, help: str = "Nodes worked on at once."
) -> Decorator:
    """``--workers``: how many nodes (or requests) are worked on at once."""
    return click.option(
        "--workers",
        type=WholeNumber(min=1, max=most),
        default=default,
        show_default=True,
        help=help,
    )


#: ``--workers``, ``--deadline`` (the whole command) and ``--bmc-timeout``
#: (one BMC call) for commands that talk to many BMCs
fleet_options = options(workers_option(), deadline_option(), bmc_timeout_option())

#: ``--no-retry`` for commands whose BMC calls go through ``bmaas.retry``
retry_option = click.option(
    "--no-retry",
    is_flag=True,
    help="One attempt per BMC call: show each BMC's raw first answer.",
)

#: the budgets, retry and output flags of a fleet command (power, sync, ...)
fleet_run_options = options(
    fleet_options, retry_option, json_option("Print JSON, no progress bar.")
)

#: NODE... or ``--all``
node_selection = options(
    click.argument("nodes", nargs=-1),
    click.option("--all", "all_nodes", is_flag=True, help="Every enrolled node."),
)


def check_selection(nodes: Sequence[str], all_nodes: bool) -> None:
    """NODE... or ``--all``, one of the two, as the command line gives them:
    a fleet command checks this before its ``--deadline`` is looked at, so
    a command line without nodes is exit 2 at any budget (issue 44)."""
    if all_nodes and nodes:
        raise InputError("name nodes or give --all, not both", field="NODE")
    if not all_nodes and not nodes:
        raise InputError("name at least one node, or give --all", field="NODE")


def select_nodes(store: Store, nodes: Sequence[str], all_nodes: bool) -> list[NodeRecord]:
    """The nodes a command acts on: named ones (all must exist) or ``--all``."""
    check_selection(nodes, all_nodes)
    return store.nodes.find() if all_nodes else store.nodes.require(nodes)


# -- output -------------------------------------------------------------------------


def emit(data: Any, *, as_json: bool, as_yaml: bool) -> bool:
    """Print ``data`` as JSON or YAML (credentials masked); ``False`` if the
    caller should print its table instead."""
    if as_json and as_yaml:
        raise InputError("choose one of --json and --yaml", field="--json")
    if as_json:
        click.echo(json.dumps(mask(data), indent=2, sort_keys=True, default=str))
        return True
    if as_yaml:
        import yaml

        clean = json.loads(json.dumps(mask(data), default=str))
        click.echo(yaml.safe_dump(clean, sort_keys=True, default_flow_style=False).rstrip())
        return True
    return False


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    """Plain aligned columns: greppable, and readable over a serial console."""
    cells = [[("-" if v is None or v == "" else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    lines = [[h.upper() for h in headers], *cells]
    echo_rows(
        ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in lines]
    )


@contextlib.contextmanager
def progress(total: int, label: str, *, quiet: bool) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr for long runs; nothing when ``quiet`` (JSON
    output), when stderr is not a terminal, or for a handful of nodes."""
    if quiet or total < PROGRESS_MIN_NODES:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        yield lambda: None
        return
    columns = (
        "{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)


@contextlib.contextmanager
def progress_lines(
    total: int, *, quiet: bool, line: Callable[[Any], str]
) -> Iterator[Callable[[Any], None]]:
    """One line on stderr per finished item (``[3/8] web-003: active on
    r1-n04 in 4.2s``) for slow work such as deploys, on a terminal only;
    nothing with ``quiet`` (JSON output) or when stderr is a pipe or file."""
    if quiet or not sys.stderr.isatty():
        yield lambda _item: None
        return
    done = 0
    lock = threading.Lock()

    def tick(item: Any) -> None:
        nonlocal done
        with lock:  # results arrive from worker threads
            done += 1
            click.echo(f"[{done}/{total}] {line(item)}", err=True)

    yield tick


def describe_value(value: Any) -> str:
    """How a result value reads on a result line."""
    persistent = getattr(value, "persistent", None)
    device = getattr(value, "device", None)
    if device is not None and persistent is not None:
        return f"{device} ({'persistent' if persistent else 'once'})"
    return "done" if value is None else str(value)


def outcome(result: NodeResult[Any]) -> FleetOutcome:
    """How a node's line reads: ``ok``, or the policy table's fleet column
    for the fault that was left once the retries were spent."""
    return FleetOutcome.OK if result.error is None else policy_for(result.error).fleet


def print_results(
    results: Sequence[NodeResult[Any]],
    *,
    as_json: bool,
    elapsed: float,
    describe: Callable[[Any], str] = describe_value,
) -> int:
    """One line per node (ok, or the outcome the policy table gives its fault,
    the fault class and message), a summary on stderr; returns the exit code:
    0 every node ended fine (after retries), 1 some did not."""
    failed = [r for r in results if not r.ok]
    if as_json:
        click.echo(
            json.dumps(
                mask(
                    {
                        "results": [{**r.to_dict(), "outcome": outcome(r).value} for r in results],
                        "ok": len(results) - len(failed),
                        "failed": len(failed),
                        "elapsed": round(elapsed, 3),
                    }
                ),
                indent=2,
                sort_keys=True,
                default=str,
            )
        )
    else:
        width = max((len(r.node) for r in results), default=0)
        words = [outcome(r).label for r in results]
        column = max([4, *(len(w) for w in words)])  # "FAIL" at least, as ever
        rows = []
        for r, word in zip(results, words, strict=True):
            what = describe(r.value) if r.error is None else f"{type(r.error).__name__}: {r.error}"
            rows.append(f"{r.node:<{width}}  {word:<{column}}  {what}")
        echo_rows(rows)
        counts = collections.Counter(outcome(r).value for r in failed)
        detail = ", ".join(f"{n} {word}" for word, n in sorted(counts.items()))
        summary = f"{len(results) - len(failed)} ok, {len(failed)} failed"
        if detail and set(counts) != {FleetOutcome.FAILED.value}:
            summary += f" ({detail})"
        click.echo(f"{summary} in {elapsed:.2f}s", err=True)
    return EXIT_FAILURE if failed else 0
