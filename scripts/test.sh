#!/usr/bin/env bash
# Installs what the tests need, then runs the whole test suite on two
# kernels: this machine's (root-free tests and real-kernel tests), then the
# real-kernel tests inside Debian's stock 6.1 LTS kernel in a VM
# (scripts/test-vm.sh), where kprobes and fentry/fexit are real.
# Root is needed for the real-kernel tests (without it they are skipped).
# Tests that need what a kernel lacks are listed as skipped at the end of
# each part, never counted as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
skips=$(mktemp)
trap 'rm -f "$skips"' EXIT
status=0

start=$SECONDS
RTRACE_SKIP_LOG=$skips cargo test --release --workspace --no-fail-fast || status=$?
echo "test: this machine's kernel ($(uname -r)): $((SECONDS - start)) s, exit status $status"
if [ -s "$skips" ]; then
    echo "test: skipped (not passed) on $(uname -r), $(wc -l <"$skips") test(s):"
    sed 's/^/  /' "$skips"
fi

start=$SECONDS
vm_status=0
bash scripts/test-vm.sh || vm_status=$?
echo "test: the stock-kernel VM ($(bash scripts/vm.sh kernel)): $((SECONDS - start)) s, exit status $vm_status"
[ "$vm_status" = 0 ] || status=$vm_status
exit "$status"
