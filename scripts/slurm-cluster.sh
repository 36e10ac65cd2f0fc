#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for nmt's SLURM tests and for
# trying `nmt compare --launcher slurm` (docs/cluster.md). Debian's packages: munge,
# slurmctld, slurmd, slurm-client. Idempotent: installs what is missing, writes a
# munge key and /etc/slurm/slurm.conf once, starts each daemon that is not running,
# and returns when `sinfo` shows the node idle and `srun hostname` runs. As root.
#
#   scripts/slurm-cluster.sh          # up (its cost in CI: docs/benchmarks.md)
#   scripts/slurm-cluster.sh check    # exit 0 if the cluster answers, else 1 (no changes)
set -euo pipefail

conf=/etc/slurm/slurm.conf
node=$(hostname -s)

answers() { timeout 20 srun -N1 -n1 --quiet hostname >/dev/null 2>&1; }

if [[ ${1:-up} == check ]]; then
    command -v srun >/dev/null && answers
    exit
fi
if answers 2>/dev/null; then
    echo "slurm: up ($node)"
    exit 0
fi
if [[ $(id -u) != 0 ]]; then
    echo "slurm: not running, and starting it needs root (apt-get, daemons)" >&2
    exit 1
fi
missing=()
for cmd in munged slurmctld slurmd sinfo; do command -v "$cmd" >/dev/null || missing+=("$cmd"); done
if ((${#missing[@]})); then
    echo "slurm: installing munge slurmctld slurmd slurm-client"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q munge slurmctld slurmd slurm-client \
        >/tmp/slurm-cluster-apt.log 2>&1 || {
        apt-get update -q >/dev/null 2>&1
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q munge slurmctld slurmd slurm-client \
            >/tmp/slurm-cluster-apt.log 2>&1
    }
fi
if [[ ! -s /etc/munge/munge.key ]]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0400 /etc/munge/munge.key
mkdir -p /run/munge /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
chown munge:munge /run/munge
cpus=$(nproc)
memory=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
if [[ ! -e $conf ]] || ! grep -q "^NodeName=$node " "$conf"; then
    mkdir -p /etc/slurm
    cat >"$conf" <<CONF
# written by nmt's scripts/slurm-cluster.sh: one node, this machine
ClusterName=nmt
SlurmctldHost=$node
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=30
MinJobAge=300
NodeName=$node CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
fi
pgrep -x munged >/dev/null || runuser -u munge -- munged
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 60); do
    if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
        break
    fi
    scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
    sleep 1
done
if ! answers; then
    echo "slurm: the daemons started, but srun does not answer; see /var/log/slurm/" >&2
    sinfo >&2 || true
    exit 1
fi
echo "slurm: up ($node, $cpus CPUs)"
