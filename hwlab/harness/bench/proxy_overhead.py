"""What an hwlab proxy adds to a BMC call on loopback.

Starts a stock vbmcd (libvirt test:///default) and a stock sushy-emulator
(fake driver), puts a proxy with no rules in front of each, and times the
same call direct and through the proxy, interleaved, in one run:

* IPMI: Get Chassis Status (``power.get``) on a reused pyghmi session,
  cipher suite 3, the proxy holding the BMC credentials (so it decrypts and
  checks every packet, its worst case);
* Redfish: ``GET /redfish/v1/Systems/<id>`` on a keep-alive HTTP session
  (plain HTTP on both sides, so only the proxy differs). sushy-emulator
  closes every connection, so both paths open a TCP connection to it per
  call; the client's connection to the proxy stays open, which hides part
  of the proxy's cost: this figure varies more from run to run.

Prints the median per call direct and proxied, the added median, and the
ratio. Needs the ``bmaas[virtualbmc]`` extra::

    python -m bmaas.hwlab.harness.bench.proxy_overhead --calls 500
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Callable
from typing import Any

import requests
from pyghmi.ipmi import command
from pyghmi.ipmi.private import session as pyghmi_session

from bmaas.hwlab.harness.bench.common import interleaved
from bmaas.hwlab.proxy import ProxyHost, ProxySpec
from bmaas.hwlab.proxy.stock import StockSushy, StockVbmc
from bmaas.secrets import Secret

__all__ = ["main", "measure"]


def _suite3() -> None:
    """virtualbmc (pyghmi's server) only does cipher suite 3; make pyghmi's
    client ask for it instead of 17 (see tests/lab/test_proxy_ipmi.py)."""
    original = pyghmi_session.Session._initsession

    def initsession(self: Any) -> None:
        original(self)
        self.attemptedhash = 1

    pyghmi_session.Session._initsession = initsession


def measure(
    direct: Callable[[], object], proxied: Callable[[], object], calls: int
) -> dict[str, float]:
    """Median milliseconds per call of each, interleaved so drift hits both alike."""
    times = interleaved({"direct": direct, "proxied": proxied}, calls)
    d, p = statistics.median(times["direct"]), statistics.median(times["proxied"])
    return {"direct_ms": d * 1e3, "proxied_ms": p * 1e3, "added_ms": (p - d) * 1e3, "ratio": p / d}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per path (default 300)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    _suite3()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="hwlab-bench-") as tmp:
        vbmc = StockVbmc(f"{tmp}/vbmc", ["test"])
        sushy = StockSushy(f"{tmp}/sushy", ["node1"])
        host: ProxyHost | None = None
        try:
            vbmc.start()
            sushy.start()
            specs = [
                ProxySpec(
                    "ipmi",
                    "ipmi",
                    "127.0.0.1",
                    vbmc.ports["test"],
                    username="admin",
                    password=Secret("password"),
                ),
                ProxySpec("redfish", "redfish", sushy.host, sushy.port, tls=False),
            ]
            host = ProxyHost(specs)
            host.start()
            ports = host.endpoints

            def ipmi(port: int) -> Callable[[], object]:
                bmc = command.Command("127.0.0.1", b"admin", b"password", port=port)
                return lambda: bmc.raw_command(netfn=0x00, command=0x01)

            results["ipmi power.get"] = measure(
                ipmi(vbmc.ports["test"]), ipmi(ports["ipmi"]["ipmi"]), args.calls
            )
            path = "/redfish/v1/Systems/" + sushy.system_id("node1")

            def redfish(base: str) -> Callable[[], object]:
                client = requests.Session()
                return lambda: client.get(base + path, timeout=10).raise_for_status()

            results["redfish GET system"] = measure(
                redfish(sushy.url),
                redfish(f"http://127.0.0.1:{ports['redfish']['redfish']}"),
                args.calls,
            )
        finally:
            if host is not None:
                host.stop()
            sushy.stop()
            vbmc.stop()
    if args.json:
        print(json.dumps({"calls": args.calls, "results": results}, indent=2))
        return 0
    print(f"hwlab proxy overhead on loopback, median of {args.calls} interleaved calls each")
    print(f"{'call':<20} {'direct':>10} {'proxied':>10} {'added':>10} {'ratio':>7}")
    for name, r in results.items():
        print(
            f"{name:<20} {r['direct_ms']:>8.3f}ms {r['proxied_ms']:>8.3f}ms "
            f"{r['added_ms']:>8.3f}ms {r['ratio']:>6.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
