"""How long after ``exec`` a ``bmaas`` fleet command with a short ``--deadline``
exits, on a quiet machine and beside CPU burners, for one or two builds of
bmaas side by side (issue 36: "worst end-to-end overrun <= 1 s").

    python scripts/bench_deadline_exit.py --runs 20 --burners 4 \\
        --build before=75a990c --build after=HEAD

Starts an hwlab lab (``--nodes`` nodes, IPMI and Redfish alternating; the
first ``--hung`` of them never answer a power read: an hwlab ``hang`` rule),
enrolls it in a temporary store, and runs ``bmaas power status --all
--deadline D`` as an operator does: a new process each time, timed from just
before ``exec`` to its exit as the parent sees it (``time.monotonic``).
Beside each build's command it runs the build's no-op (``bmaas --version``:
the interpreter, click, bmaas's entry) under the same conditions, so the
figure a person cares about, the time past the deadline, can be read next to
what any Python process costs there.

A build is ``NAME=COMMIT``: that commit's tree (``git archive``) laid out as
bmaas installs (``drivers/``, ``fakes/`` and ``hwlab/`` as ``bmaas.drivers``,
...) in a temporary directory and put first on ``PYTHONPATH``; ``NAME=.``:
the checkout as it is. The lab itself always runs from the checkout.

Quiet and loaded blocks alternate (``--block`` runs of every build and its
no-op, interleaved, per block), so both see the same machine over the same
minutes. Loaded: ``--burners`` processes of ``python -c 'while True: pass'``,
started before the block and killed (by pid) after it. Prints one row per
build, condition and deadline: median, p95 and worst seconds from exec to
exit, the worst overrun past the deadline, the no-op's median and worst, and
how the runs ended: exit codes, "spent" (ended by "spent by start-up"),
"no room" (ended by "would pass while the database loads") and the BMCs
asked per run (a node that answered or whose call the deadline cut).
``--json FILE`` writes every sample. The report carries ``nproc`` and the
load average at the start and the end.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: seconds past its deadline a command may take before it is called hung
HUNG_AFTER = 60.0
BURN = "while True: pass"
#: the console script's own code; a build from a commit first takes the
#: checkout's editable-install finder off the import path (it would find the
#: checkout's bmaas before PYTHONPATH's)
ENTRY = (
    "import os, sys\n"
    "if os.environ.get('BENCH_TREE'):\n"
    "    sys.meta_path[:] = [f for f in sys.meta_path\n"
    "                        if '__editable__' not in getattr(f, '__module__', '')]\n"
    "sys.argv[0] = 'bmaas'\n"
    "from bmaas.cli import main\n"
    "main()\n"
)


def build_tree(commit: str, into: Path) -> Path:
    """``commit``'s files laid out as bmaas installs; the PYTHONPATH entry."""
    archive = subprocess.run(  # noqa: S603 - git, arguments built here
        ["git", "-C", str(REPO), "archive", "--format=tar", commit],  # noqa: S607
        capture_output=True,
        check=True,
    ).stdout
    src = into / "src"
    src.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(src, filter="data")
    root = into / "path" / "bmaas"
    root.mkdir(parents=True)
    for entry in (src / "bmaas").iterdir():
        (root / entry.name).symlink_to(entry)
    for folder in ("drivers", "fakes", "hwlab"):
        (root / folder).symlink_to(src / folder)
    return into / "path"


def timed(cmd: list[str], env: dict[str, str], deadline: float, cwd: str) -> dict[str, Any]:
    """One run, from just before ``exec`` to its exit. ``cwd`` is neutral
    ground: ``python -c`` puts it first on the import path."""
    begun = time.monotonic()
    done = subprocess.run(  # noqa: S603 - our own interpreter and entry
        cmd,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=deadline + HUNG_AFTER,
        check=False,
    )
    took = time.monotonic() - begun
    return {
        "seconds": took,
        "code": done.returncode,
        "spent": "spent by start-up" in done.stderr,
        "no_room": "would pass while the database loads" in done.stderr,
        "asked": _asked(done.stdout),
        "tail": done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else [],
    }


def _asked(stdout: str) -> int:
    """Nodes whose BMC was asked (an answer, or a call cut at the deadline)."""
    try:
        results = json.loads(stdout)["results"]
    except (ValueError, KeyError, TypeError):
        return 0
    return sum(1 for r in results if r.get("ok") or r.get("fault", {}).get("class") == "BMCTimeout")


@contextlib.contextmanager
def burners(count: int) -> Iterator[None]:
    procs = [
        subprocess.Popen([sys.executable, "-c", BURN])  # noqa: S603
        for _ in range(count)
    ]
    try:
        time.sleep(0.5 if procs else 0.0)  # let them take the cores
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(10)


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {"median": statistics.median(ordered), "p95": p95, "worst": ordered[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per build, condition, deadline")
    parser.add_argument("--block", type=int, default=5, help="runs per block before switching")
    parser.add_argument("--burners", type=int, default=4)
    parser.add_argument("--deadline", type=float, action="append", help="seconds (repeatable)")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--hung", type=int, default=2)
    parser.add_argument("--build", action="append", help="NAME=COMMIT or NAME=. (repeatable)")
    parser.add_argument("--json", type=Path, help="write every sample here")
    args = parser.parse_args()
    deadlines = args.deadline or [0.5]
    builds = [b.partition("=")[::2] for b in (args.build or ["this=."])]
    if args.runs < 1 or args.block < 1 or not 0 <= args.hung <= args.nodes or args.burners < 0:
        parser.error("--runs and --block >= 1, 0 <= --hung <= --nodes, --burners >= 0")

    from bmaas.hwlab.harness.bench.common import enrolled_lab
    from bmaas.hwlab.labspec import generate

    started_load = os.getloadavg()
    samples: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-deadline-") as tmp:
        paths: dict[str, str | None] = {}
        for name, commit in builds:
            paths[name] = None if commit == "." else str(build_tree(commit, Path(tmp) / name))
        spec = generate(args.nodes, protocols="mixed", seed=36)
        with enrolled_lab(spec, "bench-deadline-") as (lab, db, names):
            for name in names[: args.hung]:
                lab.add_faults(name, [{"effect": "hang", "operation": "power.get"}])
            base = {**os.environ, "BMAAS_DB": str(db)}
            for block_start in range(0, args.runs, args.block):
                count = min(args.block, args.runs - block_start)
                for condition in ("quiet", "loaded"):
                    with burners(args.burners if condition == "loaded" else 0):
                        load = os.getloadavg()[0]
                        for _ in range(count):
                            for name, path in paths.items():
                                env = dict(base)
                                if path is not None:
                                    env["PYTHONPATH"] = env["BENCH_TREE"] = path
                                cmd = [sys.executable, "-c", ENTRY]
                                noop = timed([*cmd, "--version"], env, 0.0, tmp)
                                samples.append(
                                    {"build": name, "condition": condition, "deadline": None,
                                     "load": load, **noop}
                                )  # fmt: skip
                                for deadline in deadlines:
                                    ran = timed(
                                        [*cmd, "power", "status", "--all", "--json",
                                         "--deadline", f"{deadline:g}"],
                                        env,
                                        deadline,
                                        tmp,
                                    )  # fmt: skip
                                    samples.append(
                                        {"build": name, "condition": condition,
                                         "deadline": deadline, "load": load, **ran}
                                    )  # fmt: skip
    report: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "burners": args.burners,
        "nodes": args.nodes,
        "hung": args.hung,
        "builds": dict(builds),
        "load_start": started_load,
        "load_end": os.getloadavg(),
        "samples": samples,
    }
    print(
        f"nproc {report['nproc']}, {args.burners} burners when loaded, lab of {args.nodes} nodes "
        f"({args.hung} never answer a power read), {args.runs} runs each; load average "
        f"{' / '.join(f'{x:.2f}' for x in started_load)} at the start, "
        f"{' / '.join(f'{x:.2f}' for x in report['load_end'])} at the end"
    )
    header = (
        "build", "condition", "deadline", "median", "p95", "worst", "worst past",
        "no-op median", "no-op worst", "exit codes", "spent", "no room", "BMCs asked",
    )  # fmt: skip
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, _ in builds:
        for condition in ("quiet", "loaded"):
            noops = [
                s["seconds"]
                for s in samples
                if (s["build"], s["condition"], s["deadline"]) == (name, condition, None)
            ]
            for deadline in deadlines:
                rows = [
                    s
                    for s in samples
                    if (s["build"], s["condition"], s["deadline"]) == (name, condition, deadline)
                ]
                got = stats([s["seconds"] for s in rows])
                noop = stats(noops)
                codes_text = ",".join(
                    f"{c}x{sum(1 for s in rows if s['code'] == c)}"
                    for c in sorted({s["code"] for s in rows})
                )
                print(
                    f"| {name} | {condition} | {deadline:g} | {got['median']:.2f} | "
                    f"{got['p95']:.2f} | {got['worst']:.2f} | {got['worst'] - deadline:+.2f} | "
                    f"{noop['median']:.2f} | {noop['worst']:.2f} | {codes_text} | "
                    f"{sum(1 for s in rows if s['spent'])} | "
                    f"{sum(1 for s in rows if s['no_room'])} | "
                    f"{sum(s['asked'] for s in rows) / len(rows):.1f} |"
                )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
