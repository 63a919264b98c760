#!/usr/bin/env bash
# End-to-end tests of the master: experiments through the REST API (tests/e2e/api.py) on the
# toy trial and on Fashion-MNIST, with the faults the master must survive — a paused and
# reactivated trial, a trial process killed, the master itself killed, checkpoint GC — and bad
# input that must be refused without touching the store.
# usage: test_master.sh DTRAIN_BINARY SOURCE_DIR
# Prints "N passed, M failed" and exits non-zero on any failure. Everything it starts listens
# on loopback, on a free port, in its own DTRAIN_HOME, and is killed on exit.
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-master.XXXXXX)
. "$SRC/tests/e2e/check.sh"
. "$SRC/tests/e2e/master_env.sh"
TOY=$SRC/tests/e2e/toy
FASHION=$SRC/examples/fashion_mnist
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# every trial process group the master started (note_pgid), then the master
cleanup() {
  stop_master_runs
  rm -rf "$W"
}
trap cleanup EXIT

start_master || { bad "the master does not start"; summary; exit 1; }

# toy configs: a single trial, slow enough to act on while it runs
cat > "$W/toy.yaml" << 'EOF'
name: toy
entrypoint: model_def:ToyTrial
hyperparameters:
  global_batch_size: 16
  lr: 0.01
  batch_ms: 40
searcher:
  name: single
  metric: validation_loss
  max_length:
    batches: 60
min_validation_period:
  batches: 10
min_checkpoint_period:
  batches: 10
scheduling_unit: 5
reproducibility:
  experiment_seed: 3
EOF

# 1. a reference run, uninterrupted
A=$($API create "$W/toy.yaml" "$TOY")
check '[ "$($API wait "$A" 120)" = COMPLETED ]' "reference run did not complete: $(tail -20 "$W/master.log")"
TA=$($API get "/api/v1/experiments/$A/trials" 'r["trials"][0]["id"]')
VAL_A=$($API get "/api/v1/trials/$TA/metrics?kind=validation" '[(m["batches"], m["metrics"]) for m in r["metrics"]]')
check '[ "$($API get "/api/v1/trials/$TA/metrics?kind=validation" "len(r[\"metrics\"])")" -eq 6 ]' \
  "6 validations expected: $VAL_A"
check '[ "$($API get "/api/v1/trials/$TA/metrics?kind=training" "len(r[\"metrics\"])")" -eq 12 ]' \
  "12 training reports expected (every 5 batches)"
check '[ "$($API get "/api/v1/trials/$TA" "r[\"trial\"][\"state\"]")" = COMPLETED ]' "trial state"

# 1b. a warm start from the reference trial (searcher.source_trial_id): it resumes from that
# trial's latest checkpoint (batch 60) and trains on to 80
WS=$($API create "$W/toy.yaml" "$TOY" "searcher.source_trial_id=$TA" 'searcher.max_length={batches: 80}')
check '[ "$($API wait "$WS" 120)" = COMPLETED ]' "the warm-started experiment did not complete"
TWS=$($API get "/api/v1/experiments/$WS/trials" 'r["trials"][0]["id"]')
wsb=$($API get "/api/v1/trials/$TWS/metrics?kind=training" '" ".join(str(m["batches"]) for m in r["metrics"])')
check '[ "$wsb" = "65 70 75 80" ]' "warm start: training reports at [$wsb], expected 65 70 75 80"

# 2. pause while it trains, activate: the same validation metrics, bit for bit
B=$($API create "$W/toy.yaml" "$TOY")
TB=$($API get "/api/v1/experiments/$B/trials" 'r["trials"][0]["id"]' 2> /dev/null)
$API until "/api/v1/trials/$TB" 'r["trial"]["batches"] >= 20' 60
$API post "/api/v1/experiments/$B/pause" > /dev/null
check '$API until "/api/v1/trials/$TB" "r[\"trial\"][\"state\"] == \"PAUSED\"" 60' "trial did not pause"
P_AT=$($API get "/api/v1/trials/$TB" 'r["trial"]["batches"]')
check '[ "$P_AT" -lt 60 ]' "the trial finished before the pause took effect ($P_AT batches)"
$API post "/api/v1/experiments/$B/activate" > /dev/null
check '[ "$($API wait "$B" 120)" = COMPLETED ]' "paused + activated run did not complete"
VAL_B=$($API get "/api/v1/trials/$TB/metrics?kind=validation" '[(m["batches"], m["metrics"]) for m in r["metrics"]]')
check '[ "$VAL_A" = "$VAL_B" ]' "pause + activate changed the metrics: $VAL_A vs $VAL_B"

# 3. SIGKILL of the trial's processes: restarted from its checkpoint, the same result
C=$($API create "$W/toy.yaml" "$TOY")
TC=$($API get "/api/v1/experiments/$C/trials" 'r["trials"][0]["id"]' 2> /dev/null)
$API until "/api/v1/trials/$TC" 'r["trial"]["batches"] >= 25 and r["trial"].get("pgid")' 60
note_pgid "$TC"
G=$($API get "/api/v1/trials/$TC" 'r["trial"]["pgid"]')
check '[ "$G" -gt 1 ]' "the running trial has no process group: '$G'"
[ "$G" -gt 1 ] && kill -9 -- "-$G"
check '[ "$($API wait "$C" 120)" = COMPLETED ]' "killed trial did not complete after a restart"
check '[ "$($API get "/api/v1/trials/$TC" "r[\"trial\"][\"restarts\"]")" -eq 1 ]' "one restart expected"
VAL_C=$($API get "/api/v1/trials/$TC/metrics?kind=validation" '[(m["batches"], m["metrics"]) for m in r["metrics"]]')
check '[ "$VAL_A" = "$VAL_C" ]' "a restart from the checkpoint changed the metrics"

# 4. SIGKILL of the master mid-experiment: restarted, the experiment completes, counts match
sed -e 's/name: single/name: random\n  max_trials: 4\n  max_concurrent_trials: 2/' \
    -e 's/  lr: 0.01/  lr: {type: log, base: 10, minval: -3, maxval: -1}/' "$W/toy.yaml" > "$W/rand.yaml"
D=$($API create "$W/rand.yaml" "$TOY")
$API until "/api/v1/experiments/$D/trials" 'sum(t["batches"] >= 15 for t in r["trials"]) >= 2' 60
for t in $($API get "/api/v1/experiments/$D/trials" '" ".join(str(t["id"]) for t in r["trials"])'); do
  note_pgid "$t"
done
kill -9 "$MPID"
wait "$MPID" 2> /dev/null
sleep 1
# (a zombie runs no code: the orphans' reaper may take a moment to collect them)
orphans=0
for g in $(cat "$W/pgids"); do
  [ "$g" -gt 1 ] && ps -eo pgid=,stat= | awk -v g="$g" '$1 == g && $2 !~ /Z/ {f = 1} END {exit !f}' &&
    orphans=$((orphans + 1))
done
check '[ $orphans -eq 0 ]' "$orphans trial process groups outlived the killed master"
start_master || bad "the master does not start again"
check '[ "$($API wait "$D" 180)" = COMPLETED ]' "experiment did not complete after the master restart"
check '[ "$($API get "/api/v1/experiments/$D/trials" "len(r[\"trials\"])")" -eq 4 ]' "4 trials expected"
for t in $($API get "/api/v1/experiments/$D/trials" '" ".join(str(t["id"]) for t in r["trials"])'); do
  nt=$($API get "/api/v1/trials/$t/metrics?kind=training" 'len(r["metrics"])')
  nv=$($API get "/api/v1/trials/$t/metrics?kind=validation" 'len(r["metrics"])')
  check '[ "$nt" -eq 12 ] && [ "$nv" -eq 6 ]' "trial $t: $nt training / $nv validation rows, expected 12 / 6"
  check '[ "$($API get "/api/v1/trials/$t" "r[\"trial\"][\"restarts\"]")" -eq 0 ]' \
    "trial $t: a master restart must not count as a trial restart"
done

# 5. GC: exactly the checkpoints the policy keeps are left, on disk and in the store
for e in $D; do
  kept=$($API get "/api/v1/experiments/$e/checkpoints" '" ".join(sorted(c["path"] for c in r["checkpoints"] if c["state"] == "COMPLETED"))')
  ondisk=$(find "$DTRAIN_HOME/checkpoints/exp-$e" -mindepth 2 -maxdepth 2 -type d -name 'batch_*' | sort | tr '\n' ' ' | sed 's/ $//')
  check '[ "$kept" = "$ondisk" ]' "experiment $e: checkpoints on disk differ from the store: [$ondisk] vs [$kept]"
  # default policy: each trial's latest and best (save_trial_latest 1, save_trial_best 1)
  per_trial=$($API get "/api/v1/experiments/$e/checkpoints" 'max([sum(c["state"] == "COMPLETED" and c["trial_id"] == t for c in r["checkpoints"]) for t in set(c["trial_id"] for c in r["checkpoints"])])')
  check '[ "$per_trial" -le 2 ]' "experiment $e: a trial keeps $per_trial checkpoints (policy: at most 2)"
done

# 6. a 16-trial adaptive_asha search on Fashion-MNIST
E=$($API create "$FASHION/adaptive.yaml" "$FASHION" 'searcher.max_length={batches: 256}')
check '[ "$($API wait "$E" 600)" = COMPLETED ]' "the adaptive_asha search did not complete: $(tail -20 "$W/master.log")"
states=$($API get "/api/v1/experiments/$E/trials" '" ".join(sorted(set(t["state"] for t in r["trials"])))')
check '[ "$($API get "/api/v1/experiments/$E/trials" "len(r[\"trials\"])")" -eq 16 ] && [ "$states" = COMPLETED ]' \
  "16 COMPLETED trials expected, got states: $states"
best=$($API get "/api/v1/experiments/$E" 'r["experiment"]["best_metric"]')
check '$PY -c "import sys; b=float(sys.argv[1]); sys.exit(not (0 < b < 1.0))" "$best"' "best validation_loss: $best"
full=$($API get "/api/v1/experiments/$E/trials" 'sum(t["batches"] >= 256 for t in r["trials"])')
check '[ "$full" -ge 1 ] && [ "$full" -le 4 ]' "$full trials trained to the top rung (expected 1 to 4)"

# 6b. invalid hyperparameters (the toy refuses lr <= 0): those trials end ERROR (invalid_hp)
# without restarts, and the random searcher replaces them until 6 trials completed
sed -e 's/name: single/name: random\n  max_trials: 6\n  max_concurrent_trials: 2/' \
    -e 's/  lr: 0.01/  lr: {type: double, minval: -0.02, maxval: 0.02}/' -e 's/batch_ms: 40/batch_ms: 0/' \
    "$W/toy.yaml" > "$W/inv.yaml"
F=$($API create "$W/inv.yaml" "$TOY")
check '[ "$($API wait "$F" 120)" = COMPLETED ]' "the search with invalid trials did not complete"
ok_n=$($API get "/api/v1/experiments/$F/trials" 'sum(t["state"] == "COMPLETED" for t in r["trials"])')
inv_n=$($API get "/api/v1/experiments/$F/trials" 'sum(t["state"] == "ERROR" and t["exit_reason"] == "invalid_hp" and t["restarts"] == 0 for t in r["trials"])')
all_n=$($API get "/api/v1/experiments/$F/trials" 'len(r["trials"])')
check '[ "$ok_n" -eq 6 ] && [ "$inv_n" -ge 1 ] && [ $((ok_n + inv_n)) -eq "$all_n" ]' \
  "invalid_hp: $ok_n completed, $inv_n invalid (no restarts) of $all_n trials"

# 6c. a custom searcher from the model directory (tests/e2e/toy: toy_search, two trials)
sed -e 's/  name: single/  name: custom\n  method: toy_search/' "$W/toy.yaml" > "$W/custom.yaml"
G=$($API create "$W/custom.yaml" "$TOY")
check '[ "$($API wait "$G" 120)" = COMPLETED ]' "the custom search did not complete"
lrs=$($API get "/api/v1/experiments/$G/trials" '" ".join(sorted("%g" % t["hparams"]["lr"] for t in r["trials"] if t["state"] == "COMPLETED"))')
check '[ "$lrs" = "0.01 0.02" ]' "custom searcher trials: lr $lrs"

# 6d. a trial on two slots (mpirun under the master)
sed -e 's/batch_ms: 40/batch_ms: 0/' "$W/toy.yaml" > "$W/two.yaml"
printf 'resources:\n  slots_per_trial: 2\n' >> "$W/two.yaml"
H=$($API create "$W/two.yaml" "$TOY")
check '[ "$($API wait "$H" 180)" = COMPLETED ]' "the 2-slot trial did not complete: $(tail -5 "$W/master.log")"
TH=$($API get "/api/v1/experiments/$H/trials" 'r["trials"][0]["id"]')
check '[ "$($API get "/api/v1/trials/$TH/metrics?kind=validation" "len(r[\"metrics\"])")" -eq 6 ]' \
  "2-slot trial: one validation stream of 6 rows expected"

# 6e. the Core API example (a command entrypoint built by its Makefile) under the master
I=$($API create "$SRC/examples/core_api/config.yaml" "$SRC/examples/core_api" searcher.max_trials=2 \
    'searcher.max_length={batches: 60}')
check '[ "$($API wait "$I" 300)" = COMPLETED ]' "the Core API example did not complete: $(tail -5 "$W/master.log")"
cv=$($API get "/api/v1/experiments/$I/trials" 'sum(t["state"] == "COMPLETED" and t["best_validation"] is not None for t in r["trials"])')
check '[ "$cv" -eq 2 ]' "Core API example: $cv trials completed with a validation metric (expected 2)"

# 7. bad input: a clear error, nothing created
n_before=$($API get /api/v1/experiments 'len(r["experiments"])')
expect_400() {
  out=$($API create "$1" "$2" 2>&1)
  want=$3
  check 'echo "$out" | grep -q "HTTP 400" && echo "$out" | grep -qi "$want"' "$4: $out"
}
printf 'name: x\nentrypoint: model_def:ToyTrial\nhyperparameters: {global_batch_size: 16\n' > "$W/bad.yaml"
expect_400 "$W/bad.yaml" "$TOY" "config:" "malformed YAML"
sed 's/name: single/name: hyperband/' "$W/toy.yaml" > "$W/bad2.yaml"
expect_400 "$W/bad2.yaml" "$TOY" "searcher" "unknown searcher"
sed 's/    batches: 60/    batches: -5/' "$W/toy.yaml" > "$W/bad3.yaml"
expect_400 "$W/bad3.yaml" "$TOY" "max_length" "negative length"
sed 's/  lr: 0.01/  lr: {type: double, minval: 0.5, maxval: 0.1}/' "$W/toy.yaml" > "$W/bad4.yaml"
expect_400 "$W/bad4.yaml" "$TOY" "lr" "min > max"
expect_400 "$W/toy.yaml" "$SRC/tests/e2e/broken" "error" "a model directory that does not compile"
check '[ "$($API get /api/v1/experiments "len(r[\"experiments\"])")" -eq "$n_before" ]' \
  "a refused experiment left rows in the store"

# 8. a second master on the same port, or on the same store: refused, the first unharmed
"$DTRAIN" master --port "$PORT" > "$W/o" 2>&1 &
p2=$!
for _ in $(seq 100); do kill -0 $p2 2> /dev/null || break; sleep 0.1; done
kill -0 $p2 2> /dev/null && { kill -9 $p2; bad "a second master on the same store kept running"; }
wait $p2; rc=$?
check '[ $rc -ne 0 ] && grep -qi "another master\|in use" "$W/o"' "second master: $(cat "$W/o")"
DTRAIN_HOME=$W/home2 "$DTRAIN" master --port "$PORT" > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "$PORT" "$W/o" && grep -qi "hint" "$W/o"' "port in use: $(cat "$W/o")"
check '$API get /api/v1/master r[\"pid\"] > /dev/null' "the first master stopped answering"

# 9. a store that is not SQLite, or is from a newer dtrain: refused, the file unchanged
mkdir -p "$W/home3" "$W/home4"
head -c 4096 /dev/urandom > "$W/home3/store.db"
sum3=$(md5sum < "$W/home3/store.db")
DTRAIN_HOME=$W/home3 "$DTRAIN" master --port 0 > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -qi "store.db" "$W/o" && [ "$(md5sum < "$W/home3/store.db")" = "$sum3" ]' \
  "a non-SQLite store: $(cat "$W/o")"
$PY -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("create table t(x)"); c.execute("pragma user_version = 999"); c.commit()' "$W/home4/store.db"
sum4=$(md5sum < "$W/home4/store.db")
DTRAIN_HOME=$W/home4 "$DTRAIN" master --port 0 > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -qi "newer" "$W/o" && [ "$(md5sum < "$W/home4/store.db")" = "$sum4" ]' \
  "a store from a newer dtrain: $(cat "$W/o")"

# 10. the master's store survived all of it
$API post /api/v1/master/shutdown > /dev/null
for _ in $(seq 300); do kill -0 "$MPID" 2> /dev/null || break; sleep 0.1; done
check '! kill -0 "$MPID" 2> /dev/null' "the master did not stop on shutdown"
MPID=
check '[ "$($PY -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(\"pragma integrity_check\").fetchone()[0])" "$DTRAIN_HOME/store.db")" = ok ]' \
  "integrity_check of the store"
summary
