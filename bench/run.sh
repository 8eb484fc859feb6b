#!/usr/bin/env bash
# bench/run.sh: what `cbrun run` costs on top of the trials it runs.
#
# Runs N replay trials of sample case 1 (its reference control) at --jobs J
# and reports:
#   * the ratio of the run's wall time to the trials' own wall times
#     (finished_at - started_at of each record) summed and divided by J:
#     1.00 would be a scheduler that costs nothing; floor <= 1.15;
#   * cbrun's own resident memory per running trial: the supervisor plus
#     its worker processes (not the sandboxes), sampled every 20 ms, summed
#     and divided by the number of running workers; floor <= 30 MiB.
#
# Usage: bench/run.sh [--cbrun PATH] [--trials N] [--jobs J] [--json OUT] [--keep]
# Exit: 0 whatever the figures are; 2 on a bad option; 1 when the binary,
# python3 or the run fails.

set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
CBRUN="$REPO/target/release/cbrun"
TRIALS=200
JOBS=2
JSON=""
KEEP=0

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --cbrun) CBRUN=$2; shift 2 ;;
        --trials) TRIALS=$2; shift 2 ;;
        --jobs) JOBS=$2; shift 2 ;;
        --json) JSON=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "bench/run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
case "$TRIALS$JOBS" in *[!0-9]*|"") echo "bench/run.sh: --trials and --jobs take numbers" >&2; exit 2 ;; esac
command -v python3 >/dev/null || { echo "bench/run.sh: python3 is needed" >&2; exit 1; }
[ -x "$CBRUN" ] || { echo "bench/run.sh: no cbrun at $CBRUN (cargo build --release, or --cbrun PATH)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cbrun-run-bench.XXXXXX")
# The judge runs as a mapped non-root user: it must reach the trial folders.
chmod 755 "$WORK"
cleanup() {
    if [ "$KEEP" = 1 ]; then echo "kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A private copy of the binary (a rebuild during the run changes nothing)
# and of the case.
cp "$CBRUN" "$WORK/cbrun"
mkdir -p "$WORK/cases"
cp -r "$REPO/cases/case001" "$WORK/cases/"

python3 "$HERE/benchlib.py" hostinfo --print --out "$WORK/host.json" --tool "cbrun=$WORK/cbrun" || true

python3 - "$WORK" "$TRIALS" "$JOBS" "$JSON" <<'PY'
import json, os, statistics, subprocess, sys, time

work, trials, jobs, json_out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
exe = os.path.join(work, "cbrun")
out = os.path.join(work, "run")
argv = [exe, "run", os.path.join(work, "cases", "case001"), "--agent", "replay:@reference",
        "--repeats", str(trials), "--jobs", str(jobs), "--out", out, "--quiet"]
print("command:", " ".join(argv), flush=True)

def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None

def workers(sup):
    """Direct children of the supervisor that run the cbrun binary: the
    workers (their own children are sandboxes and are not counted)."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                stat = fh.read()
            ppid = int(stat[stat.rfind(")") + 2:].split()[1])
            if ppid == sup and os.readlink(f"/proc/{d}/exe") == exe:
                kids.append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    return kids

t0 = time.perf_counter()
proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
samples = []  # (running workers, KiB of supervisor + workers)
while proc.poll() is None:
    ws = workers(proc.pid)
    sup = rss_kib(proc.pid)
    rs = [rss_kib(w) for w in ws]
    rs = [r for r in rs if r is not None]
    if sup is not None and rs:
        samples.append((len(rs), sup + sum(rs)))
    time.sleep(0.02)
wall = time.perf_counter() - t0
if proc.returncode != 0:
    print(f"the run failed (exit {proc.returncode})", file=sys.stderr)
    sys.exit(1)

def parse(ts):
    # 2026-11-30T05:09:09.123Z
    import calendar
    base = calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S"))
    return base + float("0" + ts[19:-1])

own = []
rewards = 0
tdir = os.path.join(out, "trials", "case001", "reference")
for name in os.listdir(tdir):
    if not name.isdigit():
        continue
    with open(os.path.join(tdir, name, "trial.json")) as fh:
        r = json.load(fh)
    own.append(parse(r["finished_at"]) - parse(r["started_at"]))
    rewards += r["reward"]
assert len(own) == trials, f"{len(own)} records for {trials} trials"
ideal = sum(own) / jobs
ratio = wall / ideal
per = sorted(kib / n / 1024.0 for n, kib in samples)
def pct(xs, p):
    return xs[min(len(xs) - 1, int(round((len(xs) - 1) * p / 100.0)))] if xs else float("nan")
rss_median, rss_p95, rss_max = pct(per, 50), pct(per, 95), (per[-1] if per else float("nan"))

print()
print(f"== cbrun run: {trials} replay trials of case001 at --jobs {jobs} ==")
print(f"rewards 1: {rewards}/{trials}")
print(f"wall time of the run:            {wall:8.2f} s")
print(f"trials' own wall time, summed:   {sum(own):8.2f} s  (median {statistics.median(own)*1000:.0f} ms per trial)")
print(f"  / {jobs} slots:                    {ideal:8.2f} s")
print(f"ratio wall / (sum / {jobs}):          {ratio:8.3f}   floor <= 1.15: {'PASS' if ratio <= 1.15 else 'FAIL'}")
print(f"cbrun RSS per running trial (supervisor + workers, {len(samples)} samples):")
print(f"  median {rss_median:.1f} MiB, p95 {rss_p95:.1f} MiB, max {rss_max:.1f} MiB   floor p95 <= 30 MiB: {'PASS' if rss_p95 <= 30 else 'FAIL'}")
try:
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]
    print(f"load average at the end: {' '.join(load)} (other work on the cores skews both figures)")
except OSError:
    pass
if json_out:
    with open(json_out, "w") as fh:
        json.dump({"trials": trials, "jobs": jobs, "wall_s": wall, "own_s": own, "ratio": ratio,
                   "rss_per_trial_mib": {"median": rss_median, "p95": rss_p95, "max": rss_max,
                                         "samples": len(samples)},
                   "floors": {"ratio_max": 1.15, "rss_p95_max_mib": 30}}, fh, indent=2)
PY
