#!/usr/bin/env bash
# Starts a single-node Slurm cluster (Debian's slurm-wlm 22.05 + munge) on
# this host, without systemd, for cbrun's Slurm tests. Run as root.
# Idempotent: when the cluster this script started is up with the
# slurm.conf it would write and the node is idle, it does nothing;
# otherwise it (re)starts munged, slurmctld, slurmd.
# scripts/slurm-down.sh stops it.
#
# What it sets up: a munge key it creates (when there is none), a
# slurm.conf with ProctrackType=proctrack/linuxproc and TaskPlugin=task/none
# (no cgroup plugins: cbrun makes its own cgroups), SlurmUser=root,
# MailProg=/bin/true, AuthInfo=cred_expire=10 (a requeued job may start
# again 10 s after the requeue, not 120), the node line from `slurmd -C`,
# spool 0755 (users' jobs read their scripts there). It returns when the node is idle and its
# slurmd has checked in since this start.
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "slurm-up: must run as root" >&2; exit 1; }
for t in munged slurmctld slurmd sinfo scontrol; do
    command -v "$t" >/dev/null || { echo "slurm-up: $t not found (apt-get install slurm-wlm munge)" >&2; exit 1; }
done

STATE=/run/cbrun-slurm            # pid files and logs of this script's daemons
CONF=/etc/slurm/slurm.conf
PARTITION=${CBRUN_SLURM_PARTITION:-debug}
mkdir -p "$STATE" /etc/slurm

alive() { [ -f "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

node_state() { sinfo -h -N -o '%T' 2>/dev/null | head -n1; }

# slurm.conf: this host as controller and only node.
host=$(hostname -s)
node=$(slurmd -C | head -n1 | sed "s/^NodeName=[^ ]*/NodeName=$host/")
cat > "$STATE/slurm.conf.want" <<CONF
# written by cbrun scripts/slurm-up.sh
ClusterName=cbrun
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=10
MinJobAge=300
# A requeued job waits cred_expire seconds before it may start again (120
# by default); the requeue test need not wait that long.
AuthInfo=cred_expire=10
InactiveLimit=0
MaxArraySize=100001
SlurmctldTimeout=30
SlurmdTimeout=30
$node State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF

if alive munged && alive slurmctld && alive slurmd && [ -f "$CONF" ] \
    && cmp -s "$CONF" "$STATE/slurm.conf.want" \
    && [ "$(node_state)" = idle ]; then
    echo "slurm-up: already up (node idle)"
    exit 0
fi

"$(dirname "$0")/slurm-down.sh" >/dev/null 2>&1 || true

# munge: a key of our own when there is none.
install -d -m 0700 -o munge -g munge /etc/munge
install -d -m 0755 -o munge -g munge /run/munge /var/log/munge /var/lib/munge
if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=128 status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
setpriv --reuid munge --regid munge --init-groups munged --force \
    --pid-file=/run/munge/munged.pid
for _ in $(seq 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
cp /run/munge/munged.pid "$STATE/munged.pid"
for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.1; done
munge -n </dev/null | unmunge >/dev/null

install -d -m 0755 /var/spool/slurmd /var/spool/slurmctld /var/log/slurm
install -m 0644 "$STATE/slurm.conf.want" "$CONF"

start=$(date +%s)
# -i: ignore a state file from an earlier cluster's jobs.
slurmctld -D -i >>"$STATE/slurmctld.out" 2>&1 &
echo $! >"$STATE/slurmctld.pid.launch"
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
slurmd -D >>"$STATE/slurmd.out" 2>&1 &
echo $! >"$STATE/slurmd.pid.launch"

# Idle, and checked in since this start (not a stale state from before).
for _ in $(seq 300); do
    st=$(node_state || true)
    last=$(scontrol show node "$host" -o 2>/dev/null | sed -n 's/.*SlurmdStartTime=\([^ ]*\).*/\1/p')
    if [ "$st" = idle ] && [ -n "$last" ] && [ "$last" != None ] \
        && [ "$(date -d "$last" +%s 2>/dev/null || echo 0)" -ge "$((start - 1))" ]; then
        echo "slurm-up: node $host idle (slurmd started $last)"
        exit 0
    fi
    if [ "${st:-}" = down ] || [ "${st:-}" = "down*" ] || [ "${st:-}" = drained ]; then
        scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
    fi
    sleep 0.1
done
echo "slurm-up: the node did not become idle; see $STATE/*.out and /var/log/slurm/" >&2
sinfo -N -l >&2 || true
exit 1
