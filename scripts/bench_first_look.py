"""How long after ``exec`` a fleet command first looks at its ``--deadline``
(issue 44), for one or more builds side by side, quiet and beside CPU burners.

    python scripts/bench_first_look.py --runs 15 --burners 4 \\
        --build before=0d0405c --build after=.

Runs ``bmaas power status --all --deadline 0.1`` (a budget start-up always
spends) as a new process each time, no lab needed: the command's one line,
"... spent by start-up (X s after exec) ...", gives the first look's own
figure; the parent times exec to exit. Builds are laid out and run as
scripts/bench_deadline_exit.py does (``NAME=COMMIT`` or ``NAME=.``), with
bytecode cached outside the trees (``PYTHONPYCACHEPREFIX``; two warm-up runs
each), as an installed bmaas has it. Prints one row per build and condition.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_deadline_exit import ENTRY, build_tree, burners

_LOOK = re.compile(r"\(([\d.]+) s after exec\)")


def run(env: dict[str, str], cwd: str) -> tuple[float, float, int]:
    begun = time.monotonic()
    done = subprocess.run(  # noqa: S603 - our own interpreter and entry
        [sys.executable, "-c", ENTRY, "power", "status", "--all", "--deadline", "0.1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )
    took = time.monotonic() - begun
    found = _LOOK.search(done.stderr)
    return (float(found.group(1)) if found else float("nan")), took, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--burners", type=int, default=4)
    parser.add_argument("--build", action="append", help="NAME=COMMIT or NAME=. (repeatable)")
    args = parser.parse_args()
    builds = [b.partition("=")[::2] for b in (args.build or ["this=."])]
    rows: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-first-look-") as tmp:
        envs = {}
        for name, commit in builds:
            env = {**os.environ, "BMAAS_DB": f"{tmp}/none.db", "PYTHONPYCACHEPREFIX": f"{tmp}/pyc"}
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            if commit != ".":
                env["PYTHONPATH"] = env["BENCH_TREE"] = str(build_tree(commit, Path(tmp) / name))
            envs[name] = env
            for _ in range(2):
                run(env, tmp)
        for condition in ("quiet", "loaded"):
            with burners(args.burners if condition == "loaded" else 0):
                load = os.getloadavg()[0]
                for _ in range(args.runs):
                    for name, env in envs.items():
                        rows.setdefault((name, condition), []).append(run(env, tmp))
            print(f"{condition}: load {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"nproc {os.cpu_count()}, {args.burners} burners when loaded, {args.runs} runs each")
    print("| build | beside it | first look median | p90 | worst | exec to exit median | worst |")
    print("|---|---|---|---|---|---|---|")
    for (name, condition), samples in rows.items():
        look = sorted(s[0] for s in samples)
        took = sorted(s[1] for s in samples)
        p90 = look[int(0.9 * (len(look) - 1))]
        print(
            f"| {name} | {condition} | {statistics.median(look):.2f} | {p90:.2f} | "
            f"{look[-1]:.2f} | {statistics.median(took):.2f} | {took[-1]:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
