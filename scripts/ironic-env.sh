#!/usr/bin/env bash
# Install a real OpenStack Ironic (from PyPI) into its own venv, .venv-ironic,
# with bmaas installed editable into it (bmaas[ironic]) so the conductor loads
# the bmaas-ipmi / bmaas-redfish hardware types. Safe to re-run: it does
# nothing (a second or two) while the venv holds the pinned Ironic installed
# with the release's constraints file as it is now (a stamp records its hash)
# and bmaas is importable; pip keeps the wheels it built in its cache
# (~/.cache/pip), so a venv made again builds nothing.
#
#   bash scripts/ironic-env.sh                   # the current release (39.0.0) in .venv-ironic
#   bash scripts/ironic-env.sh --release 35.1.0  # another tested one, in .venv-ironic-35.1.0
#
# Each release installs with the constraints kept for it in
# scripts/ironic-constraints/<release>.txt (for 35.1.0, OpenStack's own
# stable/2026.1 upper constraints), so a release is tested with the library
# versions it shipped with, not whatever is newest today.
#
# Why its own venv: Ironic brings ~80 OpenStack libraries (oslo.*, keystone
# middleware, ...) with their own pins, and the conductor is a separate
# process in production too. Keeping it apart means bmaas's development venv
# (.venv) never gets its versions moved by Ironic's, and CI tests exactly what
# an operator does: `pip install 'bmaas[ironic]'` into the conductor's env.
#
# The `ironic` tests find the venv through BMAAS_IRONIC_VENV (default:
# .venv-ironic at the repository root; scripts/test-ironic-release.sh sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
DEFAULT_RELEASE=39.0.0
IRONIC_VERSION=${IRONIC_VERSION:-$DEFAULT_RELEASE}
if [ "${1:-}" = --release ]; then
    IRONIC_VERSION=${2:?usage: ironic-env.sh [--release VERSION]}
    shift 2
fi
if [ $# -gt 0 ]; then
    echo "usage: ironic-env.sh [--release VERSION]" >&2
    exit 2
fi
if [ "$IRONIC_VERSION" = "$DEFAULT_RELEASE" ]; then
    venv=${BMAAS_IRONIC_VENV:-.venv-ironic}
else
    venv=${BMAAS_IRONIC_VENV:-.venv-ironic-$IRONIC_VERSION}
fi
constraints=scripts/ironic-constraints/$IRONIC_VERSION.txt
if [ ! -f "$constraints" ]; then
    echo "ironic-env: no constraints for Ironic $IRONIC_VERSION ($constraints); tested releases:" \
        "$(cd scripts/ironic-constraints && ls -- *.txt | sed 's/\.txt$//' | tr '\n' ' ')" >&2
    exit 2
fi
python=${PYTHON:-python3}
t0=$(date +%s.%N)

say() { printf 'ironic-env: %s\n' "$*" >&2; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }
quiet_pip() {
    PYTHONWARNINGS=ignore "$venv/bin/python" -m pip install -q --disable-pip-version-check \
        -c "$constraints" "$@" 2>&1 |
        grep -v -e BuildBackendWarning -e '^ *!!' -e '^ *\*\*\*' -e 'careful with folders' \
            -e 'name as your package' -e 'WheelFile(wheel_path' -e '^ *$' \
            -e "^WARNING: Location '.*' is ignored" >&2 || true
}

command -v ipmitool >/dev/null 2>&1 || say "stock ipmi needs ipmitool (apt-get install ipmitool)"

if [ ! -x "$venv/bin/python" ]; then
    t=$(date +%s.%N)
    say "creating $venv with $("$python" --version 2>&1)..."
    "$python" -m venv "$venv"
    say "created $venv ($(since "$t"))"
fi
# Ironic and its ~80 libraries are installed once per constraints file: a stamp
# in the venv records the release, the constraints' hash and the Python, and
# while all three are what is asked (and that Ironic is installed) nothing is
# installed. An edited constraints file re-runs pip in the same venv, which
# moves only the libraries whose pins changed.
ironic_stamp="$venv/.ironic-stamp"
ironic_want="$IRONIC_VERSION $(sha256sum <"$constraints" | cut -c1-16) $("$venv/bin/python" -c 'import sys; print(sys.version.split()[0])')"
have=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("ironic"))' 2>/dev/null || true)
if [ "$have" = "$IRONIC_VERSION" ] && [ "$(cat "$ironic_stamp" 2>/dev/null)" = "$ironic_want" ]; then
    say "Ironic $IRONIC_VERSION already in $venv (installed with this $constraints)"
else
    t=$(date +%s.%N)
    if [ "$have" = "$IRONIC_VERSION" ]; then
        say "Ironic $IRONIC_VERSION in $venv, installed with another $constraints: installing again with it (pip)..."
    else
        say "installing Ironic $IRONIC_VERSION into $venv with $constraints (pip; 2-4 minutes the first time)..."
    fi
    "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    quiet_pip "ironic==$IRONIC_VERSION"
    "$venv/bin/python" -c 'import ironic' >/dev/null
    echo "$ironic_want" >"$ironic_stamp"
    say "installed Ironic $IRONIC_VERSION ($(since "$t"))"
fi
# bmaas itself, editable, with the conductor-side extra only (no lab, no tests),
# and the database driver for an Ironic on PostgreSQL (the tests that run
# concurrent allocations use one; operators run Ironic on a database server).
# Skipped while pyproject.toml and the constraints are what was installed from
# this checkout, which a stamp in the venv records.
stamp="$venv/.bmaas-stamp"
want="$(cat pyproject.toml "$constraints" | sha256sum | cut -c1-16) $PWD"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] &&
    "$venv/bin/python" -c 'import bmaas.drivers.ironic, psycopg' 2>/dev/null; then
    say "bmaas[ironic] up to date in $venv (editable, this checkout)"
else
    t=$(date +%s.%N)
    say "installing bmaas[ironic] (editable) and psycopg into $venv..."
    quiet_pip -e '.[ironic]' 'psycopg[binary]>=3.2,<4'
    "$venv/bin/python" -c 'import ironic, bmaas.drivers.ironic, psycopg' >/dev/null
    echo "$want" >"$stamp"
    say "installed bmaas[ironic] ($(since "$t"))"
fi
say "Ironic $IRONIC_VERSION in $venv, done in $(since "$t0")"
