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
    # What the floors can change: every unit, contract, core and PostgreSQL
    # test, and the lab tests that put pyghmi, sushy, sushy-tools, requests
    # and the store on the wire one layer at a time (drivers, proxies,
    # sessions, deadlines, hwlab's servers, vendor trees). Not here: the lab
    # tests that drive whole fleets through the CLI (bench smoke runs, the
    # fault and vendor matrices, multi-pass syncs, provisioning, thousands of
    # streams, the runnable docs): they reach the libraries through the same
    # calls the tests above hold, cost two thirds of the floor's run, and
    # step 1 runs them at the newest versions. Not here either: Ironic (its
    # own pins) and vbmc (an extra).
    lab=()
    for f in tests/lab/test_*.py; do
        case ${f#tests/lab/} in
            test_ipmi*|test_redfish_*|test_proxy_*|test_session_*|test_login_*|\
            test_shared_service_*|test_hwlab_*|test_silent_edges.py|test_total_deadline.py|\
            test_vendor_incidents.py|test_deadline_from_exec.py|test_clean_import_path.py|\
            test_loopback_hosts.py|test_push_listener_limits.py|test_sync_sessions.py|\
            test_local_contention.py)
                lab+=("$f") ;;
        esac
    done
    set -- -m "not ironic and not vbmc" tests/unit tests/contract tests/core tests/pg "${lab[@]}"
fi
workers=${BMAAS_TEST_WORKERS:-6}
say "pytest -n $workers $* (load $(cut -d' ' -f1-3 /proc/loadavg))"
t=$SECONDS
# -p no:cacheprovider: .pytest_cache belongs to the .venv runs
$venv/bin/python -m pytest -n "$workers" -p no:cacheprovider "$@"
say "passed at the floors ($((SECONDS - t)) s for the tests, $((SECONDS - t0)) s in all)"
