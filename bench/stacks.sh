#!/usr/bin/env bash
# Stacks and symbols: what symbolizing a user stack costs rtrace (first stack
# of a fresh rtrace, first stack of a new process, a repeated stack), and a
# stack-heavy profile (kstack + ustack keys at 999 Hz on every CPU) side by
# side with bpftrace. See bench/README.md.
#
#   sudo bench/stacks.sh
#
# Environment (all optional):
#   RTRACE=path        rtrace binary   (default: target/release/rtrace, built if missing)
#   BPFTRACE=path      bpftrace binary (default: bpftrace on PATH)
#   COLD_REPS=5        fresh rtrace runs for the cold/warm figures (per script)
#   WARM_EVENTS=20000  events of the same stack per run for the warm figure
#   PROFILE_SECS=5     length of the profile window
#   PROFILE_REPS=2     profile runs per tracer (alternating)
#   SETTLE=0.3         seconds to wait after "Attaching"
#   EXIT_LIMIT=90      seconds a tracer may take to print its maps after SIGINT
#                      (a run that takes longer is killed and left out)
#   FIXTURE_CFLAGS     gcc flags for tests/fixtures/stacks.c
#                      (default: -O0 -fno-omit-frame-pointer -g)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
FIXTURE_SRC=$ROOT/tests/fixtures/stacks.c

case ${1:-} in
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) echo "stacks.sh: unknown argument $1" >&2; exit 2 ;;
esac

COLD_REPS=${COLD_REPS:-5}
WARM_EVENTS=${WARM_EVENTS:-20000}
PROFILE_SECS=${PROFILE_SECS:-5}
PROFILE_REPS=${PROFILE_REPS:-2}
SETTLE=${SETTLE:-0.3}
EXIT_LIMIT=${EXIT_LIMIT:-90}
FIXTURE_CFLAGS=${FIXTURE_CFLAGS:--O0 -fno-omit-frame-pointer -g}
NCPU=$(nproc)
HZ=$(getconf CLK_TCK)

check_setup gcc taskset awk
GNU_TIME=
if /usr/bin/time -f %U true >/dev/null 2>&1; then GNU_TIME=/usr/bin/time; fi

TMP=$(mktemp -d /tmp/rtrace-stacks.XXXXXX)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    if [[ -n ${KEEP_TMP:-} ]]; then log "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp "$RTRACE" "$TMP/rtrace"
RT=$TMP/rtrace
BT=$BPFTRACE
# The fixture's name is its comm, which the scripts filter on.
FX_NAME=rtt_stkbench
FX=$TMP/$FX_NAME
# shellcheck disable=SC2086
gcc $FIXTURE_CFLAGS -o "$FX" "$FIXTURE_SRC"

now_ns() { date +%s%N; }

# CPU time of every thread of PID so far, in ns (schedstat: run time).
cpu_ns() {
    local f sum=0 v
    for f in /proc/"$1"/task/*/schedstat; do
        read -r v _ <"$f" 2>/dev/null || continue
        sum=$((sum + v))
    done
    echo "$sum"
}
# utime+stime of PID in clock ticks (/proc/PID/stat fields 14, 15).
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# wait_for FILE REGEX COUNT [TIMEOUT_S]: until COUNT lines of FILE match.
wait_for() {
    local file=$1 re=$2 want=$3 limit=${4:-30} start
    start=$SECONDS
    local n
    while :; do
        n=$(grep -c -E "$re" "$file" 2>/dev/null || true)
        (( ${n:-0} >= want )) && break
        ((SECONDS - start < limit)) || die "timed out waiting for $want lines /$re/ in $file"
        sleep 0.005
    done
}

# start_bg OUT CMD...: start CMD in the background (stdout to OUT); sets BG_PID.
start_bg() {
    local out=$1; shift
    rm -f "$out" "$out.err"
    "$@" >"$out" 2>"$out.err" &
    BG_PID=$!
    PIDS+=("$BG_PID")
}

# attached OUT PID NAME: wait for "Attaching" on OUT, then SETTLE.
attached() {
    local out=$1 pid=$2 name=$3 waited=0
    while ! grep -q Attaching "$out" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "---- $name stdout:"; cat "$out" >&2; log "---- $name stderr:"; cat "$out.err" >&2
            die "$name exited before attaching"
        fi
        ((waited++ < 3000)) || die "$name did not print 'Attaching' within 30 s"
        sleep 0.01
    done
    ATTACHED_NS=$(now_ns)
    sleep "$SETTLE"
}

# stop PID NAME: SIGINT and wait for the exit (maps are printed then).
stop() {
    local pid=$1 name=$2 i rc=0
    kill -INT "$pid" 2>/dev/null || true
    for i in $(seq 1 3000); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.01
    done
    if kill -0 "$pid" 2>/dev/null; then
        note "$name did not end within 30 s of SIGINT; killed"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || rc=$?
    ((rc == 0)) || note "$name exited with status $rc after SIGINT"
}

log "stacks bench: $(uname -r), $NCPU CPUs, $("$RT" -V 2>/dev/null || echo rtrace), $("$BT" --version 2>/dev/null)"
log "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# ------------------------------------------------- 1. symbolization cost
# One rtrace per run, printing each event of the fixture either with its
# user stack (`print(e.ustack)`: read the stack map, symbolize, format) or
# with a plain integer (`print(e.pid)`: the same record and print path
# without a stack). CPU time of all rtrace threads (schedstat, ns) around:
#   first   the first event of a fresh rtrace (fixture process A)
#   warm    WARM_EVENTS more events of the same stack in process A, per event
#   newpid  the first event of a second process B of the same binary
# Cost of the stack = figure(ustack) - figure(plain), medians over COLD_REPS.
log "== 1. symbolization cost: $COLD_REPS fresh runs per script, $WARM_EVENTS warm events each"
cat >"$TMP/sym_ustack.rhai" <<EOF
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.comm == "$FX_NAME" { print(\`S\${e.ustack}\`); }
});
EOF
cat >"$TMP/sym_plain.rhai" <<EOF
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.comm == "$FX_NAME" { print(\`S \${e.pid}\`); }
});
EOF

declare -A FIRST=() WARM=() NEWPID=()
serve_start() { # NAME: a `serve` fixture reading $TMP/NAME.in; sets SERVE_PID
    rm -f "$TMP/$1.in" "$TMP/$1.out"
    mkfifo "$TMP/$1.in"
    "$FX" serve <"$TMP/$1.in" >"$TMP/$1.out" &
    SERVE_PID=$!
    PIDS+=("$SERVE_PID")
}
for rep in $(seq 1 "$COLD_REPS"); do
    for kind in plain ustack; do
        out=$TMP/sym.$kind.$rep.out
        start_bg "$out" "$RT" "$TMP/sym_$kind.rhai"
        rpid=$BG_PID
        attached "$out" "$rpid" rtrace
        serve_start A; apid=$SERVE_PID; exec {AW}>"$TMP/A.in"
        wait_for "$TMP/A.out" '^addr' 1
        sleep 0.1
        c0=$(cpu_ns "$rpid")
        echo 1 >&"$AW"; wait_for "$out" '^S' 1
        c1=$(cpu_ns "$rpid")
        echo "$WARM_EVENTS" >&"$AW"; wait_for "$out" '^S' $((1 + WARM_EVENTS)) 120
        c2=$(cpu_ns "$rpid")
        serve_start B; bpid=$SERVE_PID; exec {BW}>"$TMP/B.in"
        wait_for "$TMP/B.out" '^addr' 1
        sleep 0.1
        c3=$(cpu_ns "$rpid")
        echo 1 >&"$BW"; wait_for "$out" '^S' $((2 + WARM_EVENTS))
        c4=$(cpu_ns "$rpid")
        stop "$rpid" rtrace
        exec {AW}>&- {BW}>&-
        wait "$apid" "$bpid" 2>/dev/null || true
        if [[ $kind == ustack ]] && ! grep -q '^ *inner+' "$out"; then
            note "symbolization run $rep: the user stacks were not symbolized (no inner+N frame)"
        fi
        FIRST[$kind]+="$(( (c1 - c0) / 1000 )) "
        WARM[$kind]+="$(calc "($c2 - $c1) / $WARM_EVENTS / 1000" 2) "
        NEWPID[$kind]+="$(( (c4 - c3) / 1000 )) "
        log "  run $rep $kind: first $(( (c1 - c0) / 1000 )) us, warm $(calc "($c2 - $c1) / $WARM_EVENTS / 1000" 2) us/event, new pid $(( (c4 - c3) / 1000 )) us"
    done
done
# shellcheck disable=SC2086
{
    F_U=$(median ${FIRST[ustack]}); F_P=$(median ${FIRST[plain]})
    W_U=$(median ${WARM[ustack]});  W_P=$(median ${WARM[plain]})
    N_U=$(median ${NEWPID[ustack]}); N_P=$(median ${NEWPID[plain]})
}

# ------------------------------------------------- 2. stack-heavy profile
# profile:hz:999 on every CPU, kernel and user stacks as map keys, while one
# `stacks vary` process per CPU runs PROFILE_SECS (user spin through 32
# recursion depths + reads from /dev/zero: varied user and kernel stacks).
# The load processes stay alive until the tracer has printed its maps.
log "== 2. profile:hz:999, kstack + ustack keys, $PROFILE_SECS s under load on $NCPU CPUs, $PROFILE_REPS runs each"
cat >"$TMP/prof.rhai" <<'EOF'
let s = map();
let u = map();
probe("profile:hz:999", |e| {
    s[e.kstack] = count();
    u[e.ustack] = count();
});
EOF
cat >"$TMP/prof.bt" <<'EOF'
profile:hz:999 { @k[kstack] = count(); @u[ustack] = count(); }
EOF

# stack_summary FILE KMAP UMAP -> "ksamples usamples kkeys ukeys bracketed hexframes symframes"
stack_summary() {
    awk -v km="@$2[" -v um="@$3[" '
        $0 == km { cur = "k"; keys["k"]++; next }
        $0 == um { cur = "u"; keys["u"]++; next }
        index($0, km "]: ") == 1 { keys["k"]++; sum["k"] += $2; next }   # bpftrace: empty stack
        index($0, um "]: ") == 1 { keys["u"]++; sum["u"] += $2; next }
        /^\]: [0-9]+$/ { if (cur != "") sum[cur] += $2; cur = ""; next }
        cur != "" && /^ +\[/ { br++ }
        cur == "u" && /^ +(0x)?[0-9a-f]+$/ { hex++ }
        cur == "u" && /^ +[^ 0-9\[].*\+[0-9]+$/ { sym++ }
        END { printf "%d %d %d %d %d %d %d\n", sum["k"], sum["u"], keys["k"], keys["u"], br, hex, sym }
    ' "$1"
}

declare -A P_RATE=() P_WCPU=() P_TCPU=() P_EXIT=() P_KEYS=() P_SYM=() P_BR=() P_MISS=()
for rep in $(seq 1 "$PROFILE_REPS"); do
    for name in rtrace bpftrace; do
        out=$TMP/prof.$name.$rep.out
        if [[ $name == rtrace ]]; then cmd=("$RT" "$TMP/prof.rhai"); km=s; else cmd=("$BT" "$TMP/prof.bt"); km=k; fi
        if [[ -n $GNU_TIME ]]; then
            start_bg "$out" "$GNU_TIME" -f "cpu %U %S" -o "$out.time" "${cmd[@]}"
            wrapper=$BG_PID
            for _ in $(seq 1 200); do tpid=$(pgrep -P "$wrapper" | head -1 || true); [[ -n $tpid ]] && break; sleep 0.01; done
        else
            start_bg "$out" "${cmd[@]}"
            wrapper=$BG_PID; tpid=$BG_PID
        fi
        attached "$out" "$tpid" "$name"
        ta=$ATTACHED_NS
        loads=()
        for cpu in $(seq 0 $((NCPU - 1))); do
            rm -f "$TMP/load.$cpu.in" "$TMP/load.$cpu.out"; mkfifo "$TMP/load.$cpu.in"
            taskset -c "$cpu" "$FX" vary $((PROFILE_SECS * 1000)) hold <"$TMP/load.$cpu.in" >"$TMP/load.$cpu.out" &
            loads+=($!); PIDS+=($!)
            exec {fd}>"$TMP/load.$cpu.in"; eval "LOADFD_$cpu=$fd"
        done
        t0=$(now_ns); k0=$(cpu_ticks "$tpid")
        for cpu in $(seq 0 $((NCPU - 1))); do wait_for "$TMP/load.$cpu.out" '^done' 1 $((PROFILE_SECS + 60)); done
        t1=$(now_ns); k1=$(cpu_ticks "$tpid")
        # SIGINT to the tracer itself (GNU time ignores SIGINT while it waits)
        kill -INT "$tpid" 2>/dev/null || true
        killed=0
        while kill -0 "$tpid" 2>/dev/null; do
            if (( ($(now_ns) - t1) / 1000000000 >= EXIT_LIMIT )); then
                note "$name run $rep did not end within $EXIT_LIMIT s of SIGINT; killed, run left out"
                kill -KILL "$tpid" 2>/dev/null || true
                killed=1
                break
            fi
            sleep 0.005
        done
        t2=$(now_ns)
        rc=0; wait "$wrapper" 2>/dev/null || rc=$?
        ((rc == 0 || killed)) || note "$name run $rep exited with status $rc after SIGINT"
        for cpu in $(seq 0 $((NCPU - 1))); do eval "exec {LOADFD_$cpu}>&-"; done
        wait "${loads[@]}" 2>/dev/null || true
        ((killed)) && continue
        read -r ks us kk uk br hex sym < <(stack_summary "$out" "$km" u)
        win=$(calc "($t1 - $t0) / 1e9" 3)
        # samples are counted from attach to SIGINT (settle + load window)
        rate=$(calc "$ks / (($t1 - $ta) / 1e9)" 0)
        wcpu=$(calc "($k1 - $k0) * 1000 / $HZ" 0)
        tcpu=n/a
        if [[ -f $out.time ]]; then
            tcpu=$(awk '$1=="cpu" {printf "%.0f", ($2 + $3) * 1000}' "$out.time")
        fi
        exitms=$(calc "($t2 - $t1) / 1e6" 0)
        symf=$(calc "$sym * 100 / ($sym + $hex + 0.000001)" 1)
        miss=$((ks - us))
        log "  $name run $rep: ${ks} samples in ${win}s window (~${rate}/s), ${kk} kstack keys, ${uk} ustack keys, ${miss} samples missing from the ustack map, ${br} bracketed, user frames symbolized ${symf}% ($sym/$((sym + hex))), CPU in window ${wcpu} ms, total CPU ${tcpu} ms, SIGINT->exit ${exitms} ms"
        P_RATE[$name]+="$rate "; P_WCPU[$name]+="$wcpu "; P_TCPU[$name]+="$tcpu "; P_EXIT[$name]+="$exitms "
        P_KEYS[$name]+="$((kk + uk)) "; P_SYM[$name]+="$symf "; P_BR[$name]+="$br "; P_MISS[$name]+="$miss "
        if [[ $name == rtrace ]] && [[ -s $out.err ]]; then
            while IFS= read -r l; do log "    rtrace stderr: $l"; done < <(grep -v '^$' "$out.err" | head -5)
        fi
    done
done

# ------------------------------------------------- summary
row() { printf '%-48s %12s %12s\n' "$@"; }
med() { local v; v=$(median $1); echo "$v"; }
echo
echo "stacks bench — $(uname -r), $NCPU CPUs, $("$RT" -V 2>/dev/null || echo rtrace), $("$BT" --version 2>/dev/null)"
echo "load average (1 min) at end $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "1. user-stack symbolization in rtrace (CPU us of all rtrace threads; median of $COLD_REPS runs)"
row "" "print(ustack)" "print(pid)" 
row "first event of a fresh rtrace, us" "$F_U" "$F_P"
row "first event of a new process (same binary), us" "$N_U" "$N_P"
row "repeated stack (warm), us/event" "$W_U" "$W_P"
row "=> cold stack cost (fresh rtrace), us" "$(calc "$F_U - $F_P" 0)" ""
row "=> new-process stack cost, us" "$(calc "$N_U - $N_P" 0)" ""
row "=> warm stack cost, us/event" "$(calc "$W_U - $W_P" 2)" ""
echo
echo "2. profile:hz:999, kstack + ustack map keys, ${PROFILE_SECS} s, $NCPU CPUs loaded (median of $PROFILE_REPS runs)"
row "" "rtrace" "bpftrace"
# shellcheck disable=SC2086
{
row "samples processed per second" "$(med "${P_RATE[rtrace]}")" "$(med "${P_RATE[bpftrace]}")"
row "tracer CPU during the window, ms" "$(med "${P_WCPU[rtrace]}")" "$(med "${P_WCPU[bpftrace]}")"
row "tracer CPU in all (start, window, print), ms" "$(med "${P_TCPU[rtrace]}")" "$(med "${P_TCPU[bpftrace]}")"
row "SIGINT -> exit (symbolize + print maps), ms" "$(med "${P_EXIT[rtrace]}")" "$(med "${P_EXIT[bpftrace]}")"
row "distinct stacks (kstack + ustack keys)" "$(med "${P_KEYS[rtrace]}")" "$(med "${P_KEYS[bpftrace]}")"
row "user frames symbolized, %" "$(med "${P_SYM[rtrace]}")" "$(med "${P_SYM[bpftrace]}")"
row "bracketed (lost) stack keys" "$(med "${P_BR[rtrace]}")" "$(med "${P_BR[bpftrace]}")"
row "samples missing from the ustack map" "$(med "${P_MISS[rtrace]}")" "$(med "${P_MISS[bpftrace]}")"
}
if ((${#NOTES[@]})); then
    echo
    echo "notes:"
    for n in "${NOTES[@]}"; do echo "  - $n"; done
fi
exit 0
