# Shell helpers shared by the bench scripts (sourced, not run).
# The sourcing script sets nothing beforehand; NOTES collects notes for its summary.

NOTES=()
die() { echo "$(basename "$0"): $*" >&2; exit 2; }
log() { echo "$*" >&2; }
note() { NOTES+=("$*"); log "NOTE: $*"; }
# median of the numbers given as arguments
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{ if(NR==0){print "nan"} else if(NR%2){print v[(NR+1)/2]} else {print (v[NR/2]+v[NR/2+1])/2} }'; }
# field NAME from a "k=v k=v" line
field() { awk -v k="$1" '{for(i=1;i<=NF;i++){split($i,a,"="); if(a[1]==k) print a[2]}}' <<<"$2"; }
# calc EXPR [DECIMALS]: awk arithmetic
calc() { awk "BEGIN{ printf \"%.${2:-3}f\", $1 }"; }

# Other tracers running now would skew every figure (an enabled syscall
# tracepoint slows every traced call); say so. $1: when ("at the start").
check_foreign() {
    local p comm others=()
    for p in /proc/[0-9]*; do
        comm=$(cat "$p/comm" 2>/dev/null) || continue
        case $comm in rtrace|bpftrace|rtrace-*) others+=("${p#/proc/}($comm)") ;; esac
    done
    if ((${#others[@]})); then
        note "other tracer processes were running $1: ${others[*]}; figures may be skewed"
    fi
}

# check_setup TOOL...: root, the tools, bpftrace and rtrace (built when
# missing; ROOT is the repository). Sets BPFTRACE and RTRACE, keeping values
# given in the environment.
check_setup() {
    local t
    [[ $(id -u) -eq 0 ]] || die "must run as root (BPF)"
    for t in "$@"; do command -v "$t" >/dev/null || die "$t not found"; done
    BPFTRACE=${BPFTRACE:-$(command -v bpftrace || true)}
    [[ -n $BPFTRACE && -x $BPFTRACE ]] || die "bpftrace not found (scripts/setup.sh installs it)"
    RTRACE=${RTRACE:-$ROOT/target/release/rtrace}
    if [[ ! -x $RTRACE ]]; then
        log "building rtrace (cargo build --release) ..."
        (cd "$ROOT" && cargo build --release -q) || die "cargo build failed"
    fi
}

# bench_workdir NAME: a temporary folder TMP (removed at exit, or kept when
# KEEP_TMP is set; the processes whose pids the variables named in BG_VARS
# hold are killed first), a private copy of rtrace as RT, so a rebuild
# during the run cannot swap the binary under us, and BT (bpftrace).
BG_VARS="TRACER_PID"
bench_workdir() {
    TMP=$(mktemp -d "/tmp/rtrace-$1.XXXXXX")
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
    cp "$RTRACE" "$TMP/rtrace"
    RT=$TMP/rtrace
    BT=$BPFTRACE
}
bench_cleanup() {
    local v p
    for v in $BG_VARS; do
        p=${!v:-}
        if [[ -n $p ]] && kill -0 "$p" 2>/dev/null; then kill -KILL "$p" 2>/dev/null || true; fi
    done
    if [[ -n ${KEEP_TMP:-} ]]; then log "kept $TMP"; else rm -rf "$TMP"; fi
}

# measure_start: note other tracers now and the load average (LOAD_START).
measure_start() {
    check_foreign "at the start"
    LOAD_START=$(cut -d' ' -f1 /proc/loadavg)
}

# await_attaching NAME STDOUT STDERR: wait until the tracer TRACER_PID has
# printed "Attaching" on STDOUT (a file); when it ends first, or after 15 s,
# show what it printed and die.
await_attaching() {
    local name=$1 out=$2 err=$3 waited=0
    while ! grep -q Attaching "$out" 2>/dev/null; do
        if ! kill -0 "$TRACER_PID" 2>/dev/null; then
            wait "$TRACER_PID" || true
            TRACER_PID=
            log "---- $name stdout:"; cat "$out" >&2; log "---- $name stderr:"; cat "$err" >&2
            die "$name exited before attaching"
        fi
        ((waited++ < 1500)) || die "$name did not print 'Attaching' within 15 s"
        sleep 0.01
    done
}

# stop_tracer NAME: SIGINT to TRACER_PID (maps are printed), again every
# 2 s, SIGKILL after 6 s; notes anything but a prompt exit with status 0.
stop_tracer() {
    local name=$1 i sent=1 rc=0
    kill -INT "$TRACER_PID" 2>/dev/null || true
    for i in $(seq 1 300); do
        kill -0 "$TRACER_PID" 2>/dev/null || break
        if ((i % 100 == 0)); then
            sent=$((sent + 1))
            kill -INT "$TRACER_PID" 2>/dev/null || true
        fi
        sleep 0.02
    done
    if kill -0 "$TRACER_PID" 2>/dev/null; then
        note "$name ignored $sent SIGINTs; killed"
        kill -KILL "$TRACER_PID" 2>/dev/null || true
    elif ((sent > 1)); then
        note "$name needed $sent SIGINTs to stop"
    fi
    wait "$TRACER_PID" || rc=$?
    TRACER_PID=
    if ((rc != 0)); then note "$name exited with status $rc after SIGINT"; fi
}
