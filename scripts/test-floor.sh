#!/usr/bin/env bash
# The test suite at the low end of every dependency range pyproject.toml
# declares: a second venv, .venv-floor, with bmaas[test] installed under
# scripts/constraints-floor.txt (the lowest pyghmi, sushy, sushy-tools,
# tenacity, openstacksdk, SQLAlchemy, alembic, PyYAML, click, rich,
# platformdirs, prometheus-client, cryptography and psutil allowed), then the
# suite run in it. The high end is .venv (scripts/setup.sh: pip takes the
# newest in range), which scripts/test.sh runs. CI runs both (.ci/run).
#
#   bash scripts/test-floor.sh                 # what CI runs
#   bash scripts/test-floor.sh tests/unit -x   # arguments replace the selection
#
# Not here: tests marked `ironic` run a real Ironic from .venv-ironic
# (scripts/ironic-env.sh), where bmaas is installed into Ironic's own
# environment with the versions Ironic itself requires -- the floors of this
# file are not Ironic's to take; tests marked `vbmc` need the virtualbmc
# extra, CI's own step. The `pg` tests run here too (a real PostgreSQL, the
# oldest SQLAlchemy and alembic). Private attributes of pyghmi, sushy,
# sushy-tools and requests that bmaas relies on are listed in
# drivers/private_api.py and checked by tests/unit/test_private_api.py, in
# both venvs.
#
# Needs what scripts/setup.sh installs on the machine (ipmitool; CI runs it
# first, in scripts/test.sh).
#
# Re-running is a no-op install (well under a second) while pyproject.toml,
# the constraints and this script are unchanged: a stamp in .venv-floor
# records them. Workers: BMAAS_TEST_WORKERS (default 6, as scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=.venv-floor
floor=scripts/constraints-floor.txt
stamp_file=$venv/.bmaas-floor-stamp
say() { printf 'test-floor: %s\n' "$*" >&2; }
t0=$SECONDS

inputs="$(cat pyproject.toml "$floor" scripts/test-floor.sh | sha256sum | cut -c1-16)"
inputs="$inputs $("$python" -c 'import sys; print(sys.version.split()[0])')"
if [ -x $venv/bin/python ] && [ -f $stamp_file ] && [ "$(cat $stamp_file)" = "$inputs" ]; then
    say "$venv is up to date for this pyproject.toml and $floor"
else
    if [ ! -x $venv/bin/python ]; then
        say "creating $venv with $("$python" --version 2>&1)..."
        "$python" -m venv $venv
    fi
    say "installing bmaas[test] (editable) at the floors of $floor into $venv (pip)..."
    # --no-compile: modules are byte-compiled when first imported, not all up front
    $venv/bin/python -m pip install -q --disable-pip-version-check --no-compile \
        -e '.[test]' -c "$floor"
    echo "$inputs" >$stamp_file
    say "installed ($((SECONDS - t0)) s)"
fi

# What the venv resolved, beside what the floor file pins: a pin pip could
# not honour fails the run here, not in some test far away.
$venv/bin/python - "$floor" <<'EOF'
import re
import sys
from importlib.metadata import PackageNotFoundError, version

def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()

pins = {}
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if line:
        name, _, wanted = line.partition("==")
        pins[norm(name)] = (name.strip(), wanted.strip())
wrong = []
print("test-floor: the floors, as installed (pinned / resolved):", file=sys.stderr)
for key, (name, wanted) in sorted(pins.items()):
    try:
        got = version(name)
    except PackageNotFoundError:
        got = "missing"
    mark = "" if got == wanted else "   <-- not the floor"
    print(f"  {name:<18} {wanted:<10} {got}{mark}", file=sys.stderr)
    if got != wanted:
        wrong.append(name)
for name in ("requests", "urllib3", "flask"):  # not bmaas's pins: sushy's, sushy-tools'
    print(f"  {name:<18} {'-':<10} {version(name)}", file=sys.stderr)
if wrong:
    sys.exit(f"test-floor: not at the floor: {', '.join(wrong)}")
EOF

if [ $# -eq 0 ]; then
    # Not here: Ironic (its own pins) and vbmc (an extra); nor the benchmarks'
    # smoke runs and the runnable docs, which drive the same drivers and CLI
    # paths the lab tests hold at these versions, and cost a quarter of the run
    set -- -m "not ironic and not vbmc" \
        --ignore=tests/lab/test_bench.py --ignore=tests/lab/test_bench_events.py \
        --ignore=tests/lab/test_bench_sync_cpu.py --ignore=tests/lab/test_runnable_docs.py
fi
workers=${BMAAS_TEST_WORKERS:-6}
say "pytest -n $workers $* (load $(cut -d' ' -f1-3 /proc/loadavg))"
t=$SECONDS
# -p no:cacheprovider: .pytest_cache belongs to the .venv runs
$venv/bin/python -m pytest -n "$workers" -p no:cacheprovider "$@"
say "passed at the floors ($((SECONDS - t)) s for the tests, $((SECONDS - t0)) s in all)"
