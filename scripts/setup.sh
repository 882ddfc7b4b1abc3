#!/usr/bin/env bash
# Installs the system packages rtrace needs to build and test on Debian.
# libelf-dev + zlib1g-dev: libbpf (built from source by libbpf-sys) links them.
# bpftrace: the reference tracer the benchmarks compare against.
# gcc + systemtap-sdt-dev (<sys/sdt.h>): the uprobe/USDT tests build their target program.
set -euo pipefail
need=()
for p in libelf-dev zlib1g-dev pkg-config bpftrace gcc systemtap-sdt-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Tracepoints live in tracefs; rtrace mounts it itself, tests expect it too.
if [ ! -e /sys/kernel/tracing/events ]; then
    mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
fi
