#!/usr/bin/env bash
# Build the sdist and, from it, the wheel (`python -m build`), install the
# wheel with its lab extra into a clean venv outside the repository, and run
# the README's Quickstart steps from that venv only: `hwlab up`, `bmaas enroll`,
# `bmaas status check`, `hwlab down`. This proves what an editable install
# cannot: the package data (Redfish templates, migrations, py.typed) and the
# entry points (console scripts, drivers) ship in the wheel, and the sdist
# has what the wheel needs, and both carry LICENSE and NOTICE
# (scripts/check_dist.py). CI runs it (.ci/run); prints each step and its time.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
python=${PYTHON:-python3}
work=$(mktemp -d -t bmaas-wheel-smoke-XXXXXX)
lab_up=no

say() { printf 'wheel-smoke: %s\n' "$*" >&2; }
step() {
    local t=$SECONDS
    say "$*"
    "$@"
    say "ok ($((SECONDS - t)) s)"
}
cleanup() {
    if [ $lab_up = yes ]; then
        "$work/venv/bin/hwlab" down >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# a home of its own: no default lab or database of the user's is touched
export HOME=$work/home XDG_DATA_HOME=$work/home/data XDG_STATE_HOME=$work/home/state
export XDG_CONFIG_HOME=$work/home/config XDG_CACHE_HOME=$work/home/cache
export BMAAS_DB=$work/bmaas.db
unset VIRTUAL_ENV PYTHONPATH
mkdir -p "$HOME"

step "$python" -m venv "$work/build-env"
step "$work/build-env/bin/python" -m pip install -q --disable-pip-version-check build
step "$work/build-env/bin/python" -m build --outdir "$work/dist" "$repo" >"$work/build.log"
sdist=$(ls "$work"/dist/bmaas-*.tar.gz)
wheel=$(ls "$work"/dist/bmaas-*.whl)
say "built $(basename "$sdist") and $(basename "$wheel")"
# LICENSE and NOTICE (pyproject's license-files) in both, as in the tree
step "$python" "$repo/scripts/check_dist.py" "$sdist" "$wheel"

step "$python" -m venv "$work/venv"
step "$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel[lab]"

# from outside the repository, so nothing is imported from the work tree
cd "$work"
export PATH=$work/venv/bin:$PATH
step hwlab up --nodes 4 --seed 7
lab_up=yes
step bmaas enroll "$XDG_STATE_HOME/hwlab/default/inventory.yaml"
step bmaas status check
step hwlab down
lab_up=no
say "the wheel works: package data and entry points are in it"
