"""``hwlab``: run a rack of flaky emulated BMCs on this machine."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
import platformdirs
import yaml
from rich.console import Console
from rich.table import Table

from bmaas import __version__
from bmaas.cliutil import BmaasGroup, common_options, emit_json, run, setup_logging
from bmaas.faults import InputError
from bmaas.secrets import Secret
from hwlab import profiles
from hwlab.bench.cli import bench
from hwlab.control import LabClient, LabNotRunning
from hwlab.daemon import LabOptions, build_spec, pid_alive, read_pid

__all__ = ["cli", "main"]

STDERR = Console(stderr=True)


def default_state_dir() -> str:
    return os.path.join(platformdirs.user_state_dir("hwlab"), "default")


def state_dir_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=default_state_dir,
        envvar="HWLAB_STATE_DIR",
        show_default="per-user state dir",
        help="Where the lab keeps inventory.yaml, events.jsonl and its pid (env HWLAB_STATE_DIR).",
    )(fn)


@click.group(name="hwlab", cls=BmaasGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hwlab")
@common_options
def cli(verbose: int, debug: bool) -> None:
    """Emulated IPMI and Redfish BMCs with seeded, replayable faults.

    \b
    hwlab up --nodes 8 --profile flaky --seed 7   # start a lab in the background
    hwlab status                                  # nodes, ports, rules, effects fired
    hwlab fault add node-003 effect=busy,probability=0.5
    hwlab down                                    # stop it; nothing left listening
    """
    setup_logging(verbose, debug)


# -- up / down ------------------------------------------------------------------


@cli.command()
@click.option(
    "--nodes",
    "-n",
    type=click.IntRange(1, 5000),
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
    type=click.Path(dir_okay=False, exists=True),
    help="A YAML lab file (nodes, hardware, credentials, fault rules).",
)
@click.option(
    "--profile",
    help="Fault profile(s): a built-in name (see 'hwlab profiles'), a "
    "YAML file, or several separated by commas.",
)
@click.option("--seed", default=None, help="Seed for every random choice (default 0).")
@click.option("--redfish-tls", is_flag=True, help="Serve Redfish over HTTPS (self-signed).")
@click.option(
    "--ipmi-base-port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Give IPMI BMCs consecutive UDP ports from here (default: any free port).",
)
@click.option(
    "--redfish-base-port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Give Redfish BMCs consecutive TCP ports from here (default: any free port).",
)
@click.option(
    "--timeout",
    type=float,
    default=180.0,
    show_default=True,
    help="Seconds to wait for every BMC to listen.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the lab description as JSON.")
@state_dir_option
def up(
    nodes: int,
    protocols: str,
    lab_file: str | None,
    profile: str | None,
    seed: str | None,
    redfish_tls: bool,
    ipmi_base_port: int,
    redfish_base_port: int,
    timeout: float,
    as_json: bool,
    state_dir: Path,
) -> None:
    """Start a lab in the background; return when every BMC is listening."""
    options = LabOptions(
        labfile=os.path.abspath(lab_file) if lab_file else None,
        nodes=nodes,
        protocols=protocols,
        profile=profile,
        seed=_seed(seed),
        redfish_tls=redfish_tls,
        ipmi_base_port=ipmi_base_port,
        redfish_base_port=redfish_base_port,
        start_timeout=timeout,
    )
    spec = build_spec(options)  # every input error surfaces here, before anything starts
    state_dir.mkdir(parents=True, exist_ok=True)
    pid = read_pid(state_dir)
    if pid is not None and pid_alive(pid):
        raise InputError(
            f"a lab is already running in {state_dir} (pid {pid}); run 'hwlab down' first, "
            "or pick another --state-dir"
        )
    if pid is not None:
        click.echo(f"removing stale pid file of a lab that is gone (pid {pid})", err=True)
        (state_dir / "hwlab.pid").unlink(missing_ok=True)
    (state_dir / "lab.json").unlink(missing_ok=True)
    log = open(state_dir / "hwlab.log", "ab")  # noqa: SIM115 - handed to the daemon
    with log:
        daemon = subprocess.Popen(  # noqa: S603 - our own module, no shell
            [sys.executable, "-m", "hwlab.daemon", str(state_dir), options.to_json()],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    info = _wait_ready(state_dir, daemon, timeout + 30, len(spec.nodes))
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


def _seed(text: str | None) -> int | str | None:
    if text is None:
        return None
    return int(text) if text.lstrip("-").isdigit() else text


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
    try:
        return json.loads((state_dir / "lab.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


@cli.command()
@click.option(
    "--timeout",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds to wait before killing what is left.",
)
@state_dir_option
def down(timeout: float, state_dir: Path) -> None:
    """Stop the lab and everything it started."""
    pid = read_pid(state_dir)
    if pid is None:
        click.echo(f"no lab is running in {state_dir}")
        return
    if not pid_alive(pid):
        (state_dir / "hwlab.pid").unlink(missing_ok=True)
        (state_dir / "lab.json").unlink(missing_ok=True)
        click.echo(f"no lab is running in {state_dir} (removed a stale pid file, pid {pid})")
        return
    try:
        LabClient.from_state_dir(state_dir).shutdown()
    except (LabNotRunning, InputError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid_alive(pid):
        click.echo(f"lab (pid {pid}) did not stop in {timeout:g}s; killing it", err=True)
        _kill_group(pid)
        (state_dir / "hwlab.pid").unlink(missing_ok=True)
        (state_dir / "lab.json").unlink(missing_ok=True)
    click.echo("lab stopped")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)  # the daemon leads its session: workers go too


# -- looking and poking -------------------------------------------------------------


@cli.command()
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
        table.add_row(
            name,
            str(ports.get("ipmi", "")),
            str(ports.get("redfish", "")),
            node["power"] + (" (BMC rebooting)" if node.get("bmc_down") else ""),
            "\n".join(node.get("rules", [])) or "-",
            str(fired),
        )
    Console().print(table)
    click.echo(f"inventory: {info.get('inventory')}")


@cli.command("profiles")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def profiles_cmd(as_json: bool) -> None:
    """List the built-in fault profiles."""
    if as_json:
        emit_json({p.name: p.description for p in profiles.PROFILES.values()})
        return
    width = max(len(n) for n in profiles.PROFILES)
    for p in profiles.PROFILES.values():
        click.echo(f"{p.name:<{width}}  {p.description}")


@cli.group()
def fault() -> None:
    """Add or clear fault rules on a running lab."""


def parse_rule_arg(text: str) -> dict[str, Any]:
    """``effect=busy,operation=power.*,probability=0.5`` or a YAML/JSON mapping."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputError(f"not a YAML/JSON mapping: {exc}", field="RULE") from None
        if not isinstance(value, dict):
            raise InputError("must be a mapping", field="RULE")
        return value
    rule: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        if not sep or not key:
            raise InputError(f"expected key=value, got {part!r}", field="RULE")
        rule[key.strip()] = yaml.safe_load(raw) if raw else ""
    return rule


@fault.command("add")
@click.argument("node")
@click.argument("rules", nargs=-1, required=True)
@state_dir_option
def fault_add(node: str, rules: Sequence[str], state_dir: Path) -> None:
    """Put RULES in force on NODE now.

    \b
    A rule is key=value pairs, or a YAML mapping:
      hwlab fault add node-002 effect=busy,operation=power.*,probability=0.5
      hwlab fault add node-002 '{effect: hang, operation: power.get, times: 3}'
    """
    parsed = [parse_rule_arg(r) for r in rules]
    total = LabClient.from_state_dir(state_dir).add_faults(node, parsed)
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


@cli.command()
@click.argument("node")
@click.argument("state", type=click.Choice(["on", "off"]))
@state_dir_option
def power(node: str, state: str, state_dir: Path) -> None:
    """Turn NODE's hardware on or off behind its BMC's back."""
    LabClient.from_state_dir(state_dir).power(node, state)
    click.echo(f"{node}: power {state}")


@cli.command()
@click.option(
    "--protocol",
    "protocols",
    multiple=True,
    type=click.Choice(["ipmi", "redfish"]),
    help="Protocols to test (repeatable; default both).",
)
@click.option("--only", multiple=True, help="Run only these scenarios (repeatable).")
@click.option(
    "--deadline",
    type=float,
    default=1.0,
    show_default=True,
    help="Driver deadline per call, seconds.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def matrix(protocols: Sequence[str], only: Sequence[str], deadline: float, as_json: bool) -> None:
    """Run every fault effect against every protocol through the real bmaas
    drivers, on a private lab, and compare with the expected fault classes.

    Exits 1 on any mismatch or UnclassifiedFault.
    """
    from hwlab.lab import Lab
    from hwlab.matrix import SCENARIOS, matrix_spec, run_matrix

    chosen = [s for s in SCENARIOS if not only or s.name in only]
    unknown = set(only) - {s.name for s in SCENARIOS}
    if unknown:
        raise InputError(
            f"unknown scenario(s): {', '.join(sorted(unknown))} "
            f"(known: {', '.join(s.name for s in SCENARIOS)})"
        )
    protocols = list(protocols) or ["ipmi", "redfish"]

    def progress(result: Any) -> None:
        if not as_json:
            mark = "ok  " if result.passed else "FAIL"
            click.echo(
                f"{mark} {result.scenario:<20} {result.protocol:<8} {result.seen:<22} "
                f"{result.seconds:6.2f}s"
                + ("" if result.passed else f"  expected {result.expected}")
            )

    with (
        tempfile.TemporaryDirectory(prefix="hwlab-matrix-") as tmp,
        Lab(matrix_spec(protocols), tmp) as lab,
    ):
        results = run_matrix(
            lab, protocols=protocols, scenarios=chosen, deadline=deadline, progress=progress
        )
    failed = [r for r in results if not r.passed]
    unclassified = [r for r in results if r.unclassified]
    if as_json:
        emit_json(
            {
                "results": [r.to_dict() for r in results],
                "failed": len(failed),
                "unclassified": len(unclassified),
            }
        )
    else:
        click.echo(
            f"{len(results) - len(failed)}/{len(results)} passed, {len(unclassified)} unclassified"
        )
    if failed or unclassified:
        sys.exit(1)


# -- proxy -----------------------------------------------------------------------------


@cli.command()
@click.option(
    "--protocol",
    type=click.Choice(["ipmi", "redfish"]),
    required=True,
    help="What the BMC speaks.",
)
@click.option(
    "--upstream",
    required=True,
    help="The BMC: HOST[:PORT] for IPMI (default port 623); http(s)://HOST[:PORT] for Redfish.",
)
@click.option(
    "--listen",
    default="127.0.0.1:0",
    show_default=True,
    help="HOST:PORT the proxy listens on (port 0: any free port, printed at start).",
)
@click.option("--node", default="bmc", show_default=True, help="Node name in rules and events.")
@click.option("--profile", help="Fault profile(s), as for 'hwlab up' (hardware rules skipped).")
@click.option(
    "--rules",
    "rules_file",
    type=click.Path(dir_okay=False, exists=True),
    help="A YAML fault plan ({seed, rules: [...]}) for this BMC.",
)
@click.option("--seed", default=None, help="Seed for every random choice (default: the file's, 0).")
@click.option("--username", help="BMC user (IPMI: lets the proxy read and answer in sessions).")
@click.option(
    "--password",
    envvar="HWLAB_PROXY_PASSWORD",
    help="BMC password (or env HWLAB_PROXY_PASSWORD; never printed).",
)
@click.option("--kg", envvar="HWLAB_PROXY_KG", help="IPMI BMC key, if the BMC has one.")
@click.option(
    "--tls/--no-tls",
    default=None,
    help="Redfish: serve HTTPS with a generated certificate (default: as the upstream).",
)
@click.option(
    "--upstream-ca",
    type=click.Path(dir_okay=False, exists=True),
    help="Redfish: CA bundle to verify an https upstream with (default: system CAs).",
)
@click.option(
    "--upstream-insecure",
    is_flag=True,
    help="Redfish: do not verify the upstream's certificate (factory BMC certificates).",
)
@click.option("--control-port", type=click.IntRange(0, 65535), default=0, help="Control API port.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where lab.json, events.jsonl, inventory.yaml and the certificate go "
    "(default: per-user state dir, proxy-NODE).",
)
def proxy(
    protocol: str,
    upstream: str,
    listen: str,
    node: str,
    profile: str | None,
    rules_file: str | None,
    seed: str | None,
    username: str | None,
    password: str | None,
    kg: str | None,
    tls: bool | None,
    upstream_ca: str | None,
    upstream_insecure: bool,
    control_port: int,
    state_dir: Path | None,
) -> None:
    """Put the lab's faults in front of a real BMC, until Ctrl-C.

    \b
    hwlab proxy --protocol ipmi --upstream 10.0.0.21 --listen 127.0.0.1:6230 \\
        --username admin --password "$PW" --profile flaky --seed 7
    hwlab fault add bmc effect=busy,operation=power.get --state-dir DIR
    ipmitool -I lanplus -H 127.0.0.1 -p 6230 -U admin -P "$PW" power status
    """
    from hwlab.proxy.host import ProxyHost
    from hwlab.proxy.serve import load_rules, serve
    from hwlab.proxy.spec import ProxySpec, parse_hostport, parse_upstream

    if upstream_ca and upstream_insecure:
        raise InputError("give --upstream-ca or --upstream-insecure, not both")
    listen_host, listen_port = parse_hostport(listen, default_port=0, field="--listen")
    up_host, up_port, up_tls = parse_upstream(upstream, protocol, field="--upstream")
    spec = ProxySpec(
        node=node,
        protocol=protocol,
        upstream_host=up_host,
        upstream_port=up_port,
        upstream_tls=up_tls,
        username=username,
        password=Secret(password or ""),
        kg=Secret(kg or ""),
        verify_ca=False if upstream_insecure else (upstream_ca or True),
        tls=tls,
        listen_host=listen_host,
        listen_port=listen_port,
    )
    if protocol == "ipmi" and not spec.credentials:
        click.echo(
            "note: no --username/--password: in-session IPMI packets stay unreadable, so "
            "only wire effects and login faults can be injected",
            err=True,
        )
    rules, final_seed = load_rules(spec, rules_file=rules_file, profile=profile, seed=_seed(seed))
    state = state_dir or Path(default_state_dir()).parent / f"proxy-{node}"
    host = ProxyHost(
        [spec],
        rules={node: rules},
        seed=final_seed,
        events_path=state / "events.jsonl",
        tls_dir=state / "tls",
    )
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    def ready(info: dict[str, Any]) -> None:
        port = info["nodes"][node]["ports"][protocol]
        click.echo(
            f"proxy {node}: {protocol} {listen_host}:{port} -> {spec.upstream} "
            f"({len(rules)} rule(s), seed {final_seed})"
        )
        click.echo(f"  state dir: {state}  (hwlab fault add {node} ... --state-dir {state})")
        click.echo(f"  control:   {info['control_url']}")
        click.echo("  Ctrl-C to stop")

    serve(host, state, stop=stop, control_port=control_port, ready=ready)
    click.echo("proxy stopped")


@cli.command()
@click.option(
    "--nodes",
    "-n",
    type=click.IntRange(2, 500),
    default=12,
    show_default=True,
    help="Nodes in the demo lab.",
)
@click.option(
    "--requests",
    "-r",
    type=click.IntRange(1, 500),
    default=8,
    show_default=True,
    help="Instances to deploy.",
)
@click.option(
    "--protocols",
    type=click.Choice(["mixed", "ipmi", "redfish", "both"]),
    default="mixed",
    show_default=True,
    help="BMC protocols of the lab's nodes.",
)
@click.option(
    "--profile",
    default="flaky,dead-bmc,brownout",
    show_default=True,
    help="Fault profile(s) of the lab.",
)
@click.option("--seed", default="7", show_default=True, help="Seed: the same seed, the same run.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the lab state and database here (default: a temporary folder).",
)
def demo(
    nodes: int,
    requests: int,
    protocols: str,
    profile: str,
    seed: str,
    as_json: bool,
    workdir: Path | None,
) -> None:
    """Show bmaas working: bring up a flaky lab, deploy a batch of instances
    with typed retries, check nothing leaked, undeploy, tear down.

    Exits 1 if anything leaked or no request succeeded.
    """
    from hwlab.demo import DemoOptions, run_demo

    options = DemoOptions(
        nodes=nodes, requests=requests, protocols=protocols, profile=profile, seed=_seed(seed) or 0
    )
    if not as_json:
        click.echo(
            f"hwlab demo: {nodes} {protocols} nodes, profile {profile}, seed {seed}; "
            f"deploying {requests} instances..."
        )

    def show(result: Any) -> None:
        if as_json:
            return
        tried = ", ".join(f"{a.node} {a.fault_class}" for a in result.attempts)
        node = getattr(result, "node", None)
        line = f"  {result.request}: " + (f"active on {node}" if node else "FAILED")
        click.echo(line + (f" (after {tried})" if tried else ""))

    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hwlab-demo-")))
        workdir.mkdir(parents=True, exist_ok=True)
        summary = run_demo(options, workdir, on_result=show)
    if as_json:
        emit_json(summary.to_dict())
    else:
        _print_summary(summary)
    if not summary.clean or summary.succeeded == 0:
        sys.exit(1)


def _print_summary(summary: Any) -> None:
    faults = ", ".join(f"{k} x{v}" for k, v in summary.faults_by_class.items()) or "none"
    rows = [
        ("requests", summary.requests),
        ("succeeded", summary.succeeded),
        ("failed", summary.failed),
        ("attempts (all nodes tried)", summary.attempts),
        ("faults seen, by class", faults),
        ("nodes fenced by the system", ", ".join(summary.maintenance) or "none"),
        (
            "time to active p50 / max",
            f"{summary.time_to_active_p50}s / {summary.time_to_active_max}s",
        ),
        ("leaked allocations", summary.leaked_allocations),
        ("leaked ports", summary.leaked_ports),
        ("left after undeploy", summary.leaked_after_undeploy),
        ("total time", f"{summary.elapsed}s"),
    ]
    table = Table(title="hwlab demo summary", show_header=False)
    table.add_column("what")
    table.add_column("value")
    for what, value in rows:
        table.add_row(what, str(value))
    Console().print(table)


cli.add_command(bench)


def main(argv: Sequence[str] | None = None) -> None:
    run(cli, argv)
