#!/usr/bin/env bash
# A single-node SLURM cluster on this machine (slurmctld + slurmd + munge), for testing the slurm
# profile for real: `scripts/slurm-localhost.sh [start]` brings it up (idempotent), `stop` kills it,
# `status` prints the node state. Needs root (apt, daemons). Accounting is off: use
# `slurm-status-command: squeue` (profiles/slurm-localhost does).
set -euo pipefail

CONF=/etc/slurm/slurm.conf # the executor strips SLURM_CONF inside jobs: only the default path works
TIMEOUT=${SLURM_UP_TIMEOUT:-60}
PARTITION=${SLURM_PARTITION:-debug}
UP_STATES='^(idle|mixed|allocated|completing)$'

die() { echo "slurm-localhost: error: $*" >&2; exit 1; }
log() { echo "slurm-localhost: $*" >&2; }

node_state() { timeout 10 sinfo -h -o %T 2>/dev/null | head -n1 || true; }

install_packages() {
  local missing=()
  for bin in slurmctld:slurmctld slurmd:slurmd sinfo:slurm-client munged:munge; do
    command -v "${bin%%:*}" >/dev/null || missing+=("${bin#*:}")
  done
  ((${#missing[@]})) || return 0
  command -v apt-get >/dev/null || die "apt-get not found; install ${missing[*]} with your package manager"
  log "installing ${missing[*]} from apt"
  local apt=(apt-get -o DPkg::Lock::Timeout=300 -qq)
  # Package lists are absent on a fresh image; refresh once if the packages are unknown.
  apt-cache show slurmctld >/dev/null 2>&1 || "${apt[@]}" update
  # policy-rc.d 101: packages must not try to start services (no init system in containers; we
  # start the daemons ourselves below).
  local policy=/usr/sbin/policy-rc.d restore=""
  if [ -e "$policy" ]; then restore=$(mktemp); cp -p "$policy" "$restore"; fi
  printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends \
    slurmctld slurmd slurm-client munge >/dev/null || { rm -f "$policy"; [ -z "$restore" ] || mv "$restore" "$policy"; die "apt-get install ${missing[*]} failed"; }
  rm -f "$policy"; [ -z "$restore" ] || mv "$restore" "$policy"
}

write_conf() {
  local host node_line tmp
  host=$(hostname -s)
  # slurmd -C reports this machine's real topology and memory; declaring more than that drains the node.
  node_line=$(slurmd -C | head -n1) || die "slurmd -C failed"
  [[ $node_line == NodeName=* ]] || die "unexpected 'slurmd -C' output: $node_line"
  mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
  tmp=$(mktemp)
  cat >"$tmp" <<EOF
# Written by ewa scripts/slurm-localhost.sh: one node, no accounting, no cgroups (test cluster).
ClusterName=ewa-localhost
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
# Finished jobs stay visible to squeue for 5 minutes: the executor's squeue status query needs them.
MinJobAge=300
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
${node_line} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=${PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  if cmp -s "$tmp" "$CONF"; then rm -f "$tmp"; return 1; fi
  mv "$tmp" "$CONF"; chmod 644 "$CONF"
  log "wrote $CONF (${node_line})"
  return 0
}

start_munge() {
  if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key
    else dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none; fi
  fi
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /etc/munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
  chmod 700 /etc/munge; chmod 400 /etc/munge/munge.key; chmod 755 /run/munge
  if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    pkill_pidfile /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged --force || die "munged did not start (see /var/log/munge/munged.log)"
  fi
}

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

pkill_pidfile() { # stop exactly the daemon recorded in its pid file
  local f=$1 pid
  pid_alive "$f" || { rm -f "$f"; return 0; }
  pid=$(cat "$f"); kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}

stop_all() {
  pkill_pidfile /run/slurm/slurmd.pid
  pkill_pidfile /run/slurm/slurmctld.pid
  pkill_pidfile /run/munge/munged.pid
}

start_all() {
  local t0 changed=0 state
  t0=$(date +%s.%N)
  [ "$(id -u)" = 0 ] || die "must run as root (installs packages and starts daemons)"
  install_packages
  write_conf && changed=1
  start_munge
  if ((changed)); then pkill_pidfile /run/slurm/slurmd.pid; pkill_pidfile /run/slurm/slurmctld.pid; fi
  pid_alive /run/slurm/slurmctld.pid || slurmctld || die "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
  pid_alive /run/slurm/slurmd.pid || slurmd || die "slurmd did not start (see /var/log/slurm/slurmd.log)"
  for _ in $(seq $((TIMEOUT * 5))); do
    state=$(node_state)
    [[ $state =~ $UP_STATES ]] && break
    # A node left drained/down by an earlier run (or a changed node line) is put back in service.
    if [[ $state =~ ^(down|drain|drained|draining) ]]; then
      scontrol update NodeName="$(hostname -s)" State=RESUME 2>/dev/null || true
    fi
    sleep 0.2
  done
  [[ $state =~ $UP_STATES ]] || die "node not up after ${TIMEOUT}s (sinfo state '${state:-none}'); see /var/log/slurm/slurmctld.log and slurmd.log"
  log "up: partition ${PARTITION}, node $(hostname -s) ${state} ($(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s)"
}

case ${1:-start} in
  start) start_all ;;
  stop) stop_all; log "stopped" ;;
  status) state=$(node_state); echo "${state:-down}"; [[ $state =~ $UP_STATES ]] ;;
  *) die "usage: $0 [start|stop|status]" ;;
esac
