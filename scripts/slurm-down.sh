#!/usr/bin/env bash
# Stops what scripts/slurm-up.sh started (slurmd, slurmctld, munged), by the
# pids it recorded. Jobs still running are killed with their slurmd.
set -uo pipefail
STATE=/run/cbrun-slurm
stop() {
    for f in "$STATE/$1.pid" "$STATE/$1.pid.launch"; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
    done
}
stop slurmd
stop slurmctld
stop munged
echo "slurm-down: stopped"
