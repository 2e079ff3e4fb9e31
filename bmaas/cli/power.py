"""``bmaas power``, ``bmaas boot-device`` and ``bmaas vmedia``: one BMC
operation over many nodes in parallel, a result line per node.

Every node's calls go through the operation retry
(:class:`~bmaas.retry.RetryingDriver`): a BMC that is busy for a moment is
asked again, a reset is never resent blindly (``power reboot`` is the safe
:func:`~bmaas.retry.reboot`). ``--no-retry`` makes one attempt per call, to
see each BMC's raw first answer. A node's line is ``ok`` or the policy
table's fleet word for the fault left after the retries (``FAIL``, ``BUSY``,
``AUTH``, ``UNSUPPORTED``, ...).

Exit codes: 0 every node ended fine after retries, 1 some did not (their
lines say why), 2 the command could not run (unknown node, bad arguments,
database).

Time: ``--deadline`` is the whole command. Its :class:`~bmaas.deadline.Deadline`
is made once, when the command starts, and handed to every node's operation
(retries and waits included); each BMC call gets a share of it of at most
``--bmc-timeout``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from bmaas.cli.app import describe_value, whoami
from bmaas.cli.fleet import FleetArgs, events, fleet_command, run_fleet
from bmaas.cliutil import ImageURL, Seconds
from bmaas.deadline import Deadline
from bmaas.driver import BootDevice, BootSetting, PowerAction, PowerState
from bmaas.ops import NodeResult
from bmaas.secrets import mask_url

if TYPE_CHECKING:  # the retry (tenacity) loads once the command's deadline is made
    from bmaas.retry import RetryingDriver

__all__ = ["boot_device", "power", "vmedia"]


# -- power ----------------------------------------------------------------------------


@click.group("power")
def power() -> None:
    """Read or change power state."""


@power.command("status")
@fleet_command()
def power_status(args: FleetArgs) -> None:
    """Read the power state of NODE... (or --all) and record it."""

    def record(results: list[NodeResult[Any]]) -> None:
        args.app.store().health.note_power(
            states={r.node: r.value for r in results if r.ok and r.value}
        )

    run_fleet(
        args,
        lambda d, deadline: d.get_power_state(deadline=deadline),
        label="power status",
        record=record,
    )


_WAIT = click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Wait until the node reads the target state.",
)
_TIMEOUT = click.option(
    "--timeout",
    type=Seconds(min=0),
    default=120.0,
    show_default=True,
    help="Seconds to wait for the target state (with --wait).",
)


def _power_command(action: PowerAction, help_text: str) -> click.Command:
    @click.command(action.value.replace("_", "-"), help=help_text)
    @fleet_command(_WAIT, _TIMEOUT)
    def command(args: FleetArgs, *, wait: bool, timeout: float) -> None:
        def operation(driver: RetryingDriver, deadline: Deadline) -> PowerState:
            # REBOOT with --wait is bmaas.retry.reboot: never resent blindly
            return driver.set_power_state(action, wait=wait, timeout=timeout, deadline=deadline)

        def record(results: list[NodeResult[Any]]) -> None:
            ok = [r for r in results if r.ok]
            store = args.app.store()
            store.health.note_power(states={r.node: r.value for r in ok if r.value})
            store.nodes.add_events(
                [(r.node, "power_action", f"power {action} requested") for r in ok],
                actor=whoami(),
            )

        run_fleet(args, operation, label=f"power {action}", record=record)

    return command


power.add_command(_power_command(PowerAction.ON, "Power NODE... (or --all) on."))
power.add_command(_power_command(PowerAction.OFF, "Power NODE... (or --all) off, hard."))
power.add_command(_power_command(PowerAction.SOFT_OFF, "Shut NODE... (or --all) down gracefully."))
power.add_command(_power_command(PowerAction.REBOOT, "Hard-reset NODE... (or --all)."))


# -- boot device -----------------------------------------------------------------------


@click.group("boot-device")
def boot_device() -> None:
    """Read or set the next boot device."""


@boot_device.command("get")
@fleet_command()
def boot_get(args: FleetArgs) -> None:
    """Read the next boot device of NODE... (or --all)."""
    run_fleet(
        args,
        lambda d, deadline: d.get_boot_device(deadline=deadline),
        label="boot device",
    )


@boot_device.command("set")
@fleet_command(
    click.option(
        "--device",
        "-d",
        required=True,
        type=click.Choice([d.value for d in BootDevice]),
        help="Device to boot from next.",
    ),
    click.option("--persistent", is_flag=True, help="Keep it for every boot, not just the next."),
)
def boot_set(args: FleetArgs, *, device: str, persistent: bool) -> None:
    """Set the next boot device of NODE... (or --all); read back to verify."""
    target = BootDevice(device)

    def operation(driver: RetryingDriver, deadline: Deadline) -> BootSetting:
        driver.set_boot_device(target, persistent=persistent, deadline=deadline)
        # the same shape as `get`: {"device", "persistent"} in JSON
        return BootSetting(target, persistent)

    def record(results: list[NodeResult[Any]]) -> None:
        said = [
            (r.node, "boot_device", f"boot device set to {describe_value(r.value)}")
            for r in results
            if r.ok
        ]
        args.app.store().nodes.add_events(said, actor=whoami())

    run_fleet(args, operation, label="boot device", record=record)


# -- virtual media ----------------------------------------------------------------------


@click.group("vmedia")
def vmedia() -> None:
    """Insert or eject virtual media (a CD image by URL)."""


@vmedia.command("insert")
@fleet_command(
    click.option(
        "--url",
        required=True,
        type=ImageURL(),
        help="Image URL the BMC fetches: http(s)://, or nfs:// or cifs:// where the BMC "
        "takes them.",
    )
)
def vmedia_insert(args: FleetArgs, *, url: str) -> None:
    """Insert the image at --url into NODE... (or --all)."""

    def operation(driver: RetryingDriver, deadline: Deadline) -> str:
        driver.insert_virtual_media(url, deadline=deadline)
        return "inserted"

    said = f"virtual media inserted: {mask_url(url)}"
    run_fleet(args, operation, label="vmedia insert", record=events(args.app, "vmedia", said))


@vmedia.command("eject")
@fleet_command(
    click.option(
        "--url",
        default=None,
        type=ImageURL(),
        help="Eject only this image (as given to vmedia insert): slots holding another "
        "tool's media are left. Default: every CD slot's media, whoever inserted it.",
    )
)
def vmedia_eject(args: FleetArgs, *, url: str | None) -> None:
    """Eject virtual media from NODE... (or --all).

    Naming the nodes asks for their CD slots to be emptied, whoever inserted
    the media (``force`` at the library level, where the default ejects only
    what bmaas inserted); with --url only that image is ejected."""

    def operation(driver: RetryingDriver, deadline: Deadline) -> str:
        driver.eject_virtual_media(deadline=deadline, url=url, force=url is None)
        return "ejected"

    said = "virtual media ejected" + (f": {mask_url(url)}" if url else "")
    run_fleet(args, operation, label="vmedia eject", record=events(args.app, "vmedia", said))
