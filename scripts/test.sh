#!/usr/bin/env bash
# Installs what the tests need, then runs the whole test suite (root needed
# for the real-kernel tests; they print a reason and skip without it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --release --workspace --no-fail-fast
