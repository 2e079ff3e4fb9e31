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

__all__ = ["main"]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    import sushy

    job = json.loads(sys.stdin.read())
    nodes: list[Mapping[str, Any]] = job["nodes"]
    systems: dict[str, Any] = {}
    roots: list[Any] = []

    def one(node: Mapping[str, Any]) -> bool:
        try:
            system = systems.get(node["name"])
            if system is None:
                root = sushy.Sushy(
                    node["address"],
                    username=node["username"],
                    password=node["password"],
                    verify=False,
                )
                roots.append(root)
                path = node.get("system") or root.get_system_collection().members_identities[0]
                system = systems[node["name"]] = root.get_system(path)
            else:
                system.refresh()
            return system.power_state is not None
        except Exception:  # a failed read is counted, as for bmaas
            return False

    interval = float(job.get("interval", 0.0))
    end = time.monotonic() + float(job.get("duration", 3600.0))
    with concurrent.futures.ThreadPoolExecutor(int(job.get("workers", 8))) as pool:
        for number in range(1, int(job.get("passes", 10)) + 1):
            started = time.monotonic()
            ok = list(pool.map(one, nodes))
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
    for root in roots:  # sushy would log out at garbage collection: now, while the lab runs
        auth, root._auth = root._auth, None
        with contextlib.suppress(Exception):
            if auth is not None:
                auth.close()


if __name__ == "__main__":
    main()
