#!/bin/sh
# Build a base image recipe into an OCI image layout directory, then check it.
#
#   rootfs/build.sh RECIPE OUTDIR
#
#   RECIPE   rootfs/<name> (a directory holding recipe.toml) or a recipe.toml
#   OUTDIR   the OCI layout to write (must not exist, or be empty)
#
# Environment:
#   CBRUN              the cbrun binary (default: target/release/cbrun if built, else cbrun)
#   MODE               mmdebstrap mode: auto (default), root, unshare, fakechroot
#   SOURCE_DATE_EPOCH  fixed mtime/created date (overrides the recipe's)
#   CHECK=0            skip the umoci check
#
# The check (needs umoci, `apt-get install umoci`): unpack the layout into a
# temporary bundle, then run `bin/busybox sh -c 'echo ok'` (busybox) or
# `chroot ROOTFS python3 -c 'import pytest'` (an image with python3; the
# chroot needs root), and remove the bundle.
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 RECIPE OUTDIR" >&2
    exit 2
fi
recipe=$1
out=$2
here=$(cd "$(dirname "$0")/.." && pwd)

if [ -z "${CBRUN:-}" ]; then
    if [ -x "$here/target/release/cbrun" ]; then
        CBRUN=$here/target/release/cbrun
    else
        CBRUN=cbrun
    fi
fi

recipe_file=$recipe
[ -d "$recipe" ] && recipe_file=$recipe/recipe.toml
tag=$(sed -n 's/^tag *= *"\([^"]*\)".*/\1/p' "$recipe_file" | head -n 1)
kind=$(sed -n 's/^kind *= *"\([^"]*\)".*/\1/p' "$recipe_file" | head -n 1)
if [ "$kind" = mmdebstrap ] && ! command -v mmdebstrap >/dev/null 2>&1; then
    echo "$0: mmdebstrap not found: apt-get install mmdebstrap" >&2
    exit 1
fi

start=$(date +%s)
"$CBRUN" image bootstrap "$recipe" --layout "$out" --mode "${MODE:-auto}"
end=$(date +%s)
echo "built $out in $((end - start)) s"
du -sh "$out"

if [ "${CHECK:-1}" = 0 ]; then
    exit 0
fi
if ! command -v umoci >/dev/null 2>&1; then
    echo "umoci not found (apt-get install umoci): layout not checked" >&2
    exit 0
fi
bundle=$(mktemp -d "${TMPDIR:-/tmp}/cbrun-rootfs-check.XXXXXX")
trap 'rm -rf "$bundle"' EXIT
rootless=
[ "$(id -u)" = 0 ] || rootless=--rootless
umoci unpack $rootless --image "$out:$tag" "$bundle/b" >/dev/null
rootfs=$bundle/b/rootfs
if [ -x "$rootfs/usr/bin/python3" ] || [ -L "$rootfs/usr/bin/python3" ]; then
    if [ "$(id -u)" = 0 ]; then
        chroot "$rootfs" python3 -c 'import pytest; print("ok: pytest", pytest.__version__)'
    else
        echo "unpacked; run as root to check python3 inside" >&2
    fi
else
    "$rootfs/bin/busybox" sh -c 'echo ok'
fi
