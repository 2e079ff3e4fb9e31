"""IPMI latency against one emulated BMC, side by side in one run.

    python -m hwlab.bench.ipmi_latency [--rounds 30] [--bmcs 300]

The BMC runs in a child process (its own interpreter, as in a lab worker), so
client and server do not share a GIL. Each round measures, in turn:

* a fresh ``IPMIDriver``: RMCP+ login (suite 17) and one power read;
* ten power reads on the same driver's reused session;
* bare pyghmi ``Command.get_power()`` on a reused session (pyghmi's own
  synchronous API, for reference);
* ``ipmitool -I lanplus ... power status`` (a process, its own login).

Medians and ratios are printed at the end. With ``--bmcs N`` the child also
serves N more BMCs and reports its resident memory per BMC, idle and with one
live session each.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

USER, PASSWORD = "bench", "bench-password"


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _serve(conn: Connection, extra: int) -> None:
    """The child: one measured BMC plus ``extra`` for the memory figure."""
    from fakes.machine import FakeMachine
    from hwlab.ipmi import IPMIServer

    with IPMIServer() as server:
        port = server.add(FakeMachine("bench"), username=USER, password=PASSWORD)
        baseline = _rss_kib()
        ports = [
            server.add(FakeMachine(f"extra-{i:04d}"), username=USER, password=PASSWORD)
            for i in range(extra)
        ]
        conn.send((port, ports, baseline, _rss_kib()))
        while conn.recv() == "rss":
            conn.send(_rss_kib())


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _driver(port: int, deadline: float = 5.0) -> Any:
    from bmaas.driver_info import DriverInfo
    from drivers.ipmi import IPMIDriver

    info = DriverInfo.parse(
        {
            "ipmi_address": "127.0.0.1",
            "ipmi_port": port,
            "ipmi_username": USER,
            "ipmi_password": PASSWORD,
        }
    )
    return IPMIDriver("bench", info, deadline=deadline)


def _fresh_login_and_read(port: int) -> float:
    driver = _driver(port)
    took = _timed(driver.get_power_state)
    driver.close()
    return took


def _ipmitool(tool: str, port: int) -> float:
    args = [tool, "-I", "lanplus", "-H", "127.0.0.1", "-p", str(port), "-U", USER]
    args += ["-P", PASSWORD, "power", "status"]

    def run() -> None:
        subprocess.run(args, check=True, capture_output=True, timeout=10)  # noqa: S603

    return _timed(run)


def _memory(conn: Connection, ports: list[int], baseline: int, loaded: int) -> list[str]:
    if not ports:
        return []
    drivers = [_driver(port) for port in ports]
    for driver in drivers:
        driver.get_power_state()
    conn.send("rss")
    with_sessions = conn.recv()
    for driver in drivers:
        driver.close()
    n = len(ports)
    return [
        f"server RSS, 1 BMC:                    {baseline / 1024:8.1f} MiB",
        f"server RSS, {n + 1} BMCs idle:             {loaded / 1024:8.1f} MiB"
        f"   ({(loaded - baseline) / n:.1f} KiB per BMC)",
        f"server RSS, {n + 1} BMCs, 1 session each:  {with_sessions / 1024:8.1f} MiB"
        f"   ({(with_sessions - baseline) / n:.1f} KiB per BMC)",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30, help="rounds (default 30)")
    parser.add_argument("--bmcs", type=int, default=0, help="extra BMCs for the memory figure")
    args = parser.parse_args(argv)
    tool = shutil.which("ipmitool")
    if tool is None:
        print("ipmitool not found: run scripts/setup.sh", file=sys.stderr)
        return 2

    from pyghmi.ipmi import command as pyghmi_command

    parent, child = multiprocessing.get_context("spawn").Pipe()
    worker = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(child, args.bmcs), daemon=True
    )
    worker.start()
    try:
        port, extra_ports, baseline, loaded = parent.recv()
        driver = _driver(port)
        driver.get_power_state()  # warm: pyghmi's IO thread, sockets, session
        bare = pyghmi_command.Command("127.0.0.1", USER.encode(), PASSWORD.encode(), port=port)
        bare.get_power()
        samples: dict[str, list[float]] = {"fresh": [], "reused": [], "pyghmi": [], "ipmitool": []}
        for _ in range(args.rounds):
            samples["fresh"].append(_fresh_login_and_read(port))
            samples["reused"] += [_timed(driver.get_power_state) for _ in range(10)]
            samples["pyghmi"] += [_timed(bare.get_power) for _ in range(10)]
            samples["ipmitool"].append(_ipmitool(tool, port))
        driver.close()
        bare.ipmi_session.logout()
        memory = _memory(parent, extra_ports, baseline, loaded)
        parent.send("stop")
    finally:
        worker.join(timeout=10)
        if worker.is_alive():
            worker.kill()

    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    print(f"IPMI latency, one emulated BMC on 127.0.0.1, {args.rounds} rounds (medians)")
    print(f"  bmaas fresh login + power read:      {med['fresh']:8.3f} ms")
    print(f"  bmaas reused-session power read:     {med['reused']:8.3f} ms")
    print(f"  pyghmi Command.get_power (reused):   {med['pyghmi']:8.3f} ms")
    print(f"  ipmitool -I lanplus power status:    {med['ipmitool']:8.3f} ms")
    print("ratios")
    print(f"  fresh login / reused session:        {med['fresh'] / med['reused']:8.1f} x")
    print(f"  ipmitool / reused session:           {med['ipmitool'] / med['reused']:8.1f} x")
    print(f"  ipmitool / fresh login:              {med['ipmitool'] / med['fresh']:8.1f} x")
    print(f"  bmaas reused / pyghmi reused:        {med['reused'] / med['pyghmi']:8.2f} x")
    for line in memory:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
