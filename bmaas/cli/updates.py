"""``bmaas firmware update`` and ``bmaas bmc reset``: long BMC work followed
to its end on many nodes, a result line per node (issue 51).

``firmware update NODE... --image URI [--targets ID]`` hands each BMC the
image (Redfish SimpleUpdate, else a multipart push of a local file), follows
its task (or vendor job) to its end, waits for a BMC that reboots into its
new firmware (``--back-checks`` answers in a row, ``--back-interval`` apart,
within ``--back-timeout``), and reads the version back: unchanged is
``SettingsNotApplied``, never success (:mod:`bmaas.updates`). At most
``--workers`` nodes at once (a rolling update); the first node whose BMC
rejects the image stops the roll-out: nodes not started yet are ``SKIPPED``
(the image is wrong; every node of the kind would refuse it). Progress lines
(``node: task Running 40%``) go to stderr, except with ``--json``.

``bmc reset NODE...`` restarts each BMC (``Manager.Reset``) and waits for it
the same way: ``BMCNotBack`` when it stays away past ``--back-timeout``.

``--deadline`` bounds the whole command, tasks and waits included. While a
node's update runs it is marked in the store (``extra.firmware_update``, at
the latest until the deadline): ``bmaas sync`` counts none of its faults
meanwhile, so a BMC rebooting into new firmware never fences the node.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from bmaas.cli.app import check_selection, seconds_option, whoami
from bmaas.cli.fleet import FleetArgs, fleet_command, run_fleet
from bmaas.cliutil import InputProblems
from bmaas.deadline import Deadline
from bmaas.faults import BmaasError, InputError, NodeUnavailable
from bmaas.hardware import FirmwareComponent
from bmaas.ops import NodeResult
from bmaas.policy import Reschedule, policy_for
from bmaas.updates import UpdateBounds

if TYPE_CHECKING:
    from bmaas.retry import RetryingDriver

__all__ = ["bmc", "check_image", "firmware_update_command"]

_DEFAULTS = UpdateBounds()

#: the options of waiting for a BMC, shared by ``firmware update`` and ``bmc reset``
_WAIT_OPTIONS = (
    seconds_option(
        "--back-timeout",
        _DEFAULTS.back,
        0,
        "Seconds a BMC may stay away (rebooting) before it is BMCNotBack.",
    ),
    click.option(
        "--back-checks",
        type=click.IntRange(min=1, max=100),
        default=_DEFAULTS.good,
        show_default=True,
        help="Answers in a row that make a BMC back.",
    ),
    seconds_option(
        "--back-interval",
        _DEFAULTS.interval,
        0,
        "Seconds between two asks while waiting for a BMC.",
    ),
)


def _bounds(**given: Any) -> UpdateBounds:
    return UpdateBounds(
        task=given.get("task_timeout", _DEFAULTS.task),
        poll=given.get("poll", _DEFAULTS.poll),
        back=given["back_timeout"],
        good=given["back_checks"],
        interval=given["back_interval"],
    )


def _lines(args: FleetArgs, node: str) -> Callable[[str], None]:
    """A node's progress lines on stderr (nothing with ``--json``)."""
    if args.as_json:
        return lambda _line: None
    return lambda line: click.echo(f"{node}: {line}", err=True)


def check_image(
    args: FleetArgs, image: str | None, targets: tuple[str, ...]
) -> tuple[str, tuple[str, ...]]:
    """The image URI and the component ids, or every problem of the command
    line at once (the nodes' selection too)."""
    problems = []
    try:
        check_selection(args.nodes, args.all_nodes)
    except InputError as exc:
        problems.append(exc)
    if not image:
        problems.append(InputError("give the image to install (--image URI)", field="--image"))
    elif urllib.parse.urlsplit(image).scheme not in ("http", "https", "file", ""):
        problems.append(
            InputError(f"{image!r} is not an http, https or file URI or a path", field="--image")
        )
    ids = tuple(t.strip() for given in targets for t in given.split(","))
    if any(not t for t in ids):
        problems.append(InputError("an empty component id", field="--targets"))
    if problems:
        raise InputProblems(problems)
    assert image is not None
    return image, ids


def _describe(value: Any) -> str:
    if not isinstance(value, list):
        return str(value)
    return "now " + ", ".join(
        f"{c.id} {c.version or '?'}" for c in value if isinstance(c, FirmwareComponent)
    )


def firmware_update_command(group: click.Group) -> None:
    """Add ``update`` to the ``firmware`` group (:mod:`bmaas.cli.lifecycle`)."""

    @group.command("update")
    @fleet_command(
        click.option("--image", metavar="URI", help="The firmware image (http, https, file)."),
        click.option(
            "--targets",
            multiple=True,
            metavar="ID[,ID]",
            help="Firmware components to update, as `firmware list` names them "
            "(default: the BMC chooses).",
        ),
        seconds_option(
            "--task-timeout",
            _DEFAULTS.task,
            0,
            "Seconds the update's task may run before it is TaskStuck (left running).",
        ),
        seconds_option("--poll", _DEFAULTS.poll, 0, "Seconds between two reads of a running task."),
        *_WAIT_OPTIONS,
    )
    def firmware_update(
        args: FleetArgs, *, image: str | None, targets: tuple[str, ...], **given: Any
    ) -> None:
        """Update the firmware of NODE... (or --all), followed to its end and
        verified; at most --workers at once, stopping at the first image
        rejected."""
        uri, ids = check_image(args, image, targets)
        bounds = _bounds(**given)
        stopped: list[str] = []  # the node whose BMC rejected the image
        lock = threading.Lock()

        def operation(driver: RetryingDriver, deadline: Deadline) -> list[FirmwareComponent]:
            with lock:
                if stopped:
                    raise NodeUnavailable(
                        f"not updated: {stopped[0]}'s BMC rejected the image", node=driver.node
                    )
            # marked while it runs: the sync counts none of its faults (its
            # BMC reboots), at the latest until this command's deadline
            nodes = args.app.store().nodes
            until = args.app.store().clock() + deadline.left()
            nodes.mark_update(driver.node, until=until, by=whoami(), what=f"updating from {uri}")
            try:
                return driver.update_firmware(
                    uri,
                    targets=ids,
                    deadline=deadline,
                    bounds=bounds,
                    progress=_lines(args, driver.node),
                )
            except BmaasError as exc:
                if policy_for(exc).reschedule is Reschedule.STOP:  # the request is wrong
                    with lock:
                        stopped.append(driver.node)
                raise
            finally:
                nodes.mark_update(driver.node, until=None, by=whoami())

        def record(results: list[NodeResult[Any]]) -> None:
            said = [(r.node, "firmware", f"firmware updated from {uri}") for r in results if r.ok]
            args.app.store().nodes.add_events(said, actor=whoami())

        run_fleet(args, operation, label="firmware update", record=record, describe=_describe)


@click.group("bmc")
def bmc() -> None:
    """The BMCs themselves: reset, and wait for their return."""


@bmc.command("reset")
@fleet_command(*_WAIT_OPTIONS)
def bmc_reset(args: FleetArgs, **given: Any) -> None:
    """Restart the BMC of NODE... (or --all) and wait until it answers
    --back-checks times in a row (BMCNotBack past --back-timeout)."""
    bounds = _bounds(**given)

    def operation(driver: RetryingDriver, deadline: Deadline) -> float:
        return driver.reset_bmc(
            deadline=deadline, bounds=bounds, progress=_lines(args, driver.node)
        )

    run_fleet(
        args,
        operation,
        label="bmc reset",
        describe=lambda waited: f"back after {waited:.1f}s",
    )
