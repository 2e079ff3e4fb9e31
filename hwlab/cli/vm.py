"""``hwlab vm image|up|down``: the VM lab (real firmware behind stock BMC emulators)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from bmaas.cliutil import Seconds, WholeNumber
from bmaas.home import user_dir
from bmaas.hwlab.vm.domain import FIRMWARE
from bmaas.hwlab.vm.image import MACHINE_FAULTS, build_image
from bmaas.hwlab.vm.state import EMULATORS, MAX_VMS

__all__ = ["vm"]


def _default_state_dir() -> str:
    """``~/.local/state/hwlab/vm``, or ``$BMAAS_HOME/hwlab/vm``."""
    return os.path.join(user_dir("state", "hwlab"), "vm")


state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=_default_state_dir,
    envvar="HWLAB_VM_STATE_DIR",
    show_default="per-user state dir, vm",
    help="Where the VM lab keeps vm.json, inventory.yaml and the serial logs.",
)


@click.group()
def vm() -> None:
    """Small libvirt VMs (TCG) behind stock sushy-tools and virtualbmc.

    \b
    sudo bash scripts/vm-setup.sh      # libvirt, qemu, the pool (once)
    hwlab vm up --count 2 --proxies    # VMs off; BMCs listening on 127.0.0.1
    bmaas enroll STATE_DIR/inventory.yaml
    bmaas deploy --count 2 --image URL --ready-log 'STATE_DIR/serial/{node}.log' \\
        --ready-pattern 'BMAAS-BOOTED via=vmedia'
    hwlab vm cd                        # the CD drives back (vmedia's eject took them)
    # IPMI (hwlab vm up --driver ipmi): the CD drive, by a one-time boot override
    bmaas deploy --count 2 --ready-log ... --ready-pattern 'BMAAS-BOOTED via=cdrom'
    hwlab vm restart-bmc vbmcd --down 5  # really restart a BMC (a lab without --proxies)
    hwlab vm down
    """


@vm.command("image")
@click.option("--force", is_flag=True, help="Rebuild even if cached.")
def image_cmd(force: bool) -> None:
    """Build (or find cached) the boot ISOs, kernel and initramfs; print their paths.

    disk_iso is a user image (it prints via=disk); writer_iso a deploy image
    that writes it to the VM's disk and powers off (bmaas deploy --to-disk);
    uefi_iso and uefi_vmedia_iso boot UEFI VMs only (signed for Secure Boot);
    uefi_disk and uefi_writer_iso are their disk_iso and writer_iso."""
    image = build_image(force=force)
    click.echo(f"iso: {image.iso}\nvmedia_iso: {image.vmedia_iso}")
    click.echo(f"disk_iso: {image.disk_iso}\nwriter_iso: {image.writer_iso}")
    click.echo(f"uefi_iso: {image.uefi_iso}\nuefi_vmedia_iso: {image.uefi_vmedia_iso}")
    click.echo(f"uefi_disk: {image.uefi_disk}\nuefi_writer_iso: {image.uefi_writer_iso}")
    click.echo(f"kernel: {image.kernel}\ninitramfs: {image.initramfs}")


@vm.command("up")
@click.option(
    "--count",
    "-n",
    type=WholeNumber(1, MAX_VMS),
    default=2,
    show_default=True,
    help=f"VMs to define, at most {MAX_VMS} (each boot costs 5-8 CPU s under TCG).",
)
@click.option(
    "--proxies/--no-proxies",
    default=False,
    show_default=True,
    help="Put hwlab's Redfish and IPMI fault proxies in front (hwlab fault works).",
)
@click.option(
    "--driver",
    type=click.Choice(["redfish", "ipmi"]),
    default="redfish",
    show_default=True,
    help="The driver the inventory enrolls each VM with.",
)
@click.option(
    "--memory",
    "memory_mib",
    type=WholeNumber(128, 2048),
    default=256,
    show_default=True,
    help="MiB per VM.",
)
@click.option(
    "--cdrom",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="ISO for each VM's own CD drive (default: the lab's, saying via=cdrom): what a "
    "deploy without virtual media (IPMI, deploy_boot_device: cdrom) boots.",
)
@click.option(
    "--firmware",
    type=click.Choice(FIRMWARE),
    default="bios",
    show_default=True,
    help="SeaBIOS, or OVMF (UEFI) with Secure Boot off or on (uefi-secure: Debian's "
    "snakeoil key enrolled; the lab's UEFI images are signed with it).",
)
@state_dir_option
def up_cmd(
    count: int,
    proxies: bool,
    driver: str,
    memory_mib: int,
    cdrom: Path | None,
    firmware: str,
    state_dir: Path,
) -> None:
    """Define COUNT VMs (off) and start their BMCs; write STATE_DIR/inventory.yaml."""
    from bmaas.hwlab.vm.lab import up

    lab = up(
        state_dir,
        count=count,
        proxies=proxies,
        driver=driver,
        memory_mib=memory_mib,
        cdrom=cdrom,
        firmware=firmware,
    )
    click.echo(f"lab {lab.id_text}")
    click.echo(f"inventory: {state_dir / 'inventory.yaml'}")
    click.echo(f"serial logs: {lab.serial_template}")
    click.echo(f"vmedia image: {lab.vmedia_iso}")
    click.echo(f"CD drives hold: {lab.iso}")
    if proxies:
        click.echo(
            f"faults: hwlab fault add {lab.domains[0]}-redfish ... --state-dir {lab.lab_dir}"
        )


@vm.command("cd")
@click.option(
    "--iso",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The ISO to put in (default: what hwlab vm up put there).",
)
@state_dir_option
def cd_cmd(iso: Path | None, state_dir: Path) -> None:
    """Put each VM's CD drive back with its disc (virtual media's eject removes it).

    IPMI has no virtual media: a deploy by IPMI (deploy_boot_device: cdrom)
    boots what this drive holds. Takes effect at each VM's next cold start.
    """
    from bmaas.hwlab.vm.lab import insert_cd

    lab = insert_cd(state_dir, iso)
    click.echo(f"CD drives of {', '.join(lab.domains)} hold: {lab.iso}")


@vm.command("fault")
@click.argument("node")
@click.argument("fault", type=click.Choice([*MACHINE_FAULTS, "clear"]))
@state_dir_option
def fault_cmd(node: str, fault: str, state_dir: Path) -> None:
    """Make VM NODE's own boots fail: panic (its kernel panics, the machine
    halts, still on) or hang (before its marker); clear ends it.

    On the machine, not at a proxy (a proxy refuses boot_crash): the lab's
    images read it from the VM's disk at every boot, whatever the medium.
    Set it with the VM off."""
    from bmaas.hwlab.vm.lab import machine_fault

    machine_fault(state_dir, node, None if fault == "clear" else fault)
    click.echo(f"{node}: {'boots normally' if fault == 'clear' else f'every boot: {fault}'}")


@vm.command("restart-bmc")
@click.argument("emulators", nargs=-1, type=click.Choice([*EMULATORS, "all"]))
@click.option(
    "--down",
    "down_s",
    type=Seconds(max=600),
    default=5.0,
    show_default=True,
    help="Seconds its ports refuse between the stop and the start.",
)
@state_dir_option
def restart_bmc_cmd(emulators: tuple[str, ...], down_s: float, state_dir: Path) -> None:
    """Really restart EMULATOR (sushy-emulator: Redfish of every VM; vbmcd:
    IPMI; all): SIGTERM (SIGKILL past 10 s), its ports refusing --down
    seconds, started again with the same config and ports. The VMs keep
    running. A lab up without --proxies (with them: hwlab fault's bmc_reboot)."""
    from bmaas.hwlab.vm.restart import restart_bmc

    if not emulators:
        raise click.UsageError(f"name an emulator: {', '.join(EMULATORS)} or all")
    names = list(EMULATORS) if "all" in emulators else list(dict.fromkeys(emulators))
    for done in restart_bmc(state_dir, names, down=down_s):
        click.echo(
            f"{done.name}: pid {done.old_pid} stopped by {done.stopped_by} in "
            f"{done.stop_s:.1f}s; ports {', '.join(map(str, done.ports))} refused "
            f"{done.refused_s:.1f}s; pid {done.new_pid} answering"
        )


@vm.command("down")
@state_dir_option
def down_cmd(state_dir: Path) -> None:
    """Destroy and undefine this lab's VMs (never another lab's), delete the
    pool volumes made for them; stop the emulators and proxies."""
    from bmaas.hwlab.vm.lab import down

    stopped = down(state_dir)
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "no VM lab here")
