"""``hwlab up``, ``down``, ``status``, ``profiles``, ``fault``, ``power``: a lab's life."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from bmaas.cliutil import EXIT_USAGE, InputFile, Seconds, WholeNumber, emit_json
from bmaas.deadline import Deadline
from bmaas.fakes.effects import EFFECTS, describe_effects, incident_record
from bmaas.fakes.faults import FaultRule
from bmaas.fakes.incidents import INCIDENTS
from bmaas.fakes.machine import HEALTH_STATES
from bmaas.faults import InputError
from bmaas.hwlab.cli.common import parse_seed, state_dir_option
from bmaas.hwlab.control import LabClient, LabNotRunning
from bmaas.hwlab.limits import MAX_NODES, MAX_SHARD_SIZE, SSE_KEEPALIVE
from bmaas.hwlab.pyexec import python_argv
from bmaas.yamlsrc import load_text

if TYPE_CHECKING:
    from bmaas.hwlab.daemon import LabOptions

__all__ = [
    "down",
    "effects_cmd",
    "fault",
    "health",
    "parse_rule_arg",
    "power",
    "profiles_cmd",
    "status",
    "up",
]


STDERR = Console(stderr=True)


@click.command()
@click.option(
    "--nodes",
    "-n",
    type=WholeNumber(1, MAX_NODES),
    default=4,
    show_default=True,
    help="Number of nodes (ignored with --lab-file).",
)
@click.option(
    "--protocols",
    type=click.Choice(["mixed", "ipmi", "redfish", "both"]),
    default="mixed",
    show_default=True,
    help="mixed: half IPMI, half Redfish; both: every machine speaks both.",
)
@click.option(
    "--lab-file",
    type=InputFile(exists=True),
    help="A YAML lab file (nodes, hardware, credentials, fault rules).",
)
@click.option(
    "--profile",
    help="Fault profile(s): a built-in name (see 'hwlab profiles'), a "
    "YAML file, or several separated by commas.",
)
@click.option("--seed", default=None, help="Seed for every random choice (default 0).")
@click.option(
    "--shape",
    default=None,
    help="Vendor shape of every Redfish BMC: hwlab (default), dmtf, idrac9, idrac10, "
    "dell-r6515, ilo5, ilo5-1.40, xcc, supermicro, supermicro-x12, openbmc, and the "
    "gaps ami, no-managedby, no-override, dmtf-held (a lab file's per-node 'shape' wins).",
)
@click.option("--redfish-tls", is_flag=True, help="Serve Redfish over HTTPS (self-signed).")
@click.option(
    "--redfish-service-size",
    type=WholeNumber(1, 1000),
    default=1,
    show_default=True,
    help="Redfish systems per service: >1 serves that many Redfish nodes from one "
    "port (one service root, one SessionService), as a chassis manager or sushy-tools does.",
)
@click.option(
    "--sse-keepalive",
    type=Seconds(),
    default=None,
    metavar="SECONDS",
    help="Seconds between ': keepalive' comments on an idle Redfish SSE stream "
    f"(default: the lab file's sse_keepalive, else {SSE_KEEPALIVE:g}); 0: none at all, "
    "as OpenBMC's bmcweb, which writes only events.",
)
@click.option(
    "--ipmi-base-port",
    type=WholeNumber(0, 65535),
    default=0,
    help="Give IPMI BMCs consecutive UDP ports from here (default: any free port).",
)
@click.option(
    "--redfish-base-port",
    type=WholeNumber(0, 65535),
    default=0,
    help="Give Redfish BMCs consecutive TCP ports from here (default: any free port).",
)
@click.option(
    "--ipmi-own-addresses",
    is_flag=True,
    help="Put every IPMI BMC on a loopback address of its own (127.1.0.1, 127.1.0.2, "
    "...; Linux needs no setup): Ironic's stock ipmi waits min_command_interval between "
    "commands to one address, so BMCs sharing 127.0.0.1 are throttled as one.",
)
@click.option(
    "--timeout",
    type=Seconds(),
    default=180.0,
    show_default=True,
    help="Seconds to wait for every BMC to listen.",
)
@click.option(
    "--shard-size",
    type=WholeNumber(1, MAX_SHARD_SIZE),
    default=None,
    help="Machines per worker process (default: one worker per core, at most "
    f"{MAX_SHARD_SIZE} machines each).",
)
@click.option(
    "--no-restart",
    "restart",
    flag_value=False,
    default=True,
    help="Leave a worker process that dies dead (default: restart it with its machines).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the lab description as JSON.")
@state_dir_option
def up(
    nodes: int,
    protocols: str,
    lab_file: str | None,
    profile: str | None,
    seed: str | None,
    shape: str | None,
    redfish_tls: bool,
    redfish_service_size: int,
    sse_keepalive: float | None,
    ipmi_base_port: int,
    redfish_base_port: int,
    ipmi_own_addresses: bool,
    timeout: float,
    shard_size: int | None,
    restart: bool,
    as_json: bool,
    state_dir: Path,
) -> None:
    """Start a lab in the background; return when every BMC is listening.

    A worker process that dies is logged, shown in `hwlab status` and
    restarted with its machines' state and rules (unless --no-restart).
    """
    # the lab's machinery, only for the commands that start or stop one:
    # `hwlab status` stays quick
    from bmaas.hwlab.daemon import LabOptions, build_spec

    options = LabOptions(
        labfile=os.path.abspath(lab_file) if lab_file else None,
        nodes=nodes,
        protocols=protocols,
        profile=profile,
        seed=parse_seed(seed),
        shape=shape,
        redfish_tls=redfish_tls,
        redfish_service_size=redfish_service_size,
        sse_keepalive=sse_keepalive,
        ipmi_base_port=ipmi_base_port,
        redfish_base_port=redfish_base_port,
        ipmi_own_addresses=ipmi_own_addresses,
        start_timeout=timeout,
        shard_size=shard_size,
        restart=restart,
    )
    from bmaas.inventory.specs import InventoryError  # only `up` reads lab files: import here

    try:
        spec = build_spec(options)  # every input error surfaces here, before anything starts
    except InventoryError as exc:  # a lab file's problems: all of them, one line each
        for problem in exc.problems:
            click.echo(f"error: {problem}", err=True)
        raise SystemExit(EXIT_USAGE) from None
    from bmaas.hwlab import statefiles, statelock

    statefiles.prepare_dir(state_dir)  # 0700, ours, not a link

    lock = statelock.acquire(state_dir)  # held by the daemon for the lab's life
    try:
        info = _start(state_dir, options, spec_nodes=len(spec.nodes), lock=lock, timeout=timeout)
    finally:
        os.close(lock)  # the daemon has its own copy
    if as_json:
        emit_json(info)
        return
    click.echo(
        f"lab up: {len(info['nodes'])} nodes in {info.get('start_seconds', 0):.1f}s "
        f"(profile {spec.profile or 'none'}, seed {spec.seed})"
    )
    click.echo(f"  inventory: {info['inventory']}")
    click.echo(f"  events:    {info['events']}")
    click.echo(f"  control:   {info['control_url']}")


def _start(
    state_dir: Path, options: LabOptions, *, spec_nodes: int, lock: int, timeout: float
) -> dict[str, Any]:
    """Start the daemon (handing it the state directory's ``lock``) and wait
    until it is ready."""
    from bmaas.hwlab.daemon import lab_alive, read_pid

    mark = read_pid(state_dir)
    if mark is not None and lab_alive(mark):
        raise InputError(
            f"a lab is already running in {state_dir} (pid {mark.pid}); run 'hwlab down' "
            "first, or pick another --state-dir"
        )
    if mark is not None:
        click.echo(f"removing stale pid file of a lab that is gone (pid {mark.pid})", err=True)
        (state_dir / "hwlab.pid").unlink(missing_ok=True)
    (state_dir / "lab.json").unlink(missing_ok=True)
    from bmaas.hwlab.statefiles import open_private

    # 0600 and never through a link: a planted hwlab.log is refused, not written
    log = os.fdopen(
        open_private(state_dir / "hwlab.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND), "ab"
    )
    with log:
        daemon = subprocess.Popen(  # noqa: S603 - our own module, no shell
            python_argv("-m", "bmaas.hwlab.daemon", str(state_dir), options.to_json()),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            pass_fds=(lock,),
        )
    return _wait_ready(state_dir, daemon, timeout + 30, spec_nodes)


def _wait_ready(
    state_dir: Path, daemon: subprocess.Popen[bytes], timeout: float, count: int
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    spinner = STDERR.status(f"starting {count} BMCs...") if STDERR.is_terminal else None
    with spinner or contextlib.nullcontext():
        while time.monotonic() < deadline:
            info = _read_lab_json(state_dir)
            if info.get("state") == "ready":
                return info
            if info.get("state") == "failed":
                (state_dir / "lab.json").unlink(missing_ok=True)
                raise InputError(f"the lab did not start: {info.get('error')}")
            if daemon.poll() is not None:
                raise InputError(
                    f"the lab process exited ({daemon.returncode}); see {state_dir / 'hwlab.log'}"
                )
            time.sleep(0.1)
    daemon.send_signal(signal.SIGTERM)
    raise InputError(f"the lab did not become ready within {timeout:.0f}s; stopped it")


def _read_lab_json(state_dir: Path) -> dict[str, Any]:
    from bmaas.hwlab.statefiles import read_private

    try:
        data: dict[str, Any] = json.loads(read_private(state_dir / "lab.json"))
        return data
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


@click.command()
@click.option(
    "--timeout",
    type=Seconds(),
    default=30.0,
    show_default=True,
    help="Seconds to wait before killing what is left.",
)
@state_dir_option
def down(timeout: float, state_dir: Path) -> None:
    """Stop the lab and everything it started."""
    from bmaas.hwlab.daemon import lab_alive, read_pid

    mark = read_pid(state_dir)
    if mark is None:
        click.echo(f"no lab is running in {state_dir}")
        return
    if not lab_alive(mark):
        (state_dir / "hwlab.pid").unlink(missing_ok=True)
        (state_dir / "lab.json").unlink(missing_ok=True)
        click.echo(f"no lab is running in {state_dir} (removed a stale pid file, pid {mark.pid})")
        return
    # Signals go only to the process the pid file's mark proves to be the lab's
    # daemon (pid, start time, executable: a reused pid is never signalled); a
    # bare pid an older hwlab wrote is only asked, through the control API.
    try:  # the whole of `down` takes --timeout, asking the lab to stop included
        LabClient.from_state_dir(state_dir, deadline=Deadline.after(timeout / 2)).shutdown()
    except (LabNotRunning, InputError):
        mark.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while lab_alive(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    if lab_alive(mark):
        if not mark.signal_group(signal.SIGKILL):  # the daemon leads its session: workers go too
            raise click.ClickException(
                f"lab (pid {mark.pid}) did not stop in {timeout:g}s, and its pid file does not "
                "prove the process is hwlab's: not killed"
            )
        click.echo(f"lab (pid {mark.pid}) did not stop in {timeout:g}s; killed it", err=True)
        (state_dir / "hwlab.pid").unlink(missing_ok=True)
        (state_dir / "lab.json").unlink(missing_ok=True)
    click.echo("lab stopped")


# -- looking and poking -------------------------------------------------------------


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@state_dir_option
def status(as_json: bool, state_dir: Path) -> None:
    """Nodes, ports, fault rules in force and effects injected so far."""
    info = LabClient.from_state_dir(state_dir).status()
    if as_json:
        emit_json(info)
        return
    table = Table(title=f"hwlab: {len(info['nodes'])} nodes, {info['events']} effects injected")
    for column in ("node", "ipmi", "redfish", "power", "rules", "fired"):
        table.add_column(column)
    for name, node in info["nodes"].items():
        ports = node.get("ports", {})
        fired = sum(node.get("fired", {}).values())
        power = node["power"] + (" (BMC rebooting)" if node.get("bmc_down") else "")
        if node.get("worker_down"):
            power = f"down (worker {node['worker_down']})"
        table.add_row(
            name,
            str(ports.get("ipmi", "")),
            str(ports.get("redfish", "")),
            power,
            "\n".join(node.get("rules", [])) or "-",
            str(fired),
        )
    Console().print(table)
    for worker in info.get("workers", []):
        if worker["state"] != "alive" or worker["restarts"]:
            click.echo(_worker_line(worker, restart=info.get("restart", True)))
    click.echo(f"inventory: {info.get('inventory')}")


def _worker_line(worker: dict[str, Any], *, restart: bool) -> str:
    """One line about a shard that died: what happened, what happens next."""
    index, count = worker["index"], worker["nodes"]
    if worker["state"] == "alive":
        died = worker.get("cause")
        last = f", last {died} (pid {worker['died_pid']})" if died else ""
        restarts = worker["restarts"]
        return f"worker {index}: restarted {restarts} time(s){last}; its {count} nodes serve"
    what = f"worker {index} (pid {worker['pid']}) {worker['state']}"
    if worker.get("cause"):
        what += f", {worker['cause']}"
    then = "restarting it" if restart else "left dead (--no-restart)"
    return f"{what}: its {count} nodes are down; {then}"


@click.command("profiles")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def profiles_cmd(as_json: bool) -> None:
    """List the built-in fault profiles."""
    from bmaas.hwlab import profiles  # here, not at import: `hwlab status` stays quick

    if as_json:
        emit_json({p.name: p.description for p in profiles.PROFILES.values()})
        return
    width = max(len(n) for n in profiles.PROFILES)
    for p in profiles.PROFILES.values():
        click.echo(f"{p.name:<{width}}  {p.description}")


@click.command("effects")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def effects_cmd(as_json: bool) -> None:
    """List the fault effects: layer, parameters (with defaults), what they do."""
    if as_json:
        emit_json(
            {
                str(e): {
                    "layer": str(d.layer),
                    "summary": d.summary,
                    "operations": list(d.operations),
                    "params": {k: p.default for k, p in d.params.items()},
                    "ipmi": d.ipmi,
                }
                for e, d in EFFECTS.items()
            }
            | {"incidents": {n: incident_record(i) for n, i in INCIDENTS.items()}}
        )
        return
    describe_effects(click.echo)


@click.group()
def fault() -> None:
    """Add or clear fault rules on a running lab."""


def parse_rule_arg(text: str) -> dict[str, Any]:
    """``effect=busy,operation=power.*,probability=0.5`` or a YAML/JSON mapping.
    Parsed by bmaas's loader, so binary, deep nesting and 5,000-digit numbers
    are one error line like an inventory's."""
    text = text.strip()
    if text.startswith("{"):
        value = _yaml_value(text, "RULE")
        if not isinstance(value, dict):
            raise InputError("must be a mapping", field="RULE")
        return dict(value)
    rule: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        if not sep or not key:
            raise InputError(f"expected key=value, got {part!r}", field="RULE")
        rule[key.strip()] = _yaml_value(raw, f"RULE.{key.strip()}") if raw else ""
    return rule


def _yaml_value(text: str, field: str) -> Any:
    try:
        return load_text(text, source="<argument>")
    except InputError as exc:
        raise InputError(exc.message, field=field) from None


def parse_rule_args(args: Sequence[str]) -> list[dict[str, Any]]:
    """``EFFECT [key=value ...]`` is one rule; otherwise each argument is one
    rule (``effect=...`` pairs or a YAML mapping)."""
    first = args[0].strip()
    if "=" in first or first.startswith("{"):
        return [parse_rule_arg(a) for a in args]
    rule: dict[str, Any] = {"effect": first}
    for arg in args[1:]:
        for key, value in parse_rule_arg(arg).items():
            if key in rule:
                raise InputError(f"{key!r} given twice", field="RULE")
            rule[key] = value
    return [rule]


@fault.command("add")
@click.argument("node")
@click.argument("rule", nargs=-1, required=True)
@state_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def fault_add(node: str, rule: Sequence[str], state_dir: Path, as_json: bool) -> None:
    """Put a rule in force on NODE now: EFFECT [key=value ...].

    \b
      hwlab fault add node-003 hang
      hwlab fault add node-002 busy operation=power.* probability=0.5
      hwlab fault add node-004 bmc_reboot duration=10 times=1
      hwlab fault add node-005 incident incident=idrac10-power-on-conflict within=5
    \b
    Also accepted: rules as key=value lists or YAML mappings, one per argument:
      hwlab fault add node-002 effect=busy,operation=power.*,probability=0.5
      hwlab fault add node-002 '{effect: hang, operation: power.get, times: 3}'
    `hwlab effects` lists the effects and their parameters.

    --json: {"node", "added": [each rule as the lab holds it], "in_force"}.
    """
    parsed = parse_rule_args(rule)
    rules = [
        FaultRule.from_dict(raw, where=f"RULE[{i}]" if len(parsed) > 1 else "RULE")
        for i, raw in enumerate(parsed)
    ]
    total = LabClient.from_state_dir(state_dir).add_faults(node, parsed)
    if as_json:
        emit_json({"node": node, "added": [r.to_dict() for r in rules], "in_force": total})
        return
    click.echo(f"{node}: {len(parsed)} rule(s) added, {total} in force")


@fault.command("clear")
@click.argument("node", required=False)
@click.option("--all", "all_nodes", is_flag=True, help="Clear every node's rules.")
@state_dir_option
def fault_clear(node: str | None, all_nodes: bool, state_dir: Path) -> None:
    """Remove every rule from NODE (or from all nodes with --all)."""
    if bool(node) == all_nodes:
        raise InputError("name one NODE or pass --all")
    LabClient.from_state_dir(state_dir).clear_faults(node)
    click.echo(f"cleared rules on {node or 'every node'}")


@click.command()
@click.argument("node")
@click.argument("state", type=click.Choice(["on", "off"]))
@state_dir_option
def power(node: str, state: str, state_dir: Path) -> None:
    """Turn NODE's hardware on or off behind its BMC's back."""
    LabClient.from_state_dir(state_dir).power(node, state)
    click.echo(f"{node}: power {state}")


@click.command()
@click.argument("node")
@click.argument("health", type=click.Choice(list(HEALTH_STATES)))
@state_dir_option
def health(node: str, health: str, state_dir: Path) -> None:
    """Set the overall health NODE's BMC reports (Redfish Status.Health)."""
    LabClient.from_state_dir(state_dir).health(node, health)
    click.echo(f"{node}: health {health}")
