"""What one boot costs in the VM lab, BIOS against UEFI with Secure Boot on
(issue 49's "the tier's cost per boot").

For each firmware: a one-VM lab of its own (``hwlab vm up --count 1
--proxies``, Redfish through the proxy and stock sushy-tools, as the tier's),
the lab's virtual-media ISO served on 127.0.0.1, and ``--boots`` deploys of
it one after another (``bmaas deploy --image URL --ready-log ...
--ready-pattern 'BMAAS-BOOTED via=vmedia'``, then ``bmaas undeploy --all``).
Per boot, read beside the deploy while it runs (the serial log every 0.2 s):

* **to marker**: seconds from the deploy command's start to the guest's
  marker line (firmware, boot loader, kernel, init, the marker: a TCG boot
  on shared cores; the command's own start and power-on included);
* **guest CPU**: the domain's ``cpu.time`` (libvirt, ``virsh domstats
  --cpu-total``) when the marker appears -- the qemu process is new at each
  power-on, so that is what the boot cost the host's cores;
* **to active**: the deploy command's wall time (its settle window and
  ready polling on top of the boot).

Medians over the boots; the load average beside each. Run as root (the
VM lab's set-up, ``scripts/vm-setup.sh``) with the virtualbmc extra::

    .venv/bin/python scripts/bench_vm_boot.py --boots 3 [--firmware bios --firmware uefi-secure]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bmaas.hwlab.pyexec import python_argv
from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm.lab import VmLab, down, up

VMEDIA = "BMAAS-BOOTED via=vmedia"


def _cli(home: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    """The bmaas CLI's argv and environment, on a store of its own under ``home``."""
    env = {**os.environ, "BMAAS_HOME": str(home / "bmaas"), "XDG_STATE_HOME": str(home)}
    return python_argv("-c", "from bmaas.cli import main; main()", *args), env


def _bmaas(home: Path, *args: str, timeout: float = 700) -> subprocess.CompletedProcess[str]:
    argv, env = _cli(home, *args)
    return subprocess.run(  # noqa: S603 - our own CLI, arguments built here
        argv, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


@contextlib.contextmanager
def _served(iso: Path) -> Iterator[str]:
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(iso.parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{iso.name}"
    finally:
        server.shutdown()
        server.server_close()


def _cpu_seconds(dom: str) -> float:
    out = domain.virsh("domstats", "--cpu-total", dom)
    for line in out.splitlines():
        key, _, value = line.strip().partition("=")
        if key == "cpu.time":
            return int(value) / 1e9
    raise RuntimeError(f"no cpu.time for {dom}: {out!r}")


def _markers(log: Path) -> int:
    try:
        return log.read_text(errors="replace").count(VMEDIA)
    except FileNotFoundError:
        return 0


def _one_boot(home: Path, lab: VmLab, url: str) -> dict[str, Any]:
    (node,) = lab.domains
    log = lab.serial_log(node)
    seen = _markers(log)
    load = os.getloadavg()[0]
    start = time.monotonic()
    argv, env = _cli(
        home, "deploy", "--json", "--count", "1", "--max-attempts", "1", "--image", url,
        "--ready-log", lab.serial_template, "--ready-pattern", VMEDIA, "--deadline", "600",
    )  # fmt: skip
    deploying = subprocess.Popen(  # noqa: S603 - our own CLI, arguments built here
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    to_marker = cpu = None
    for _ in range(3000):  # at most 600 s, the deploy's own deadline
        if _markers(log) > seen:
            to_marker = time.monotonic() - start
            cpu = _cpu_seconds(lab.domain(node))
            break
        if deploying.poll() is not None:
            break
        time.sleep(0.2)
    out, err = deploying.communicate(timeout=700)
    to_active = time.monotonic() - start
    if deploying.returncode != 0 or to_marker is None:
        raise RuntimeError(f"deploy failed (rc {deploying.returncode}): {err[-2000:]}")
    assert json.loads(out)["ok"] == 1
    done = _bmaas(home, "undeploy", "--all")
    if done.returncode != 0:
        raise RuntimeError(f"undeploy failed: {done.stderr[-2000:]}")
    return {
        "to_marker_s": round(to_marker, 2),
        "guest_cpu_s": round(cpu or 0.0, 2),
        "to_active_s": round(to_active, 2),
        "load_1min": round(load, 1),
    }


def bench(firmware: str, boots: int, work: Path) -> list[dict[str, Any]]:
    state = work / firmware / "lab"
    home = work / firmware / "home"
    home.mkdir(parents=True)
    lab = up(state, count=1, proxies=True, driver="redfish", firmware=firmware)
    try:
        inventory = state / "inventory.yaml"
        done = _bmaas(home, "enroll", str(inventory))
        if done.returncode != 0:
            raise RuntimeError(f"enroll failed: {done.stderr[-2000:]}")
        with _served(Path(lab.vmedia_iso)) as url:
            return [_one_boot(home, lab, url) for _ in range(boots)]
    finally:
        down(state)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boots", type=int, default=3)
    parser.add_argument("--firmware", action="append", choices=domain.FIRMWARE)
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-vm-boot-") as tmp:
        for firmware in args.firmware or ["bios", "uefi-secure"]:
            rows = bench(firmware, args.boots, Path(tmp))
            for row in rows:
                print(json.dumps({"firmware": firmware, **row}), flush=True)
            median = {
                key: round(statistics.median(r[key] for r in rows), 2)
                for key in ("to_marker_s", "guest_cpu_s", "to_active_s", "load_1min")
            }
            print(json.dumps({"firmware": firmware, "median_of": len(rows), **median}), flush=True)


if __name__ == "__main__":
    main()
