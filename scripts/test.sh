#!/usr/bin/env bash
# Set up everything, then run lint and the whole test suite (unit, contract,
# lab). Extra arguments go to pytest: scripts/test.sh -m "not lab" -x
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
ruff check .
ruff format --check .
python -m pytest "$@"
