#!/usr/bin/env bash
# Set up a development environment: ipmitool (the real client some lab tests
# drive), a venv in .venv, and bmaas installed editable with the extras the
# demo and the tests need (test, plus lab when pyproject.toml defines it).
# Prints each step and how long it took. Re-running is a no-op (well under a
# second) while pyproject.toml, this script and the options below are
# unchanged: a stamp in .venv records what was installed.
#
# Opt-in, for the stock-vbmcd proxy tests (pytest marker `vbmc`; CI sets it):
#   BMAAS_SETUP_EXTRAS=virtualbmc bash scripts/setup.sh
# which also installs Debian's libvirt-dev and pkg-config to build libvirt-python.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
extras_opt=${BMAAS_SETUP_EXTRAS:-}
stamp_file=.venv/.bmaas-setup-stamp
t0=$(date +%s.%N)

say() { printf 'setup: %s\n' "$*" >&2; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

stamp=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
stamp="$stamp $("$python" -c 'import sys; print(sys.version.split()[0])') extras=$extras_opt"
if [ -x .venv/bin/python ] && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ]; then
    say "up to date (.venv matches pyproject.toml and scripts/setup.sh; $(since "$t0"))"
    exit 0
fi

# -- Debian packages -----------------------------------------------------------
apt_packages=()
command -v ipmitool >/dev/null 2>&1 || apt_packages+=(ipmitool)
if [[ ",$extras_opt," == *",virtualbmc,"* ]]; then
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

# The lab extra (sushy-tools, cryptography, psutil: what hwlab needs beyond
# bmaas) is installed when pyproject.toml defines it; older trees had those
# in the main dependencies.
extras=test
if .venv/bin/python - <<'EOF'; then extras="$extras,lab"; fi
import sys, tomllib
with open("pyproject.toml", "rb") as f:
    sys.exit(0 if "lab" in tomllib.load(f)["project"].get("optional-dependencies", {}) else 1)
EOF
[ -n "$extras_opt" ] && extras="$extras,$extras_opt"

t=$(date +%s.%N)
say "installing bmaas (editable) with extras [$extras] into .venv (pip)..."
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extras]"
say "installed bmaas[$extras] ($(since "$t"))"

echo "$stamp" >"$stamp_file"
say "done in $(since "$t0"); re-runs are a no-op until pyproject.toml or this script change"
