#!/usr/bin/env bash
# Experiments on Slurm, for real: a one-node cluster of Debian's slurm-wlm and munge
# (tests/cluster/slurm_cluster.sh), a master with `--launcher slurm` bound to 127.0.0.2 — not
# one of the addresses that go without a token, so the trials (sbatch jobs) reach it over TCP
# with DTRAIN_TOKEN — and the toy trial:
#   1. requests without the token are refused; an adaptive_asha search completes through Slurm
#      (each trial's handle a Slurm job of its name, its lines in the trial's logs);
#   2. a trial cancelled with `scancel` (SIGTERM first) checkpoints, and runs again from it;
#   3. pause / activate;
#   4. a job Slurm refuses (a partition that does not exist) is a trial error naming Slurm's
#      message, and its experiment ends.
# usage: test_slurm.sh DTRAIN_BINARY SOURCE_DIR. Needs root. Everything it starts (munged,
# slurmctld, slurmd, the master, the jobs) is stopped on exit, failed or not; every port is a
# free one on loopback. Prints "N passed, M failed".
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-slurm.XXXXXX)
chmod 755 "$W"
. "$SRC/tests/e2e/check.sh"
. "$SRC/tests/cluster/slurm_cluster.sh"
TOY=$SRC/tests/e2e/toy
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
API="$PY $SRC/tests/e2e/api.py"
MPID=

cleanup() {
  [ -n "$MPID" ] && kill -9 "$MPID" 2> /dev/null
  [ -n "${SLURM_CONF:-}" ] && scancel --full --signal=KILL -u root 2> /dev/null
  slurm_cluster_stop
  rm -rf "$W"
}
trap cleanup EXIT

if [ "$(id -u)" != 0 ]; then
  echo "FAIL: test_slurm.sh needs root (it runs slurmctld, slurmd and munged)" >&2
  exit 1
fi
slurm_cluster_start "$W/cluster" || { bad "the one-node Slurm cluster does not start"; summary; exit 1; }

export DTRAIN_HOME=$W/home
PORT=$(slurm_free_port)
export DTRAIN_MASTER=http://127.0.0.2:$PORT
"$DTRAIN" master --host 127.0.0.2 --port "$PORT" --slots 1 --launcher slurm >> "$W/master.log" 2>&1 &
MPID=$!
for _ in $(seq 100); do [ -s "$DTRAIN_HOME/master.port" ] && break; sleep 0.1; done
check '[ -s "$DTRAIN_HOME/master.port" ]' "the master does not start: $(tail -5 "$W/master.log")"
check '! $API get /api/v1/master > /dev/null 2>&1' "a request without the token was answered"
export DTRAIN_TOKEN=$("$DTRAIN" master token)
check '[ "$($API get /api/v1/master "r[\"pid\"]")" = "$MPID" ]' "the token is refused"

trials_of() { $API get "/api/v1/experiments/$1/trials" '" ".join(str(t["id"]) for t in r["trials"])'; }
trial() { $API get "/api/v1/trials/$1" "r[\"trial\"]$2"; }
logs_of() { $API get "/api/v1/trials/$1/logs?limit=10000" '"\n".join(l["line"] for l in r["logs"])'; }

cat > "$W/asha.yaml" << 'EOF'
name: asha-on-slurm
entrypoint: model_def:ToyTrial
hyperparameters:
  global_batch_size: 16
  lr: {type: log, base: 10, minval: -3, maxval: -1}
  batch_ms: 5
searcher:
  name: adaptive_asha
  metric: validation_loss
  max_trials: 4
  max_length: {batches: 16}
  divisor: 2
  max_rungs: 2
  max_concurrent_trials: 2
min_checkpoint_period: {batches: 8}
reproducibility: {experiment_seed: 5}
EOF

# 1. an adaptive_asha search through Slurm (slots_per_trial larger than the master's --slots:
# Slurm places the jobs, not the master's slot pool)
A=$($API create "$W/asha.yaml" "$TOY" resources.slots_per_trial=2)
check '[ "$($API wait "$A" 400)" = COMPLETED ]' "adaptive_asha on Slurm did not complete: $(tail -20 "$W/master.log")"
TS=$(trials_of "$A")
check '[ "$(echo $TS | wc -w)" -eq 4 ]' "4 trials expected, got [$TS]"
for t in $TS; do
  check '[ "$(trial "$t" "[\"state\"]")" = COMPLETED ]' "trial $t: $(trial "$t" "")"
done
T1=${TS%% *}
JOB=$(trial "$T1" '["pgid"]')
check 'slurm_job_info "$JOB" | grep "JobName=dtrain-trial-$T1 " > /dev/null' "trial $T1's handle $JOB is not its Slurm job"
check 'slurm_job_info "$JOB" | grep "NumTasks=2 " > /dev/null' "trial $T1's job does not have 2 tasks"
check 'logs_of "$T1" | grep "validation" > /dev/null' "trial $T1's logs lack its validation lines: $(logs_of "$T1" | head)"

cat > "$W/toy.yaml" << 'EOF'
name: toy-on-slurm
entrypoint: model_def:ToyTrial
hyperparameters: {global_batch_size: 16, lr: 0.01, batch_ms: 100}
searcher: {name: single, metric: validation_loss, max_length: {batches: 80}}
min_validation_period: {batches: 20}
min_checkpoint_period: {batches: 100}
checkpoint_policy: none
scheduling_unit: 5
reproducibility: {experiment_seed: 3}
EOF

# 2. scancel: SIGTERM first, the trial checkpoints and stops; the master runs it again from
# that checkpoint (one restart) and it completes
B=$($API create "$W/toy.yaml" "$TOY")
TB=$(trials_of "$B")
$API until "/api/v1/trials/$TB" 'r["trial"]["batches"] >= 15' 120
JB=$(trial "$TB" '["pgid"]')
scancel "$JB"
check '$API until "/api/v1/trials/$TB" "r[\"trial\"][\"restarts\"] == 1" 120' "the cancelled trial was not restarted: $(trial "$TB" "")"
check '[ "$($API wait "$B" 300)" = COMPLETED ]' "the cancelled trial did not complete after its restart"
check 'logs_of "$TB" | grep "CANCELLED" > /dev/null' "the trial's logs do not say Slurm cancelled its job"
ck=$($API get "/api/v1/trials/$TB/checkpoints" '" ".join(str(c["batches"]) for c in r["checkpoints"])')
check '[ -n "$ck" ] && [ "${ck%% *}" -lt 80 ]' "no checkpoint from the SIGTERM before batch 80: [$ck]"
first_run=$(logs_of "$TB" | grep -c "dtrain master: run .* ended")
check '[ "$first_run" -eq 2 ]' "two runs expected, the logs show $first_run"
resumed_at=$(logs_of "$TB" | awk '/run 1 ended/ {after = 1} after && /^training: batch/ {print $3; exit}')
check '[ -n "$resumed_at" ] && [ "$resumed_at" -gt 5 ] && [ "$resumed_at" -le 40 ]' \
  "the second run did not resume from the SIGTERM's checkpoint (its first report: batch '$resumed_at')"

# 3. pause while it trains (its job ends), activate (a new job): it completes
C=$($API create "$W/toy.yaml" "$TOY")
TC=$(trials_of "$C")
$API until "/api/v1/trials/$TC" 'r["trial"]["batches"] >= 10' 120
$API post "/api/v1/experiments/$C/pause" > /dev/null
check '$API until "/api/v1/trials/$TC" "r[\"trial\"][\"state\"] == \"PAUSED\"" 120' "the trial did not pause"
JC=$(trial "$TC" '["pgid"]')
check '[ "$JC" = 0 ] && [ -z "$(squeue -h -n "dtrain-trial-$TC" -t PD,R,CG)" ]' "a paused trial still has a Slurm job"
$API post "/api/v1/experiments/$C/activate" > /dev/null
check '[ "$($API wait "$C" 300)" = COMPLETED ]' "the reactivated trial did not complete"
check '[ "$(trial "$TC" "[\"restarts\"]")" = 0 ]' "pause / activate counted a restart"

# 4. Slurm refuses the job: the trial is an error that names Slurm's message
D=$($API create "$W/toy.yaml" "$TOY" slurm.partition=nosuchpartition)
TD=$(trials_of "$D")
check '$API until "/api/v1/trials/$TD" "r[\"trial\"][\"state\"] == \"ERROR\"" 60' "the refused trial is not ERROR: $(trial "$TD" "")"
check 'logs_of "$TD" | grep "Invalid partition name specified" > /dev/null' "the trial's logs do not name Slurm's message: $(logs_of "$TD")"
# the searcher is told: the experiment ends instead of waiting for a trial that never runs
check '$API wait "$D" 60 > /dev/null' "the experiment of a trial that cannot start did not end"

summary
