"""A client's cost is its process tree's: ``bmaas sync`` on a large fleet
reads BMCs in one sweep worker process per core, and the events bench once
reported only the parent's CPU, threads, descriptors and memory at 10,000
nodes (the polling row's CPU read 0.0035 s a node-hour)."""

from __future__ import annotations

import subprocess
import sys

from bmaas.hwlab.harness.bench.common import process_cpu, process_footprint, tree_cpu

#: CPU seconds the grandchild burns before it says so
BURN = 0.3

#: the child starts a grandchild that burns BURN s of CPU, says "burnt" and
#: waits for its stdin to close (no sleep: a blocking read)
GRANDCHILD = f"""
import sys, time
start = time.process_time()
while time.process_time() - start < {BURN}:
    pass
print("burnt", flush=True)
sys.stdin.read()
"""
CHILD = f"""
import subprocess, sys
sys.exit(subprocess.run([sys.executable, "-c", {GRANDCHILD!r}], check=False).returncode)
"""


def test_the_cost_of_a_process_counts_its_descendants() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdin is not None
            assert child.stdout.readline() == "burnt\n"
            own, whole = process_cpu(child.pid), tree_cpu(child.pid)
            held = process_footprint(child.pid)
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=30)
    assert own < BURN <= whole - own
    assert held["processes"] == 2
    assert held["threads"] >= 2  # one at least in each process
    assert held["fds"] >= 6  # stdin, stdout and stderr of each
    assert held["rss_mib"] > 0


def test_a_process_gone_has_no_footprint() -> None:
    # reaped: nothing to count (its pid comes back only after the pid
    # space wraps, not within this test)
    with subprocess.Popen([sys.executable, "-c", "pass"]) as gone:
        gone.wait(timeout=30)
    assert process_footprint(gone.pid) == {}
    assert tree_cpu(gone.pid) == 0.0
