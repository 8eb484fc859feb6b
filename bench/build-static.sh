#!/usr/bin/env bash
# Build cbrun as a static, non-PIE executable and print its path.
# RUSTFLAGS with an explicit --target leaves build scripts and proc macros
# (host artefacts) alone, which a plain `cargo build` could not.
set -euo pipefail
cd "$(dirname "$0")/.."
triple="$(rustc -vV | sed -n 's/^host: //p')"
RUSTFLAGS="-C target-feature=+crt-static -C relocation-model=static" \
    cargo build --release --quiet --target "$triple" >&2
echo "$PWD/target/$triple/release/cbrun"
