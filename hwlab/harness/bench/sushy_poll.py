"""Bare sushy polling power, as a power sync built on it does, in a process
of its own (so its CPU is its own): one ``sushy.Sushy`` client (session auth)
and its ``System`` kept per node, ``system.refresh()`` and ``power_state``
per read, ``workers`` threads, pass after pass for ``duration`` seconds at
most ``passes`` passes, ``interval`` seconds start to start::

    echo '{"nodes": [...], "workers": 8, "passes": 40, "interval": 0.2}' \\
        | python -m bmaas.hwlab.harness.bench.sushy_poll

The job (with the passwords) comes on stdin, never on the command line.
Each pass prints one JSON line as it ends: its number, the process's CPU
seconds so far (user + system, ``getrusage``: the parent takes differences
from one line to the next, as it does for ``bmaas sync``), the wall seconds
the pass took, and how many reads failed. The first pass logs in (each
client reads the service root, posts a session, finds its system); the
sessions are logged out at the end.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import resource
import sys
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["Kept", "main", "node_job"]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def node_job(record: Any) -> dict[str, Any]:
    """A store record as :meth:`Kept.read` takes it (the job's ``nodes``)."""
    from bmaas import credentials

    info = credentials.resolve_driver_info(record.driver_info, node=record.name)
    return {
        "name": record.name,
        "address": str(info["redfish_address"]),
        "username": info["redfish_username"],
        "password": info["redfish_password"].reveal(),
        "system": info.get("redfish_system_id"),
    }


class Kept:
    """A kept ``sushy.Sushy`` client and ``System`` per node, as a power sync
    built on sushy keeps them: a node's first read makes its client (logs in,
    finds its system), each later one is ``system.refresh()``."""

    def __init__(self) -> None:
        import sushy

        self.sushy = sushy
        self.systems: dict[str, Any] = {}
        self.roots: list[Any] = []

    def read(self, node: Mapping[str, Any]) -> bool:
        """One power read; False if it failed (counted, as for bmaas)."""
        try:
            system = self.systems.get(node["name"])
            if system is None:
                root = self.sushy.Sushy(
                    node["address"],
                    username=node["username"],
                    password=node["password"],
                    verify=False,
                )
                self.roots.append(root)
                path = node.get("system") or root.get_system_collection().members_identities[0]
                system = self.systems[node["name"]] = root.get_system(path)
            else:
                system.refresh()
            return system.power_state is not None
        except Exception:  # a failed read is counted, as for bmaas
            return False

    def close(self) -> None:
        """Log every session out now, while the lab runs (sushy would at
        garbage collection, after it: 3 x 60 s each)."""
        for root in self.roots:
            auth, root._auth = root._auth, None
            with contextlib.suppress(Exception):  # a courtesy: sessions expire anyway
                if auth is not None:
                    auth.close()
        self.roots.clear()
        self.systems.clear()


def main() -> None:
    job = json.loads(sys.stdin.read())
    nodes: list[Mapping[str, Any]] = job["nodes"]
    kept = Kept()
    interval = float(job.get("interval", 0.0))
    end = time.monotonic() + float(job.get("duration", 3600.0))
    with concurrent.futures.ThreadPoolExecutor(int(job.get("workers", 8))) as pool:
        for number in range(1, int(job.get("passes", 10)) + 1):
            started = time.monotonic()
            ok = list(pool.map(kept.read, nodes))
            line = {
                "pass": number,
                "cpu": _cpu(),
                "wall": time.monotonic() - started,
                "failed": ok.count(False),
            }
            print(json.dumps(line), flush=True)
            if time.monotonic() >= end:
                break
            time.sleep(max(0.0, started + interval - time.monotonic()))
    kept.close()


if __name__ == "__main__":
    main()
