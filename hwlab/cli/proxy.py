"""``hwlab proxy``: the lab's faults in front of a real BMC."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from bmaas import credentials
from bmaas.cliutil import InputFile, WholeNumber
from bmaas.faults import InputError
from bmaas.hwlab.cli.common import default_state_dir, parse_seed
from bmaas.secrets import Secret

__all__ = ["proxy", "read_secret"]

#: where a proxy's BMC secrets come from when no file is named
PASSWORD_ENV = "HWLAB_PROXY_PASSWORD"  # noqa: S105 - a variable's name
KG_ENV = "HWLAB_PROXY_KG"
_SOURCES = {"--password": ("--password-file", PASSWORD_ENV), "--kg": ("--kg-file", KG_ENV)}


def _refuse_in_argv(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``--password``/``--kg`` put a secret where every user reads it (``ps``,
    /proc/PID/cmdline): refused with one line saying what to use instead."""
    if value is None:
        return
    option = param.opts[0]
    file_option, env = _SOURCES[option]
    raise InputError(
        f"{option} is not accepted: a secret on the command line is visible to every "
        f"user (ps); use {file_option} PATH or set {env}"
    )


def read_secret(
    path: str | None, env: str, *, option: str, environ: Mapping[str, str] | None = None
) -> Secret:
    """A BMC secret from the file ``path`` (a regular file of at most 64 KiB,
    trailing newlines removed: bmaas.credentials) or the variable ``env``;
    empty when neither is given. Errors name the file or variable, never
    the secret."""
    env_map = os.environ if environ is None else environ
    if path is not None and env_map.get(env):
        raise InputError(f"give {option} or set {env}, not both")
    if path is not None:
        return credentials.resolve("file:" + path, field=option)
    return Secret(env_map.get(env, ""))


@click.command()
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
    type=InputFile(exists=True),
    help="A YAML fault plan ({seed, rules: [...]}) for this BMC.",
)
@click.option("--seed", default=None, help="Seed for every random choice (default: the file's, 0).")
@click.option("--username", help="BMC user (IPMI: lets the proxy read and answer in sessions).")
@click.option(
    "--password-file",
    type=click.Path(dir_okay=False),
    help="A file holding the BMC password (trailing newline ignored); or set "
    f"{PASSWORD_ENV}. Never on the command line, where every user sees it in ps.",
)
@click.option(
    "--kg-file",
    type=click.Path(dir_okay=False),
    help=f"A file holding the IPMI BMC key, if the BMC has one; or set {KG_ENV}.",
)
@click.option(
    "--password", "password_argv", hidden=True, expose_value=True, callback=_refuse_in_argv
)
@click.option("--kg", "kg_argv", hidden=True, expose_value=True, callback=_refuse_in_argv)
@click.option(
    "--tls/--no-tls",
    default=None,
    help="Redfish: serve HTTPS with a generated certificate (default: as the upstream).",
)
@click.option(
    "--upstream-ca",
    type=InputFile(exists=True),
    help="Redfish: CA bundle to verify an https upstream with (default: system CAs).",
)
@click.option(
    "--upstream-insecure",
    is_flag=True,
    help="Redfish: do not verify the upstream's certificate (factory BMC certificates).",
)
@click.option("--control-port", type=WholeNumber(0, 65535), default=0, help="Control API port.")
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
    password_file: str | None,
    kg_file: str | None,
    password_argv: None,
    kg_argv: None,
    tls: bool | None,
    upstream_ca: str | None,
    upstream_insecure: bool,
    control_port: int,
    state_dir: Path | None,
) -> None:
    """Put the lab's faults in front of a real BMC, until Ctrl-C.

    \b
    hwlab proxy --protocol ipmi --upstream 10.0.0.21 --listen 127.0.0.1:6230 \\
        --username admin --password-file bmc.pass --profile flaky --seed 7
    hwlab fault add bmc effect=busy,operation=power.get --state-dir DIR
    ipmitool -I lanplus -H 127.0.0.1 -p 6230 -U admin -P "$PW" power status
    """
    from bmaas.hwlab.proxy.host import ProxyHost
    from bmaas.hwlab.proxy.serve import load_rules, serve
    from bmaas.hwlab.proxy.spec import ProxySpec, parse_hostport, parse_upstream

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
        password=read_secret(password_file, PASSWORD_ENV, option="--password-file"),
        kg=read_secret(kg_file, KG_ENV, option="--kg-file"),
        verify_ca=False if upstream_insecure else (upstream_ca or True),
        tls=tls,
        listen_host=listen_host,
        listen_port=listen_port,
    )
    if protocol == "ipmi" and not spec.credentials:
        click.echo(
            "note: no --username/--password-file: in-session IPMI packets stay unreadable, so "
            "only wire effects and login faults can be injected",
            err=True,
        )
    rules, final_seed = load_rules(
        spec, rules_file=rules_file, profile=profile, seed=parse_seed(seed)
    )
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
