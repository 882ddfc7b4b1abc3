#!/usr/bin/env bash
# Runs inside the stock-kernel VM (scripts/test-vm.sh starts it): the
# real-kernel test binary, one name filter at a time, within a time budget,
# so that a slow machine (qemu TCG runs several times slower than the host)
# can't push the whole suite past CI's limit.
#
#   scripts/vm-tests.sh BIN SKIPLOG BUDGET_S FILTER... [--skip NAME]...
#
# A filter `scripts:F` runs the script cases (tests/scripts/*.case) whose
# names contain F, with the binary $RTRACE_SCRIPTS_BIN.
#
# A filter that runs longer than RTRACE_VM_FILTER_LIMIT seconds (1200) has
# hung: it fails. Once BUDGET_S is spent, the filters not started, and the
# tests a running filter had not finished, are written to SKIPLOG as not run
# (listed as skipped at the end, never counted as passed). Exits 1 when a
# test failed or a filter hung.
set -uo pipefail
bin=$1 skiplog=$2 budget=$3
shift 3
filters=() skips=()
while [ $# -gt 0 ]; do
    case $1 in
    --skip) skips+=(--skip "$2"); shift 2 ;;
    *) filters+=("$1"); shift ;;
    esac
done
limit=${RTRACE_VM_FILTER_LIMIT:-1200}
# The binaries run from the guest's own disk: run from the host's file
# system (9p) every rtrace start pages its 10 MB in again, ~2 s under TCG.
# (The generated man pages and completions beside rtrace go along.)
local=$(mktemp -d /tmp/rtrace-bin.XXXXXX)
cp "$bin" "$local/kernel-tests" && bin=$local/kernel-tests
if [ -n "${RTRACE_BIN:-}" ]; then
    share=$(dirname "$RTRACE_BIN")/share
    [ -d "$share" ] && cp -r "$share" "$local/share"
    cp "$RTRACE_BIN" "$local/rtrace" && RTRACE_BIN=$local/rtrace
fi
if [ -n "${RTRACE_SCRIPTS_BIN:-}" ]; then
    cp "$RTRACE_SCRIPTS_BIN" "$local/script-tests" && RTRACE_SCRIPTS_BIN=$local/script-tests
fi
export RTRACE_BIN RTRACE_SCRIPTS_BIN
# Hang timeouts stretch with the emulation.
export RTRACE_TEST_PATIENCE=${RTRACE_TEST_PATIENCE:-4}
deadline=$((SECONDS + budget))
status=0
out=$(mktemp)
# Lists FILTER's tests (of the binary $b) as not run, but those OUT shows finished.
not_run() {
    "$b" --list "$1" "${skips[@]}" 2>/dev/null | sed -n 's/: test$//p' | while read -r t; do
        [ -n "${2:-}" ] && grep -qE "^test $t +\.\.\. (ok|FAILED|ignored)" "$2" && continue
        echo "$t: not run, the VM's time budget (${budget} s) was spent" >>"$skiplog"
    done
}
for f in "${filters[@]}"; do
    b=$bin name=$f
    if [[ $f == scripts:* ]]; then
        b=${RTRACE_SCRIPTS_BIN:?scripts: filters need RTRACE_SCRIPTS_BIN}
        f=${f#scripts:}
    fi
    left=$((deadline - SECONDS))
    if [ "$left" -le 0 ]; then
        not_run "$f"
        continue
    fi
    cap=$((left < limit ? left : limit))
    start=$SECONDS
    timeout -k 10 "$cap" "$b" --test-threads=1 "$f" "${skips[@]}" | tee "$out"
    rc=${PIPESTATUS[0]}
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        if [ "$cap" -lt "$limit" ]; then
            # Cut by the budget, not hung: the unfinished tests are not run.
            echo
            echo "vm-tests: the time budget (${budget} s) ran out during $name"
            not_run "$f" "$out"
        else
            echo
            echo "vm-tests: $name ran past ${limit} s and was stopped (a test hung); after: $(tail -1 "$out")"
            status=1
        fi
    elif [ "$rc" != 0 ]; then
        status=1
    fi
    echo "vm-tests: $name: $((SECONDS - start)) s"
done
rm -f "$out"
exit "$status"
