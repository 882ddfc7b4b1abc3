#!/usr/bin/env bash
# Events delivered to userspace: rtrace's ring buffer -> reader thread -> Rhai
# callback path, with bpftrace's printf path beside it.  See bench/README.md.
#
#   sudo bench/userspace.sh            # full run (about 2 minutes)
#   sudo bench/userspace.sh --quick    # fewer rate steps (about 1 minute)
#   sudo bench/userspace.sh --strict   # exit 1 when a target is missed
#   sudo bench/userspace.sh --latency  # only part 3, lone-event latency (about 10 s)
#   bench/userspace.sh --rows FILE     # (used by run.sh) also write the summary rows to FILE
#
# Environment (all optional):
#   RTRACE=path        rtrace binary   (default: target/release/rtrace, built if missing)
#   BPFTRACE=path      bpftrace binary (default: bpftrace on PATH)
#   RATES="..."        generator rate steps in calls/s, 0 = as fast as it can
#   STEP_SECS=3        seconds the generator runs per rate step
#   BIG_RING=16M       --ring-size of the extra unthrottled rtrace run
#   LAT_SAMPLES=20     lone events for the latency figure
#   LAT_GAP_MS=100     gap between them
#   GEN_CPU=N          CPU the generator is pinned to (default: the last one)
#   SETTLE=0.3         seconds to wait after "Attaching" before starting the generator
#   DRAIN_LIMIT=120    most seconds to wait for a busy tracer's backlog after the generator ended
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")

STRICT=0
QUICK=0
ONLY_LATENCY=0
ROWS_FILE=
while (($#)); do
    case $1 in
        --strict) STRICT=1 ;;
        --quick) QUICK=1 ;;
        --latency) ONLY_LATENCY=1 ;;
        --rows) ROWS_FILE=${2:?--rows needs a file}; shift ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "userspace.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

if ((QUICK)); then
    : "${RATES:=200000 400000 600000 1000000 0}" "${STEP_SECS:=2}" "${LAT_SAMPLES:=15}"
fi
RATES=${RATES:-100000 200000 300000 400000 500000 600000 800000 1000000 0}
STEP_SECS=${STEP_SECS:-3}
BIG_RING=${BIG_RING:-16M}
LAT_SAMPLES=${LAT_SAMPLES:-20}
LAT_GAP_MS=${LAT_GAP_MS:-100}
SETTLE=${SETTLE:-0.3}
NCPU=$(nproc)
GEN_CPU=${GEN_CPU:-$((NCPU - 1))}
# The most a busy tracer may take, after the generator finished, to deliver
# the rest (an idle one is given 2 s) before it is stopped with SIGINT.
DRAIN_LIMIT=${DRAIN_LIMIT:-120}

check_setup gcc taskset awk mkfifo

GEN_BG=
STAMP_PID=
WAIT_PID=
BG_VARS="TRACER_PID GEN_BG STAMP_PID WAIT_PID"
bench_workdir ubench
gcc -O2 -Wall -o "$TMP/ubench" "$HERE/ubench.c"
UB=$TMP/ubench

measure_start

# rate in events/s -> "1.234" M/s
mps() { awk -v r="$1" 'BEGIN{ if (r == "" || r == "n/a") print "n/a"; else printf "%.3f", r / 1e6 }'; }

# ------------------------------------------------------------ programs
# prog KIND PID -> program text.  Besides the measured probe every program
# has an end marker: the generator's final getpgid() prints "done".  Its
# record follows all the generator's events on the same ring (the generator
# is pinned to one CPU), so the moment "done" reaches the harness is the
# moment the last event was handled; the harness then stops the tracer with
# SIGINT.
prog() {
    local kind=$1 pid=$2
    case $kind in
        rt-count) cat <<EOF
let n = 0;
probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.pid == $pid { n += 1; } });
probe("tracepoint:syscalls:sys_enter_getpgid", |e| { if e.pid == $pid { print(\`done n=\${n}\`); } });
probe("END", || { print(\`n=\${n}\`); });
EOF
        ;;
        rt-print) cat <<EOF
probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.pid == $pid { print("x"); } });
probe("tracepoint:syscalls:sys_enter_getpgid", |e| { if e.pid == $pid { print("done"); } });
EOF
        ;;
        bt-print) cat <<EOF
tracepoint:syscalls:sys_enter_getppid /pid == $pid/ { printf("x\n"); }
tracepoint:syscalls:sys_enter_getpgid /pid == $pid/ { printf("done\n"); }
EOF
        ;;
        rt-lat) cat <<EOF
probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.pid == $pid { print(\`t=\${e.nsecs}\`); } });
probe("tracepoint:syscalls:sys_enter_getpgid", |e| { if e.pid == $pid { print("done"); } });
EOF
        ;;
        bt-lat) cat <<EOF
tracepoint:syscalls:sys_enter_getppid /pid == $pid/ { printf("t=%llu\n", nsecs); }
tracepoint:syscalls:sys_enter_getpgid /pid == $pid/ { printf("done\n"); }
EOF
        ;;
    esac
}

# run_one TAG KIND SINK GENMODE GENARG1 GENARG2 [TRACER OPTIONS...]
# Starts the generator (pinned, waiting), then the tracer with the
# generator's pid in its filter, waits for "Attaching" + SETTLE, lets the
# generator go, waits for the "done" end marker and stops the tracer with
# SIGINT.  Sets DONE_AT: CLOCK_MONOTONIC ns when "done" reached the harness
# (empty when it never came within DRAIN_LIMIT s after the generator ended).
# SINK "pipe": tracer stdout -> `ubench stamp`, which counts "x" lines and
# timestamps the other lines on arrival.  SINK "file": tracer stdout -> a
# regular file (no reader to wake, as with /dev/null, but the lines can be
# counted); "done" is seen by polling the file every 0.5 ms.
# Leaves $TMP/TAG.gen (generator output), TAG.st (stamped stdout, or the
# file), TAG.err (tracer stderr).
run_one() {
    local tag=$1 kind=$2 sink=$3 mode=$4 a1=$5 a2=$6; shift 6
    local go=$TMP/$tag.go gen=$TMP/$tag.gen st=$TMP/$tag.st err=$TMP/$tag.err fifo=$TMP/$tag.fifo
    rm -f "$go" "$gen" "$st" "$err" "$fifo" "$TMP/$tag.found"
    taskset -c "$GEN_CPU" "$UB" "$mode" "$a1" "$a2" "$go" >"$gen" &
    GEN_BG=$!
    local i
    for i in $(seq 1 500); do grep -q '^pid=' "$gen" 2>/dev/null && break; sleep 0.01; done
    local pid
    pid=$(sed -n 's/^pid=//p' "$gen")
    [[ -n $pid ]] || die "$tag: generator did not start"
    local src=$TMP/$tag.src out=$st
    prog "$kind" "$pid" >"$src"
    if [[ $sink == pipe ]]; then
        mkfifo "$fifo"
        "$UB" stamp <"$fifo" >"$st" &
        STAMP_PID=$!
        out=$fifo
    fi
    case $kind in
        rt-*) "$RT" "$@" "$src" >"$out" 2>"$err" & ;;
        bt-*) "$BT" "$@" "$src" >"$out" 2>"$err" & ;;
    esac
    TRACER_PID=$!
    await_attaching "$tag" "$st" "$err"
    sleep "$SETTLE"
    "$UB" waitfor "$st" done 3600 >"$TMP/$tag.found" &
    WAIT_PID=$!
    touch "$go"
    wait "$GEN_BG" || note "$tag: generator exited with status $?"
    GEN_BG=
    # Wait for "done" while the tracer is still working through its backlog;
    # a tracer that used under 20 ms of CPU in the last 2 s has nothing left
    # (the marker was lost).
    local t cpu last_cpu=-1 idle=0
    for t in $(seq 1 $((DRAIN_LIMIT * 50))); do
        kill -0 "$WAIT_PID" 2>/dev/null || break
        if ((t % 25 == 0)); then
            cpu=$(awk '{print $14 + $15}' "/proc/$TRACER_PID/stat" 2>/dev/null || echo 0)
            if ((last_cpu >= 0 && cpu - last_cpu < 2)); then idle=$((idle + 1)); else idle=0; fi
            last_cpu=$cpu
            ((idle < 4)) || break
        fi
        sleep 0.02
    done
    kill -0 "$WAIT_PID" 2>/dev/null && kill -TERM "$WAIT_PID" 2>/dev/null || true
    wait "$WAIT_PID" || true
    WAIT_PID=
    DONE_AT=$(sed -n 's/^found=//p' "$TMP/$tag.found")
    HWM_KB=$(awk '$1 == "VmHWM:" {print $2}' "/proc/$TRACER_PID/status" 2>/dev/null || true)
    stop_tracer "$tag"
    if [[ -n $STAMP_PID ]]; then wait "$STAMP_PID" || true; STAMP_PID=; fi
    # With the pipe the arrival stamp of the line is exact; prefer it.
    if [[ $sink == pipe && -n $DONE_AT ]]; then DONE_AT=$(stamp_of "$tag" done); fi
    [[ -n $DONE_AT ]] || note "$tag: the 'done' end marker never arrived (lost, or the tracer went idle without it)"
}

# Lost-event reports of either tracer, summed ("Lost N events ..." on stdout or stderr).
lost_of() { cat "$TMP/$1.st" "$TMP/$1.err" 2>/dev/null | { grep -o 'Lost [0-9]* events' || true; } | awk '{s+=$2} END{print s+0}'; }
# Stamp (arrival ns) of the first stamped line whose text starts with $2.
stamp_of() { awk -v p="$2" 'index($2, p) == 1 {print $1; exit}' "$TMP/$1.st"; }

# throughput TAG KIND SINK RATE [TRACER OPTIONS...]: one run of STEP_SECS s
# with the generator paced to RATE calls/s (0: unthrottled); sets RESULT to
# one "k=v ..." line.
throughput() {
    local tag=$1 kind=$2 sink=$3 rate=$4; shift 4
    run_one "$tag" "$kind" "$sink" gen "$rate" "$STEP_SECS" "$@"
    local g; g=$(grep '^calls=' "$TMP/$tag.gen" || true)
    [[ -n $g ]] || die "$tag: the generator printed no result"
    local calls start end; calls=$(field calls "$g"); start=$(field start "$g"); end=$(field end "$g")
    local got
    if [[ $kind == rt-count ]]; then
        got=$(awk '$2 ~ /^n=/ {sub(/^n=/, "", $2); print $2}' "$TMP/$tag.st" | tail -1)
    elif [[ $sink == pipe ]]; then
        got=$(sed -n 's/^xlines=//p' "$TMP/$tag.st")
    else
        got=$(grep -c '^x$' "$TMP/$tag.st" || true)
    fi
    got=${got:-0}
    local lost; lost=$(lost_of "$tag")
    local skipped; skipped=$({ grep -o '[0-9]* queued event(s) were not processed' "$TMP/$tag.err" || true; } | awk '{s+=$1} END{print s+0}')
    local delivered=n/a lag=n/a
    if [[ -n $DONE_AT ]]; then
        delivered=$(calc "$got / (($DONE_AT - $start) / 1e9)" 0)
        lag=$(calc "($DONE_AT - $end) / 1e6" 1)
    fi
    local unreported=$((calls - got - lost - skipped))
    RESULT="gen_rate=$(field rate "$g") calls=$calls got=$got lost=$lost skipped=$skipped unreported=$unreported delivered=$delivered lag_ms=$lag hwm_mb=$(calc "${HWM_KB:-0} / 1024" 0)"
}

# show LABEL RATE: one line on stderr for the run in RESULT; adds notes
show() {
    local label=$1 rate=$2 line=$RESULT
    log "$(printf '%11s %12s %9s %10s %10s %10s %13s %12s %7s' \
        "$( ((rate)) && echo "$rate" || echo max)" "$(field gen_rate "$line")" "$(field calls "$line")" \
        "$(field got "$line")" "$(field lost "$line")" "$(field unreported "$line")" \
        "$(field delivered "$line")" "$(field lag_ms "$line")" "$(field hwm_mb "$line")")"
    local skip unrep
    skip=$(field skipped "$line"); unrep=$(field unreported "$line")
    ((skip == 0)) || note "$label at rate $rate: rtrace reported $skip queued events not processed"
    if ((unrep != 0)); then
        if [[ $label == prb* ]]; then
            UNREPORTED_BT=$((UNREPORTED_BT + (unrep < 0 ? -unrep : unrep)))
        else
            UNREPORTED=$((UNREPORTED + (unrep < 0 ? -unrep : unrep)))
        fi
        note "$label at rate $rate: $unrep events neither delivered nor reported lost ($line)"
    fi
}
HEADER="   target/s   achieved/s     calls  delivered  lost(rep) unreported   delivered/s  drain-lag ms  HWM MB"

# step_table KIND SINK LABEL [TRACER OPTIONS...]: the rate ladder, a line per
# step on stderr; sets BEST (highest delivered/s of a step with no loss at
# all, reported or not), MAXRUN (the unthrottled step's RESULT).  Once two
# paced steps in a row fell behind (delivered/s under 90% of the rate the
# generator achieved), the higher paced steps are skipped: they would only
# repeat the tracer's capacity, slowly.  The unthrottled step always runs.
step_table() {
    local kind=$1 sink=$2 label=$3; shift 3
    log "$HEADER"
    BEST=0; MAXRUN=
    local rate behind=0
    for rate in $RATES; do
        if ((rate && behind >= 2)); then
            log "$(printf '%11s   (skipped: fell behind at two lower rates)' "$rate")"
            continue
        fi
        throughput "$label.$rate" "$kind" "$sink" "$rate" "$@"
        show "$label" "$rate"
        local lost unrep skip del gr
        lost=$(field lost "$RESULT"); unrep=$(field unreported "$RESULT")
        skip=$(field skipped "$RESULT"); del=$(field delivered "$RESULT"); gr=$(field gen_rate "$RESULT")
        if ((lost == 0 && unrep == 0 && skip == 0)) && [[ $del != n/a ]]; then
            if awk -v a="$del" -v b="$BEST" 'BEGIN{exit !(a > b)}'; then BEST=$del; fi
        fi
        if [[ $del == n/a ]] || awk -v d="$del" -v g="$gr" 'BEGIN{exit !(d < 0.9 * g)}'; then
            behind=$((behind + 1))
        else
            behind=0
        fi
        ((rate)) || MAXRUN=$RESULT
    done
}

UNREPORTED=0     # rtrace: events neither delivered nor reported lost
UNREPORTED_BT=0  # the same for bpftrace

CB_BEST=n/a CB_MAX= CB_BIG= CB_UNREP=0 PR_RT_BEST=n/a PR_RT_MAX= PR_BT_BEST=n/a PR_BT_MAX= PR_RT_PIPE= PR_BT_PIPE=
V_CB=n/a V_PR=n/a
if ((!ONLY_LATENCY)); then
# --------------------------------------------- 1. no-op Rhai callback
log "== 1. events into a Rhai callback (n += 1), generator pinned to CPU $GEN_CPU, ${STEP_SECS} s per rate step"
log "   rtrace, default ring:"
step_table rt-count pipe cb
CB_BEST=$BEST; CB_MAX=$MAXRUN
log "   rtrace, unthrottled, --ring-size $BIG_RING:"
log "$HEADER"
throughput cb.big rt-count pipe 0 --ring-size "$BIG_RING"
show cb.big 0
CB_BIG=$RESULT
CB_UNREP=$UNREPORTED

# --------------------------------------------- 2. printf throughput
log "== 2. a printed line per event: rtrace print(\"x\") vs bpftrace printf(\"x\\n\"), stdout to a file"
log "   rtrace:"
step_table rt-print file prt
PR_RT_BEST=$BEST; PR_RT_MAX=$MAXRUN
log "   bpftrace:"
step_table bt-print file prb
PR_BT_BEST=$BEST; PR_BT_MAX=$MAXRUN
log "   unthrottled, stdout to a pipe read by the harness: rtrace, then bpftrace"
log "$HEADER"
throughput prt.pipe rt-print pipe 0; show prt.pipe 0; PR_RT_PIPE=$RESULT
throughput prb.pipe bt-print pipe 0; show prb.pipe 0; PR_BT_PIPE=$RESULT
fi

# --------------------------------------------- 3. lone-event latency
# latency TAG KIND: LAT_SAMPLES lone getppid() calls LAT_GAP_MS apart; for each,
# arrival of the tracer's "t=NSECS" line at the harness minus NSECS (the
# event's bpf_ktime_get_ns, CLOCK_MONOTONIC) and minus the generator's own
# timestamp taken just before the call.  The generator makes one warm-up
# call first, whose line is dropped.  Writes "EV_US CALL_US" lines to $TMP/TAG.lat.
latency() {
    local tag=$1 kind=$2
    run_one "$tag" "$kind" pipe once "$LAT_SAMPLES" "$LAT_GAP_MS"
    paste -d' ' <(sed -n 's/^call=//p' "$TMP/$tag.gen") \
                <(awk '$2 ~ /^t=/ {sub(/^t=/, "", $2); print $1, $2}' "$TMP/$tag.st" | tail -n +2) |
        awk 'NF == 3 { printf "%.1f %.1f\n", ($2 - $3) / 1e3, ($2 - $1) / 1e3 }' >"$TMP/$tag.lat"
}
log "== 3. lone-event latency: $LAT_SAMPLES single getppid() calls ${LAT_GAP_MS} ms apart; event -> line read by the harness"
declare -A LAT=()
for kind in rt-lat bt-lat; do
    latency "$kind" "$kind"
    pairs=$(cat "$TMP/$kind.lat")
    n=$(grep -c . <<<"$pairs" || true)
    ((n == LAT_SAMPLES)) || note "latency $kind: $n of $LAT_SAMPLES events arrived"
    ev=$(awk '{print $1}' <<<"$pairs"); call=$(awk '{print $2}' <<<"$pairs")
    # shellcheck disable=SC2086
    LAT[$kind.med]=$(median $ev); LAT[$kind.max]=$(sort -g <<<"$ev" | tail -1)
    # shellcheck disable=SC2086
    LAT[$kind.min]=$(sort -g <<<"$ev" | head -1); LAT[$kind.callmed]=$(median $call)
    log "   $kind event->arrival µs: $(tr '\n' ' ' <<<"$ev")"
    log "   $kind (generator's timestamp before the call -> arrival, median: ${LAT[$kind.callmed]} µs)"
done

check_foreign "at the end"

# ------------------------------------------------------------ summary
CB_MAXDEL=$(field delivered "$CB_MAX"); CB_BIGDEL=$(field delivered "$CB_BIG")
PR_RT_MAXDEL=$(field delivered "$PR_RT_MAX"); PR_BT_MAXDEL=$(field delivered "$PR_BT_MAX")
PR_RT_PIPEDEL=$(field delivered "$PR_RT_PIPE"); PR_BT_PIPEDEL=$(field delivered "$PR_BT_PIPE")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a == "n/a" || b == "n/a" || b <= 0) print "n/a"; else printf "%.2f\n", a / b }'; }
atleast() { awk -v r="$1" -v t="$2" 'BEGIN{ if (r == "n/a") print "MISS"; else print (r >= t ? "PASS" : "MISS") }'; }

if ((!ONLY_LATENCY)); then
V_CB=$(atleast "$(mps "$CB_BEST")" 0.5)
((CB_UNREP == 0)) || V_CB=MISS
fi
((UNREPORTED == 0)) || note "rtrace: $UNREPORTED events in all went missing without a loss report (see above)"
((UNREPORTED_BT == 0)) || note "bpftrace: $UNREPORTED_BT events in all went missing without a loss report (see above)"
R_PR=$(ratio "$PR_RT_BEST" "$PR_BT_BEST")
((ONLY_LATENCY)) || V_PR=$(atleast "$R_PR" 2)
R_PRMAX=$(ratio "$PR_RT_MAXDEL" "$PR_BT_MAXDEL")
atmost() { awk -v v="$1" -v t="$2" 'BEGIN{ if (v == "n/a") print "MISS"; else print (v <= t ? "PASS" : "MISS") }'; }
us_ms() { awk -v u="$1" 'BEGIN{ if (u == "" || u == "nan") print "n/a"; else printf "%.2f", u / 1e3 }'; }

# name rtrace bpftrace ratio target result
ROWS=(
    "events -> Rhai callback, no loss, M/s|$(mps "$CB_BEST")|n/a||>= 0.5 M/s|$V_CB"
    "  same, unthrottled generator, M/s|$(mps "$CB_MAXDEL")|n/a|||info"
    "  same, unthrottled, --ring-size $BIG_RING, M/s|$(mps "$CB_BIGDEL")|n/a|||info"
    "print per event, no loss, M lines/s|$(mps "$PR_RT_BEST")|$(mps "$PR_BT_BEST")|$R_PR|>= 2x|$V_PR"
    "  same, unthrottled generator, M lines/s|$(mps "$PR_RT_MAXDEL")|$(mps "$PR_BT_MAXDEL")|$R_PRMAX||info"
    "  same, unthrottled, to a pipe, M lines/s|$(mps "$PR_RT_PIPEDEL")|$(mps "$PR_BT_PIPEDEL")|$(ratio "$PR_RT_PIPEDEL" "$PR_BT_PIPEDEL")||info"
    "  peak RSS, unthrottled print run, MiB|$(field hwm_mb "$PR_RT_MAX")|$(field hwm_mb "$PR_BT_MAX")|$(ratio "$(field hwm_mb "$PR_RT_MAX")" "$(field hwm_mb "$PR_BT_MAX")")||info"
    "lone event -> printed line, median ms|$(us_ms "${LAT[rt-lat.med]}")|$(us_ms "${LAT[bt-lat.med]}")|$(ratio "${LAT[rt-lat.med]}" "${LAT[bt-lat.med]}")|<= 0.2 ms|$(atmost "$(us_ms "${LAT[rt-lat.med]}")" 0.2)"
    "  same, max ms|$(us_ms "${LAT[rt-lat.max]}")|$(us_ms "${LAT[bt-lat.max]}")|$(ratio "${LAT[rt-lat.max]}" "${LAT[bt-lat.max]}")|<= 1 ms|$(atmost "$(us_ms "${LAT[rt-lat.max]}")" 1)"
)
row() { printf '%-44s %10s %10s %8s %10s  %s\n' "$@"; }
print_rows() { local r; for r in "${ROWS[@]}"; do IFS='|' read -r a b c d e f <<<"$r"; row "$a" "$b" "$c" "$d" "$e" "$f"; done; }

if [[ -n $ROWS_FILE ]]; then
    { printf '%s\n' "${ROWS[@]}"; for n in "${NOTES[@]}"; do echo "note|$n"; done; } >"$ROWS_FILE"
fi

echo
echo "rtrace vs bpftrace, events to userspace — $(uname -r), $NCPU CPUs, $("$RT" -V 2>/dev/null), $("$BT" --version 2>/dev/null)"
echo "load average (1 min) at start $LOAD_START, at end $(cut -d' ' -f1 /proc/loadavg)"
echo
row "benchmark" "rtrace" "bpftrace" "ratio" "target" "result"
row "--------------------------------------------" "----------" "----------" "--------" "----------" "------"
print_rows
echo
echo "generator pinned to CPU $GEN_CPU, rate steps [$RATES] calls/s (0 = unthrottled), $STEP_SECS s each;"
echo "delivered/s = events handled / (generator start -> 'done' end marker read); 'no loss' = best step with"
echo "no reported and no unreported loss. latency: $LAT_SAMPLES lone events ${LAT_GAP_MS} ms apart, e.nsecs/nsecs -> line read."
if ((${#NOTES[@]})); then
    echo
    echo "notes:"
    for n in "${NOTES[@]}"; do echo "  - $n"; done
fi

if ((STRICT)) && [[ $V_CB != PASS || $V_PR != PASS ]]; then
    exit 1
fi
exit 0
