#!/usr/bin/env bash
# Set up a development environment from nothing: system packages, a venv in
# .venv, and bmaas installed editable with its test extras. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

# System tools the lab tests drive as real clients.
apt_packages=()
command -v ipmitool >/dev/null 2>&1 || apt_packages+=(ipmitool)
command -v curl >/dev/null 2>&1 || apt_packages+=(curl)
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
.venv/bin/python -m pip install -q -e '.[test]'
