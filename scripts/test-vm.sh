#!/usr/bin/env bash
# Runs the real-kernel tests inside the stock-kernel VM (scripts/vm.sh:
# Debian's 6.1 LTS kernel under qemu), from a snapshot of the built binaries,
# so the tree can be rebuilt while the VM runs.
#
#   scripts/test-vm.sh                 the VM's part of the suite (tests/vm-suite.txt)
#   scripts/test-vm.sh --all           every real-kernel test
#   scripts/test-vm.sh FILTER...       the tests whose names contain a FILTER
#
# The filters run one after another within RTRACE_VM_BUDGET seconds (3000):
# tests the budget leaves unrun are listed as skipped, never as passed.
#
# Prints libtest's output; exits non-zero when a test failed. Skipped tests
# (a feature this kernel lacks) are listed at the end, as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

filters=()
case "${1:-}" in
--all) ;;
"")
    # NAME: run the tests whose names contain NAME; `skip NAME  # why`: not those.
    mapfile -t filters < <(grep -v '^\s*#' tests/vm-suite.txt | awk 'NF && $1 != "skip" {print $1}')
    while read -r name; do filters+=(--skip "$name"); done < <(awk '$1 == "skip" {print $2}' tests/vm-suite.txt)
    ;;
*) filters=("$@") ;;
esac

bash scripts/vm.sh setup
cargo build --release --bins 2>&1 | grep -v '^\s*\(Compiling\|Finished\)' >&2 || true
# The executable of test target $1.
test_executable() {
    cargo test --release --test "$1" --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$1"
}
test_bin=$(test_executable kernel)
scripts_bin=$(test_executable scripts)
[ -x "$test_bin" ] || { echo "test-vm: the kernel test binary did not build" >&2; exit 1; }
[ -x "$scripts_bin" ] || { echo "test-vm: the script-case test binary did not build" >&2; exit 1; }

snap=$ROOT/target/vm-run.$$
rm -rf "$snap" && mkdir -p "$snap"
trap 'rm -rf "$snap"' EXIT
cp target/release/rtrace "$snap/rtrace"
[ -d target/release/share ] && cp -r target/release/share "$snap/share"
cp "$test_bin" "$snap/kernel-tests"
cp "$scripts_bin" "$snap/script-tests"
: >"$snap/skipped"

# One filter at a time, within the time budget (scripts/vm-tests.sh);
# the VM itself is stopped if it outlives the budget by 15 minutes.
budget=${RTRACE_VM_BUDGET:-3000}
[ ${#filters[@]} -gt 0 ] || filters=("")
cmd="cd '$ROOT' && RTRACE_BIN='$snap/rtrace' RTRACE_SCRIPTS_BIN='$snap/script-tests' RTRACE_SKIP_LOG='$snap/skipped' bash scripts/vm-tests.sh '$snap/kernel-tests' '$snap/skipped' $budget ${filters[*]@Q}"
status=0
RTRACE_VM_TIMEOUT=$((budget + 900)) bash scripts/vm.sh run "$cmd" || status=$?
if [ -s "$snap/skipped" ]; then
    echo "test-vm: skipped (not passed) in the VM, $(wc -l <"$snap/skipped") test(s):"
    sed 's/^/  /' "$snap/skipped"
fi
exit "$status"
