#!/usr/bin/env bash
# Set up everything, then lint, type-check and run the whole test suite (unit,
# contract, lab, a real Ironic, a real PostgreSQL). Extra arguments go to
# pytest: scripts/test.sh -m "not lab" -x
# The `ironic` tests run a real Ironic from .venv-ironic (scripts/ironic-env.sh,
# about a minute the first time, seconds after); the `pg` tests start Debian's
# postgresql themselves (scripts/postgres.sh installs it when missing).
# Tests marked `vbmc` (stock vbmcd behind hwlab proxies) need the
# bmaas[virtualbmc] extra; without it pytest deselects them, with one line
# saying so (CI installs it and sets BMAAS_REQUIRE_VBMC=1, see .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/ironic-env.sh
. .venv/bin/activate

step() {
    local t=$SECONDS
    echo "test: $*" >&2
    "$@"
    echo "test: $1 ok ($((SECONDS - t)) s)" >&2
}

step ruff check .
step ruff format --check .
step mypy  # bmaas/ drivers/ fakes/, strict; configured in pyproject.toml

step python -m pytest "$@"
