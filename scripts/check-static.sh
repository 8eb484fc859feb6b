#!/usr/bin/env bash
# Checks that a cbrun binary runs on old distributions: no dynamic section
# at all (no NEEDED libraries, no GLIBC_ symbol versions), then
# `cbrun --version` and `cbrun doctor` here. With --old-rootfs DIR (a
# Debian root from scripts/old-rootfs.sh, e.g. bullseye with glibc 2.31),
# it also runs in DIR as its / (a private mount namespace, pivot_root, so
# nothing of this host's libraries is in reach): `--version`, `doctor`, and
# a real sandbox (`cbrun sandbox run` on DIR's own system as root and as
# nobody) that must print DIR's /etc/debian_version. Run as root for
# --old-rootfs.
#   scripts/check-static.sh BINARY [--old-rootfs DIR]
set -euo pipefail
bin=${1:?usage: check-static.sh BINARY [--old-rootfs DIR]}
root=
if [ $# -gt 1 ]; then
    [ "$2" = --old-rootfs ] && [ -n "${3:-}" ] || { echo "usage: check-static.sh BINARY [--old-rootfs DIR]" >&2; exit 2; }
    root=$(realpath "$3")
fi
fail() { echo "check-static: FAILED: $*" >&2; exit 1; }
[ -x "$bin" ] || fail "$bin: not an executable"
bin=$(realpath "$bin")
if readelf -d "$bin" 2>/dev/null | grep -q '(NEEDED)'; then
    readelf -d "$bin" | grep '(NEEDED)' >&2
    newest=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -n1)
    fail "$bin is dynamically linked (newest glibc symbol version: ${newest:-none})"
fi
readelf -l "$bin" | grep -q INTERP && fail "$bin asks for a program interpreter (dynamic loader)"
if objdump -T "$bin" 2>/dev/null | grep -q GLIBC_; then
    fail "$bin references glibc symbol versions"
fi
file "$bin" 2>/dev/null || true
"$bin" --version
"$bin" doctor >/dev/null || [ $? -eq 2 ] || fail "$bin doctor failed here"
echo "check-static: $bin is static (no NEEDED libraries, no interpreter, no GLIBC_ symbol versions) and runs here"
[ -n "$root" ] || exit 0

[ "$(id -u)" = 0 ] || fail "--old-rootfs needs root (a mount namespace and pivot_root)"
[ -s "$root/etc/debian_version" ] || fail "$root: no etc/debian_version (make it with scripts/old-rootfs.sh)"
for t in sh mount umount setpriv; do
    [ -x "$root/bin/$t" ] || [ -x "$root/usr/bin/$t" ] || fail "$root has no $t (scripts/old-rootfs.sh includes it)"
done
want=$(cat "$root/etc/debian_version")
libc=$(cd "$root" && ls lib/x86_64-linux-gnu/libc-*.so 2>/dev/null || echo 'libc.so.6')
echo "check-static: in $root (Debian $want, $libc) as /"
# Inside a private mount namespace: $root becomes / with the host's /proc,
# /sys and /dev (cbrun needs them for namespaces and cgroups) and fresh
# tmpfs on /run, /tmp, /dev/shm; the binary is bound read-only at
# /usr/local/bin/cbrun (DIR is not changed); then the old / is unmounted
# and the rest runs with DIR's own shell and tools. A chroot would not do:
# the kernel refuses new user namespaces to a chrooted process.
out=$(unshare --mount --propagation private --fork /bin/bash -euc '
    r=$1 bin=$2
    mount --bind "$r" "$r"
    for d in proc sys dev; do mount --rbind "/$d" "$r/$d"; done
    mount -t tmpfs tmpfs "$r/run"; mount -t tmpfs tmpfs "$r/tmp"; mount -t tmpfs tmpfs "$r/dev/shm"
    touch "$r/run/cbrun-bin"
    mount --bind "$bin" "$r/run/cbrun-bin"; mount -o remount,bind,ro "$r/run/cbrun-bin"
    mkdir -p "$r/run/oldroot"
    cd "$r"
    pivot_root . run/oldroot
    exec /bin/sh -c "umount -l /run/oldroot && rmdir /run/oldroot && cd /tmp && exec /bin/sh -c \"\$0\"" "
        set -e
        PATH=/usr/sbin:/usr/bin:/sbin:/bin
        c=/run/cbrun-bin
        [ ! -e /run/oldroot ] && echo no-old-root
        \$c --version
        \$c doctor >/tmp/doctor.txt || { cat /tmp/doctor.txt; exit 1; }
        echo doctor-ok
        echo root: \$(\$c sandbox run --memory 256M --pids 64 -- /bin/cat /etc/debian_version)
        echo nobody: \$(cd /tmp && setpriv --reuid 65534 --regid 65534 --clear-groups \$c sandbox run --memory 256M -- /bin/cat /etc/debian_version)
    "
' sh "$root" "$bin" 2>&1) || { echo "$out" >&2; fail "$bin on $root"; }
echo "$out" | sed 's/^/  | /'
for line in no-old-root doctor-ok "root: $want" "nobody: $want"; do
    grep -qxF "$line" <<<"$out" || fail "on $root: expected the line '$line'"
done
echo "check-static: $bin runs on Debian $want ($libc): --version, doctor, a sandbox as root and as nobody"
