#!/usr/bin/env bash
# Judge set-up against workspace size, in one run: `cbrun judge` of sample
# case 1 on its reference solution alone ("small") and on the same plus a
# generated node_modules-like tree ("big": 50,000 files, 200 MB), through
# the overlay (the default) and through the copy (CBRUN_JUDGE_VIEW=copy),
# next to `cp -a` of the big tree. The tests are the same in every run (they
# never look at node_modules), so the difference in wall time is set-up.
#
# Usage: bench/judge-view.sh [--cbrun PATH] [--runs N] [--files N] [--mb N]
#                            [--keep]
# Floor (issue 13): overlay(big) - overlay(small) <= 0.2 s.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cbrun="$repo/target/release/cbrun"
runs=5
files=50000
mb=200
keep=0
while [ $# -gt 0 ]; do
    case "$1" in
        --cbrun) cbrun=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --files) files=$2; shift 2 ;;
        --mb) mb=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        *) echo "judge-view.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ ! -x "$cbrun" ]; then
    echo "building $cbrun (cargo build --release)" >&2
    (cd "$repo" && cargo build --release --bin cbrun >&2)
fi
cbrun=$(readlink -f "$cbrun")

# On the disk the trial folders live on (not a tmpfs), like a real run.
tmp=$(mktemp -d "${BENCH_TMP:-/var/tmp}/cbrun-judge-view.XXXXXX")
# The sandbox's own root walks through it to the workspace it is shown.
chmod 755 "$tmp"
cleanup() { [ "$keep" = 1 ] || rm -rf "$tmp"; }
trap cleanup EXIT INT TERM

case_dir="$repo/cases/case001"
small="$tmp/small"
big="$tmp/big"
cp -a "$case_dir/controls/reference/app" "$small"
cp -a "$small" "$big"
python3 - "$big/node_modules" "$files" "$mb" <<'EOF'
import os, sys
root, files, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per_pkg = 20
size = mb * 1024 * 1024 // files
chunk = (b"module.exports = function () { return 42; };\n" * (size // 46 + 1))[:size]
os.makedirs(root)
n = 0
pkg = 0
while n < files:
    d = os.path.join(root, f"pkg{pkg:05d}", "lib")
    os.makedirs(d)
    with open(os.path.join(root, f"pkg{pkg:05d}", "package.json"), "w") as f:
        f.write('{"name": "pkg%05d", "version": "1.0.0"}\n' % pkg)
    n += 1
    for i in range(per_pkg - 1):
        if n >= files:
            break
        with open(os.path.join(d, f"f{i:03d}.js"), "wb") as f:
            f.write(chunk)
        n += 1
    pkg += 1
EOF
sync
entries=$(find "$big" | wc -l)
bytes=$(du -sb "$big" | cut -f1)

# Wall seconds of one command.
wall() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; return 1; }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}
median() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3f\n", m}'; }

judge() { # VIEW WORKSPACE OUT
    CBRUN_JUDGE_VIEW=$1 "$cbrun" judge "$case_dir" --workspace "$2" --out "$3" --json >"$3.json"
}

run_series() { # NAME VIEW WORKSPACE RUNS
    local i
    for i in $(seq "$4"); do
        wall judge "$2" "$3" "$tmp/out-$1-$i"
    done | median
}

# One untimed run of each to warm the page cache and the scaffold.
judge auto "$small" "$tmp/warm-small"
judge auto "$big" "$tmp/warm-big"

ov_small=$(run_series ov-small auto "$small" "$runs")
ov_big=$(run_series ov-big auto "$big" "$runs")
copy_runs=$(( runs < 3 ? runs : 3 ))
cp_small=$(run_series cp-small copy "$small" "$copy_runs")
cp_big=$(run_series cp-big copy "$big" "$copy_runs")
cpa=$(for i in $(seq "$copy_runs"); do wall cp -a "$big" "$tmp/cpa-$i"; rm -rf "$tmp/cpa-$i"; done | median)

# `--json` output is the envelope {cbrun, command, ok, result}.
view=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["result"]; print(r["workspace_view"], r["reward"], (r.get("workspace_scan") or {}).get("seconds"))' "$tmp/out-ov-big-1.json")
read -r view_kind reward scan_s <<<"$view"
copy_kind=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["result"]["workspace_view"])' "$tmp/out-cp-big-1.json")

d_ov=$(echo "$ov_big - $ov_small" | bc -l)
d_cp=$(echo "$cp_big - $cp_small" | bc -l)
printf 'host: %s, %s cores, kernel %s; cbrun %s (as uid %s)\n' "$(hostname)" "$(nproc)" "$(uname -r)" "$cbrun" "$(id -u)"
printf 'big workspace: %s entries, %s bytes (node_modules: %s files, %s MB); small: the reference solution\n' "$entries" "$bytes" "$files" "$mb"
printf 'medians of %s runs (copy: %s)\n\n' "$runs" "$copy_runs"
printf '%-28s %9s %9s %9s\n' "" "small s" "big s" "big-small"
printf '%-28s %9.3f %9.3f %9.3f\n' "cbrun judge, overlay" "$ov_small" "$ov_big" "$d_ov"
printf '%-28s %9.3f %9.3f %9.3f\n' "cbrun judge, copy" "$cp_small" "$cp_big" "$d_cp"
printf '%-28s %9s %9.3f\n' "cp -a" "-" "$cpa"
printf '\nview used on big: %s (reward %s, walk+mounts %ss); forced: %s\n' "$view_kind" "$reward" "$scan_s" "$copy_kind"
printf 'ratios: overlay big/small %.2fx; copy big / overlay big %.1fx; cp -a / overlay set-up growth %.0fx\n' \
    "$(echo "$ov_big / $ov_small" | bc -l)" "$(echo "$cp_big / $ov_big" | bc -l)" \
    "$(echo "$cpa / ($d_ov + 0.001)" | bc -l)"
if [ "$reward" != 1 ]; then
    echo "the judge did not pass the reference solution: see $tmp/out-ov-big-1.json (--keep)" >&2
    exit 1
fi
if [ "$view_kind" = overlay ] && [ "$(echo "$d_ov <= 0.2" | bc -l)" = 1 ]; then
    echo "floor (overlay big - small <= 0.2 s): PASS"
else
    echo "floor (overlay big - small <= 0.2 s): FAIL"
    exit 1
fi
