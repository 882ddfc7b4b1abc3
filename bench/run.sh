#!/usr/bin/env bash
# rtrace vs bpftrace, side by side on this machine: start-up time, resident
# memory while tracing, in-kernel cost per event, and (bench/userspace.sh)
# events delivered to userspace.  See bench/README.md.
#
#   sudo bench/run.sh            # full run (about 4 minutes)
#   sudo bench/run.sh --quick    # fewer repetitions (about 2 minutes)
#   sudo bench/run.sh --strict   # exit 1 when a target is missed
#   sudo bench/run.sh --no-userspace   # skip part 4, userspace delivery (about 2 minutes less)
#
# Environment (all optional):
#   RTRACE=path        rtrace binary   (default: target/release/rtrace, built if missing)
#   BPFTRACE=path      bpftrace binary (default: bpftrace on PATH)
#   STARTUP_RUNS=15    timed start-up runs per tracer (plus 2 warm-up runs each)
#   MANY_RUNS=5        timed runs attaching every sys_enter_* tracepoint (plus 1 warm-up)
#   MEM_REPS=3         memory samples per tracer
#   EVENT_CALLS=5000000  getppid() calls per load-generator run
#   EVENT_REPS=5       repetitions of the per-event round
#   GEN_CPU=N          CPU the load generator is pinned to (default: the last one)
#   SETTLE=0.3         seconds to wait after "Attaching" before loading
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
PROGS=$HERE/progs

STRICT=0
QUICK=0
USERSPACE=1
for a in "$@"; do
    case $a in
        --strict) STRICT=1 ;;
        --quick) QUICK=1 ;;
        --no-userspace) USERSPACE=0 ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run.sh: unknown argument $a" >&2; exit 2 ;;
    esac
done

if ((QUICK)); then
    : "${STARTUP_RUNS:=10}" "${MANY_RUNS:=3}" "${MEM_REPS:=2}" "${EVENT_CALLS:=3000000}" "${EVENT_REPS:=3}"
fi
STARTUP_RUNS=${STARTUP_RUNS:-15}
MANY_RUNS=${MANY_RUNS:-5}
MEM_REPS=${MEM_REPS:-3}
EVENT_CALLS=${EVENT_CALLS:-5000000}
EVENT_REPS=${EVENT_REPS:-5}
SETTLE=${SETTLE:-0.3}
NCPU=$(nproc)
GEN_CPU=${GEN_CPU:-$((NCPU - 1))}

check_setup gcc taskset awk

bench_workdir bench
gcc -O2 -Wall -o "$TMP/timeit" "$HERE/timeit.c"
gcc -O2 -Wall -o "$TMP/getppid_loop" "$HERE/getppid_loop.c"

measure_start

# ---------------------------------------------------------------- helpers

# start_tracer NAME OUTFILE CMD...: run CMD in the background, wait until it
# printed "Attaching" (rtrace prints it once attached; bpftrace just before
# attaching, hence the settle delay), then SETTLE seconds more.
start_tracer() {
    local name=$1 out=$2; shift 2
    # The file must not exist before the tracer's shell child creates it, or a
    # previous run's "Attaching" could be seen before this one has started.
    rm -f "$out" "$out.err"
    "$@" >"$out" 2>"$out.err" &
    TRACER_PID=$!
    await_attaching "$name" "$out" "$out.err"
    sleep "$SETTLE"
}

# ------------------------------------------------------------ 1. start-up
log "== 1. start-up: launch -> probes attached -> BEGIN prints 'ready' -> exit ($STARTUP_RUNS runs each, alternating)"
# time_pair LABEL RUNS WARMUPS PROG: launch -> 'ready' -> exit of both
# tracers on progs/PROG.*; sets TP_RT and TP_BT to timeit's result lines.
time_pair() {
    local label=$1 runs=$2 warm=$3 prog=$4 out pair f
    out=$("$TMP/timeit" -n "$runs" -w "$warm" -m ready -- "$RT" "$PROGS/$prog.rhai" :: "$BT" "$PROGS/$prog.bt")
    log "$out"
    TP_RT=$(sed -n 1p <<<"$out"); TP_BT=$(sed -n 2p <<<"$out")
    for pair in "rtrace:$TP_RT" "bpftrace:$TP_BT"; do
        f=$(field fail "${pair#*:}")
        ((f == 0)) || note "$label: ${pair%%:*} failed $f of $runs runs (non-zero exit or no 'ready')"
    done
}
time_pair start-up "$STARTUP_RUNS" 2 startup
SU_RT=$TP_RT; SU_BT=$TP_BT
SU_RT_EXIT=$(field exit_med "$SU_RT");     SU_BT_EXIT=$(field exit_med "$SU_BT")
SU_RT_EXITMIN=$(field exit_min "$SU_RT");  SU_BT_EXITMIN=$(field exit_min "$SU_BT")
SU_RT_READY=$(field marker_med "$SU_RT");  SU_BT_READY=$(field marker_med "$SU_BT")
SU_RT_READYMIN=$(field marker_min "$SU_RT"); SU_BT_READYMIN=$(field marker_min "$SU_BT")

# ------------------------------------------------------------ 1b. many probes
NPROBES=$(ls -d /sys/kernel/tracing/events/syscalls/sys_enter_* 2>/dev/null | wc -l)
log "== 1b. attaching tracepoint:syscalls:sys_enter_* ($NPROBES tracepoints), $MANY_RUNS runs each"
time_pair "many probes" "$MANY_RUNS" 1 many
MANY_RT=$TP_RT; MANY_BT=$TP_BT
MANY_RT_READY=$(field marker_med "$MANY_RT"); MANY_BT_READY=$(field marker_med "$MANY_BT")
MANY_RT_EXIT=$(field exit_med "$MANY_RT");    MANY_BT_EXIT=$(field exit_med "$MANY_BT")

# ------------------------------------------------------------ 2. memory
log "== 2. resident memory while tracing sys_enter_read with hist() ($MEM_REPS samples each)"
RSS_RT=(); RSS_BT=(); HWM_RT=(); HWM_BT=()
status_kb() { awk -v k="$1:" '$1==k {print $2}' "/proc/$2/status"; }
for rep in $(seq 1 "$MEM_REPS"); do
    for name in rtrace bpftrace; do
        if [[ $name == rtrace ]]; then cmd=("$RT" "$PROGS/hist.rhai"); else cmd=("$BT" "$PROGS/hist.bt"); fi
        start_tracer "$name" "$TMP/mem.$name.$rep.out" "${cmd[@]}"
        # some read() traffic so the probe fires while we sample
        dd if=/dev/zero of=/dev/null bs=64 count=100000 status=none
        sleep 0.7
        rss=$(status_kb VmRSS "$TRACER_PID"); hwm=$(status_kb VmHWM "$TRACER_PID")
        stop_tracer "$name"
        grep -q '^@h' "$TMP/mem.$name.$rep.out" || note "memory: $name printed no @h histogram"
        log "  $name: VmRSS ${rss} kB, VmHWM ${hwm} kB"
        if [[ $name == rtrace ]]; then RSS_RT+=("$rss"); HWM_RT+=("$hwm"); else RSS_BT+=("$rss"); HWM_BT+=("$hwm"); fi
    done
done
MEM_RT_RSS=$(median "${RSS_RT[@]}"); MEM_BT_RSS=$(median "${RSS_BT[@]}")
MEM_RT_HWM=$(median "${HWM_RT[@]}"); MEM_BT_HWM=$(median "${HWM_BT[@]}")

# ------------------------------------------------------------ 3. per event
log "== 3. per-event cost: getppid() x $EVENT_CALLS on CPU $GEN_CPU, $EVENT_REPS rounds"
gen() { taskset -c "$GEN_CPU" "$TMP/getppid_loop" "$EVENT_CALLS"; }
declare -A ADD=()          # key "tracer.prog" -> space separated added ns, one per round
BASES=()
for rep in $(seq 1 "$EVENT_REPS"); do
    b1=$(field ns_per_call "$(gen)")
    declare -A NS=()
    for prog in empty count struct; do
        for name in rtrace bpftrace; do
            if [[ $name == rtrace ]]; then cmd=("$RT" "$PROGS/$prog.rhai"); else cmd=("$BT" "$PROGS/$prog.bt"); fi
            start_tracer "$name" "$TMP/ev.$name.$prog.$rep.out" "${cmd[@]}"
            line=$(gen)
            stop_tracer "$name"
            NS[$name.$prog]=$(field ns_per_call "$line")
            if [[ $prog == count ]]; then
                pid=$(field pid "$line"); calls=$(field calls "$line")
                got=$(awk -v p="@m[$pid]:" '$1==p {print $2}' "$TMP/ev.$name.$prog.$rep.out")
                if [[ $got != "$calls" ]]; then
                    note "count check: $name counted ${got:-nothing} for the generator (pid $pid), expected $calls (round $rep)"
                fi
            fi
        done
    done
    b2=$(field ns_per_call "$(gen)")
    base=$(calc "($b1 + $b2) / 2" 2)
    BASES+=("$base")
    msg="  round $rep: baseline $b1 / $b2 ns"
    for k in rtrace.empty bpftrace.empty rtrace.count bpftrace.count rtrace.struct bpftrace.struct; do
        ADD[$k]+="$(calc "${NS[$k]} - $base" 2) "
        msg+=", $k ${NS[$k]}"
    done
    log "$msg ns/call"
    unset NS
done
# shellcheck disable=SC2086
EV_BASE=$(median "${BASES[@]}")
EV_RT_EMPTY=$(median ${ADD[rtrace.empty]});  EV_BT_EMPTY=$(median ${ADD[bpftrace.empty]})
EV_RT_COUNT=$(median ${ADD[rtrace.count]});  EV_BT_COUNT=$(median ${ADD[bpftrace.count]})
EV_RT_STRUCT=$(median ${ADD[rtrace.struct]});  EV_BT_STRUCT=$(median ${ADD[bpftrace.struct]})
log "  added ns/event per round: rtrace.empty [${ADD[rtrace.empty]% }] bpftrace.empty [${ADD[bpftrace.empty]% }]"
log "                            rtrace.count [${ADD[rtrace.count]% }] bpftrace.count [${ADD[bpftrace.count]% }]"
log "                            rtrace.struct [${ADD[rtrace.struct]% }] bpftrace.struct [${ADD[bpftrace.struct]% }]"

# ------------------------------------------------------------ 4. userspace
# bench/userspace.sh measures on its own (its raw figures and table go to
# stderr here) and hands back its summary rows and notes.
US_ROWS=()
if ((USERSPACE)); then
    log "== 4. events delivered to userspace (bench/userspace.sh)"
    us_args=(--rows "$TMP/userspace.rows")
    ((QUICK)) && us_args+=(--quick)
    if RTRACE=$RT BPFTRACE=$BT GEN_CPU=$GEN_CPU SETTLE=$SETTLE "$HERE/userspace.sh" "${us_args[@]}" >&2 \
        && [[ -s $TMP/userspace.rows ]]; then
        while IFS= read -r line; do
            if [[ $line == note\|* ]]; then NOTES+=("userspace: ${line#note|}"); else US_ROWS+=("$line"); fi
        done <"$TMP/userspace.rows"
    else
        note "bench/userspace.sh failed; its rows are missing (see stderr)"
    fi
fi

check_foreign "at the end"

# ------------------------------------------------------------ summary
# verdict VALUE_RT VALUE_BT MAX_RATIO -> "ratio result"
verdict() {
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN{
        if (b <= 0) { print "n/a", "n/a"; exit }
        r = a / b; printf "%.3f %s\n", r, (r <= t ? "PASS" : "MISS") }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b <= 0) print "n/a"; else printf "%.3f\n", a / b }'; }

read -r R_SU V_SU < <(verdict "$SU_RT_READY" "$SU_BT_READY" 0.0667)
read -r R_MEM V_MEM < <(verdict "$MEM_RT_RSS" "$MEM_BT_RSS" 0.125)
read -r R_EV V_EV < <(verdict "$EV_RT_COUNT" "$EV_BT_COUNT" 0.8)

row() { printf '%-44s %10s %10s %8s %10s  %s\n' "$@"; }
mb() { calc "$1 / 1024" 1; }

echo
echo "rtrace vs bpftrace — $(uname -r), $NCPU CPUs, $("$RT" -V 2>/dev/null), $("$BT" --version 2>/dev/null)"
echo "load average (1 min) at start $LOAD_START, at end $(cut -d' ' -f1 /proc/loadavg)"
echo
row "benchmark" "rtrace" "bpftrace" "ratio" "target" "result"
row "--------------------------------------------" "----------" "----------" "--------" "----------" "------"
row "start-up, launch->attached+BEGIN, median ms" "$SU_RT_READY" "$SU_BT_READY" "$R_SU" "<= 1/15" "$V_SU"
row "  same, min ms" "$SU_RT_READYMIN" "$SU_BT_READYMIN" "$(ratio "$SU_RT_READYMIN" "$SU_BT_READYMIN")" "" "info"
row "  launch->exit incl. detach, median ms" "$SU_RT_EXIT" "$SU_BT_EXIT" "$(ratio "$SU_RT_EXIT" "$SU_BT_EXIT")" "" "info"
row "  launch->exit incl. detach, min ms" "$SU_RT_EXITMIN" "$SU_BT_EXITMIN" "$(ratio "$SU_RT_EXITMIN" "$SU_BT_EXITMIN")" "" "info"
row "$NPROBES sys_enter_* probes: launch->BEGIN, ms" "$MANY_RT_READY" "$MANY_BT_READY" "$(ratio "$MANY_RT_READY" "$MANY_BT_READY")" "< 1000" "$(awk -v v="$MANY_RT_READY" 'BEGIN{ print (v < 1000 ? "PASS" : "MISS") }')"
row "  same, launch->exit incl. detach, ms" "$MANY_RT_EXIT" "$MANY_BT_EXIT" "$(ratio "$MANY_RT_EXIT" "$MANY_BT_EXIT")" "" "info"
row "RSS while tracing (VmRSS), MiB" "$(mb "$MEM_RT_RSS")" "$(mb "$MEM_BT_RSS")" "$R_MEM" "<= 1/8" "$V_MEM"
row "  peak RSS (VmHWM), MiB" "$(mb "$MEM_RT_HWM")" "$(mb "$MEM_BT_HWM")" "$(ratio "$MEM_RT_HWM" "$MEM_BT_HWM")" "" "info"
row "per event, m[pid] = count(), added ns" "$EV_RT_COUNT" "$EV_BT_COUNT" "$R_EV" "<= 0.8x" "$V_EV"
row "  empty program floor, added ns" "$EV_RT_EMPTY" "$EV_BT_EMPTY" "$(ratio "$EV_RT_EMPTY" "$EV_BT_EMPTY")" "" "info"
row "  m[curtask.real_parent.tgid] = count(), ns" "$EV_RT_STRUCT" "$EV_BT_STRUCT" "$(ratio "$EV_RT_STRUCT" "$EV_BT_STRUCT")" "" "info"
row "  count() above the floor, ns" "$(calc "$EV_RT_COUNT - $EV_RT_EMPTY" 2)" "$(calc "$EV_BT_COUNT - $EV_BT_EMPTY" 2)" "" "" "info"
row "  getppid() untraced, ns/call" "$EV_BASE" "" "" "" "info"
V_US=PASS
for r in "${US_ROWS[@]}"; do
    IFS='|' read -r c1 c2 c3 c4 c5 c6 <<<"$r"
    row "$c1" "$c2" "$c3" "$c4" "$c5" "$c6"
    [[ $c6 != MISS ]] || V_US=MISS
done
echo
echo "start-up: $STARTUP_RUNS runs each (+2 warm-up), alternating; includes detach and exit."
echo "memory: median of $MEM_REPS samples taken ~1 s after attach. per event: median over $EVENT_REPS rounds,"
echo "$EVENT_CALLS getppid() calls pinned to CPU $GEN_CPU, added = traced - untraced in the same round."
if ((${#US_ROWS[@]})); then
    echo "userspace: best no-loss events/s over generator rate steps; delivered/s counts the drain after the"
    echo "generator stops; latency = lone event's timestamp -> its printed line read (bench/userspace.sh)."
fi
if ((${#NOTES[@]})); then
    echo
    echo "notes:"
    for n in "${NOTES[@]}"; do echo "  - $n"; done
fi

if ((STRICT)) && [[ $V_SU != PASS || $V_MEM != PASS || $V_EV != PASS || $V_US != PASS ]]; then
    exit 1
fi
exit 0
