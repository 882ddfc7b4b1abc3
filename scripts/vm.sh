#!/usr/bin/env bash
# A stock-kernel VM: Debian's own 6.1 LTS kernel (linux-image-6.1.0-*-amd64)
# booted under qemu through virtme-ng, seeing this machine's filesystem, so
# rtrace and its tests run there as built here. That kernel has kprobes,
# fentry/fexit and BPF LSM, which the host kernel may lack.
#
#   scripts/vm.sh setup          install qemu, busybox, virtme-ng and the kernel (idempotent)
#   scripts/vm.sh run 'CMD'      run CMD (bash) as root inside the VM, in this checkout;
#                                its output streams here, its exit status is ours
#   scripts/vm.sh kernel         print the kernel release the VM boots
#
# Environment: RTRACE_VM_DIR (where the kernel is unpacked; /var/lib/rtrace-vm),
# RTRACE_VM_KERNEL (a linux-image package name; default the newest 6.1 one),
# RTRACE_VM_CPUS (1: under TCG, kernel text patching with two vCPUs, as attaching
# fentry or enabling a tracepoint does, at times spins for good), RTRACE_VM_MEMORY (2G),
# RTRACE_VM_KVM=1 (try KVM; hangs at boot on some hosts, so TCG is the default),
# RTRACE_VM_TIMEOUT (seconds after which the VM is stopped; none by default).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# Not /var/cache: the guest sees a tmpfs there, and it must see the modules.
VM_DIR=${RTRACE_VM_DIR:-/var/lib/rtrace-vm}
VIRTME_NG_VERSION=1.42

log() { echo "vm: $*" >&2; }

# The newest linux-image-6.1.0-N-amd64-unsigned Debian offers.
newest_package() {
    apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' |
        awk '{print $1}' | sort -V | tail -1
}

install_tools() {
    local need=()
    for p in qemu-system-x86 busybox-static; do
        dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
    done
    if [ ${#need[@]} -gt 0 ]; then
        log "installing ${need[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${need[@]}" >/dev/null
    fi
    if ! vng --version 2>/dev/null | grep -q "$VIRTME_NG_VERSION"; then
        log "installing virtme-ng $VIRTME_NG_VERSION"
        python3 -m pip install -q --root-user-action=ignore "virtme-ng==$VIRTME_NG_VERSION"
        hash -r
    fi
}

# Unpacks the kernel package (not installed: dpkg-deb -x) under $VM_DIR/PKG,
# and its modules under /lib/modules/VERSION for the VM's initramfs.
install_kernel() {
    local pkg=${RTRACE_VM_KERNEL:-}
    if [ -z "$pkg" ]; then
        pkg=$(newest_package)
        if [ -z "$pkg" ]; then
            apt-get update -qq
            pkg=$(newest_package)
        fi
    fi
    [ -n "$pkg" ] || { log "no linux-image-6.1.0-*-amd64-unsigned package is known to apt"; exit 1; }
    local dir=$VM_DIR/$pkg
    if [ ! -e "$dir/.done" ]; then
        log "fetching $pkg"
        rm -rf "$dir" && mkdir -p "$dir/deb"
        (cd "$dir/deb" && apt-get download -q "$pkg" 2>&1 | grep -v "unsandboxed" >&2 || true)
        ls "$dir"/deb/*.deb >/dev/null
        dpkg-deb -x "$dir"/deb/*.deb "$dir/root"
        rm -rf "$dir/deb"
        # The guest loads modules from this tree (virtme links it as its
        # /lib/modules/VERSION): it needs their index too.
        depmod -b "$dir/root" "$(basename "$(ls -d "$dir"/root/lib/modules/*)")"
        touch "$dir/.done"
    fi
    local release
    release=$(basename "$(ls -d "$dir"/root/lib/modules/*)")
    if [ ! -e "/lib/modules/$release/modules.dep" ]; then
        mkdir -p /lib/modules
        rm -rf "/lib/modules/$release"
        cp -a "$dir/root/lib/modules/$release" "/lib/modules/$release"
        depmod -a "$release"
    fi
    echo "$dir/root/boot/vmlinuz-$release" >"$VM_DIR/current"
}

setup() {
    install_tools
    install_kernel
}

kernel_image() {
    [ -s "$VM_DIR/current" ] && [ -e "$(cat "$VM_DIR/current")" ] || setup
    cat "$VM_DIR/current"
}

# Runs "$1" inside the VM. The guest writes its output and exit status to a
# directory shared read-write with the host (under target/, which the guest
# sees); the output is streamed from it. The guest's /tmp is an ext4 file
# system on a disk of its own (a sparse image), so block I/O and writeback
# happen there as on a machine's disk (the root file system is the host's,
# over 9p, and has no block device).
run_in_vm() {
    local cmd=$1 image share
    image=$(kernel_image)
    mkdir -p "$ROOT/target"
    share=$(mktemp -d "$ROOT/target/vm-share.XXXXXX")
    : >"$share/out"
    truncate -s 1G "$share/tmp.img"
    mkfs.ext4 -q -F "$share/tmp.img"
    cat >"$share/guest.sh" <<EOF
#!/bin/bash
exec >>"$share/out" 2>&1
modprobe -q virtio_blk; modprobe -q virtio_scsi; modprobe -q sd_mod; modprobe -q ext4
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] || [ -b /dev/sda ] && break; sleep 0.5; done
disk=\$(lsblk -dnpo NAME,TYPE 2>/dev/null | awk '\$2 == "disk" {print \$1; exit}')
if [ -n "\$disk" ] && mount "\$disk" /tmp; then chmod 1777 /tmp; else echo "vm: no disk for /tmp: it stays the overlay"; fi
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
ulimit -l unlimited
ulimit -n 65536
export RTRACE_IN_VM=1 HOME=/root PATH="$PATH"
cd "$ROOT"
echo "vm: \$(uname -r), \$(nproc) CPUs"
bash -c $(printf '%q' "$cmd")
echo \$? >"$share/status"
EOF
    chmod +x "$share/guest.sh"
    local kvm=(--disable-kvm)
    [ "${RTRACE_VM_KVM:-0}" = 1 ] && kvm=(--qemu-opts="-cpu host,-arch-capabilities")
    tail -n +1 -f "$share/out" &
    local tailer=$!
    local vng_status=0
    local limit=()
    [ -n "${RTRACE_VM_TIMEOUT:-}" ] && limit=(timeout -k 30 "$RTRACE_VM_TIMEOUT")
    "${limit[@]}" vng -r "$image" --memory "${RTRACE_VM_MEMORY:-2G}" --cpus "${RTRACE_VM_CPUS:-1}" "${kvm[@]}" \
        --rwdir "$ROOT" --disk "$share/tmp.img" --exec "$share/guest.sh" >"$share/console" 2>&1 || vng_status=$?
    sleep 0.5
    kill "$tailer" 2>/dev/null || true
    wait "$tailer" 2>/dev/null || true
    local status
    if [ -s "$share/status" ]; then
        status=$(cat "$share/status")
    else
        log "the VM ended without the command's exit status (vng exited $vng_status); its console:"
        tail -40 "$share/console" >&2
        status=125
    fi
    rm -rf "$share"
    return "$status"
}

case "${1:-}" in
setup) setup ;;
kernel) basename "$(kernel_image)" | sed 's/^vmlinuz-//' ;;
run)
    [ $# -eq 2 ] || { echo "usage: scripts/vm.sh run 'CMD'" >&2; exit 2; }
    run_in_vm "$2"
    ;;
*)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
