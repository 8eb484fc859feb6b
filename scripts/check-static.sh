#!/usr/bin/env bash
# Checks that a cbrun binary runs on old distributions: no dynamic
# section at all (static), or, for a glibc build, no symbol version newer
# than GLIBC_2.17 (RHEL 7/8 era). Then runs `cbrun --version` and
# `cbrun doctor` with it.
#   scripts/check-static.sh BINARY
set -euo pipefail
bin=${1:?usage: check-static.sh BINARY}
[ -x "$bin" ] || { echo "check-static: $bin: not an executable" >&2; exit 1; }
if readelf -d "$bin" 2>/dev/null | grep -q '(NEEDED)'; then
    echo "check-static: $bin is dynamically linked:" >&2
    readelf -d "$bin" | grep '(NEEDED)' >&2
    newest=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -n1)
    echo "check-static: newest glibc symbol version: ${newest:-none}" >&2
    exit 1
fi
if objdump -T "$bin" 2>/dev/null | grep -q GLIBC_; then
    echo "check-static: $bin references glibc symbol versions" >&2
    exit 1
fi
file "$bin" 2>/dev/null || true
"$bin" --version
"$bin" doctor >/dev/null || [ $? -eq 2 ]
echo "check-static: $bin is static (no NEEDED libraries, no GLIBC_ symbol versions) and runs"
