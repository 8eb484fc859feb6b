#!/usr/bin/env python3
"""Helpers for bench/start.sh (start-up benchmark of cbrun against its peers).

Sub-commands (all invoked by start.sh; none of them needs anything but the
Python 3 standard library):

  edit-spec CONFIG            rewrite a `runc spec` config.json for the bench
  hostinfo --out F [--tool NAME=PATH ...]
                              collect kernel / cores / cgroup layout / versions
  measure --name N --runs R --warmup W --out F [--hyperfine PATH] -- ARGV...
                              time start-to-exit of ARGV; a literal "{i}" in
                              ARGV is replaced by a unique id on every run
  report --host F --result F... [--json OUT] [--standin]
                              print the summary table + floors, write JSON

A runtime that fails its pre-flight run, or fails while being timed, is
recorded as {"status": "unavailable", "reason": ...}; `measure` itself always
exits 0 so that one broken peer never aborts the benchmark.
"""

import argparse
import json
import math
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PLACEHOLDER = "{i}"


# --------------------------------------------------------------------------
# small utilities
# --------------------------------------------------------------------------

def percentile(sorted_xs, p):
    """Linear-interpolation percentile (numpy's default), p in [0, 100]."""
    n = len(sorted_xs)
    if n == 0:
        return float("nan")
    if n == 1:
        return sorted_xs[0]
    k = (n - 1) * p / 100.0
    f = int(math.floor(k))
    c = min(f + 1, n - 1)
    return sorted_xs[f] + (sorted_xs[c] - sorted_xs[f]) * (k - f)


def summarize(times_s):
    xs = sorted(t * 1000.0 for t in times_s)
    return {
        "median_ms": statistics.median(xs),
        "p10_ms": percentile(xs, 10),
        "p90_ms": percentile(xs, 90),
        "mean_ms": statistics.fmean(xs) if hasattr(statistics, "fmean") else statistics.mean(xs),
        "stddev_ms": statistics.stdev(xs) if len(xs) > 1 else 0.0,
        "min_ms": xs[0],
        "max_ms": xs[-1],
        "n": len(xs),
    }


def subst(argv, ident):
    return [a.replace(PLACEHOLDER, ident) for a in argv]


def short_reason(text, limit=160):
    """Last meaningful line of some stderr output, trimmed."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return ""
    # Prefer a line that looks like an error message.
    for ln in reversed(lines):
        low = ln.lower()
        if "error" in low or "denied" in low or "not permitted" in low or "failed" in low:
            pick = ln
            break
    else:
        pick = lines[-1]
    pick = " ".join(pick.split())
    return pick if len(pick) <= limit else pick[: limit - 3] + "..."


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def run_killable(argv, timeout, **kw):
    """subprocess.run with a timeout that kills the whole process group."""
    proc = subprocess.Popen(argv, start_new_session=True, **kw)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        raise
    return proc.returncode, out, err


# --------------------------------------------------------------------------
# edit-spec
# --------------------------------------------------------------------------

def cmd_edit_spec(a):
    with open(a.config) as fh:
        spec = json.load(fh)
    proc = spec.setdefault("process", {})
    proc["args"] = ["/bin/true"]
    proc["terminal"] = False
    root = spec.setdefault("root", {})
    root["readonly"] = True
    root.setdefault("path", "rootfs")
    write_json(a.config, spec)
    return 0


# --------------------------------------------------------------------------
# is-static
# --------------------------------------------------------------------------

def cmd_is_static(a):
    """Exit 0 if PATH is an ELF executable without a PT_INTERP (static)."""
    import struct
    try:
        with open(a.path, "rb") as fh:
            ident = fh.read(16)
            if ident[:4] != b"\x7fELF":
                print("not an ELF file")
                return 1
            is64 = ident[4] == 2
            end = "<" if ident[5] == 1 else ">"
            if is64:
                fh.seek(0x20)
                phoff, = struct.unpack(end + "Q", fh.read(8))
                fh.seek(0x36)
                phentsize, phnum = struct.unpack(end + "HH", fh.read(4))
            else:
                fh.seek(0x1C)
                phoff, = struct.unpack(end + "I", fh.read(4))
                fh.seek(0x2A)
                phentsize, phnum = struct.unpack(end + "HH", fh.read(4))
            for i in range(phnum):
                fh.seek(phoff + i * phentsize)
                p_type, = struct.unpack(end + "I", fh.read(4))
                if p_type == 3:  # PT_INTERP
                    print("dynamically linked")
                    return 1
    except (OSError, struct.error) as e:
        print("unreadable: %s" % e)
        return 1
    return 0


# --------------------------------------------------------------------------
# hostinfo
# --------------------------------------------------------------------------

def cgroup_layout():
    v1, v2 = [], []
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fstype = right.split()[0] if right else ""
                mnt = left.split()[4]
                if fstype == "cgroup2":
                    v2.append(mnt)
                elif fstype == "cgroup":
                    v1.append(mnt)
    except OSError:
        return "unknown"
    if v1 and v2:
        return "hybrid (v1 controllers + cgroup2 at %s)" % ",".join(v2)
    if v2:
        return "unified (cgroup2 at %s)" % ",".join(v2)
    if v1:
        return "legacy (cgroup v1 only)"
    return "none mounted"


def first_line(argv):
    try:
        rc, out, err = run_killable(argv, 20, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except Exception as e:  # noqa: BLE001 - informational only
        return "error: %s" % e
    text = (out or b"").decode(errors="replace").strip().splitlines()
    return text[0].strip() if text else "(no output, rc=%d)" % rc


def cmd_hostinfo(a):
    info = {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cores_online": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cgroups": cgroup_layout(),
        "uid": os.geteuid(),
        "python": platform.python_version(),
    }
    try:
        with open("/proc/loadavg") as fh:
            info["loadavg_at_start"] = [float(x) for x in fh.read().split()[:3]]
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as fh:
            kb = int(fh.readline().split()[1])
            info["mem_gib"] = round(kb / 1024.0 / 1024.0, 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/etc/os-release") as fh:
            for line in fh:
                if line.startswith("PRETTY_NAME="):
                    info["os"] = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    versions = {}
    for spec in a.tool or []:
        name, _, path = spec.partition("=")
        if not path:
            versions[name] = "not installed"
            continue
        flag = "--help" if name == "busybox" else "--version"
        versions[name] = first_line([path, flag])
    info["versions"] = versions
    write_json(a.out, info)
    if a.print:
        print("host:   %s, kernel %s, %s, %s cores online (%s usable), %s GiB RAM" % (
            info.get("os", "?"), info["kernel"], info["machine"], info["cores_online"],
            info["cores_usable"], info.get("mem_gib", "?")))
        print("cpu:    %s" % info.get("cpu_model", "?"))
        print("cgroup: %s" % info["cgroups"])
        print("euid:   %d" % info["uid"])
        la = info.get("loadavg_at_start")
        if la:
            busy = la[0] > 0.5 * (info["cores_usable"] or info["cores_online"] or 1)
            print("load:   %.2f %.2f %.2f%s" % (la[0], la[1], la[2],
                  "   WARNING: host is busy, figures will be noisy" if busy else ""))
        for name, ver in versions.items():
            print("  %-10s %s" % (name, ver))
    return 0


# --------------------------------------------------------------------------
# measure
# --------------------------------------------------------------------------

def probe(argv, timeout):
    """One untimed pre-flight run. Returns (ok, reason, seconds)."""
    t0 = time.perf_counter()
    try:
        rc, _, err = run_killable(argv, timeout, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except subprocess.TimeoutExpired:
        return False, "timed out after %ds" % timeout, None
    except OSError as e:
        return False, "cannot execute %s: %s" % (argv[0], e.strerror or e), None
    dt = time.perf_counter() - t0
    if rc != 0:
        why = short_reason(err.decode(errors="replace"))
        if rc < 0:
            head = "killed by signal %d" % -rc
        else:
            head = "exit %d" % rc
        return False, head + (": " + why if why else ""), dt
    return True, "", dt


def via_hyperfine(hf, argv, runs, warmup, unique, budget, log):
    """Time with hyperfine -N; returns (times_s, error)."""
    work = tempfile.mkdtemp(prefix="hf.", dir=os.path.dirname(os.path.abspath(log)))
    base = [hf, "-N", "--style", "none"]
    jobs = []
    if unique:
        # Every run needs its own container id, so each run is one value of a
        # hyperfine parameter scan ({i}); the warm-up is a separate scan.
        if warmup > 0:
            jobs.append(("warmup", base + ["--runs", "1", "--warmup", "0",
                                           "--parameter-scan", "i", "1", str(warmup),
                                           shlex.join(subst(argv, "warm-" + PLACEHOLDER))]))
        jobs.append(("timed", base + ["--runs", "1", "--warmup", "0",
                                      "--parameter-scan", "i", "1", str(runs),
                                      shlex.join(subst(argv, "run-" + PLACEHOLDER))]))
    else:
        jobs.append(("timed", base + ["--runs", str(runs), "--warmup", str(warmup),
                                      shlex.join(argv)]))
    times = []
    try:
        for kind, cmd in jobs:
            out_json = os.path.join(work, kind + ".json")
            cmd = cmd[:2] + ["--export-json", out_json] + cmd[2:]
            with open(log, "ab") as lf:
                lf.write(("$ " + shlex.join(cmd) + "\n").encode())
                lf.flush()
                try:
                    rc, _, _ = run_killable(cmd, budget, stdin=subprocess.DEVNULL,
                                            stdout=lf, stderr=lf)
                except subprocess.TimeoutExpired:
                    return None, "hyperfine timed out after %ds" % budget
            if rc != 0:
                with open(log, "rb") as lf:
                    tail = lf.read()[-4000:].decode(errors="replace")
                return None, "failed under hyperfine: " + (short_reason(tail) or "rc=%d" % rc)
            if kind != "timed":
                continue
            with open(out_json) as fh:
                data = json.load(fh)
            for r in data.get("results", []):
                codes = r.get("exit_codes") or []
                if any(c not in (0, None) for c in codes):
                    return None, "non-zero exit code under hyperfine: %s" % codes
                times.extend(r["times"])
    finally:
        for f in os.listdir(work):
            os.unlink(os.path.join(work, f))
        os.rmdir(work)
    if len(times) != runs:
        return None, "hyperfine returned %d samples, expected %d" % (len(times), runs)
    return times, ""


def via_loop(argv, runs, warmup, unique, per_run_timeout):
    """Fallback timer: perf_counter_ns around subprocess.run."""
    times = []
    for phase, count in (("warm", warmup), ("run", runs)):
        for i in range(1, count + 1):
            av = subst(argv, "%s-%d" % (phase, i)) if unique else argv
            t0 = time.perf_counter_ns()
            try:
                cp = subprocess.run(av, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, timeout=per_run_timeout)
            except subprocess.TimeoutExpired:
                return None, "%s %d timed out after %ds" % (phase, i, per_run_timeout)
            t1 = time.perf_counter_ns()
            if cp.returncode != 0:
                ok, why, _ = probe(subst(argv, "diag") if unique else argv, per_run_timeout)
                return None, "%s %d exited %d%s" % (phase, i, cp.returncode,
                                                    (" (" + why + ")") if why else "")
            if phase == "run":
                times.append((t1 - t0) / 1e9)
    return times, ""


def cmd_measure(a):
    argv = a.argv
    if argv and argv[0] == "--":
        argv = argv[1:]
    unique = any(PLACEHOLDER in x for x in argv)
    res = {
        "name": a.name,
        "argv": argv,
        "cmdline": shlex.join(argv),
        "runs": a.runs,
        "warmup": a.warmup,
        "unique_ids": unique,
        "method": None,
        "status": "unavailable",
        "reason": "",
        "note": a.note or "",
        "times_s": [],
    }
    if a.unavailable:
        res["attempted"] = False
        res["reason"] = a.unavailable
        write_json(a.out, res)
        print("  %-8s unavailable (%s)" % (a.name, res["reason"]), flush=True)
        return 0

    ok, why, pre_s = probe(subst(argv, "preflight") if unique else argv, a.preflight_timeout)
    if not ok:
        res["reason"] = why
        write_json(a.out, res)
        print("  %-8s unavailable (%s)" % (a.name, why), flush=True)
        return 0

    # Generous wall-clock budget derived from the pre-flight run, so that a
    # runtime that hangs part-way does not stall the whole benchmark forever.
    per_run = max(1.0, 20.0 * (pre_s or 0.05))
    budget = int(max(120.0, (a.runs + a.warmup) * per_run))
    print("  %-8s timing %d runs (+%d warm-up) ..." % (a.name, a.runs, a.warmup), end="", flush=True)
    t0 = time.monotonic()
    if a.hyperfine:
        res["method"] = "hyperfine"
        times, err = via_hyperfine(a.hyperfine, argv, a.runs, a.warmup, unique, budget, a.log)
    else:
        res["method"] = "python-loop"
        times, err = via_loop(argv, a.runs, a.warmup, unique, int(max(60, per_run)))
    took = time.monotonic() - t0
    if times is None:
        res["reason"] = err
        print(" unavailable (%s)" % err, flush=True)
    else:
        res["status"] = "ok"
        res["times_s"] = times
        res.update(summarize(times))
        print(" median %.2f ms (%.0fs)" % (res["median_ms"], took), flush=True)
    write_json(a.out, res)
    return 0


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------

def load_now():
    try:
        with open("/proc/loadavg") as fh:
            return [float(x) for x in fh.read().split()[:3]]
    except (OSError, ValueError):
        return None


def fmt_ms(x):
    return "%.2f" % x


def cmd_report(a):
    with open(a.host) as fh:
        host = json.load(fh)
    results = []
    for path in a.result:
        with open(path) as fh:
            results.append(json.load(fh))
    by_name = {r["name"]: r for r in results}
    cb = by_name.get("cbrun")
    cb_ok = cb is not None and cb["status"] == "ok"

    for r in results:
        if r["status"] == "ok" and r["name"] != "cbrun":
            r["cbrun_over_peer"] = (cb["median_ms"] / r["median_ms"]) if cb_ok and r["median_ms"] > 0 else None

    print()
    print("== commands ==")
    for r in results:
        if r.get("attempted", True):
            print("%-8s %s" % (r["name"], r["cmdline"]))
        else:
            print("%-8s (not run: %s)" % (r["name"], r["reason"]))
        extra = []
        if r.get("method"):
            extra.append("timed with %s, %d runs + %d warm-up" % (r["method"], r["runs"], r["warmup"]))
        if r.get("note"):
            extra.append(r["note"])
        if r.get("unique_ids") and r["status"] == "ok":
            extra.append("{i} = run-1..run-%d" % r["runs"])
        if extra:
            print("%-8s   (%s)" % ("", "; ".join(extra)))

    print()
    print("== summary (start-to-exit of `true`, milliseconds) ==")
    hdr = "%-9s %9s %8s %8s %5s  %s" % ("runtime", "median_ms", "p10", "p90", "runs", "cbrun/peer")
    print(hdr)
    for r in results:
        if r["status"] != "ok":
            print("%-9s unavailable (%s)" % (r["name"], r["reason"]))
            continue
        if r["name"] == "cbrun":
            ratio = "-"
        elif r.get("cbrun_over_peer") is None:
            ratio = "n/a"
        else:
            q = r["cbrun_over_peer"]
            ratio = ("%.2fx" if q >= 0.1 else "%.3fx") % q
        print("%-9s %9s %8s %8s %5d  %s" % (r["name"], fmt_ms(r["median_ms"]), fmt_ms(r["p10_ms"]),
                                           fmt_ms(r["p90_ms"]), r["n"], ratio))

    floors = []
    for peer, limit in (("bwrap", 1.5), ("runc", 0.5)):
        p = by_name.get(peer)
        entry = {"peer": peer, "max_ratio": limit, "ratio": None}
        if not cb_ok:
            entry["verdict"] = "N/A"
            entry["why"] = "cbrun unavailable"
        elif p is None or p["status"] != "ok":
            entry["verdict"] = "N/A"
            entry["why"] = "%s unavailable" % peer
        else:
            entry["ratio"] = p["cbrun_over_peer"]
            entry["verdict"] = "PASS" if entry["ratio"] <= limit else "FAIL"
        floors.append(entry)
    print("floors: " + " ; ".join("cbrun <= %gx %s: %s" % (f["max_ratio"], f["peer"], f["verdict"])
                                  for f in floors))
    detail = []
    for f in floors:
        if f["ratio"] is not None:
            detail.append("cbrun/%s = %.2fx" % (f["peer"], f["ratio"]))
        else:
            detail.append("%s: %s" % (f["peer"], f["why"]))
    print("        (" + "; ".join(detail) + ")")
    la = load_now()
    if la and la[0] > 0.5 * (host.get("cores_usable") or host.get("cores_online") or 1):
        print("WARNING: load average is %.2f at the end of the run: other work shared the CPU,"
              " treat the figures as noisy" % la[0])
    if a.standin and cb_ok:
        print("NOTE: --cbrun points at a stand-in (%s), not a real cbrun build: the floor verdicts"
              " above are meaningless." % cb["argv"][0])

    if a.json:
        out = {
            "benchmark": "cbrun start-up (start-to-exit of true)",
            "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": host,
            "cbrun_is_standin": bool(a.standin),
            "loadavg_at_end": load_now(),
            "runtimes": [],
            "floors": floors,
        }
        for r in results:
            rr = dict(r)
            rr["times_ms"] = [t * 1000.0 for t in rr.pop("times_s", [])]
            out["runtimes"].append(rr)
        write_json(a.json, out)
        print("JSON written to %s" % a.json)
    return 0


# --------------------------------------------------------------------------

def _terminate(signum, _frame):
    # Turn SIGTERM/SIGHUP into an exception so run_killable() kills the
    # process group of the hyperfine/runtime child it started (that child is
    # in its own session and would not get the signal otherwise).
    raise SystemExit(128 + signum)


def main():
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("edit-spec")
    p.add_argument("config")
    p.set_defaults(fn=cmd_edit_spec)

    p = sub.add_parser("is-static")
    p.add_argument("path")
    p.set_defaults(fn=cmd_is_static)

    p = sub.add_parser("hostinfo")
    p.add_argument("--out", required=True)
    p.add_argument("--tool", action="append", help="NAME=PATH (PATH empty: not installed)")
    p.add_argument("--print", action="store_true")
    p.set_defaults(fn=cmd_hostinfo)

    p = sub.add_parser("measure")
    p.add_argument("--name", required=True)
    p.add_argument("--runs", type=int, required=True)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--hyperfine", default="")
    p.add_argument("--preflight-timeout", type=int, default=120)
    p.add_argument("--unavailable", default="", help="record as unavailable with this reason")
    p.add_argument("--note", default="")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(fn=cmd_measure)

    p = sub.add_parser("report")
    p.add_argument("--host", required=True)
    p.add_argument("--result", action="append", default=[])
    p.add_argument("--json", default="")
    p.add_argument("--standin", action="store_true")
    p.set_defaults(fn=cmd_report)

    a = ap.parse_args()
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
