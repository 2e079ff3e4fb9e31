#!/usr/bin/env bash
# Build the docs site (docs/, Sphinx + MyST) with warnings as errors, as CI
# does: installs the `docs` extra into .venv (scripts/setup.sh; a no-op once
# done), then `sphinx-build -W --keep-going -b html docs docs/_build/html`.
# Extra arguments go to sphinx-build (e.g. -E to rebuild every page).
# Open docs/_build/html/index.html afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

BMAAS_SETUP_EXTRAS=docs bash scripts/setup.sh

t=$(date +%s.%N)
printf 'docs: sphinx-build -W --keep-going -b html docs docs/_build/html\n' >&2
rc=0
.venv/bin/python -m sphinx -W --keep-going -q -b html "$@" docs docs/_build/html || rc=$?
if [ $rc -ne 0 ]; then
    printf 'docs: FAILED after %s: every warning above is an error (-W)\n' "$(since "$t")" >&2
    exit $rc
fi
printf 'docs: built docs/_build/html in %s, no warnings (%s with setup)\n' "$(since "$t")" "$(since "$t0")" >&2
