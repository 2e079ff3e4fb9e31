"""Median power-read latency through bmaas's RedfishDriver and through bare sushy.

Both clients read the same emulated BMC in one run, interleaved read by read
so neither gets a quieter machine. bare sushy keeps its defaults (session
auth, ``Connection: close``, its own retry settings) and one reused client;
bmaas adds the bounded connector, the operation header, the call lock and
fault mapping on top of the same sushy calls.

    python -m hwlab.bench.redfish_latency [--reads 500] [--tls]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence

import sushy

from bmaas.driver import PowerState
from bmaas.driver_info import DriverInfo
from drivers.redfish import RedfishDriver
from fakes.machine import FakeMachine
from hwlab.redfish import RedfishServer

USERNAME, PASSWORD = "bench", "bench-password"


def _timed(read: Callable[[], object]) -> float:
    start = time.perf_counter()
    read()
    return time.perf_counter() - start


def measure(reads: int, *, tls: bool) -> dict[str, float]:
    machine = FakeMachine("bench-node", power=PowerState.ON)
    with RedfishServer(tls=tls) as server:
        port = server.add(machine, username=USERNAME, password=PASSWORD)
        url, system_path = server.url(port), "/redfish/v1/Systems/bench-node"
        verify: bool | str = server.ca_path if tls else True
        info = DriverInfo.parse(
            {
                "redfish_address": url,
                "redfish_username": USERNAME,
                "redfish_password": PASSWORD,
                "redfish_system_id": system_path,
                "redfish_verify_ca": verify,
            }
        )
        driver = RedfishDriver("bench-node", info)
        root = sushy.Sushy(url, username=USERNAME, password=PASSWORD, verify=verify)
        system = root.get_system(system_path)

        def bare() -> object:
            system.refresh()
            return system.power_state

        try:
            for _ in range(20):  # warm up both: sessions, connection setup, caches
                driver.get_power_state()
                bare()
            ours, theirs = [], []
            for _ in range(reads):
                ours.append(_timed(driver.get_power_state))
                theirs.append(_timed(bare))
        finally:
            driver.close()
            root._auth.close()
            root._auth = None
    bmaas_ms = statistics.median(ours) * 1000
    sushy_ms = statistics.median(theirs) * 1000
    return {"bmaas_ms": bmaas_ms, "sushy_ms": sushy_ms, "ratio": bmaas_ms / sushy_ms}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=500, help="power reads per client")
    parser.add_argument("--tls", action="store_true", help="serve the BMC over HTTPS")
    args = parser.parse_args(argv)
    result = measure(args.reads, tls=args.tls)
    scheme = "https" if args.tls else "http"
    print(f"power read, median of {args.reads}, one emulated Redfish BMC over {scheme}:")
    print(f"  bmaas RedfishDriver.get_power_state  {result['bmaas_ms']:7.3f} ms")
    print(f"  bare sushy System.refresh            {result['sushy_ms']:7.3f} ms")
    print(f"  ratio bmaas / sushy                  {result['ratio']:7.3f}")


if __name__ == "__main__":
    main()
