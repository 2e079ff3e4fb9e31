#!/usr/bin/env bash
# The VM lab's tests (marker `vm`, tests/vm/): two libvirt VMs under TCG
# behind stock sushy-tools and virtualbmc, hwlab's proxies in front, deploys
# that really boot (docs/lab.md "VM lab"). CI runs this as its own step after
# the README's test command. Needs root (or sudo) for scripts/vm-setup.sh.
#
#   bash scripts/test-vm.sh            # extra arguments go to pytest
#
# Set-up (idempotent, each step timed): libvirt + qemu + the pool, the
# virtualbmc extra in .venv, the boot image (cached). BMAAS_REQUIRE_VM=1: a
# missing piece fails the run instead of deselecting the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

bash scripts/vm-setup.sh
BMAAS_SETUP_EXTRAS=virtualbmc bash scripts/setup.sh
ts=$(date +%s.%N)
.venv/bin/hwlab vm image >/dev/null
printf 'test-vm: boot image (%s)\n' "$(since "$ts")" >&2
# two workers, a file each at a time (--dist loadfile: a file's tests run in
# its order, on one worker): each worker brings up its own 2-VM lab (the
# session's) and a file's own lab where it has one; a TCG boot wants a core,
# and one worker left the second core idle once CI's side-by-side steps were
# done (20 tests in 17 min 22 s, 2026-11-30). The Ironic-on-VMs test is
# opt-in, scripts/vm-ironic.sh: not collected here.
BMAAS_REQUIRE_VM=1 .venv/bin/python -m pytest -p no:randomly -n 2 --dist loadfile -m vm tests/vm \
    --ignore tests/vm/test_vm_ironic.py "$@"
printf 'test-vm: done in %s\n' "$(since "$t0")" >&2
