"""``hwlab proxy``: one proxy in the foreground, controllable like a lab.

It keeps, in its state directory, what a lab keeps: ``lab.json`` (``state:
ready``, ``control_url``), ``token`` (the control API's), ``hwlab.pid``,
``events.jsonl`` and an ``inventory.yaml`` with the proxied node (0700
directory, 0600 files: :mod:`bmaas.hwlab.statefiles`), so ``hwlab fault add/clear``,
``hwlab status`` and ``hwlab down`` work against it unchanged.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from bmaas.fakes.faults import FaultPlan, FaultRule
from bmaas.faults import InputError
from bmaas.hwlab import profiles
from bmaas.hwlab.control import ControlServer
from bmaas.hwlab.daemon import lab_alive, read_pid
from bmaas.hwlab.lab import write_json
from bmaas.hwlab.procmark import ProcessMark
from bmaas.hwlab.proxy.effects import supported_rules
from bmaas.hwlab.proxy.host import ProxyHost
from bmaas.hwlab.proxy.spec import ProxySpec
from bmaas.hwlab.statefiles import TOKEN_FILE, create_token, prepare_dir, remove, write_private

__all__ = ["load_rules", "profile_rules", "serve"]

LOG = logging.getLogger(__name__)


def profile_rules(
    spec: ProxySpec, names: str, nodes: Sequence[str], seed: int | str
) -> list[FaultRule]:
    """The rules ``names`` (built-in profiles or files) give ``spec``'s node,
    minus the ones a proxy cannot carry out: a profile describes a whole rack,
    so its hardware rules are skipped with a warning rather than refused."""
    chosen = profiles.assign(profiles.resolve(names), list(nodes), seed)[spec.node]
    return supported_rules(chosen, spec, why=f"rule of profile {names}")


def load_rules(
    spec: ProxySpec,
    *,
    rules_file: str | None = None,
    profile: str | None = None,
    seed: int | str | None = None,
) -> tuple[list[FaultRule], int | str]:
    """Rules for one proxy from ``--rules FILE`` and/or ``--profile``, and
    the seed (``--seed``, else the rules file's, else 0)."""
    rules: list[FaultRule] = []
    file_seed: int | str = 0
    if rules_file:
        plan = FaultPlan.from_file(rules_file)
        file_seed = plan.seed
        rules.extend(plan.rules)
    final_seed = seed if seed is not None else file_seed
    if profile:
        rules = profile_rules(spec, profile, [spec.node], final_seed) + rules
    return rules, final_seed


def serve(
    host: ProxyHost,
    state_dir: Path,
    *,
    stop: threading.Event,
    control_port: int = 0,
    ready: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Run ``host`` until ``stop`` is set; the state directory says where."""
    prepare_dir(state_dir)  # 0700, ours, not a link (bmaas.hwlab.statefiles)
    lab_json = state_dir / "lab.json"
    pid_file = state_dir / "hwlab.pid"
    mark = read_pid(state_dir)
    if mark is not None and mark.pid != os.getpid() and lab_alive(mark):
        raise InputError(
            f"a lab or proxy is already running in {state_dir} (pid {mark.pid}); stop it "
            "('hwlab down --state-dir ...') or pick another --state-dir"
        )
    control: ControlServer | None = None
    try:
        host.start()
        token = create_token(state_dir)  # fresh per proxy run, 0600
        control = ControlServer(host, token=token, port=control_port, on_shutdown=stop.set)
        control.start()
        inventory = host.inventory_path = state_dir / "inventory.yaml"
        text = "# written by hwlab proxy: the proxied BMC in bmaas inventory format\n"
        write_private(
            inventory, text + yaml.safe_dump({"nodes": host.inventory()}, sort_keys=False)
        )
        write_private(pid_file, ProcessMark.of(os.getpid()).to_text())
        info = {
            "state": "ready",
            "pid": os.getpid(),
            "control_url": control.url,
            "inventory": str(inventory),
            "events": str(state_dir / "events.jsonl"),
            **host.describe(),
        }
        write_json(lab_json, info)
        if ready is not None:
            ready(info)
        while not stop.wait(0.5):
            pass
    finally:
        if control is not None:
            control.stop()
        host.stop()
        lab_json.unlink(missing_ok=True)
        remove(state_dir / TOKEN_FILE)
        pid_file.unlink(missing_ok=True)
