#!/usr/bin/env bash
# Installs the system packages rtrace needs to build and test on Debian.
# libelf-dev + zlib1g-dev: libbpf (built from source by libbpf-sys) links them.
# bpftrace: the reference tracer the benchmarks compare against.
# gcc + systemtap-sdt-dev (<sys/sdt.h>): the uprobe/USDT tests build their target program.
# prometheus (with promtool): the --serve tests check the metrics with promtool and scrape
#   rtrace with a real Prometheus server on loopback (its service is not started).
# python3-junitparser: the CI-report tests read --junit files with a real JUnit consumer.
# python3-yaml: the CI-report tests read docs/ci.md's GitHub/GitLab job files to run them.
set -euo pipefail
need=()
for p in libelf-dev zlib1g-dev pkg-config bpftrace gcc systemtap-sdt-dev prometheus python3-junitparser python3-yaml; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # Installing a service must not start it (prometheus would take port 9090).
    policy=/usr/sbin/policy-rc.d
    added_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && added_policy=1
    fi
    apt-get install -y -qq "${need[@]}" >/dev/null
    if [ "$added_policy" = 1 ]; then rm -f "$policy"; fi
fi
# Tracepoints live in tracefs; rtrace mounts it itself, tests expect it too.
if [ ! -e /sys/kernel/tracing/events ]; then
    mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
fi
