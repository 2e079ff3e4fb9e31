#!/usr/bin/env bash
# A real Ironic on the VM lab (issue 38, opt-in, not a CI step): the two VMs
# taken to `active` by virtual media, one with bmaas-redfish
# (bmaas-virtual-media), one with stock redfish (redfish-virtual-media), the
# same stock sushy-tools (libvirt) behind hwlab's proxies; each VM's marker
# seen and its boot counted once; the seconds of each path printed side by
# side (tests/vm/test_vm_ironic.py). Needs root (or sudo) for the VM lab and
# the test Ironic (bash scripts/ironic-env.sh: .venv-ironic).
#
#   bash scripts/vm-ironic.sh            # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

if [ ! -x "${BMAAS_IRONIC_VENV:-.venv-ironic}/bin/ironic-api" ] \
    && [ ! -x "${BMAAS_IRONIC_VENV:-.venv-ironic}/bin/ironic" ]; then
    echo "vm-ironic: no test Ironic: run bash scripts/ironic-env.sh first" >&2
    exit 2
fi
bash scripts/vm-setup.sh
BMAAS_SETUP_EXTRAS=virtualbmc bash scripts/setup.sh
.venv/bin/hwlab vm image >/dev/null
BMAAS_VM_IRONIC=1 BMAAS_REQUIRE_VM=1 .venv/bin/python -m pytest -s -p no:randomly -n 0 -m vm \
    tests/vm/test_vm_ironic.py "$@"
printf 'vm-ironic: done in %s\n' "$(since "$t0")" >&2
