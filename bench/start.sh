#!/usr/bin/env bash
# bench/start.sh - start-up benchmark: cbrun vs bwrap, runc, podman and a bare
# `unshare` floor. Times start-to-exit of `true` for every runtime in one run
# and prints median / p10 / p90 (ms) plus cbrun's median over each peer's.
#
# Usage: bench/start.sh [--runs N] [--podman-runs N] [--warmup N]
#                       [--cbrun PATH | --skip-cbrun] [--json OUT]
#                       [--no-install] [--rm-image] [--no-hyperfine] [-h|--help]
#
# Meant to run as root (CI, fresh Debian 12). Missing tools are installed with
# apt-get; a runtime that cannot run is reported "unavailable (reason)" and
# skipped. The script exits 0 whatever the floors say: it is a benchmark.
# See bench/README.md.

set -uo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(dirname "$BENCH_DIR")"
LIB="$BENCH_DIR/benchlib.py"

RUNS=200
PODMAN_RUNS=""
WARMUP=5
CBRUN=""
SKIP_CBRUN=0
JSON_OUT=""
NO_INSTALL=0
RM_IMAGE=0
NO_HYPERFINE=0

IMAGE_NAME="cbrun-bench-busybox"
IMAGE="localhost/$IMAGE_NAME"
PACKAGES=(bubblewrap runc podman hyperfine uidmap busybox-static)

usage() { sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die_usage() { echo "start.sh: $*" >&2; usage >&2; exit 2; }
is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

while [ $# -gt 0 ]; do
    case "$1" in
        --runs) [ $# -ge 2 ] || die_usage "--runs needs a value"; RUNS="$2"; shift 2 ;;
        --runs=*) RUNS="${1#*=}"; shift ;;
        --podman-runs) [ $# -ge 2 ] || die_usage "--podman-runs needs a value"; PODMAN_RUNS="$2"; shift 2 ;;
        --podman-runs=*) PODMAN_RUNS="${1#*=}"; shift ;;
        --warmup) [ $# -ge 2 ] || die_usage "--warmup needs a value"; WARMUP="$2"; shift 2 ;;
        --warmup=*) WARMUP="${1#*=}"; shift ;;
        --cbrun) [ $# -ge 2 ] || die_usage "--cbrun needs a path"; CBRUN="$2"; shift 2 ;;
        --cbrun=*) CBRUN="${1#*=}"; shift ;;
        --skip-cbrun) SKIP_CBRUN=1; shift ;;
        --json) [ $# -ge 2 ] || die_usage "--json needs a path"; JSON_OUT="$2"; shift 2 ;;
        --json=*) JSON_OUT="${1#*=}"; shift ;;
        --no-install) NO_INSTALL=1; shift ;;
        --rm-image) RM_IMAGE=1; shift ;;
        --no-hyperfine) NO_HYPERFINE=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die_usage "unknown argument: $1" ;;
    esac
done
if ! is_uint "$RUNS" || [ "$RUNS" -lt 2 ]; then die_usage "--runs must be an integer >= 2"; fi
is_uint "$WARMUP" || die_usage "--warmup must be a non-negative integer"
if [ -z "$PODMAN_RUNS" ]; then
    PODMAN_RUNS=$(( RUNS < 20 ? RUNS : 20 ))     # podman is slow: fewer runs
fi
if ! is_uint "$PODMAN_RUNS" || [ "$PODMAN_RUNS" -lt 2 ]; then die_usage "--podman-runs must be an integer >= 2"; fi
if [ -n "$JSON_OUT" ]; then
    case "$JSON_OUT" in /*) ;; *) JSON_OUT="$PWD/$JSON_OUT" ;; esac
fi

log()  { printf '%s\n' "$*"; }
warn() { printf 'WARN: %s\n' "$*"; }

# ----------------------------------------------------------------------------
# temp dir + cleanup
# ----------------------------------------------------------------------------
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cbrun-bench.XXXXXX")" || { echo "start.sh: mktemp failed" >&2; exit 1; }
RUNC_STATE=""
RUNC_BIN=""
MEASURE_PID=""
RUNC_ID_PREFIX="cbrun-bench-${WORK##*.}-"   # unique per invocation

# shellcheck disable=SC2317  # invoked via trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$MEASURE_PID" ] && kill -0 "$MEASURE_PID" 2>/dev/null; then
        kill -TERM "$MEASURE_PID" 2>/dev/null
        wait "$MEASURE_PID" 2>/dev/null
        log ""
        log "interrupted: stopped the measurement in progress"
    fi
    if [ -n "$RUNC_STATE" ] && [ -d "$RUNC_STATE" ]; then
        if [ -n "$RUNC_BIN" ]; then
            local id
            for id in $("$RUNC_BIN" --root "$RUNC_STATE" list -q 2>/dev/null); do
                "$RUNC_BIN" --root "$RUNC_STATE" delete -f "$id" >/dev/null 2>&1 || true
            done
        fi
        rm -rf "$RUNC_STATE"
        # A runc killed mid-create (interrupt) can leave empty cgroup dirs
        # named after its container id; remove ours (rmdir: only if empty).
        local cg
        for cg in /sys/fs/cgroup/"$RUNC_ID_PREFIX"* /sys/fs/cgroup/*/"$RUNC_ID_PREFIX"*; do
            [ -d "$cg" ] && rmdir "$cg" 2>/dev/null
        done
    fi
    rm -rf "$WORK"
    if [ "$RM_IMAGE" = 1 ] && command -v podman >/dev/null 2>&1; then
        podman rmi -f "$IMAGE" >/dev/null 2>&1 && log "cleanup: removed podman image $IMAGE"
    fi
    log "cleanup: removed $WORK${RUNC_STATE:+ and $RUNC_STATE}"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ----------------------------------------------------------------------------
# packages
# ----------------------------------------------------------------------------
pkg_installed() {
    # (no `dpkg -s | grep -q` pipe: with pipefail, grep's early exit gives
    # dpkg SIGPIPE on long package descriptions and a false "missing")
    local status
    status="$(dpkg -s "$1" 2>/dev/null)" || return 1
    [[ "$status" == *$'\nStatus: install ok installed'* ]]
}

ensure_packages() {
    local want=("${PACKAGES[@]}") missing=() p
    command -v python3 >/dev/null 2>&1 || want+=(python3)
    if ! command -v dpkg >/dev/null 2>&1; then
        warn "dpkg not found (not Debian?): not installing anything"
        return 0
    fi
    for p in "${want[@]}"; do
        pkg_installed "$p" || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        log "packages: all present (${want[*]})"
        return 0
    fi
    if [ "$NO_INSTALL" = 1 ]; then
        warn "missing packages, not installing (--no-install): ${missing[*]}"
        return 0
    fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        warn "missing packages but not root / no apt-get, cannot install: ${missing[*]}"
        return 0
    fi
    log "packages: installing ${missing[*]} ..."
    local aptlog="$WORK/apt.log"
    export DEBIAN_FRONTEND=noninteractive
    local install=(apt-get install -y --no-install-recommends -o Dpkg::Use-Pty=0)
    if ! "${install[@]}" "${missing[@]}" >>"$aptlog" 2>&1; then
        # Package lists missing or stale (fresh machine): update once, retry.
        log "packages: running apt-get update ..."
        apt-get update >>"$aptlog" 2>&1 || warn "apt-get update failed"
        if ! "${install[@]}" "${missing[@]}" >>"$aptlog" 2>&1; then
            warn "batch install failed; trying packages one by one"
            for p in "${missing[@]}"; do
                "${install[@]}" "$p" >>"$aptlog" 2>&1 || {
                    warn "could not install $p: $(grep -E '^E:' "$aptlog" | tail -n 1)"
                }
            done
        fi
    fi
    for p in "${missing[@]}"; do
        pkg_installed "$p" || warn "package $p still missing"
    done
}

ensure_packages

if ! command -v python3 >/dev/null 2>&1; then
    echo "start.sh: python3 is required (statistics, JSON) and could not be installed" >&2
    exit 1
fi

HYPERFINE="$(command -v hyperfine 2>/dev/null || true)"
[ "$NO_HYPERFINE" = 1 ] && HYPERFINE=""
BWRAP="$(command -v bwrap 2>/dev/null || true)"
RUNC_BIN="$(command -v runc 2>/dev/null || true)"
PODMAN="$(command -v podman 2>/dev/null || true)"
UNSHARE="$(command -v unshare 2>/dev/null || true)"
BUSYBOX=""
for b in /bin/busybox /usr/bin/busybox; do
    [ -x "$b" ] && { BUSYBOX="$b"; break; }
done

# ----------------------------------------------------------------------------
# cbrun binary
# ----------------------------------------------------------------------------
STANDIN=0
if [ -z "$CBRUN" ] && [ "$SKIP_CBRUN" = 0 ]; then
    # The deployment build: static and non-PIE, so no process cbrun starts
    # or forks pays for dynamic loading and relocation.
    log "building the static release binary (bench/build-static.sh)"
    CBRUN="$("$REPO_ROOT/bench/build-static.sh")" || { echo "start.sh: static build failed" >&2; exit 1; }
elif [ -n "$CBRUN" ]; then
    case "$CBRUN" in
        */*) case "$CBRUN" in /*) ;; *) CBRUN="$PWD/$CBRUN" ;; esac ;;
        *) CBRUN="$(command -v "$CBRUN" 2>/dev/null || echo "$PWD/$CBRUN")" ;;
    esac
fi
case "$(basename "$CBRUN")" in cbrun) ;; *) STANDIN=1 ;; esac
# Time an installed copy, as users run it (cargo install, a package, cp):
# the linker's own output sits in the page cache in small pages, which
# makes every exec and fork of it measurably slower (about 0.25 ms per
# start here) than the same bytes written by a copy.
if [ "$SKIP_CBRUN" = 0 ] && [ -x "$CBRUN" ]; then
    mkdir -p "$WORK/bin"
    install -m 0755 "$CBRUN" "$WORK/bin/cbrun" && CBRUN="$WORK/bin/cbrun"
fi

# ----------------------------------------------------------------------------
# host info
# ----------------------------------------------------------------------------
log ""
log "== cbrun start-up benchmark =="
CBRUN_TOOL="cbrun="
[ "$SKIP_CBRUN" = 0 ] && [ -x "$CBRUN" ] && CBRUN_TOOL="cbrun=$CBRUN"
python3 "$LIB" hostinfo --print --out "$WORK/host.json" \
    --tool "$CBRUN_TOOL" --tool "bwrap=$BWRAP" --tool "runc=$RUNC_BIN" \
    --tool "podman=$PODMAN" --tool "unshare=$UNSHARE" --tool "hyperfine=$HYPERFINE" \
    --tool "busybox=$BUSYBOX"
if [ -n "$HYPERFINE" ]; then
    log "timing: hyperfine -N (no intermediate shell), $RUNS runs + $WARMUP warm-up each (podman: $PODMAN_RUNS runs)"
else
    log "timing: hyperfine not available -> python3 loop (perf_counter_ns around subprocess.run), $RUNS runs + $WARMUP warm-up each (podman: $PODMAN_RUNS runs)"
fi

# ----------------------------------------------------------------------------
# prepare peers
# ----------------------------------------------------------------------------
# busybox-static rootfs shared by runc and podman.
ROOTFS_OK=""
BUNDLE="$WORK/runc-bundle"
make_rootfs() {
    [ -n "$BUSYBOX" ] || { ROOTFS_OK="busybox-static not installed"; return; }
    local why
    if ! why="$(python3 "$LIB" is-static "$BUSYBOX")"; then
        ROOTFS_OK="$BUSYBOX: $why (need busybox-static)"; return
    fi
    mkdir -p "$BUNDLE/rootfs/bin" "$BUNDLE/rootfs/proc" "$BUNDLE/rootfs/dev" \
             "$BUNDLE/rootfs/sys" "$BUNDLE/rootfs/tmp" "$BUNDLE/rootfs/etc" || { ROOTFS_OK="mkdir failed"; return; }
    cp "$BUSYBOX" "$BUNDLE/rootfs/bin/busybox" || { ROOTFS_OK="copying busybox failed"; return; }
    ln -s busybox "$BUNDLE/rootfs/bin/true"
    ln -s busybox "$BUNDLE/rootfs/bin/sh"
    ROOTFS_OK=ok
}
make_rootfs
[ "$ROOTFS_OK" = ok ] || warn "busybox rootfs: $ROOTFS_OK"

# --- runc bundle ---
RUNC_WHY=""
if [ -z "$RUNC_BIN" ]; then
    RUNC_WHY="runc not installed"
elif [ "$ROOTFS_OK" != ok ]; then
    RUNC_WHY="no rootfs: $ROOTFS_OK"
elif ! "$RUNC_BIN" spec --bundle "$BUNDLE" >"$WORK/runc-spec.log" 2>&1; then
    RUNC_WHY="runc spec failed: $(tail -n 1 "$WORK/runc-spec.log")"
elif ! python3 "$LIB" edit-spec "$BUNDLE/config.json" >"$WORK/runc-spec.log" 2>&1; then
    RUNC_WHY="editing config.json failed: $(tail -n 1 "$WORK/runc-spec.log")"
else
    # Private runc state dir (tmpfs /run like runc's default /run/runc), so
    # nothing is left in the host's runc state and cleanup is total.
    RUNC_STATE="$(mktemp -d /run/cbrun-bench-runc.XXXXXX 2>/dev/null || true)"
    if [ -z "$RUNC_STATE" ]; then RUNC_STATE="$WORK/runc-state"; mkdir -p "$RUNC_STATE"; fi
fi

# --- podman image (imported from the same rootfs; no registry access) ---
PODMAN_WHY=""
PODMAN_NOTE=""
PODMAN_ARGS=()
if [ -z "$PODMAN" ]; then
    PODMAN_WHY="podman not installed"
elif [ "$ROOTFS_OK" != ok ]; then
    PODMAN_WHY="no rootfs: $ROOTFS_OK"
else
    if "$PODMAN" image exists "$IMAGE" >/dev/null 2>&1; then
        log "podman: reusing cached image $IMAGE"
    elif tar -C "$BUNDLE/rootfs" -c . 2>"$WORK/podman-import.log" | \
            "$PODMAN" import - "$IMAGE_NAME" >>"$WORK/podman-import.log" 2>&1; then
        log "podman: imported $IMAGE from the busybox rootfs"
    else
        PODMAN_WHY="podman import failed: $(grep -v '^$' "$WORK/podman-import.log" | tail -n 1)"
    fi
    PODMAN_ARGS=("$PODMAN" run --rm --pull=never --network none --runtime runc --ulimit nofile=1024:1024)
    if [ -z "$PODMAN_WHY" ]; then
        # Probe once. Without CAP_SYS_RESOURCE (some CI sandboxes), podman's
        # default RLIMIT_NPROC (1048576) can exceed conmon's hard limit and
        # runc fails "error setting rlimit type 6"; then lower nproc and retry.
        if ! timeout 180 "${PODMAN_ARGS[@]}" "$IMAGE" true >/dev/null 2>"$WORK/podman-probe.log"; then
            if grep -qi 'rlimit' "$WORK/podman-probe.log"; then
                PODMAN_ARGS+=(--ulimit nproc=1024:1024)
                PODMAN_NOTE="added --ulimit nproc=1024:1024: podman's default RLIMIT_NPROC is above this host's hard limit (no CAP_SYS_RESOURCE)"
                log "podman: $PODMAN_NOTE"
            fi
        fi
    fi
fi

# --- bwrap: mirror the host's /bin, /lib* layout (merged-/usr => symlinks) ---
BWRAP_ARGS=("$BWRAP" --unshare-all --die-with-parent --ro-bind /usr /usr)
for d in bin lib lib64 sbin lib32 libx32; do
    if [ -L "/$d" ]; then
        BWRAP_ARGS+=(--symlink "$(readlink "/$d")" "/$d")
    elif [ -d "/$d" ]; then
        BWRAP_ARGS+=(--ro-bind "/$d" "/$d")
    fi
done
BWRAP_ARGS+=(--proc /proc --dev /dev --tmpfs /tmp true)

# ----------------------------------------------------------------------------
# measure
# ----------------------------------------------------------------------------
log ""
log "== measuring =="
RESULTS=()
measure() {   # measure NAME RUNS UNAVAILABLE_REASON NOTE -- ARGV...
    local name="$1" runs="$2" why="$3" note="$4"; shift 5
    local out="$WORK/result-$name.json"
    # Run in the background + wait, so that a signal to this script runs the
    # cleanup trap at once (which stops the helper and its children).
    python3 "$LIB" measure --name "$name" --runs "$runs" --warmup "$WARMUP" \
        --out "$out" --log "$WORK/hyperfine-$name.log" \
        --hyperfine "$HYPERFINE" --unavailable "$why" --note "$note" -- "$@" &
    MEASURE_PID=$!
    wait "$MEASURE_PID"
    MEASURE_PID=""
    if [ -f "$out" ]; then
        RESULTS+=(--result "$out")
    else
        warn "$name: measurement helper crashed; skipping"
    fi
}

# 1. cbrun
CB_WHY=""
if [ "$SKIP_CBRUN" = 1 ]; then
    CB_WHY="skipped (--skip-cbrun)"
elif [ ! -x "$CBRUN" ]; then
    CB_WHY="binary not found at $CBRUN (run: cargo build --release)"
fi
CB_NOTE=""
[ "$STANDIN" = 1 ] && [ -z "$CB_WHY" ] && CB_NOTE="stand-in binary, not a real cbrun build"
measure cbrun "$RUNS" "$CB_WHY" "$CB_NOTE" -- "$CBRUN" sandbox run --memory 256M --pids 256 -- true

# 2. bwrap
measure bwrap "$RUNS" "$([ -z "$BWRAP" ] && echo "bwrap not installed")" "" -- "${BWRAP_ARGS[@]}"

# 3. runc ({i} -> unique container id per run; `runc run` without -d deletes
#    the container on exit, so no cleanup lands inside or between timed runs)
measure runc "$RUNS" "$RUNC_WHY" "unique container id per run; busybox-static rootfs, readonly root" -- \
    "$RUNC_BIN" --root "$RUNC_STATE" run --bundle "$BUNDLE" "${RUNC_ID_PREFIX}{i}"

# 4. podman
measure podman "$PODMAN_RUNS" "$PODMAN_WHY" "$PODMAN_NOTE" -- "${PODMAN_ARGS[@]}" "$IMAGE" true

# 5. unshare floor
measure unshare "$RUNS" "$([ -z "$UNSHARE" ] && echo "unshare not installed")" "floor: namespaces only" -- \
    "$UNSHARE" -Urnmpif --mount-proc true

# ----------------------------------------------------------------------------
# report
# ----------------------------------------------------------------------------
REPORT_ARGS=(--host "$WORK/host.json" "${RESULTS[@]}")
[ -n "$JSON_OUT" ] && REPORT_ARGS+=(--json "$JSON_OUT")
[ "$STANDIN" = 1 ] && [ -z "$CB_WHY" ] && REPORT_ARGS+=(--standin)
python3 "$LIB" report "${REPORT_ARGS[@]}" || warn "report failed"

log ""
if [ -n "$PODMAN" ] && [ "$RM_IMAGE" = 0 ] && "$PODMAN" image exists "$IMAGE" >/dev/null 2>&1; then
    log "note: podman image $IMAGE stays cached (remove: podman rmi $IMAGE, or pass --rm-image)"
fi
exit 0
