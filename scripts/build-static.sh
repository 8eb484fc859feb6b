#!/usr/bin/env bash
# A static cbrun for clusters with older distributions (RHEL 8, Debian 10/11).
#   scripts/build-static.sh [--libc musl|glibc] [--profile P] [--check [--old-rootfs DIR]]
# --libc musl (the default, what to ship): the x86_64-unknown-linux-musl
#   target, no glibc at all. Needs the rustup target (added here when
#   missing; rustup downloads it) and a C compiler (zstd-sys builds zstd).
# --libc glibc: the host's x86_64-unknown-linux-gnu target linked with
#   `-C target-feature=+crt-static` against Debian's libc.a (libc6-dev).
#   Needs nothing beyond the toolchain rustup installed with cargo, which is
#   why CI checks this one (a fresh CI machine cannot fetch rustup targets).
# --profile: a cargo profile (default release; CI uses static-check, see
#   Cargo.toml). --check runs scripts/check-static.sh on the binary, with
#   --old-rootfs DIR (a Debian root, scripts/old-rootfs.sh) passed on.
# Prints the binary's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
libc=musl profile=release check=()
while [ $# -gt 0 ]; do
    case "$1" in
        --libc) libc=${2:?--libc needs musl or glibc}; shift 2 ;;
        --profile) profile=${2:?--profile needs a name}; shift 2 ;;
        --check) check=(scripts/check-static.sh); shift ;;
        --old-rootfs) [ "${#check[@]}" -gt 0 ] || { echo "build-static: --old-rootfs needs --check first" >&2; exit 2; }
            check+=(--old-rootfs "${2:?--old-rootfs needs a directory}"); shift 2 ;;
        *) echo "build-static: unknown argument $1" >&2; exit 2 ;;
    esac
done
case "$libc" in
    musl)
        target=x86_64-unknown-linux-musl
        rustup target list --installed | grep -qx "$target" || rustup target add "$target"
        export CC_x86_64_unknown_linux_musl="${CC_x86_64_unknown_linux_musl:-$(command -v musl-gcc || echo cc)}"
        ;;
    glibc)
        target=x86_64-unknown-linux-gnu
        [ -e /usr/lib/x86_64-linux-gnu/libc.a ] || { echo "build-static: no static glibc (/usr/lib/x86_64-linux-gnu/libc.a): apt-get install libc6-dev" >&2; exit 1; }
        ;;
    *) echo "build-static: --libc musl|glibc, not $libc" >&2; exit 2 ;;
esac
# An explicit --target keeps RUSTFLAGS off build scripts and proc macros,
# which must stay dynamic host code; crt-static is musl's default anyway.
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --locked --target "$target" --profile "$profile"
dir=$profile; [ "$profile" != dev ] || dir=debug
bin="${CARGO_TARGET_DIR:-target}/$target/$dir/cbrun"
if [ "${#check[@]}" -gt 0 ]; then
    "${check[0]}" "$bin" "${check[@]:1}"
fi
echo "$bin"
