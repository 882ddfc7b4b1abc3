#!/usr/bin/env bash
# Installs rtrace, its man page and its bash/zsh/fish completions under
# PREFIX (default /usr/local), from a release build (`cargo build --release`
# writes the man page and completions into target/release/share/).
#   scripts/install.sh [PREFIX]        e.g. scripts/install.sh ~/.local
set -euo pipefail
prefix="${1:-${PREFIX:-/usr/local}}"
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}/release"
if [ ! -x "$target/rtrace" ] || [ ! -f "$target/share/man/man1/rtrace.1" ]; then
    (cd "$root" && cargo build --release)
fi
install -Dm755 "$target/rtrace" "$prefix/bin/rtrace"
install -Dm644 "$target/share/man/man1/rtrace.1" "$prefix/share/man/man1/rtrace.1"
install -Dm644 "$target/share/bash-completion/completions/rtrace" "$prefix/share/bash-completion/completions/rtrace"
install -Dm644 "$target/share/zsh/site-functions/_rtrace" "$prefix/share/zsh/site-functions/_rtrace"
install -Dm644 "$target/share/fish/vendor_completions.d/rtrace.fish" "$prefix/share/fish/vendor_completions.d/rtrace.fish"
echo "installed rtrace, rtrace(1) and shell completions under $prefix"
