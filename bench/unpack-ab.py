#!/usr/bin/env python3
"""bench/unpack-ab.py - compare cbrun builds at unpacking, against tar, in
alternating single runs.

Usage: bench/unpack-ab.py KEPT_DIR [--as root|nobody] [--compression none|gzip]
                          [--rounds N] CBRUN [CBRUN...]

KEPT_DIR is what `bench/image.sh --keep` leaves behind (it prints "kept:
DIR"): the image's layouts, and per user a store and the unpack config.
Each round runs every CBRUN (`cbrun image unpack`) and `tar -x` of the same
layers once, in an order that rotates from round to round, each on a freshly
emptied target; the medians come out with cbrun/tar throughput ratios.

Why single runs in turn rather than `bench/image.sh`'s blocks: on a small
VM the host's load moves from minute to minute, and cbrun (two busy
threads: extraction and SHA-256) moves with it more than tar (one). Runs
taken side by side see the same machine, so two builds compare fairly even
when the absolute figures drift. As root, run it as root.
"""

import json
import os
import statistics
import subprocess
import sys
import time


def usage(code):
    print(__doc__.split("\n\n")[1], file=sys.stderr if code else sys.stdout)
    sys.exit(code)


def empty(path):
    """Removes everything in `path` (read-only directories from layers too)."""
    for name in os.listdir(path):
        subprocess.run(["rm", "-rf", "--", os.path.join(path, name)], check=True)


def main(argv):
    who, comp, rounds, bins, kept = "nobody", "none", 15, [], None
    it = iter(argv)
    for a in it:
        if a in ("-h", "--help"):
            usage(0)
        elif a == "--as":
            who = next(it, None)
            if who not in ("root", "nobody"):
                usage(2)
        elif a == "--compression":
            comp = next(it, None)
            if comp not in ("none", "gzip"):
                usage(2)
        elif a == "--rounds":
            try:
                rounds = int(next(it, ""))
            except ValueError:
                usage(2)
            if rounds < 1:
                usage(2)
        elif a.startswith("-"):
            print("unpack-ab.py: unknown option %s" % a, file=sys.stderr)
            usage(2)
        elif kept is None:
            kept = a
        else:
            bins.append(os.path.abspath(a))
    if kept is None or not bins:
        usage(2)
    label = "root" if who == "root" else "uid65534"
    cfg_path = os.path.join(kept, "as-" + label, "unpack-%s.cfg.json" % comp)
    try:
        with open(cfg_path) as f:
            cfg = json.load(f)
    except OSError as e:
        sys.exit("unpack-ab.py: %s: %s (run bench/image.sh --keep first)" % (cfg_path, e.strerror))
    runas = cfg["runas"]
    home, tag, tar_dir = cfg["home"], cfg["tag"], os.path.join(cfg["work"], "tar-out")
    owner = cfg.get("owner")
    for b in bins:
        if not os.access(b, os.X_OK):
            sys.exit("unpack-ab.py: %s: not an executable" % b)
    env_cb = runas + ["env", "CBRUN_HOME=" + home]
    # bench/image.sh may have left the store without the image's name.
    if subprocess.run(env_cb + [bins[0], "image", "inspect", tag],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        subprocess.run(env_cb + [bins[0], "image", "import", cfg["layout"], "--tag", tag],
                       stdout=subprocess.DEVNULL, check=True)

    def prep_cbrun():
        for sub in ("rootfs", "tmp"):
            d = os.path.join(home, sub)
            if os.path.isdir(d):
                empty(d)

    def prep_tar():
        subprocess.run(["rm", "-rf", "--", tar_dir], check=True)
        os.mkdir(tar_dir)
        if owner:
            os.chown(tar_dir, owner[0], owner[1])

    z = "z" if comp == "gzip" else ""
    tar_cmd = " && ".join("tar -x%sf '%s' -C '%s'" % (z, l, tar_dir) for l in cfg["layers"])
    tools = [("cbrun %d: %s" % (i + 1, b), prep_cbrun, env_cb + [b, "image", "unpack", tag])
             for i, b in enumerate(bins)]
    tools.append(("tar", prep_tar, runas + ["sh", "-c", tar_cmd]))
    times = {name: [] for name, _, _ in tools}
    for r in range(rounds):
        k = r % len(tools)
        for name, prep, cmd in tools[k:] + tools[:k]:
            prep()
            os.sync()
            t0 = time.perf_counter()
            p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            dt = time.perf_counter() - t0
            if p.returncode != 0:
                sys.exit("unpack-ab.py: %s failed (exit %d): %s" % (
                    name, p.returncode, p.stderr.decode(errors="replace").strip()[-300:]))
            times[name].append(dt)
    tar_med = statistics.median(times["tar"])
    print("as %s, %s layers, %d rounds (load average now %.2f)" % (
        label, comp, rounds, os.getloadavg()[0]))
    for name, _, _ in tools:
        med = statistics.median(times[name])
        print("  %-60s median %.4f s  min %.4f s  cbrun/tar %.3fx" % (
            name[-60:], med, min(times[name]), tar_med / med))


if __name__ == "__main__":
    main(sys.argv[1:])
