#!/usr/bin/env bash
# In-kernel cost per event of quantiles() beside hist() (design §5: at most
# 1.5x), keyless and keyed by pid, on sys_enter_getppid, with the empty
# program's cost on the same tracepoint beside them.
#
#   sudo bench/quantiles.sh            # about 1 minute
#   sudo bench/quantiles.sh --strict   # exit 1 when a ratio is over 1.5
#
# Each round runs the getppid() generator (bench/getppid_loop.c) untraced,
# then under each program, then untraced again; "added" is the traced ns/call
# minus the mean of the two untraced runs. The value recorded is
# `e.nsecs & 1048575`, so events spread over many buckets as latencies do.
# The ratios compare what the aggregation adds beyond the empty program. With
# kernel.bpf_stats_enabled (turned on for the run, restored after) the
# programs' own run time per event (run_time_ns / run_cnt from the
# program fds' fdinfo) is reported too: it leaves out the syscall and
# scheduling noise of a shared machine, so its ratios are the steadier ones.
# Tunables: EVENT_CALLS (3000000), EVENT_REPS (5), GEN_CPU (last CPU), RTRACE.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source=lib.sh
source "$HERE/lib.sh"

STRICT=0
[[ ${1:-} == --strict ]] && STRICT=1
EVENT_CALLS=${EVENT_CALLS:-3000000}
EVENT_REPS=${EVENT_REPS:-5}
GEN_CPU=${GEN_CPU:-$(($(nproc) - 1))}
[[ $(id -u) -eq 0 ]] || die "must run as root (BPF)"
for t in gcc taskset; do command -v "$t" >/dev/null || die "$t not found"; done
RTRACE=${RTRACE:-$ROOT/target/release/rtrace}
[[ -x $RTRACE ]] || (cd "$ROOT" && cargo build --release -q) || die "cargo build failed"

TMP=$(mktemp -d)
STATS_WAS=$(cat /proc/sys/kernel/bpf_stats_enabled 2>/dev/null || echo)
trap 'rm -rf "$TMP"; [[ -n $STATS_WAS ]] && echo "$STATS_WAS" >/proc/sys/kernel/bpf_stats_enabled' EXIT
[[ -n $STATS_WAS ]] && echo 1 >/proc/sys/kernel/bpf_stats_enabled
cp "$RTRACE" "$TMP/rtrace"
gcc -O2 -Wall -o "$TMP/getppid_loop" "$HERE/getppid_loop.c"
check_foreign "at the start"

TRACER_PID=
start() {
    local out=$1; shift
    rm -f "$out"
    "$@" >"$out" 2>"$out.err" &
    TRACER_PID=$!
    while ! grep -q Attaching "$out" 2>/dev/null; do
        kill -0 "$TRACER_PID" 2>/dev/null || { cat "$out.err" >&2; die "rtrace exited before attaching"; }
        sleep 0.01
    done
    sleep 0.2
}
stop() {
    kill -INT "$TRACER_PID" 2>/dev/null || true
    wait "$TRACER_PID" 2>/dev/null || true
}
# ns per run of the tracer's BPF programs so far (from their fdinfo).
prog_ns() {
    local fd info t=0 c=0
    for fd in /proc/"$TRACER_PID"/fd/*; do
        [[ $(readlink "$fd" 2>/dev/null) == anon_inode:bpf-prog ]] || continue
        info=$(cat /proc/"$TRACER_PID"/fdinfo/"${fd##*/}" 2>/dev/null) || continue
        t=$((t + $(awk '$1=="run_time_ns:"{print $2}' <<<"$info"))) c=$((c + $(awk '$1=="run_cnt:"{print $2}' <<<"$info")))
    done
    if ((c > 0)); then calc "$t / $c" 2; else echo nan; fi
}
gen() { field ns_per_call "$(taskset -c "$GEN_CPU" "$TMP/getppid_loop" "$EVENT_CALLS")"; }

PROGS=(empty dist_hist dist_quantiles dist_hist_keyed dist_quantiles_keyed)
declare -A ADD=() RUN=()
for rep in $(seq 1 "$EVENT_REPS"); do
    b1=$(gen)
    declare -A NS=()
    for p in "${PROGS[@]}"; do
        start "$TMP/$p.out" "$TMP/rtrace" "$HERE/progs/$p.rhai"
        NS[$p]=$(gen)
        RUN[$p]+="$(prog_ns) "
        stop
    done
    b2=$(gen)
    base=$(calc "($b1 + $b2) / 2" 2)
    msg="round $rep: untraced $b1 / $b2 ns"
    for p in "${PROGS[@]}"; do
        ADD[$p]+="$(calc "${NS[$p]} - $base" 2) "
        msg+=", $p ${NS[$p]}"
    done
    log "$msg"
    unset NS
done

# shellcheck disable=SC2086
med() { median ${ADD[$1]}; }
# shellcheck disable=SC2086
run() { median ${RUN[$1]}; }
EMPTY=$(med empty)
printf '%-28s %10s %14s %14s\n' "program (getppid)" "added ns" "beyond empty" "BPF run ns"
for p in "${PROGS[@]}"; do
    printf '%-28s %10s %14s %14s\n' "$p" "$(med "$p")" "$(calc "$(med "$p") - $EMPTY" 2)" "$(run "$p")"
done
status=0
for pair in "dist_quantiles dist_hist keyless" "dist_quantiles_keyed dist_hist_keyed keyed"; do
    read -r q h what <<<"$pair"
    ratio=$(calc "($(med "$q") - $EMPTY) / ($(med "$h") - $EMPTY)" 2)
    verdict=PASS
    awk -v r="$ratio" 'BEGIN{exit !(r > 1.5)}' && verdict=MISS && status=1
    printf 'quantiles/hist, %-7s %6s  (target <= 1.5)  %s\n' "$what:" "$ratio" "$verdict"
    if [[ $(run "$q") != nan ]]; then
        ratio=$(calc "$(run "$q") / $(run "$h")" 2)
        verdict=PASS
        awk -v r="$ratio" 'BEGIN{exit !(r > 1.5)}' && verdict=MISS && status=1
        printf 'quantiles/hist, %-7s %6s  BPF run time per event (target <= 1.5)  %s\n' "$what:" "$ratio" "$verdict"
    fi
done
for n in "${NOTES[@]}"; do echo "note: $n"; done
((STRICT)) && exit $status
exit 0
