#!/usr/bin/env bash
# Run the `ironic` tests (a real Ironic, bmaas's plugin inside it, bmaas's
# Ironic backend in front of it) against another supported Ironic release:
#
#   bash scripts/test-ironic-release.sh 35.1.0      # OpenStack 2026.1 (SLURP)
#   bash scripts/test-ironic-release.sh 35.1.0 -x   # extra arguments go to pytest
#
# scripts/test.sh runs them against the current release (39.0.0) with the rest
# of the suite; CI runs this after it for the previous SLURP release. The
# release is installed by scripts/ironic-env.sh --release (its own venv, its
# own pinned constraints: scripts/ironic-constraints/<release>.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
release=${1:?usage: test-ironic-release.sh RELEASE [pytest arguments]}
shift
bash scripts/setup.sh
bash scripts/ironic-env.sh --release "$release"
. .venv/bin/activate
export BMAAS_IRONIC_VENV=".venv-ironic-$release"
t=$SECONDS
echo "test-ironic-release: the ironic tests against Ironic $release ($BMAAS_IRONIC_VENV)" >&2
python -m pytest -n "${BMAAS_TEST_WORKERS:-4}" -m ironic tests/ironic "$@"
echo "test-ironic-release: Ironic $release ok ($((SECONDS - t)) s)" >&2
