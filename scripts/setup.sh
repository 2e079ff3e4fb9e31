#!/usr/bin/env bash
# Set up a development environment from nothing: system packages, a venv in
# .venv, and bmaas installed editable with its test extras. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

# System tools the lab tests drive as real clients, and what building
# libvirt-python (the bmaas[virtualbmc] extra: stock vbmcd behind hwlab
# proxies) needs. libvirt's test:///default driver runs inside the client
# library, so no libvirt daemon is needed.
apt_packages=()
command -v ipmitool >/dev/null 2>&1 || apt_packages+=(ipmitool)
command -v curl >/dev/null 2>&1 || apt_packages+=(curl)
command -v pkg-config >/dev/null 2>&1 || apt_packages+=(pkg-config)
pkg-config --exists libvirt 2>/dev/null || apt_packages+=(libvirt-dev)
if [ ${#apt_packages[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "setup: installing ${apt_packages[*]} from Debian" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq "${apt_packages[@]}" >/dev/null
    elif command -v sudo >/dev/null 2>&1; then
        sudo apt-get update -qq && sudo apt-get install -y -qq "${apt_packages[@]}" >/dev/null
    else
        echo "setup: please install ${apt_packages[*]} (apt-get install ${apt_packages[*]})" >&2
    fi
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test,lab]'
if pkg-config --exists libvirt 2>/dev/null; then
    .venv/bin/python -m pip install -q -e '.[test,lab,virtualbmc]'
else
    echo "setup: libvirt-dev is missing, so bmaas[virtualbmc] (stock vbmcd for the proxy" \
        "lab tests) is not installed; apt-get install libvirt-dev pkg-config, then re-run" >&2
fi
