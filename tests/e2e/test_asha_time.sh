#!/usr/bin/env bash
# End-to-end test of adaptive_asha timed by a metric the trial reports (searcher.max_time with
# time_metric): a real master runs 8 trials of tests/e2e/toy's TimedTrial, whose validations carry
# records_seen. Rungs at 1600, 3200, 6400 records (100, 200, 400 batches of 16); each trial may
# train 2000 batches, so a trial that ends before that was stopped by the searcher reading its
# reported metric, and those that end below the second rung were stopped at the first.
# Then the same trials under max_length with stop_once: false: as in the reference, a trial
# stopped at a rung is never resumed (every trial has one run), and the config warns that the
# key has no effect.
# usage: test_asha_time.sh DTRAIN_BINARY SOURCE_DIR
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-ashatime.XXXXXX)
. "$SRC/tests/e2e/check.sh"
. "$SRC/tests/e2e/master_env.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cleanup() {
  [ -n "$MPID" ] && kill -9 "$MPID" 2> /dev/null
  rm -rf "$W"
}
trap cleanup EXIT

cat > "$W/timed.yaml" << 'YAML'
name: timed
entrypoint: model_def:TimedTrial
hyperparameters:
  global_batch_size: 16
  batch_ms: 5
  x: {type: double, minval: 0, maxval: 1}
searcher:
  name: adaptive_asha
  metric: validation_loss
  max_trials: 8
  divisor: 2
  max_rungs: 3
  mode: aggressive
  time_metric: records_seen
  max_time: 6400
  max_length: {batches: 2000}
  max_concurrent_trials: 2
min_validation_period: {batches: 20}
reproducibility: {experiment_seed: 5}
YAML

plan=$("$DTRAIN" config check "$W/timed.yaml")
check 'echo "$plan" | grep -q "rungs at 1600, 3200, 6400 records_seen"' "config check plan: $plan"

start_master || { bad "the master does not start"; summary; exit 1; }
E=$($API create "$W/timed.yaml" "$SRC/tests/e2e/toy")
check '[ "$($API wait "$E" 600)" = COMPLETED ]' "the timed search did not complete: $(tail -20 "$W/master.log")"
T="/api/v1/experiments/$E/trials"
states=$($API get "$T" '" ".join(sorted(set(t["state"] for t in r["trials"])))')
check '[ "$($API get "$T" "len(r[\"trials\"])")" -eq 8 ] && [ "$states" = COMPLETED ]' \
  "8 COMPLETED trials expected, got states: $states"
# every trial was stopped by the searcher before its 2000 batches
capped=$($API get "$T" 'sum(t["batches"] >= 2000 for t in r["trials"])')
check '[ "$capped" -eq 0 ]' "$capped trials trained their whole max_length: the time metric stopped none"
# some stopped at the first rung (below the second, 200 batches), at least one reached the top
low=$($API get "$T" 'sum(t["batches"] < 200 for t in r["trials"])')
top=$($API get "$T" 'sum(t["batches"] >= 400 for t in r["trials"])')
check '[ "$low" -ge 2 ] && [ "$top" -ge 1 ]' "$low trials ended below the second rung, $top reached the top"
# the reported metric is in the validation rows the searcher read
first=$($API get "$T" 'r["trials"][0]["id"]')
seen=$($API get "/api/v1/trials/$first/metrics?kind=validation" 'max(m["metrics"].get("records_seen", 0) for m in r["metrics"])')
check '$PY -c "import sys; sys.exit(not float(sys.argv[1]) >= 1600)" "$seen"' "trial $first reported records_seen up to $seen"

# stop_once: false on lengths (rungs at 20, 40, 80 batches): still the stopping rule
sed -e '/time_metric/d' -e '/max_time/d' -e 's/max_length: {batches: 2000}/max_length: {batches: 80}\n  stop_once: false/' \
  -e 's/batch_ms: 5/batch_ms: 0/' "$W/timed.yaml" > "$W/once.yaml"
check '"$DTRAIN" config check "$W/once.yaml" "$SRC/tests/e2e/toy" 2>&1 | grep -q "stop_once: false has no effect"' \
  "config check does not warn that stop_once: false has no effect"
P=$($API create "$W/once.yaml" "$SRC/tests/e2e/toy")
check '[ "$($API wait "$P" 600)" = COMPLETED ]' "the stop_once: false search did not complete: $(tail -20 "$W/master.log")"
T="/api/v1/experiments/$P/trials"
states=$($API get "$T" '" ".join(sorted(set(t["state"] for t in r["trials"])))')
check '[ "$($API get "$T" "len(r[\"trials\"])")" -eq 8 ] && [ "$states" = COMPLETED ]' \
  "stop_once false: 8 COMPLETED trials expected, got states: $states"
top=$($API get "$T" 'sum(t["batches"] >= 80 for t in r["trials"])')
low=$($API get "$T" 'sum(t["batches"] < 40 for t in r["trials"])')
check '[ "$top" -ge 1 ] && [ "$low" -ge 1 ]' "stop_once false: $top trials at the top, $low stopped at rung 0"
resumed=0
for id in $($API get "$T" '" ".join(str(t["id"]) for t in r["trials"])'); do
  runs=$($API get "/api/v1/trials/$id/logs" 'str(r["logs"]).count("trained its first batch")')
  [ "$runs" -ge 2 ] && resumed=$((resumed + 1))
done
check '[ "$resumed" -eq 0 ]' "stop_once false: $resumed trials were resumed after a stop"
summary
