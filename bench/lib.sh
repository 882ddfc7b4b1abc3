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
