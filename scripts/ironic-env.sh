#!/usr/bin/env bash
# Install a real OpenStack Ironic (from PyPI) into its own venv, .venv-ironic,
# with bmaas installed editable into it (bmaas[ironic]) so the conductor loads
# the bmaas-ipmi / bmaas-redfish hardware types. Safe to re-run: it does
# nothing when the pinned Ironic is already there and bmaas is importable.
#
# Why its own venv: Ironic brings ~80 OpenStack libraries (oslo.*, keystone
# middleware, ...) with their own pins, and the conductor is a separate
# process in production too. Keeping it apart means bmaas's development venv
# (.venv) never gets its versions moved by Ironic's, and CI tests exactly what
# an operator does: `pip install 'bmaas[ironic]'` into the conductor's env.
#
# The `ironic` tests find this venv through BMAAS_IRONIC_VENV (default:
# .venv-ironic at the repository root).
set -euo pipefail
cd "$(dirname "$0")/.."
IRONIC_VERSION=${IRONIC_VERSION:-39.0.0}
venv=${BMAAS_IRONIC_VENV:-.venv-ironic}
python=${PYTHON:-python3}
t0=$(date +%s.%N)

say() { printf 'ironic-env: %s\n' "$*" >&2; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

command -v ipmitool >/dev/null 2>&1 || say "stock ipmi needs ipmitool (apt-get install ipmitool)"

if [ ! -x "$venv/bin/python" ]; then
    t=$(date +%s.%N)
    say "creating $venv with $("$python" --version 2>&1)..."
    "$python" -m venv "$venv"
    say "created $venv ($(since "$t"))"
fi
have=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("ironic"))' 2>/dev/null || true)
if [ "$have" != "$IRONIC_VERSION" ]; then
    t=$(date +%s.%N)
    say "installing Ironic $IRONIC_VERSION into $venv (pip; about a minute the first time)..."
    "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
    "$venv/bin/python" -m pip install -q "ironic==$IRONIC_VERSION"
    say "installed Ironic $IRONIC_VERSION ($(since "$t"))"
else
    say "Ironic $IRONIC_VERSION already in $venv"
fi
# bmaas itself, editable, with the conductor-side extra only (no lab, no tests);
# skipped while pyproject.toml (entry points, dependencies) is what was installed
# from this checkout, which a stamp in the venv records.
stamp="$venv/.bmaas-stamp"
want="$(sha256sum pyproject.toml | cut -c1-16) $PWD"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && "$venv/bin/python" -c 'import bmaas.drivers.ironic' 2>/dev/null; then
    say "bmaas[ironic] up to date in $venv (editable, this checkout)"
else
    t=$(date +%s.%N)
    say "installing bmaas[ironic] (editable) into $venv..."
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[ironic]' 2>&1 |
        grep -v -e BuildBackendWarning -e '^ *!!' -e '^ *\*\*\*' -e 'careful with folders' \
            -e 'name as your package' -e 'WheelFile(wheel_path' -e '^ *$' >&2 || true
    "$venv/bin/python" -c 'import ironic, bmaas.drivers.ironic' >/dev/null
    echo "$want" >"$stamp"
    say "installed bmaas[ironic] ($(since "$t"))"
fi
# The database driver for an Ironic on PostgreSQL (the tests that run
# concurrent allocations use one; operators run Ironic on a database server).
if ! "$venv/bin/python" -c 'import psycopg' 2>/dev/null; then
    t=$(date +%s.%N)
    say "installing psycopg (Ironic on PostgreSQL) into $venv..."
    "$venv/bin/python" -m pip install -q --disable-pip-version-check 'psycopg[binary]>=3.2,<4'
    say "installed psycopg ($(since "$t"))"
fi
say "Ironic $IRONIC_VERSION in $venv, done in $(since "$t0")"
