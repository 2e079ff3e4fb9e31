#!/usr/bin/env bash
# Every way docs/install.md installs bmaas, each run as written there, from
# outside the repository (CI runs this, .ci/run; prints each step and its time):
#
#   1. a wheel from a clone with a standard build front-end: `python -m build`
#      (the sdist, then the wheel from it), with no setuptools warning; the
#      wheel installed with its lab extra into a clean venv, and the README's
#      Quickstart steps run from that venv only: `hwlab up`, `bmaas enroll`,
#      `bmaas status check`, `hwlab down`. This proves what an editable
#      install cannot: the package data (Redfish templates, migrations,
#      py.typed) and the entry points (console scripts, drivers) ship in the
#      wheel, and both artifacts carry LICENSE and NOTICE (scripts/check_dist.py);
#   2. the sdist (pip builds the wheel from it);
#   3. a release's artifacts: `scripts/release.sh --dev` (HEAD's sdist and
#      wheel, versioned VERSION+gCOMMIT), its wheel installed;
#   4. a regular install straight from the clone: `pip install .`;
#   5. pip from git at a commit: `bmaas @ git+file://localhost/CLONE@COMMIT`.
#
# Paths 2-5 install into path 1's venv with --force-reinstall --no-deps: the
# dependencies are path 1's, proven there; what differs is how bmaas itself is
# built, and each is checked by `bmaas --version` naming the version built
# and `hwlab --help`. pip's wheel cache is the user's (PIP_CACHE_DIR), though
# HOME is a throwaway one.
#
# Every build runs in a clone of HEAD of its own, as install.md's reader
# would, never in this checkout: a build writes bmaas.egg-info, build/ and
# dist/ where it runs, and a CLI started with `python -c` in this checkout
# reads its entry points from that bmaas.egg-info (CI runs this beside the
# VM lab's tests). The script fails if it wrote any of the three here.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
python=${PYTHON:-python3}
work=$(mktemp -d -t bmaas-wheel-smoke-XXXXXX)
lab_up=no
touch "$work/started"

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

# pip's cache stays the user's: nothing downloaded or built twice
PIP_CACHE_DIR=${PIP_CACHE_DIR:-$("$python" -m pip cache dir 2>/dev/null || true)}
[ -z "$PIP_CACHE_DIR" ] || export PIP_CACHE_DIR
# a home of its own: no default lab or database of the user's is touched
export HOME=$work/home XDG_DATA_HOME=$work/home/data XDG_STATE_HOME=$work/home/state
export XDG_CONFIG_HOME=$work/home/config XDG_CACHE_HOME=$work/home/cache
export BMAAS_DB=$work/bmaas.db
unset VIRTUAL_ENV PYTHONPATH
mkdir -p "$HOME"

# the clone install.md starts from (HEAD: what is committed is what ships)
git -C "$repo" diff --quiet HEAD -- 2>/dev/null ||
    say "note: the work tree has changes not committed; the builds are of HEAD"
step git clone -q "$repo" "$work/clone"
clone=$work/clone

step "$python" -m venv "$work/build-env"
step "$work/build-env/bin/python" -m pip install -q --disable-pip-version-check build
step "$work/build-env/bin/python" -m build --outdir "$work/dist" "$clone" >"$work/build.log" 2>&1
# setuptools' warnings (a package "would be ignored", deprecated options) are
# a build that differs from what pyproject.toml says: none is allowed
if grep -n -i -E "would be ignored|SetuptoolsDeprecationWarning|^ *!!$" "$work/build.log" >&2; then
    say "the build warned (above; whole log: python -m build in a clone)"
    exit 1
fi
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

# the other paths: bmaas built another way, over the same dependencies
reinstall() { step "$work/venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$@"; }
installed_is() {
    local said
    said=$(bmaas --version)
    said=${said%%$'\n'*}
    [ "$said" = "bmaas $1" ] || {
        say "bmaas --version says '$said', not bmaas $1"
        exit 1
    }
    hwlab --help >/dev/null
    say "bmaas $1 installed: bmaas --version and hwlab --help answer"
}
version=$(basename "$sdist" .tar.gz)
version=${version#bmaas-}
commit=$(git -C "$clone" rev-parse HEAD)

say "path 2: the sdist"
reinstall "$sdist"
installed_is "$version"

say "path 3: a release's artifacts (scripts/release.sh --dev)"
step env PYTHON="$work/build-env/bin/python" bash "$clone/scripts/release.sh" --dev
snapshot="$version+g$(git -C "$clone" rev-parse --short HEAD)"
reinstall "$clone/dist/bmaas-$snapshot-py3-none-any.whl"
installed_is "$snapshot"

say "path 4: pip install . in the clone"
reinstall "$clone"
installed_is "$version"

say "path 5: pip from git at a commit"
# (file://localhost/: the pip that ships with Python 3.11 refuses an empty host)
reinstall "bmaas @ git+file://localhost$clone@$commit"
installed_is "$version"

# (find exits 1 for the ones that do not exist: that is the expected case)
wrote=$(find "$repo/bmaas.egg-info" "$repo/build" "$repo/dist" -newer "$work/started" 2>/dev/null || true)
if [ -n "$wrote" ]; then
    say "a build wrote into this checkout (it must build in its clone):"
    printf '  %s\n' $wrote >&2
    exit 1
fi
say "every install path of docs/install.md works (nothing written into $repo)"
