#!/usr/bin/env bash
# CBRUN-CANARY-case003-7f3a9c
#
# Acceptance entry point for the b64 case.
#
# The judge runs no build step, so this script builds the product itself:
# every C file in $APP_DIR/src/ is compiled together with the hidden test
# sources and the harness, with $APP_DIR/include on the include path, into a
# temporary directory (the workspace is not written to). The resulting binary
# prints a TAP stream ending in "# P passed, F failed".
#
# Usage: run_acceptance.sh [TEST_SOURCE.c ...]
#   With no arguments every test_*.c next to this script is used.
# Environment: APP_DIR (default /app), CC (default gcc).
# Exit status: 0 all passed, 1 some test failed, 2 the build failed.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
APP_DIR=${APP_DIR:-/app}
CC=${CC:-gcc}
CFLAGS="-std=c11 -O1 -Wall -Wextra -Wno-unused-parameter"

if [ "$#" -gt 0 ]; then
    tests=("$@")
else
    tests=("$HERE"/test_*.c)
fi

shopt -s nullglob
product=("$APP_DIR"/src/*.c)
shopt -u nullglob
if [ "${#product[@]}" -eq 0 ]; then
    echo "Bail out! no C sources found in $APP_DIR/src"
    exit 2
fi

build=$(mktemp -d "${TMPDIR:-/tmp}/b64-acceptance.XXXXXX") || { echo "Bail out! mktemp failed"; exit 2; }
trap 'rm -rf "$build"' EXIT

if ! "$CC" $CFLAGS -I"$APP_DIR/include" -I"$HERE" -o "$build/acceptance" \
        "${product[@]}" "${tests[@]}" >"$build/cc.log" 2>&1; then
    echo "Bail out! build failed"
    sed 's/^/# /' "$build/cc.log" | head -n 60
    exit 2
fi
sed 's/^/# cc: /' "$build/cc.log" | head -n 20

"$build/acceptance"
