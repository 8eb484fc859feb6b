#!/usr/bin/env bash
# bench/image.sh - image benchmark: how fast cbrun unpacks a multi-layer OCI
# image (against GNU tar and umoci, same layers, same filesystem, same run)
# and what starting a sandbox from an image costs over starting it from a
# plain directory holding the same root.
#
# Usage: bench/image.sh [--runs N] [--warmup N] [--start-runs N] [--start-rounds N]
#                       [--compression none|gzip|both] [--as self|nobody|both]
#                       [--uid N] [--dir DIR] [--cbrun PATH] [--skip-start] [--json OUT]
#                       [--no-install] [--keep] [-h|--help]
#
# Meant to run as root on a fresh Debian 12 machine (CI kind, offline): the
# image is made from the host's own files, missing tools are installed with
# apt-get. Exits 0 whatever the floors say: it is a benchmark, not a test.
# See bench/README.md.

set -uo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(dirname "$BENCH_DIR")"
LIB="$BENCH_DIR/benchlib.py"

RUNS=5
WARMUP=1
START_RUNS=200
START_WARMUP=10
START_ROUNDS=4
COMPRESSION=both
AS=""
BASE_DIR=""
CBRUN=""
SKIP_START=0
JSON_OUT=""
NO_INSTALL=0
KEEP=0
NOBODY_UID=65534

PACKAGES=(umoci hyperfine busybox-static tar gzip util-linux)

usage() { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die_usage() { echo "image.sh: $*" >&2; usage >&2; exit 2; }
is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

while [ $# -gt 0 ]; do
    case "$1" in
        --runs) [ $# -ge 2 ] || die_usage "--runs needs a value"; RUNS="$2"; shift 2 ;;
        --runs=*) RUNS="${1#*=}"; shift ;;
        --warmup) [ $# -ge 2 ] || die_usage "--warmup needs a value"; WARMUP="$2"; shift 2 ;;
        --warmup=*) WARMUP="${1#*=}"; shift ;;
        --start-runs) [ $# -ge 2 ] || die_usage "--start-runs needs a value"; START_RUNS="$2"; shift 2 ;;
        --start-runs=*) START_RUNS="${1#*=}"; shift ;;
        --start-rounds) [ $# -ge 2 ] || die_usage "--start-rounds needs a value"; START_ROUNDS="$2"; shift 2 ;;
        --start-rounds=*) START_ROUNDS="${1#*=}"; shift ;;
        --compression) [ $# -ge 2 ] || die_usage "--compression needs a value"; COMPRESSION="$2"; shift 2 ;;
        --compression=*) COMPRESSION="${1#*=}"; shift ;;
        --as) [ $# -ge 2 ] || die_usage "--as needs a value"; AS="$2"; shift 2 ;;
        --as=*) AS="${1#*=}"; shift ;;
        --uid) [ $# -ge 2 ] || die_usage "--uid needs a value"; NOBODY_UID="$2"; shift 2 ;;
        --uid=*) NOBODY_UID="${1#*=}"; shift ;;
        --dir) [ $# -ge 2 ] || die_usage "--dir needs a path"; BASE_DIR="$2"; shift 2 ;;
        --dir=*) BASE_DIR="${1#*=}"; shift ;;
        --cbrun) [ $# -ge 2 ] || die_usage "--cbrun needs a path"; CBRUN="$2"; shift 2 ;;
        --cbrun=*) CBRUN="${1#*=}"; shift ;;
        --skip-start) SKIP_START=1; shift ;;
        --json) [ $# -ge 2 ] || die_usage "--json needs a path"; JSON_OUT="$2"; shift 2 ;;
        --json=*) JSON_OUT="${1#*=}"; shift ;;
        --no-install) NO_INSTALL=1; shift ;;
        --keep) KEEP=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die_usage "unknown argument: $1" ;;
    esac
done
if ! is_uint "$RUNS" || [ "$RUNS" -lt 1 ]; then die_usage "--runs must be an integer >= 1"; fi
if ! is_uint "$NOBODY_UID" || [ "$NOBODY_UID" = 0 ]; then die_usage "--uid must be a non-zero uid"; fi
is_uint "$WARMUP" || die_usage "--warmup must be a non-negative integer"
if ! is_uint "$START_RUNS" || [ "$START_RUNS" -lt 2 ]; then die_usage "--start-runs must be an integer >= 2"; fi
if ! is_uint "$START_ROUNDS" || [ "$START_ROUNDS" -lt 1 ]; then die_usage "--start-rounds must be an integer >= 1"; fi
case "$COMPRESSION" in none) COMPS=(none) ;; gzip) COMPS=(gzip) ;; both) COMPS=(none gzip) ;;
    *) die_usage "--compression must be none, gzip or both" ;; esac
MY_UID="$(id -u)"
if [ -z "$AS" ]; then
    if [ "$MY_UID" = 0 ]; then AS=both; else AS=self; fi
fi
case "$AS" in self) USERS=(self) ;; nobody) USERS=(nobody) ;; both) USERS=(self nobody) ;;
    *) die_usage "--as must be self, nobody or both" ;; esac
if [ "$MY_UID" != 0 ] && [ "$AS" != self ]; then
    die_usage "--as $AS needs root (it runs the tools as uid $NOBODY_UID through setpriv)"
fi
if [ -n "$JSON_OUT" ]; then
    case "$JSON_OUT" in /*) ;; *) JSON_OUT="$PWD/$JSON_OUT" ;; esac
fi
if [ -z "$BASE_DIR" ]; then
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then BASE_DIR=/dev/shm; else BASE_DIR="${TMPDIR:-/tmp}"; fi
fi
[ -d "$BASE_DIR" ] || die_usage "--dir $BASE_DIR: not a directory"

log()  { printf '%s\n' "$*"; }
warn() { printf 'WARN: %s\n' "$*"; }

# ----------------------------------------------------------------------------
# work dir + cleanup
# ----------------------------------------------------------------------------
WORK="$(mktemp -d "$BASE_DIR/cbrun-image-bench.XXXXXX")" || { echo "image.sh: mktemp in $BASE_DIR failed" >&2; exit 1; }
chmod 755 "$WORK"      # uid 65534 must reach its own dirs, the layouts and the binary
STATE_BASE=""
CHILD_PID=""
PY="$WORK/imagebench.py"

# shellcheck disable=SC2317  # invoked via trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$CHILD_PID" ] && kill -0 "$CHILD_PID" 2>/dev/null; then
        kill -TERM "$CHILD_PID" 2>/dev/null
        wait "$CHILD_PID" 2>/dev/null
        log ""
        log "interrupted: stopped the measurement in progress"
    fi
    if [ "$KEEP" = 1 ]; then
        log "kept: $WORK${STATE_BASE:+ and $STATE_BASE}"
    else
        # Read-only directories (from the layers) would stop a non-root rm.
        rm -rf "$WORK" 2>/dev/null || { chmod -R u+rwX "$WORK" 2>/dev/null; rm -rf "$WORK"; }
        [ -n "$STATE_BASE" ] && rm -rf "$STATE_BASE"
        log "cleanup: removed $WORK${STATE_BASE:+ and $STATE_BASE}"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Run a child in the background and wait, so that a signal to this script
# runs the trap at once (and the trap stops the child).
run_child() {
    "$@" &
    CHILD_PID=$!
    wait "$CHILD_PID"
    local rc=$?
    CHILD_PID=""
    return "$rc"
}

# ----------------------------------------------------------------------------
# packages
# ----------------------------------------------------------------------------
pkg_installed() {
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
    if [ "$MY_UID" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        warn "missing packages but not root / no apt-get, cannot install: ${missing[*]}"
        return 0
    fi
    log "packages: installing ${missing[*]} ..."
    local aptlog="$WORK/apt.log"
    export DEBIAN_FRONTEND=noninteractive
    local install=(apt-get install -y --no-install-recommends -o Dpkg::Use-Pty=0)
    if ! "${install[@]}" "${missing[@]}" >>"$aptlog" 2>&1; then
        log "packages: running apt-get update ..."
        apt-get update >>"$aptlog" 2>&1 || warn "apt-get update failed"
        if ! "${install[@]}" "${missing[@]}" >>"$aptlog" 2>&1; then
            warn "batch install failed; trying packages one by one"
            for p in "${missing[@]}"; do
                "${install[@]}" "$p" >>"$aptlog" 2>&1 || warn "could not install $p: $(grep -E '^E:' "$aptlog" | tail -n 1)"
            done
        fi
    fi
    for p in "${missing[@]}"; do
        pkg_installed "$p" || warn "package $p still missing"
    done
}

ensure_packages
command -v python3 >/dev/null 2>&1 || { echo "image.sh: python3 is required and could not be installed" >&2; exit 1; }
command -v tar >/dev/null 2>&1 || { echo "image.sh: tar is required" >&2; exit 1; }
command -v gzip >/dev/null 2>&1 || { echo "image.sh: gzip is required" >&2; exit 1; }
HYPERFINE="$(command -v hyperfine 2>/dev/null || true)"
UMOCI="$(command -v umoci 2>/dev/null || true)"
SETPRIV="$(command -v setpriv 2>/dev/null || true)"
TAR="$(command -v tar)"
GZIP_BIN="$(command -v gzip)"
if [ "${USERS[*]}" != self ] && [ -z "$SETPRIV" ]; then
    warn "setpriv not found: measuring as the current user only"
    USERS=(self)
fi

# ----------------------------------------------------------------------------
# cbrun binary: a private copy, so a rebuild during the run changes nothing
# ----------------------------------------------------------------------------
if [ -z "$CBRUN" ]; then
    CBRUN="$REPO_ROOT/target/release/cbrun"
    [ -x "$CBRUN" ] || { echo "image.sh: no $CBRUN: build it first (cargo build --release) or pass --cbrun PATH" >&2; exit 1; }
fi
case "$CBRUN" in */*) ;; *) CBRUN="$(command -v "$CBRUN" 2>/dev/null || echo "$CBRUN")" ;; esac
[ -x "$CBRUN" ] || { echo "image.sh: --cbrun $CBRUN is not executable" >&2; exit 1; }
mkdir -p "$WORK/bin"
if ! cp "$CBRUN" "$WORK/bin/cbrun" || ! chmod 755 "$WORK/bin/cbrun"; then
    echo "image.sh: copying $CBRUN failed" >&2; exit 1
fi
CB="$WORK/bin/cbrun"

# Per-run state of sandboxes: a private memory-backed dir (isolated from
# other cbrun users of the machine), as cbrun's default one is.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    STATE_BASE="$(mktemp -d /dev/shm/cbrun-image-bench-state.XXXXXX)" && chmod 755 "$STATE_BASE"
fi

# ----------------------------------------------------------------------------
# the Python helper (statistics, layout writing, timing loop, report)
# ----------------------------------------------------------------------------
cat >"$PY" <<'PYEOF'
import hashlib, json, os, shlex, shutil, statistics, subprocess, sys, time

def write_json(path, obj):
    with open(path + ".tmp", "w") as fh:
        json.dump(obj, fh, indent=2)
        fh.write("\n")
    os.replace(path + ".tmp", path)

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

def mklayout(args):
    """mklayout OUT TAG none|gzip TAR... -> OCI layout; prints the layer blob paths."""
    out, tag, comp, tars = args[0], args[1], args[2], args[3:]
    blobs = os.path.join(out, "blobs", "sha256")
    os.makedirs(blobs)
    def put_bytes(data):
        d = hashlib.sha256(data).hexdigest()
        with open(os.path.join(blobs, d), "wb") as fh:
            fh.write(data)
        return d, len(data)
    layers, diff_ids, paths = [], [], []
    for t in tars:
        diff = sha256_file(t)
        diff_ids.append("sha256:" + diff)
        if comp == "gzip":
            src = t + ".gz"          # made by the shell script (gzip -6 -n)
            mt = "application/vnd.oci.image.layer.v1.tar+gzip"
            d = sha256_file(src)
        else:
            src, mt, d = t, "application/vnd.oci.image.layer.v1.tar", diff
        dst = os.path.join(blobs, d)
        os.replace(src, dst)
        layers.append({"mediaType": mt, "digest": "sha256:" + d, "size": os.path.getsize(dst)})
        paths.append(dst)
    cfg = {"architecture": "amd64" if os.uname().machine == "x86_64" else
           {"aarch64": "arm64"}.get(os.uname().machine, os.uname().machine),
           "os": "linux", "created": "2026-01-01T00:00:00Z",
           "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
           "rootfs": {"type": "layers", "diff_ids": diff_ids},
           "history": [{"created": "2026-01-01T00:00:00Z", "created_by": "bench/image.sh layer %d" % (i + 1)}
                       for i in range(len(tars))]}
    cd, cs = put_bytes(json.dumps(cfg).encode())
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + cd, "size": cs},
           "layers": layers}
    md, ms = put_bytes(json.dumps(man).encode())
    write_json(os.path.join(out, "index.json"), {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + md,
                       "size": ms, "annotations": {"org.opencontainers.image.ref.name": tag},
                       "platform": {"architecture": cfg["architecture"], "os": "linux"}}]})
    with open(os.path.join(out, "oci-layout"), "w") as fh:
        fh.write('{"imageLayoutVersion":"1.0.0"}')
    for p in paths:
        print(p)

def tarstats(args):
    """tarstats TAR...: entries, regular files, dirs, symlinks, data bytes, tar bytes."""
    import tarfile
    st = {"entries": 0, "files": 0, "dirs": 0, "symlinks": 0, "hardlinks": 0, "data_bytes": 0, "tar_bytes": 0}
    for t in args:
        st["tar_bytes"] += os.path.getsize(t)
        with tarfile.open(t) as tf:
            for m in tf:
                st["entries"] += 1
                if m.isreg(): st["files"] += 1; st["data_bytes"] += m.size
                elif m.isdir(): st["dirs"] += 1
                elif m.issym(): st["symlinks"] += 1
                elif m.islnk(): st["hardlinks"] += 1
    print(json.dumps(st))

def tree(path):
    n = nbytes = 0
    for root, dirs, files in os.walk(path):
        n += len(dirs) + len(files)
        for f in files:
            st = os.lstat(os.path.join(root, f))
            if not os.path.islink(os.path.join(root, f)):
                nbytes += st.st_size
    return n, nbytes

def rmtree(path):
    if not os.path.lexists(path):
        return
    try:
        shutil.rmtree(path)
    except PermissionError:
        subprocess.run(["chmod", "-R", "u+rwX", path], check=False)
        shutil.rmtree(path)

def clear_dir(path):
    if os.path.isdir(path):
        for e in os.listdir(path):
            rmtree(os.path.join(path, e))

def unpackcfg(args):
    """unpackcfg OUT KEY=VALUE...: the config of `unpack` (layers, runas: space-separated)."""
    cfg = dict(a.split("=", 1) for a in args[1:])
    cfg["layers"] = cfg["layers"].split()
    cfg["runas"] = cfg["runas"].split()
    cfg["owner"] = [int(cfg["owner"])] * 2 if cfg["owner"] else None
    cfg["runs"] = int(cfg["runs"]); cfg["warmup"] = int(cfg["warmup"])
    write_json(args[0], cfg)

def unpack(args):
    """unpack CONFIG.json -> times the three unpackers, round-robin."""
    cfg = json.load(open(args[0]))
    runas = cfg["runas"]            # argv prefix (setpriv ...) or []
    work, home, tag = cfg["work"], cfg["home"], cfg["tag"]
    owner = cfg.get("owner")        # [uid, gid] for the dirs made before runs
    tar_dir = os.path.join(work, "tar-out")
    bundle = os.path.join(work, "umoci-bundle")
    gz = cfg["compression"] == "gzip"
    tar_script = " && ".join("%s -x%sf %s -C %s" % (shlex.quote(cfg["tar"]), "z" if gz else "",
                                                     shlex.quote(l), shlex.quote(tar_dir))
                             for l in cfg["layers"])
    tools = {
        "cbrun": {"argv": runas + ["env", "CBRUN_HOME=" + home, cfg["cbrun"], "image", "unpack", tag],
                  "out": None},
        "tar": {"argv": runas + ["sh", "-c", tar_script], "out": tar_dir},
        "umoci": {"argv": runas + [cfg["umoci"], "unpack", "--rootless", "--image", cfg["layout"] + ":" + cfg["ref"], bundle],
                  "out": os.path.join(bundle, "rootfs")},
    }
    if not cfg["umoci"]:
        tools["umoci"]["unavailable"] = "umoci not installed"
    def prepare(name):
        clear_dir(os.path.join(home, "rootfs"))
        clear_dir(os.path.join(home, "tmp"))
        rmtree(tar_dir); rmtree(bundle)
        if name == "tar":
            os.mkdir(tar_dir)
            if owner: os.chown(tar_dir, owner[0], owner[1])
        os.sync()
    def cbrun_out():
        d = os.path.join(home, "rootfs")
        xs = [os.path.join(d, x) for x in os.listdir(d)] if os.path.isdir(d) else []
        return xs[0] if len(xs) == 1 else None
    names = list(tools)
    res = {n: {"times_s": [], "status": "ok", "reason": tools[n].get("unavailable", ""),
               "cmdline": shlex.join(tools[n]["argv"])} for n in names}
    for n in names:
        if res[n]["reason"]: res[n]["status"] = "unavailable"
    total = cfg["warmup"] + cfg["runs"]
    for rep in range(total):
        order = names[rep % 3:] + names[:rep % 3]   # rotate: no tool always first
        for n in order:
            if res[n]["status"] != "ok": continue
            for attempt in (1, 2):
                prepare(n)
                t0 = time.perf_counter()
                p = subprocess.run(tools[n]["argv"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
                dt = time.perf_counter() - t0
                if p.returncode == 0:
                    break
                # One retry: a process of this uid can be killed by someone
                # else's cleanup on a shared machine; a second failure counts.
                res[n]["retries"] = res[n].get("retries", 0) + 1
                print("    %-6s exit %d, retrying once: %s" % (n, p.returncode,
                      p.stderr.decode(errors="replace").strip()[-200:]), flush=True)
            if p.returncode != 0:
                err = p.stderr.decode(errors="replace").strip().splitlines()
                res[n]["status"] = "unavailable"
                res[n]["reason"] = "exit %d: %s" % (p.returncode, err[-1][:200] if err else "")
                print("    %-6s FAILED (%s)" % (n, res[n]["reason"]), flush=True)
                continue
            if rep < cfg["warmup"]:
                # Warm-up round: also check that every tool produced the same tree.
                out = cbrun_out() if n == "cbrun" else tools[n]["out"]
                if out and os.path.isdir(out):
                    res[n]["tree_entries"], res[n]["tree_bytes"] = tree(out)
                print("    %-6s warm-up %.2fs  (%s entries, %s bytes)" % (
                    n, dt, res[n].get("tree_entries", "?"), res[n].get("tree_bytes", "?")), flush=True)
            else:
                res[n]["times_s"].append(dt)
        if rep >= cfg["warmup"]:
            print("    run %d/%d: %s" % (rep - cfg["warmup"] + 1, cfg["runs"], "  ".join(
                "%s %.2fs" % (n, res[n]["times_s"][-1]) for n in names if res[n]["status"] == "ok")), flush=True)
    trees = {(res[n]["tree_entries"], res[n]["tree_bytes"]) for n in names if "tree_entries" in res[n]}
    if len(trees) > 1:
        print("    WARN: the tools' output trees differ (entries, bytes): %s" % ", ".join(
            "%s %s" % (n, (res[n].get("tree_entries"), res[n].get("tree_bytes"))) for n in names), flush=True)
    prepare("none")
    for n in names:
        if res[n]["status"] == "ok" and res[n]["times_s"]:
            res[n]["median_s"] = statistics.median(res[n]["times_s"])
            res[n]["min_s"] = min(res[n]["times_s"]); res[n]["max_s"] = max(res[n]["times_s"])
    write_json(cfg["out"], {"user": cfg["user_label"], "compression": cfg["compression"],
                            "runs": cfg["runs"], "warmup": cfg["warmup"], "tools": res})

def start(args):
    """start OUT|- LABEL HYPERFINE.json...: pool the blocks; print the medians (OUT '-': print only)."""
    out_path, label, files = args[0], args[1], args[2:]
    pooled = {}
    for f in files:
        for r in json.load(open(f))["results"]:
            pooled.setdefault(r["command"], []).extend(t * 1000 for t in r["times"])
    out = {"user": label, "results": {}, "blocks": len(files)}
    for name, xs in pooled.items():
        xs.sort()
        out["results"][name] = {"median_ms": statistics.median(xs), "mean_ms": statistics.fmean(xs),
                                "p10_ms": xs[len(xs) // 10], "p90_ms": xs[(len(xs) * 9) // 10], "n": len(xs)}
    r = out["results"]
    if "image" in r and "rootfs" in r:
        print("image %.2f ms, rootfs %.2f ms (medians, %d runs each): image - rootfs = %+.2f ms" % (
            r["image"]["median_ms"], r["rootfs"]["median_ms"], r["image"]["n"],
            r["image"]["median_ms"] - r["rootfs"]["median_ms"]))
    if out_path != "-":
        write_json(out_path, out)

def report(args):
    """report HOST.json LAYERS.json JSON_OUT|'' RESULT..."""
    host = json.load(open(args[0])); layers = json.load(open(args[1])); json_out = args[2]
    unp, st = [], []
    for p in args[3:]:
        d = json.load(open(p))
        (unp if "tools" in d else st).append(d)
    mb = layers["tar_bytes"] / 1e6
    print()
    print("== image: %d layers, %d entries (%d files, %d dirs, %d symlinks), %.1f MB of layer tar (%.1f MB of file data); gzip'd: %.1f MB ==" % (
        layers["layers"], layers["entries"], layers["files"], layers["dirs"], layers["symlinks"],
        mb, layers["data_bytes"] / 1e6, layers.get("gz_bytes", 0) / 1e6))
    print()
    print("== unpack (median of the timed runs; MB/s = uncompressed layer tar MB / median s; ratios are throughput cbrun/peer) ==")
    print("%-8s %-5s %-6s %9s %9s %9s %9s  %s" % ("as", "comp", "tool", "median_s", "min_s", "max_s", "MB/s", "cbrun/peer"))
    floors = []
    for d in unp:
        t = d["tools"]
        cb = t.get("cbrun", {})
        for n in ("cbrun", "tar", "umoci"):
            r = t.get(n)
            if r is None: continue
            if r["status"] != "ok" or "median_s" not in r:
                print("%-8s %-5s %-6s unavailable (%s)" % (d["user"], d["compression"], n, r.get("reason", "")))
                continue
            ratio = "-"
            if n != "cbrun" and "median_s" in cb:
                q = r["median_s"] / cb["median_s"]
                r["cbrun_over_peer_throughput"] = q
                ratio = "%.2fx" % q
            print("%-8s %-5s %-6s %9.3f %9.3f %9.3f %9.0f  %s" % (d["user"], d["compression"], n, r["median_s"],
                  r["min_s"], r["max_s"], mb / r["median_s"], ratio))
        for peer, need in (("tar", 0.9), ("umoci", 2.0)):
            r = t.get(peer, {})
            q = r.get("cbrun_over_peer_throughput")
            floors.append({"as": d["user"], "compression": d["compression"], "peer": peer, "min_ratio": need,
                           "ratio": q, "verdict": "N/A" if q is None else ("PASS" if q >= need else "FAIL")})
    if floors:
        print()
        print("floors (cbrun throughput >= 0.9x tar, >= 2x umoci):")
        for f in floors:
            print("  %-8s %-5s cbrun/%-5s = %-7s %s" % (f["as"], f["compression"], f["peer"],
                  "n/a" if f["ratio"] is None else "%.2fx" % f["ratio"], f["verdict"]))
    if st:
        print()
        print("== sandbox start, `/bin/true` in the busybox image (hyperfine -N, median ms, blocks in alternating order pooled) ==")
        print("%-8s %10s %10s %10s %6s  %s" % ("as", "--image", "--rootfs", "extra_ms", "runs", "goal <= 2 ms"))
        for d in st:
            r = d["results"]
            a, b = r.get("image"), r.get("rootfs")
            if a and b:
                d["extra_ms"] = a["median_ms"] - b["median_ms"]
                d["verdict"] = "PASS" if d["extra_ms"] <= 2.0 else "FAIL"
                print("%-8s %10.2f %10.2f %+10.2f %6d  %s" % (d["user"], a["median_ms"], b["median_ms"], d["extra_ms"],
                      a["n"], d["verdict"]))
            else:
                print("%-8s unavailable (%s)" % (d["user"], d.get("reason", "")))
    try:
        la = [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except OSError:
        la = None
    cores = host.get("cores_usable") or host.get("cores_online") or 1
    if la and la[0] > 0.5 * cores:
        print()
        print("WARNING: load average %.2f at the end of the run (%d cores): other work shared the CPU, treat the figures as noisy" % (la[0], cores))
    if json_out:
        write_json(json_out, {"benchmark": "cbrun images (unpack throughput, start from image)",
                              "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "host": host, "image": layers, "loadavg_at_end": la,
                              "unpack": unp, "floors": floors, "start": st})
        print("JSON written to %s" % json_out)

if __name__ == "__main__":
    {"mklayout": mklayout, "unpackcfg": unpackcfg, "tarstats": tarstats, "unpack": unpack, "start": start, "report": report}[sys.argv[1]](sys.argv[2:])
PYEOF

# ----------------------------------------------------------------------------
# host info
# ----------------------------------------------------------------------------
log ""
log "== cbrun image benchmark =="
run_child python3 "$LIB" hostinfo --print --out "$WORK/host.json" \
    --tool "cbrun=$CB" --tool "umoci=$UMOCI" --tool "tar=$TAR" --tool "gzip=$GZIP_BIN" \
    --tool "hyperfine=$HYPERFINE" --tool "setpriv=$SETPRIV"
FSTYPE="$(stat -f -c %T "$WORK" 2>/dev/null || echo '?')"
log "dir:    $WORK ($FSTYPE): layouts, stores and every unpack target (the same for all tools)"
log "cbrun:  private copy of $CBRUN"
avail_kb="$(df -Pk "$WORK" | awk 'NR==2 {print $4}')"
if is_uint "${avail_kb:-x}" && [ "$avail_kb" -lt 3000000 ]; then
    warn "only $((avail_kb / 1024)) MiB free in $BASE_DIR; about 2.5 GiB are needed (--dir elsewhere?)"
fi

# ----------------------------------------------------------------------------
# the image: three layers from the host's own files
# ----------------------------------------------------------------------------
log ""
log "== building the image (3 layers from this host's files) =="
SRC="$WORK/src"
mkdir -p "$SRC"
PYDIRS=()
for d in /usr/lib/python3 /usr/lib/python3.*; do
    [ -d "$d" ] && [ ! -L "$d" ] && PYDIRS+=("${d#/}")
done
[ ${#PYDIRS[@]} -gt 0 ] || { echo "image.sh: no /usr/lib/python3* on this host" >&2; exit 1; }
if [ ! -d /usr/share/doc ] || [ ! -d /usr/include ]; then
    echo "image.sh: /usr/share/doc or /usr/include missing" >&2; exit 1
fi
# Each layer carries its parent directories first, as image builders write them.
mklayer() {   # mklayer OUT PARENT... -- DIR...
    local out="$1"; shift
    local parents=()
    while [ "$1" != -- ]; do parents+=("$1"); shift; done
    shift
    "$TAR" -C / --sort=name --numeric-owner --format=gnu \
        -cf "$out" --no-recursion "${parents[@]}" --recursion "$@"
}
T0="$EPOCHREALTIME"
mklayer "$SRC/layer1.tar" usr usr/lib -- "${PYDIRS[@]}" || { echo "image.sh: making layer 1 failed" >&2; exit 1; }
mklayer "$SRC/layer2.tar" usr usr/share -- usr/share/doc || { echo "image.sh: making layer 2 failed" >&2; exit 1; }
mklayer "$SRC/layer3.tar" usr -- usr/include || { echo "image.sh: making layer 3 failed" >&2; exit 1; }
LAYER_TARS=("$SRC/layer1.tar" "$SRC/layer2.tar" "$SRC/layer3.tar")
python3 "$PY" tarstats "${LAYER_TARS[@]}" >"$WORK/layers-stats.json" || exit 1
GZ_BYTES=0
if [[ " ${COMPS[*]} " == *" gzip "* ]]; then
    # gzip -6 (its default, what image builders use), -n: no name/time.
    pids=()
    for t in "${LAYER_TARS[@]}"; do "$GZIP_BIN" -6 -n -c "$t" >"$t.gz" & pids+=($!); done
    for p in "${pids[@]}"; do wait "$p" || { echo "image.sh: gzip failed" >&2; exit 1; }; done
    for t in "${LAYER_TARS[@]}"; do GZ_BYTES=$((GZ_BYTES + $(stat -c %s "$t.gz"))); done
fi
# Layouts: gzip first (it moves the .gz files), the plain one last (it moves the tars).
declare -A LAYOUT LAYERS_OF
for comp in gzip none; do
    [[ " ${COMPS[*]} " == *" $comp "* ]] || continue
    LAYOUT[$comp]="$WORK/layout-$comp"
    LAYERS_OF[$comp]="$(python3 "$PY" mklayout "${LAYOUT[$comp]}" 1 "$comp" "${LAYER_TARS[@]}" | tr '\n' ' ')" || {
        echo "image.sh: writing the $comp OCI layout failed" >&2; exit 1; }
done
chmod -R a+rX "$WORK"/layout-* 2>/dev/null
python3 - "$WORK/layers-stats.json" "$GZ_BYTES" <<'EOF'
import json, sys
p = sys.argv[1]; d = json.load(open(p)); d["layers"] = 3; d["gz_bytes"] = int(sys.argv[2])
json.dump(d, open(p, "w"))
print("image:  3 layers (/usr/lib/python3*, /usr/share/doc, /usr/include): %d entries, %.1f MB of tar%s" % (
    d["entries"], d["tar_bytes"] / 1e6, (", %.1f MB gzip'd" % (d["gz_bytes"] / 1e6)) if d["gz_bytes"] else ""))
EOF
log "        built in $(python3 -c 'import sys; print("%.1f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$T0" "$EPOCHREALTIME") s (not measured)"

# ----------------------------------------------------------------------------
# per user: unpack throughput, then sandbox start
# ----------------------------------------------------------------------------
RESULTS=()
for u in "${USERS[@]}"; do
    if [ "$u" = nobody ]; then
        RUNAS=("$SETPRIV" "--reuid=$NOBODY_UID" "--regid=$NOBODY_UID" --clear-groups)
        LABEL="uid$NOBODY_UID"
        OWNER="$NOBODY_UID"
    else
        RUNAS=()
        LABEL="$([ "$MY_UID" = 0 ] && echo root || echo "uid$MY_UID")"
        OWNER=""
    fi
    UDIR="$WORK/as-$LABEL"
    mkdir -p "$UDIR"
    [ "$u" = nobody ] && chown "$NOBODY_UID:$NOBODY_UID" "$UDIR"
    STATE=""
    if [ -n "$STATE_BASE" ]; then
        STATE="$STATE_BASE/$LABEL"; mkdir -p "$STATE"; chmod 700 "$STATE"
        [ "$u" = nobody ] && chown "$NOBODY_UID:$NOBODY_UID" "$STATE"
    fi
    ENVV=(env "CBRUN_HOME=$UDIR/store-bb")
    [ -n "$STATE" ] && ENVV+=("CBRUN_STATE_DIR=$STATE")

    for comp in "${COMPS[@]}"; do
        log ""
        log "== unpack as $LABEL, $comp layers: cbrun vs tar vs umoci ($WARMUP warm-up + $RUNS timed rounds, round-robin) =="
        HOME_C="$UDIR/store-$comp"
        if ! "${RUNAS[@]}" env "CBRUN_HOME=$HOME_C" "$CB" image import "${LAYOUT[$comp]}" --tag bench-image:1 \
                >"$UDIR/import-$comp.log" 2>&1; then
            warn "cbrun image import failed: $(tail -n 1 "$UDIR/import-$comp.log")"
        fi
        python3 "$PY" unpackcfg "$UDIR/unpack-$comp.cfg.json" \
            user_label="$LABEL" owner="$OWNER" work="$UDIR" home="$HOME_C" tag=bench-image:1 \
            compression="$comp" tar="$TAR" umoci="$UMOCI" cbrun="$CB" layout="${LAYOUT[$comp]}" ref=1 \
            runs="$RUNS" warmup="$WARMUP" out="$UDIR/unpack-$comp.json" \
            layers="${LAYERS_OF[$comp]}" runas="${RUNAS[*]}" || exit 1
        run_child python3 "$PY" unpack "$UDIR/unpack-$comp.cfg.json" && RESULTS+=("$UDIR/unpack-$comp.json")
        rm -rf "$HOME_C"     # free the store's copy of the blobs (tmpfs)
    done

    [ "$SKIP_START" = 1 ] && continue
    log ""
    log "== sandbox start as $LABEL: --image busybox:latest vs --rootfs <its unpacked root> =="
    START_JSON="$UDIR/start.json"
    if [ -z "$HYPERFINE" ]; then
        echo "{\"user\": \"$LABEL\", \"results\": {}, \"reason\": \"hyperfine not installed\"}" >"$START_JSON"
        RESULTS+=("$START_JSON"); continue
    fi
    if ! "${RUNAS[@]}" "${ENVV[@]}" "$CB" image bootstrap "$REPO_ROOT/rootfs/busybox" >"$UDIR/bootstrap.log" 2>&1 ||
       ! "${RUNAS[@]}" "${ENVV[@]}" "$CB" image unpack busybox:latest >>"$UDIR/bootstrap.log" 2>&1; then
        why="$(grep -v '^$' "$UDIR/bootstrap.log" | tail -n 1)"
        warn "busybox image: $why"
        python3 -c 'import json,sys; print(json.dumps({"user": sys.argv[1], "results": {}, "reason": sys.argv[2]}))' \
            "$LABEL" "busybox image: $why" >"$START_JSON"
        RESULTS+=("$START_JSON"); continue
    fi
    BB_ROOT="$(find "$UDIR/store-bb/rootfs" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | head -n 1)"
    log "busybox root: $BB_ROOT"
    IMG_CMD="$CB sandbox run --image busybox:latest -- /bin/true"
    DIR_CMD="$CB sandbox run --rootfs $BB_ROOT -- /bin/true"
    reason=""
    for c in "$IMG_CMD" "$DIR_CMD"; do
        # shellcheck disable=SC2086
        if ! "${RUNAS[@]}" "${ENVV[@]}" $c >"$UDIR/probe.log" 2>&1; then
            reason="probe failed: $c: $(tail -n 1 "$UDIR/probe.log")"; break
        fi
    done
    if [ -n "$reason" ]; then
        warn "$reason"
        python3 -c 'import json,sys; print(json.dumps({"user": sys.argv[1], "results": {}, "reason": sys.argv[2]}))' \
            "$LABEL" "$reason" >"$START_JSON"
        RESULTS+=("$START_JSON"); continue
    fi
    # The two commands in alternating blocks (image first, then rootfs first,
    # ...), so that a change of the host's load during the run does not all
    # fall on one of them; every block is one hyperfine call, samples pooled.
    PER_ROUND=$(( (START_RUNS + START_ROUNDS - 1) / START_ROUNDS ))
    [ "$PER_ROUND" -ge 2 ] || PER_ROUND=2
    log "hyperfine -N --warmup $START_WARMUP --runs $PER_ROUND, $START_ROUNDS blocks in alternating order ($((PER_ROUND * START_ROUNDS)) runs each)"
    log "  image:  $IMG_CMD"
    log "  rootfs: $DIR_CMD"
    HF_JSONS=()
    reason=""
    for ((r = 1; r <= START_ROUNDS; r++)); do
        HF_JSON="$UDIR/hyperfine-start-$r.json"
        if [ $((r % 2)) = 1 ]; then PAIR=(-n image "$IMG_CMD" -n rootfs "$DIR_CMD"); else PAIR=(-n rootfs "$DIR_CMD" -n image "$IMG_CMD"); fi
        if run_child "${RUNAS[@]}" "${ENVV[@]}" "$HYPERFINE" -N --style basic --warmup "$START_WARMUP" --runs "$PER_ROUND" \
                --export-json "$HF_JSON" "${PAIR[@]}" >"$UDIR/hyperfine-$r.log" 2>&1; then
            HF_JSONS+=("$HF_JSON")
            printf '  block %d/%d: %s\n' "$r" "$START_ROUNDS" "$(python3 "$PY" start - "$LABEL" "$HF_JSON")"
        else
            reason="hyperfine failed: $(grep -v '^$' "$UDIR/hyperfine-$r.log" | tail -n 1)"
            break
        fi
    done
    if [ -z "$reason" ]; then
        python3 "$PY" start "$START_JSON" "$LABEL" "${HF_JSONS[@]}" >/dev/null
        python3 "$PY" start - "$LABEL" "${HF_JSONS[@]}" | sed 's/^/  all blocks: /'
    else
        warn "$reason"
        python3 -c 'import json,sys; print(json.dumps({"user": sys.argv[1], "results": {}, "reason": sys.argv[2]}))' \
            "$LABEL" "$reason" >"$START_JSON"
    fi
    RESULTS+=("$START_JSON")
    rm -rf "$UDIR/store-bb" 2>/dev/null || { chmod -R u+rwX "$UDIR/store-bb"; rm -rf "$UDIR/store-bb"; }
done

# ----------------------------------------------------------------------------
# report
# ----------------------------------------------------------------------------
log ""
log "== commands =="
log "cbrun:  CBRUN_HOME=<store> cbrun image import <layout> --tag bench-image:1 (once, untimed); timed: cbrun image unpack bench-image:1"
log "        (\$CBRUN_HOME/rootfs/* and tmp/* removed before every run, untimed)"
log "tar:    sh -c 'tar -xf L1 -C D && tar -xf L2 -C D && tar -xf L3 -C D' on the layout's own blobs (-xzf for gzip: gzip -d runs as tar's child)"
log "umoci:  umoci unpack --rootless --image <layout>:1 <bundle> (bundle removed before every run)"
[ "${USERS[*]}" != self ] && log "uid $NOBODY_UID: every timed command is prefixed with: setpriv --reuid=$NOBODY_UID --regid=$NOBODY_UID --clear-groups (sandbox start: hyperfine itself runs under it)"
python3 "$PY" report "$WORK/host.json" "$WORK/layers-stats.json" "$JSON_OUT" "${RESULTS[@]}" || warn "report failed"
exit 0
