# slurm_cluster.sh — a one-node Slurm cluster of the test's own (sourced by tests). Needs root,
# Debian's slurm-wlm and munge, and PY (a Python for picking free ports).
#
#   slurm_cluster_start DIR   make DIR/{munge,state,spool,log}, a generated munge key and a
#                             munged on its own socket, a slurm.conf with this host as the one
#                             node (CPUs from nproc, partition "debug", free loopback ports, no
#                             cgroups, no accounting), slurmctld and slurmd in the foreground in
#                             the background; exports SLURM_CONF and waits until the node is
#                             idle. Status 1 with a reason when something does not come up.
#   slurm_cluster_stop        kill the daemons it started (by pid) and remove DIR. Safe to call
#                             twice; the caller traps it on EXIT.
#   slurm_job_info ID         `scontrol show job -o ID` (state and exit code after the job ends:
#                             slurmctld keeps ended jobs MinJobAge = 300 s; there is no
#                             accounting database, so sacct has nothing).
#
# A system Slurm (if any) is left alone: its own ports, conf, state and munge socket are never
# used — everything is under DIR and every client finds it through SLURM_CONF.

SLURM_DIR=
SLURM_PIDS=()

slurm_cluster_stop() {
  local p
  for p in "${SLURM_PIDS[@]}"; do kill "$p" 2> /dev/null; done
  for p in "${SLURM_PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$p" 2> /dev/null
    wait "$p" 2> /dev/null
  done
  SLURM_PIDS=()
  if [ -n "$SLURM_DIR" ]; then rm -rf "$SLURM_DIR"; fi
  SLURM_DIR=
}

slurm_free_port() {
  $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

slurm_cluster_start() {
  SLURM_DIR=$1
  local d=$1 node cpus mem ctld_port d_port
  for b in munged mungekey slurmctld slurmd sbatch squeue scancel scontrol; do
    command -v "$b" > /dev/null || [ -x "/usr/sbin/$b" ] || {
      echo "slurm_cluster: $b is missing; hint: apt-get install slurm-wlm munge (make test-deps)" >&2
      return 1
    }
  done
  export PATH="$PATH:/usr/sbin"
  mkdir -p "$d/munge" "$d/state" "$d/spool" "$d/log" && chmod 700 "$d/munge" || return 1
  mungekey --create --keyfile="$d/munge/munge.key" --force > /dev/null 2>&1 ||
    { echo "slurm_cluster: mungekey failed" >&2; return 1; }
  chmod 400 "$d/munge/munge.key"
  munged --foreground --force --socket="$d/munge/munge.socket" --key-file="$d/munge/munge.key" \
    --pid-file="$d/munge/munged.pid" --log-file="$d/log/munged.log" \
    --seed-file="$d/munge/munge.seed" > "$d/log/munged.out" 2>&1 &
  SLURM_PIDS+=($!)
  for _ in $(seq 50); do [ -S "$d/munge/munge.socket" ] && break; sleep 0.1; done
  [ -S "$d/munge/munge.socket" ] ||
    { echo "slurm_cluster: munged did not start: $(tail -3 "$d/log/munged.log" 2> /dev/null)" >&2; return 1; }

  node=$(hostname -s)
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
  ctld_port=$(slurm_free_port)
  d_port=$(slurm_free_port)
  while [ "$d_port" = "$ctld_port" ]; do d_port=$(slurm_free_port); done
  cat > "$d/slurm.conf" << EOF
ClusterName=dtraintest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/munge.socket
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MinJobAge=300
KillWait=30
SlurmdTimeout=30
InactiveLimit=0
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$d/slurm.conf
  slurmctld -D -i -f "$SLURM_CONF" > "$d/log/slurmctld.out" 2>&1 &
  SLURM_PIDS+=($!)
  slurmd -D -f "$SLURM_CONF" -N "$node" > "$d/log/slurmd.out" 2>&1 &
  SLURM_PIDS+=($!)
  local state=
  for _ in $(seq 300); do
    state=$(sinfo -h -n "$node" -o %t 2> /dev/null)
    [ "$state" = idle ] && return 0
    sleep 0.1
  done
  echo "slurm_cluster: the node did not become idle (state '$state'):" >&2
  tail -5 "$d/log/slurmctld.log" "$d/log/slurmd.log" "$d/log/"*.out >&2 2> /dev/null
  return 1
}

slurm_job_info() {
  scontrol show job -o "$1"
}
