#!/usr/bin/env bash
# An old Debian root for scripts/check-static.sh --old-rootfs: Debian 11
# (bullseye, glibc 2.31) by default, bootstrapped with mmdebstrap from
# Debian's mirror (the essential set plus `mount`, ~100 MB, under a
# minute). Kept when DIR already holds one; made in DIR.new and renamed,
# so a cut-short bootstrap leaves nothing that looks finished. Run as root.
#   scripts/old-rootfs.sh DIR [SUITE] [MIRROR]
set -euo pipefail
dir=${1:?usage: old-rootfs.sh DIR [SUITE] [MIRROR]}
suite=${2:-bullseye}
mirror=${3:-http://deb.debian.org/debian}
if [ -s "$dir/etc/debian_version" ] && [ -x "$dir/bin/mount" ]; then
    echo "old-rootfs: $dir: Debian $(cat "$dir/etc/debian_version") (kept)"
    exit 0
fi
command -v mmdebstrap >/dev/null || { echo "old-rootfs: mmdebstrap not found (apt-get install mmdebstrap)" >&2; exit 1; }
rm -rf "$dir.new"
mkdir -p "$(dirname "$dir")"
mmdebstrap --quiet --variant=essential --include=mount "$suite" "$dir.new" "$mirror"
rm -rf "$dir"
mv "$dir.new" "$dir"
echo "old-rootfs: $dir: Debian $(cat "$dir/etc/debian_version") ($suite)"
