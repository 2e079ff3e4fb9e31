"""``bmaas sync`` with events on finds a hung API behind a live stream (issue 48).

Three hwlab Redfish nodes, each streaming its events; once every stream is
up, one node's API hangs (``hang`` with ``scope: api``: its stream keeps
its keepalives and events). The liveness read (``--liveness-interval``,
short here) reads its API anyway, the read times out, and from then on it
is read every pass, so ``bmaas sync`` fences it as a polled node: within
the liveness interval plus ``fault_after + 1`` passes (each at most the
interval plus a BMC timeout, ``--no-retry``). The bound is asserted against the deadline
it makes (a slow machine only adds a pass's worth of slack, stated); the
healthy nodes stay out of fault, their streams up all along.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bmaas import inventory as inventory_mod
from bmaas.deadline import Deadline
from bmaas.hwlab.harness.bench.common import running_lab
from bmaas.hwlab.labspec import generate
from bmaas.hwlab.pyexec import python_argv
from bmaas.store import POWER_FAILURE, Store

pytestmark = pytest.mark.lab

HUNG, HEALTHY = "node-002", ("node-001", "node-003")
INTERVAL, LIVENESS, BMC_TIMEOUT, FAULT_AFTER = 0.5, 4.0, 1.0, 2
#: the documented bound: the next liveness slot and the pass after it, then
#: fault_after failed passes, each at most the interval plus the read's
#: budget (one attempt of --bmc-timeout: --no-retry; with the retry, its
#: timeouts' attempts and back-off, docs/operator.md)
BOUND = LIVENESS + INTERVAL + FAULT_AFTER * (INTERVAL + BMC_TIMEOUT)
#: a loaded runner's start-up and scheduling (not the feature's cost)
SLACK = 5.0
ENTRY = "import sys; sys.argv[0] = 'bmaas'; from bmaas.cli import main; main()"


class Passes:
    """The sync's JSON pass lines, read on a thread of their own."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        buffer = ""
        for line in process.stdout:  # one indented object a pass
            buffer += line
            if line.rstrip() == "}":
                self.lines.append(json.loads(buffer))
                buffer = ""

    def join(self) -> None:
        self._thread.join(10)  # the process's end ends the stream

    def streamed(self) -> int:
        return int(self.lines[-1]["events"]["nodes_up"]) if self.lines else 0


def _until(what: Any, deadline: Deadline) -> bool:
    while not deadline.expired:
        if what():
            return True
        time.sleep(0.05)
    return bool(what())


@pytest.mark.timeout(120)
def test_a_hung_api_behind_a_live_stream_is_fenced_within_the_liveness_bound(
    tmp_path: Path,
) -> None:
    spec = generate(3, protocols="redfish", seed=5)
    db = tmp_path / "bmaas.db"
    with running_lab(spec, tmp_path / "lab") as lab:
        store = Store.open(str(db), create=True)
        try:
            inventory_mod.enroll(store, inventory_mod.load(str(lab.inventory_path)))
        finally:
            store.close()
        args = ["sync", "--interval", str(INTERVAL), "--liveness-interval", str(LIVENESS)]
        args += ["--fault-after", str(FAULT_AFTER), "--bmc-timeout", str(BMC_TIMEOUT)]
        args += ["--no-retry"]
        process = subprocess.Popen(
            [*python_argv("-c", ENTRY), *args, "--no-split", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "BMAAS_DB": str(db)},
        )
        passes = Passes(process)
        try:
            assert _until(lambda: passes.streamed() == 3, Deadline.after(30.0)), passes.lines[-1:]
            lab.add_faults(HUNG, [{"name": "api-hang", "effect": "hang", "scope": "api"}])
            hung = Deadline.after(BOUND + SLACK)
            store = Store.open(str(db))
            try:
                fenced = _until(lambda: store.nodes.get(HUNG).fault == POWER_FAILURE, hung)
                took = BOUND + SLACK - hung.left()
                faults = {name: store.nodes.get(name).fault for name in HEALTHY}
            finally:
                store.close()
            assert fenced, f"not fenced within {BOUND + SLACK:g} s"
            assert took <= BOUND + SLACK, took
            assert faults == dict.fromkeys(HEALTHY)
            # the stream stayed up through it: a live stream, a hung API
            assert passes.streamed() == 3
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=15)
            finally:
                if process.poll() is None:
                    process.kill()
                passes.join()
                assert process.stdout is not None
                process.stdout.close()
