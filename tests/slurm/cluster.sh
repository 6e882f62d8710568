#!/usr/bin/env bash
# A throw-away single-node SLURM cluster on this machine (Debian's slurm-wlm + munge), for the
# SLURM test and for trying the slurm profile by hand. Needs root (slurmd runs jobs as their
# submitting user and must start as root). The munge key and socket, state, spool and logs live
# under one folder; slurm.conf is written where every client looks by default,
# /etc/slurm/slurm.conf (a SLURM_CONF variable would not do: the SLURM plugin's job step drops every
# SLURM_* variable before its nested `srun`), with a first-line marker: a slurm.conf this script did
# not write is never overwritten, and `stop` removes only its own.
#
#   tests/slurm/cluster.sh start    # writes the config, starts munged, slurmctld, slurmd; waits for the node
#   tests/slurm/cluster.sh stop     # stops the three daemons (by their pid files), removes its slurm.conf
#
# AURA_SLURM_DIR (default /tmp/aura-slurm) is the folder; AURA_SLURM_PORT (default 6817) the
# slurmctld port (slurmd uses the next one).
#
# Choices for a container: no cgroups (ProctrackType=proctrack/linuxproc, TaskPlugin=task/none,
# JobAcctGatherType=jobacct_gather/none); no slurmdbd (Debian's slurmdbd needs a MariaDB server), so
# AccountingStorageType=accounting_storage/none: `sacct` has no database to read, and the Snakemake
# SLURM plugin is told to read job states with `squeue` (--slurm-status-command squeue). MinJobAge=600
# keeps finished jobs in slurmctld's memory (and in `squeue --states=all`) for 10 minutes, longer than
# any test run; JobCompType=jobcomp/filetxt writes one line per finished job to <dir>/log/jobcomp.txt,
# a record the test reads to prove jobs ran under SLURM.
set -euo pipefail

DIR=${AURA_SLURM_DIR:-/tmp/aura-slurm}
PORT=${AURA_SLURM_PORT:-6817}
CONF=/etc/slurm/slurm.conf
MARK="# Written by tests/slurm/cluster.sh"
NODE=$(hostname -s)

die() { echo "slurm cluster: $*" >&2; exit 1; }

need() {
  for cmd in munged slurmctld slurmd sbatch squeue scontrol sinfo; do
    command -v "$cmd" >/dev/null 2>&1 || die "'$cmd' not found: apt-get install -y slurm-wlm munge"
  done
  [ "$(id -u)" = 0 ] || die "must run as root (slurmd starts jobs as their user)"
}

write_config() {
  if [ -e "$CONF" ] && [ "$(head -c ${#MARK} "$CONF")" != "$MARK" ]; then
    die "$CONF exists and was not written by this script: not overwriting a real cluster's config"
  fi
  mkdir -p "$DIR"/{munge,state,spool,log,run} "$(dirname "$CONF")"
  chmod 0755 "$DIR" "$DIR"/munge
  # Real memory (MiB) of this machine, less 10% for the daemons: a node asking for more than
  # it has would be drained.
  local mem_kib mem_mb
  mem_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
  mem_mb=$(( mem_kib / 1024 * 9 / 10 ))
  if [ ! -s "$DIR/munge/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 0400 "$DIR/munge/munge.key"
  fi
  cat > "$CONF" <<EOF
$MARK: one node ($NODE), 2 CPUs, ${mem_mb} MiB.
ClusterName=aura
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=2 RealMemory=$mem_mb State=UNKNOWN
PartitionName=aura Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

pid_of() { [ -s "$DIR/run/$1.pid" ] && cat "$DIR/run/$1.pid" || true; }
alive() { local pid; pid=$(pid_of "$1"); [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }

start() {
  need
  if alive slurmctld || alive slurmd || alive munged; then
    die "already running under $DIR (tests/slurm/cluster.sh stop first)"
  fi
  if [ -e "$CONF" ] && scontrol ping 2>/dev/null | grep -q UP; then
    die "a slurmctld answers for $CONF already: tests/slurm/cluster.sh stop (no AURA_SLURM_DIR) stops it"
  fi
  write_config
  munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munge.seed" \
    || die "munged did not start: $(tail -n 3 "$DIR/log/munged.log" 2>/dev/null)"
  slurmctld -f "$CONF" -i || die "slurmctld did not start: $(tail -n 3 "$DIR/log/slurmctld.log")"
  slurmd -f "$CONF" || die "slurmd did not start: $(tail -n 3 "$DIR/log/slurmd.log")"
  # Wait (at most 60 s) for the node to be idle.
  local state=""
  for _ in $(seq 120); do
    state=$(sinfo -h -n "$NODE" -o '%t' 2>/dev/null || true)
    if [ "$state" = idle ]; then
      echo "slurm cluster: node $NODE idle ($CONF, logs in $DIR/log)"
      return 0
    fi
    if [ "$state" = drain ] || [ "$state" = down ] || [ "$state" = "down*" ]; then
      scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true
    fi
    sleep 0.5
  done
  die "node $NODE not idle after 60 s (state '$state'); logs: $DIR/log/slurmctld.log, $DIR/log/slurmd.log"
}

stop() {
  local name pid
  # Without AURA_SLURM_DIR: the folder of the cluster whose slurm.conf this script wrote.
  if [ -z "${AURA_SLURM_DIR:-}" ] && [ -e "$CONF" ] && [ "$(head -c ${#MARK} "$CONF")" = "$MARK" ]; then
    DIR=$(sed -n 's|^StateSaveLocation=\(.*\)/state$|\1|p' "$CONF")
  fi
  for name in slurmd slurmctld munged; do
    pid=$(pid_of "$name")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || continue
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "slurm cluster: $name ($pid) ignored SIGTERM for 10 s, killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  if [ -e "$CONF" ] && [ "$(head -c ${#MARK} "$CONF")" = "$MARK" ]; then rm -f "$CONF"; fi
  echo "slurm cluster: stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 start|stop" ;;
esac
