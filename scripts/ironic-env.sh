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

command -v ipmitool >/dev/null 2>&1 || echo "ironic-env: stock ipmi needs ipmitool (apt-get install ipmitool)" >&2

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
have=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("ironic"))' 2>/dev/null || true)
if [ "$have" != "$IRONIC_VERSION" ]; then
    "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
    "$venv/bin/python" -m pip install -q "ironic==$IRONIC_VERSION"
fi
# bmaas itself, editable, with the conductor-side extra only (no lab, no tests).
"$venv/bin/python" -m pip install -q -e '.[ironic]'
"$venv/bin/python" -c 'import ironic, drivers.ironic' >/dev/null
echo "ironic-env: Ironic $IRONIC_VERSION in $venv" >&2
