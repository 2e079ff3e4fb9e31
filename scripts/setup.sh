#!/usr/bin/env bash
# Set up a development environment: ipmitool (the real client some lab tests
# drive), a venv in .venv, and bmaas installed editable with what the job
# needs: `--for demo` (scripts/demo.sh) bmaas and its lab extra; `--for test`
# (the default; scripts/test.sh) the test extra too (pytest, pytest-xdist,
# ruff, mypy, matplotlib, and the lab extra). Prints each step and how long it took. Re-running is a no-op
# (well under a second) while pyproject.toml and this script are unchanged
# and what is installed covers what is asked: a stamp in .venv records it.
#
# Bytecode is compiled at install, and kept current on every run: with
# PYTHONDONTWRITEBYTECODE=1 (many container images) Python never caches it,
# so each command compiled everything it imported (`bmaas enroll`: 2.2 s CPU
# without bytecode, 0.7 s with). pip compiles what it installs; an editable
# install compiles nothing in the tree, so the four source folders are
# compiled here (compileall writes even under PYTHONDONTWRITEBYTECODE; on an
# up-to-date tree it only compares timestamps, ~0.3 s).
#
# Opt-in, for the stock-vbmcd proxy tests (pytest marker `vbmc`; CI installs
# it as its own step after scripts/test.sh, see .ci/run):
#   BMAAS_SETUP_EXTRAS=virtualbmc bash scripts/setup.sh
# which also installs Debian's libvirt-dev and pkg-config to build libvirt-python.
set -euo pipefail
cd "$(dirname "$0")/.."

purpose=test
if [ "${1:-}" = "--for" ] && [ -n "${2:-}" ]; then purpose=$2; fi
python=${PYTHON:-python3}
extras_opt=${BMAAS_SETUP_EXTRAS:-}
stamp_file=.venv/.bmaas-setup-stamp
t0=$(date +%s.%N)

say() { printf 'setup: %s\n' "$*" >&2; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }
join() { printf '%s\n' "$@" | sed '/^$/d' | sort -u | paste -sd, -; }
# the tree's own modules (an editable install leaves them uncompiled)
compile_sources() {
    .venv/bin/python -m compileall -q -j 0 bmaas drivers fakes hwlab >/dev/null ||
        say "compileall: some of bmaas drivers fakes hwlab did not compile (see python -m compileall)"
}

# The extras this run needs. The lab extra (sushy-tools, cryptography, psutil:
# what hwlab needs beyond bmaas) when pyproject.toml defines it; older trees
# had those in the main dependencies.
wanted=("")
[ "$purpose" = demo ] || wanted+=(test)
if grep -qE '^lab = \[' pyproject.toml; then wanted+=(lab); fi
if [ -n "$extras_opt" ]; then
    IFS=, read -r -a more <<<"$extras_opt"
    wanted+=("${more[@]}")
fi

inputs="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
inputs="$inputs $("$python" -c 'import sys; print(sys.version.split()[0])')"
if [ -x .venv/bin/python ] && [ -f "$stamp_file" ]; then
    read -r stamped_hash stamped_python stamped_extras <"$stamp_file" || true
    if [ "${stamped_hash:-} ${stamped_python:-}" = "$inputs" ]; then
        covered=yes
        for extra in "${wanted[@]}"; do
            [ -z "$extra" ] || [[ ",${stamped_extras:-}," == *",$extra,"* ]] || covered=no
        done
        if [ $covered = yes ]; then
            compile_sources  # files a pull or an edit changed
            say "up to date (.venv has bmaas${stamped_extras:+[$stamped_extras]} for this pyproject.toml; $(since "$t0"))"
            exit 0
        fi
        # keep what an earlier run installed (the stamp then covers both jobs)
        IFS=, read -r -a kept <<<"${stamped_extras:-}"
        wanted+=("${kept[@]}")
    fi
fi
extras=$(join "${wanted[@]}")

# -- Debian packages -----------------------------------------------------------
apt_packages=()
command -v ipmitool >/dev/null 2>&1 || apt_packages+=(ipmitool)
if [[ ",$extras," == *",virtualbmc,"* ]]; then
    command -v pkg-config >/dev/null 2>&1 || apt_packages+=(pkg-config)
    pkg-config --exists libvirt 2>/dev/null || apt_packages+=(libvirt-dev)
fi
if [ ${#apt_packages[@]} -gt 0 ]; then
    t=$(date +%s.%N)
    say "installing ${apt_packages[*]} from Debian (apt-get)..."
    sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    if [ "$(id -u)" = 0 ] || command -v sudo >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        "${sudo[@]}" apt-get update -qq
        "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
        say "installed ${apt_packages[*]} ($(since "$t"))"
    else
        say "cannot install ${apt_packages[*]} (not root, no sudo): apt-get install ${apt_packages[*]}"
    fi
fi

# -- the venv ------------------------------------------------------------------
if [ ! -x .venv/bin/python ]; then
    t=$(date +%s.%N)
    say "creating .venv with $("$python" --version 2>&1)..."
    "$python" -m venv .venv
    say "created .venv ($(since "$t"))"
fi

t=$(date +%s.%N)
target=.
[ -z "$extras" ] || target=".[$extras]"
say "installing bmaas (editable)${extras:+ with [$extras]} into .venv (pip)..."
.venv/bin/python -m pip install -q --disable-pip-version-check -e "$target"
say "installed ($(since "$t"))"

t=$(date +%s.%N)
say "compiling bytecode (the venv's packages, bmaas drivers fakes hwlab)..."
# pip compiled what it installed just now; packages an older setup.sh
# installed with --no-compile are still without bytecode: pip keeps them.
purelib=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
.venv/bin/python -m compileall -q -j 0 "$purelib" >/dev/null 2>&1 ||
    say "compileall: some files in $purelib did not compile (ignored, as pip does)"
compile_sources
say "compiled ($(since "$t"))"

echo "$inputs $extras" >"$stamp_file"
say "done in $(since "$t0"); re-runs are a no-op until pyproject.toml or this script change"
