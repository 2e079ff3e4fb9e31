"""How many Redfish BMC endpoints one process serves, and what each costs.

Starts one :class:`~hwlab.redfish.RedfishServer`, adds N machines (one port
each), reads every endpoint's system once, and prints the time to bring them
up, the resident memory each endpoint adds, and the median and worst read
latency while all N are listening.

    python -m hwlab.bench.redfish_scale [--endpoints 500] [--tls]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Sequence

import requests

from fakes.machine import FakeMachine
from hwlab.redfish import RedfishServer

USERNAME, PASSWORD = "bench", "bench-password"  # throwaway lab BMCs


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure(endpoints: int, *, tls: bool) -> dict[str, float]:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < endpoints + 100:
        raise SystemExit(f"open-file limit {soft} is too low for {endpoints} endpoints")
    session = requests.Session()
    session.auth = (USERNAME, PASSWORD)
    with RedfishServer(tls=tls) as server:
        # per request: requests lets REQUESTS_CA_BUNDLE override Session.verify
        verify = server.ca_path if tls else True
        # The first endpoint pays for Flask, Jinja and TLS set-up: measure after it.
        first = server.add(FakeMachine("scale-0"), username=USERNAME, password=PASSWORD)
        session.get(server.url(first) + "/redfish/v1/Systems/scale-0", timeout=10, verify=verify)
        base = rss_kib()
        start = time.perf_counter()
        ports = {
            f"scale-{i}": server.add(
                FakeMachine(f"scale-{i}"), username=USERNAME, password=PASSWORD
            )
            for i in range(1, endpoints)
        }
        up = time.perf_counter() - start
        latencies = []
        for name, port in ports.items():
            t0 = time.perf_counter()
            url = f"{server.url(port)}/redfish/v1/Systems/{name}"
            reply = session.get(url, timeout=10, verify=verify)
            latencies.append(time.perf_counter() - t0)
            if reply.status_code != 200 or reply.json()["Id"] != name:
                raise SystemExit(f"endpoint {port} answered for the wrong machine")
        grown = rss_kib() - base
    session.close()
    added = max(1, endpoints - 1)
    return {
        "endpoints": endpoints,
        "up_s": up,
        "kib_per_endpoint": grown / added,
        "median_ms": statistics.median(latencies) * 1000,
        "worst_ms": max(latencies) * 1000,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoints", type=int, default=500)
    parser.add_argument("--tls", action="store_true")
    args = parser.parse_args(argv)
    r = measure(args.endpoints, tls=args.tls)
    scheme = "https" if args.tls else "http"
    print(f"{r['endpoints']:.0f} Redfish endpoints in one process ({scheme}):")
    print(f"  added and listening in   {r['up_s']:8.3f} s")
    print(f"  memory per endpoint      {r['kib_per_endpoint']:8.1f} KiB (RSS growth / endpoints)")
    print(f"  system read, median      {r['median_ms']:8.3f} ms  (worst {r['worst_ms']:.1f} ms)")


if __name__ == "__main__":
    main()
