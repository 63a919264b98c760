#!/usr/bin/env bash
# A hung trial (tests/e2e/toy's hang_at: a train step that never returns) with
# resources.max_silence 3: the master kills it with its process group and restarts it from its
# latest checkpoint, counted against max_restarts, with the reason in the trial's logs and as
# its exit reason; a trial that hangs in every run ends in ERROR once no restart is left.
# usage: test_hang.sh DTRAIN_BINARY SOURCE_DIR
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-hang.XXXXXX)
. "$SRC/tests/e2e/check.sh"
. "$SRC/tests/e2e/master_env.sh"
TOY=$SRC/tests/e2e/toy

cleanup() {
  stop_master_runs
  rm -rf "$W"
}
trap cleanup EXIT

start_master || { bad "the master does not start"; summary; exit 1; }

# write_config NAME HANG_RUNS MAX_RESTARTS: the toy, hanging at batch 12 after a checkpoint at
# 10, in runs up to HANG_RUNS
write_config() {
  cat > "$W/$1.yaml" << EOF2
name: $1
entrypoint: model_def:ToyTrial
hyperparameters:
  global_batch_size: 16
  lr: 0.01
  hang_at: 12
  hang_runs: $2
searcher:
  name: single
  metric: validation_loss
  max_length:
    batches: 30
min_validation_period:
  batches: 10
min_checkpoint_period:
  batches: 10
scheduling_unit: 5
max_restarts: $3
resources:
  max_silence: 3
reproducibility:
  experiment_seed: 3
EOF2
}

# 1. hangs in its first run only: killed, restarted from the checkpoint at batch 10, completes
write_config once 1 2
A=$($API create "$W/once.yaml" "$TOY")
TA=$($API until "/api/v1/experiments/$A/trials" 'r["trials"]' 30 > /dev/null &&
  $API get "/api/v1/experiments/$A/trials" 'r["trials"][0]["id"]')
$API until "/api/v1/trials/$TA" 'r["trial"]["pgid"] > 0' 30 > /dev/null && note_pgid "$TA"
check '[ "$($API wait "$A" 180)" = COMPLETED ]' "a trial that hung once did not complete: $(tail -20 "$W/master.log")"
LOGS=$($API get "/api/v1/trials/$TA/logs" '"\n".join(l["line"] for l in r["logs"])')
CK=$($API get "/api/v1/trials/$TA/checkpoints" '[c["uuid"] for c in r["checkpoints"] if c["batches"] == 10][0]')
check 'grep -Eq "no heartbeat for [0-9]+ s \(resources.max_silence 3\); killed, restarting from checkpoint $CK" <<< "$LOGS"' \
  "the logs do not say why the run was killed and where it restarts (checkpoint at 10: $CK): $(grep -i heartbeat <<< "$LOGS")"
check '[ "$($API get "/api/v1/trials/$TA" "r[\"trial\"][\"restarts\"]")" -ge 1 ]' "the kill was not counted as a restart"
check '[ "$($API get "/api/v1/trials/$TA" "r[\"trial\"][\"batches\"]")" = 30 ]' "the restarted trial did not train to the end"

# 2. hangs in every run: killed twice (max_restarts 1), then the trial is ERROR with the reason
write_config always 1000 1
B=$($API create "$W/always.yaml" "$TOY")
TB=$($API until "/api/v1/experiments/$B/trials" 'r["trials"]' 30 > /dev/null &&
  $API get "/api/v1/experiments/$B/trials" 'r["trials"][0]["id"]')
$API until "/api/v1/trials/$TB" 'r["trial"]["pgid"] > 0' 30 > /dev/null && note_pgid "$TB"
$API wait "$B" 180 > /dev/null
SB=$($API get "/api/v1/trials/$TB" 'r["trial"]["state"]')
check '[ "$SB" = ERROR ]' "a trial that always hangs did not end in ERROR but $SB: $(tail -20 "$W/master.log")"
REASON=$($API get "/api/v1/trials/$TB" 'r["trial"]["exit_reason"]')
check 'grep -q "no heartbeat for .* killed, no restart left (max_restarts 1)" <<< "$REASON"' \
  "its exit reason does not say it hung: $REASON"
LOGS=$($API get "/api/v1/trials/$TB/logs" '"\n".join(l["line"] for l in r["logs"])')
check '[ "$(grep -c "no heartbeat for" <<< "$LOGS")" -eq 2 ]' "not killed exactly twice: $(grep "heartbeat" <<< "$LOGS")"
# every process of the hung runs is gone
for g in $(cat "$W/pgids"); do check '! kill -0 -- "-$g" 2> /dev/null' "process group $g lives on"; done

# 3. a restarted master finds the recorded pgid of a run given to an unrelated process (a
# `sleep 100` in a group of its own): it leaves that process alone, treats the run as gone and
# runs the trial again
write_config reused 0 2
sed -i 's/batches: 30/batches: 40/; s/lr: 0.01/lr: 0.01\n  batch_ms: 100/' "$W/reused.yaml"
C=$($API create "$W/reused.yaml" "$TOY")
TC=$($API until "/api/v1/experiments/$C/trials" 'r["trials"]' 30 > /dev/null &&
  $API get "/api/v1/experiments/$C/trials" 'r["trials"][0]["id"]')
$API until "/api/v1/trials/$TC" 'r["trial"]["batches"] >= 5' 60 > /dev/null
G=$($API get "/api/v1/trials/$TC" 'r["trial"]["pgid"]')
echo "$G" >> "$W/pgids"
kill -9 "$MPID"
wait "$MPID" 2> /dev/null
MPID=
[ "$G" -gt 1 ] && kill -9 -- "-$G" 2> /dev/null # the run is gone...
setsid sleep 100 & # ...and its pid number, as far as the store knows, is this process's
S=$!
echo "$S" >> "$W/pgids"
$PY -c 'import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); d.execute("UPDATE trials SET pgid = ? WHERE id = ?", (int(sys.argv[2]), int(sys.argv[3]))); d.commit()' \
  "$DTRAIN_HOME/store.db" "$S" "$TC"
start_master || bad "the master does not start again"
check '[ "$($API wait "$C" 180)" = COMPLETED ]' "the trial did not run again to its end: $(tail -20 "$W/master.log")"
check 'kill -0 "$S" 2> /dev/null' "the unrelated process $S was killed for the run it replaced"
check 'grep -q "process group $S is not the run that was recorded" "$W/master.log"' \
  "the master does not say it left process $S alone: $(tail -5 "$W/master.log")"
kill -9 "$S" 2> /dev/null
summary
