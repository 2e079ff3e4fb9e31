#!/usr/bin/env bash
# Set up everything, then lint, type-check and run the whole test suite (unit,
# contract, lab, a real Ironic, a real PostgreSQL) on pytest-xdist workers.
#
#   bash scripts/test.sh                      # what CI runs first, and a newcomer
#   bash scripts/test.sh -m "not lab" -x      # extra arguments go to pytest
#   bash scripts/test.sh --under-load         # the same with four CPU burners beside it
#   bash scripts/test.sh --load 20            # ... with burners up to a 1-min load average of 20
#
# Workers: BMAAS_TEST_WORKERS (default 6). Lab tests mostly wait on real time
# (BMC transitions, timeouts), so on a 2-core machine 6 workers finish sooner
# than `-n auto` (2): measured 2026-11-24 on 2 cores, 2464 tests in 5 min 57 s
# with 6 workers, 8 min 18 s with 4; `-n 0` (as a pytest argument) runs
# serially for a debugger.
# Each worker has its own ports, temp dirs, PostgreSQL and XDG home
# (tests/conftest.py, which also keeps the `ironic` tests on one Ironic per
# group: XDIST_GROUPS). The run ends with the 15 slowest tests.
#
# The `ironic` tests run a real Ironic from .venv-ironic (scripts/ironic-env.sh,
# about a minute the first time, seconds after); the `pg` tests start Debian's
# postgresql themselves (scripts/postgres.sh installs it when missing).
# Tests marked `vbmc` (stock vbmcd behind hwlab proxies) need the
# bmaas[virtualbmc] extra; without it pytest deselects them, with one line
# saying so (CI runs them as a second step, see .ci/run).
# Tests marked `vm` (tests/vm/: libvirt VMs that really boot) need root's
# scripts/vm-setup.sh; without it they are deselected with one line saying why
# (tests/vm/conftest.py); scripts/test-vm.sh sets up and runs them, so here
# they are deselected anyway (BMAAS_VM_TESTS=skip; set it to run to keep them).
#
# --under-load starts CPU-burning processes (BMAAS_TEST_BURNERS, default 4:
# twice the cores here, a load average of about 6-8 with the workers) for the
# whole run and stops them whatever happens: a test that can only pass on a
# quiet machine shows up here before it fails a newcomer's first run on a
# busy one. Such a test is rewritten to assert order, counts or
# deadline-relative bounds, or moves to a benchmark; never retried.
# --load N makes a stated load instead (issue 50: CI runners sit at 18-25 on
# 2 cores): as many burners as N less the tasks already runnable, and pytest
# starts once the 1-minute load average reads N (it lags: about 2 min from
# idle; at most BMAAS_TEST_LOAD_WAIT s, default 240). The workers add to it.
set -euo pipefail
cd "$(dirname "$0")/.."

under_load=no
load=none
case "${1:-}" in
--under-load) under_load=yes && shift ;;
--load=*) load=${1#--load=} && shift ;;
--load) load=${2:-} && shift $(($# > 1 ? 2 : 1)) ;;
esac
if [ "$load" = none ]; then
    load=
else
    case "$load" in
    *[!0-9]* | '') echo "test: --load takes a whole number (a 1-min load average), not '$load'" >&2 && exit 2 ;;
    esac
    under_load=yes
fi

bash scripts/setup.sh
export BMAAS_VM_TESTS=${BMAAS_VM_TESTS:-skip}  # CI boots the VMs in scripts/test-vm.sh
bash scripts/ironic-env.sh
. .venv/bin/activate
# Bytecode is written once and reused, the test tree's included: where
# PYTHONDONTWRITEBYTECODE=1 is set (many container images; this machine)
# pytest rewrote and compiled every test module in every worker on every run.
# Collecting the suite on 6 workers took 205 s at load 25, 52 s from the
# cache pytest keeps in tests/**/__pycache__ (issue 50).
unset PYTHONDONTWRITEBYTECODE

step() {
    local t=$SECONDS
    echo "test: $*" >&2
    "$@"
    echo "test: $1 ok ($((SECONDS - t)) s)" >&2
}

burners=()
stop_burners() {
    if [ ${#burners[@]} -gt 0 ]; then
        kill "${burners[@]}" 2>/dev/null || true
        wait "${burners[@]}" 2>/dev/null || true
        echo "test: stopped the CPU burners (${burners[*]})" >&2
        burners=()
    fi
}
trap stop_burners EXIT INT TERM

step ruff check .
step ruff format --check .
step bash scripts/mypy.sh # strict, on the tree as it installs (bmaas.drivers, ...): pyproject.toml

load1() { cut -d' ' -f1 /proc/loadavg; }
if [ $under_load = yes ]; then
    count=${BMAAS_TEST_BURNERS:-4}
    if [ -n "$load" ]; then
        # /proc/loadavg's 4th field: runnable tasks now (this cut among them)
        runnable=$(($(cut -d' ' -f4 /proc/loadavg | cut -d/ -f1) - 1))
        count=$((load > runnable ? load - runnable : 0))
    fi
    for _ in $(seq "$count"); do
        python -c 'while True: pass' &
        burners+=($!)
    done
    echo "test: under load: ${#burners[@]} CPU burners running (pids ${burners[*]}); load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    if [ -n "$load" ]; then
        waited=0
        until awk -v now="$(load1)" -v want="$load" 'BEGIN { exit !(now >= want) }'; do
            if [ $waited -ge "${BMAAS_TEST_LOAD_WAIT:-240}" ]; then
                echo "test: the 1-min load average is $(load1) after ${waited} s, not $load: running anyway" >&2
                break
            fi
            sleep 5 && waited=$((waited + 5))
            [ $((waited % 30)) -ne 0 ] || echo "test: waiting for load $load: $(load1) after ${waited} s" >&2
        done
        echo "test: load $(cut -d' ' -f1-3 /proc/loadavg) after ${waited} s with ${#burners[@]} burners" >&2
    fi
fi

workers=${BMAAS_TEST_WORKERS:-6}
# what a warm cache is worth (README: seconds; a fresh clone: minutes)
echo "test: pytest starts $SECONDS s after set-up began (set-up, ruff, mypy); load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
step python -m pytest -n "$workers" "$@"
echo "test: load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
