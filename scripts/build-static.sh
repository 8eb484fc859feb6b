#!/usr/bin/env bash
# A static cbrun for clusters with older distributions (RHEL 8, Debian 10):
# the x86_64-unknown-linux-musl target, fully static, no glibc at all.
#   scripts/build-static.sh            -> target/x86_64-unknown-linux-musl/release/cbrun
#   scripts/build-static.sh --check    -> also checks the binary (scripts/check-static.sh)
# Needs `rustup target add x86_64-unknown-linux-musl` (done here when
# missing) and a C compiler (zstd-sys builds zstd from source).
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-musl
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
# musl's own static libc; crt-static is the musl default, said for clarity.
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    CC_x86_64_unknown_linux_musl="${CC_x86_64_unknown_linux_musl:-$(command -v musl-gcc || echo cc)}" \
    cargo build --release --locked --target "$target" ${CBRUN_STATIC_PROFILE:+--profile "$CBRUN_STATIC_PROFILE"}
bin="target/$target/${CBRUN_STATIC_PROFILE:-release}/cbrun"
echo "$bin"
if [ "${1:-}" = --check ]; then
    scripts/check-static.sh "$bin"
fi
