#!/usr/bin/env bash
# Set up the VM lab's host side (docs/lab.md "VM lab"): libvirt + qemu (TCG)
# without systemd, as root (or through sudo). Idempotent: a second run only
# checks. Prints each step and how long it took.
#
#   sudo bash scripts/vm-setup.sh
#
# Steps: Debian packages (libvirt's daemon and qemu driver, virsh, qemu, and
# what `hwlab vm image` builds its ISOs from: busybox-static, isolinux +
# syslinux-common, xorriso, cpio; for UEFI VMs ovmf (the firmware and its
# snakeoil test key), systemd-boot-efi (the EFI stub), sbsigntool, dosfstools,
# mtools, binutils, openssl), a `libvirt-qemu` system user if missing,
# qemu.conf (`user = "root"`, `security_driver = "none"`: no systemd, no
# AppArmor here), /var/log/libvirt/qemu, virtlogd and libvirtd started (only
# if not running), bounded wait until `virsh` answers, and a dir pool named
# `default` (sushy-tools' virtual media copies the ISO into it).
#
# The kernel is not installed: `hwlab vm image` takes /boot/vmlinuz-* if
# readable, else downloads Debian's linux-image package (`apt-get download`,
# no root needed) and unpacks only its vmlinuz into the user's cache.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
    exec sudo -E bash "$0" "$@"
fi

t0=$(date +%s.%N)
say() { printf 'vm-setup: %s\n' "$*" >&2; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }
step() {  # step NAME CMD...: run, print its time
    local name=$1 ts
    shift
    ts=$(date +%s.%N)
    "$@"
    say "$name ($(since "$ts"))"
}

packages=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86
    busybox-static isolinux syslinux-common xorriso cpio
    ovmf systemd-boot-efi sbsigntool dosfstools mtools binutils openssl)
apt_install() {
    local missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        say "packages: all installed"
        return
    fi
    say "packages: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
step "packages" apt_install

qemu_user() {
    getent passwd libvirt-qemu >/dev/null ||
        useradd --system --no-create-home --home-dir /var/lib/libvirt --shell /usr/sbin/nologin libvirt-qemu
    getent group kvm >/dev/null || groupadd --system kvm
}
step "user libvirt-qemu" qemu_user

qemu_conf() {
    local conf=/etc/libvirt/qemu.conf key
    touch "$conf"
    for key in 'user = "root"' 'group = "root"' 'security_driver = "none"'; do
        local name=${key%% *}
        if ! grep -qxF "$key" "$conf"; then
            sed -i "/^[[:space:]]*${name}[[:space:]]*=/d" "$conf"
            printf '%s\n' "$key" >>"$conf"
        fi
    done
    mkdir -p /var/log/libvirt/qemu /var/lib/libvirt/images /run/libvirt
}
step "qemu.conf and directories" qemu_conf

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
daemons() {
    running /run/virtlogd.pid || virtlogd -d
    running /run/libvirtd.pid || libvirtd -d
}
step "virtlogd, libvirtd" daemons

wait_virsh() {
    local i
    for i in $(seq 1 120); do
        if virsh -q -c qemu:///system list >/dev/null 2>&1; then return 0; fi
        sleep 0.5
    done
    say "virsh -c qemu:///system does not answer after 60 s (see /var/log/libvirt/)"
    return 1
}
step "virsh answers" wait_virsh

pool() {
    local v=(virsh -q -c qemu:///system)
    if ! "${v[@]}" pool-info default >/dev/null 2>&1; then
        "${v[@]}" pool-define-as default dir --target /var/lib/libvirt/images >/dev/null
    fi
    local info
    info=$("${v[@]}" pool-info default)  # (not piped into grep -q: SIGPIPE under pipefail)
    if ! grep -q 'State: *running' <<<"$info"; then
        "${v[@]}" pool-build default >/dev/null 2>&1 || true
        "${v[@]}" pool-start default >/dev/null
    fi
    "${v[@]}" pool-autostart default >/dev/null 2>&1 || true
}
step "pool default" pool

say "ready ($(since "$t0")): virsh -c qemu:///system list answers, pool 'default' running"
