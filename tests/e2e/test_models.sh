#!/usr/bin/env bash
# End-to-end tests of the model registry and checkpoint protection (docs/models.md) with a
# real master: a toy experiment trains while one of its checkpoints is registered as a model
# version and a paused experiment warm-starts from another; its GC policy (latest only) would
# delete both, and they stay; `dtrain checkpoint delete` refuses them naming the holder and
# removes a free one (files and record); deleting the experiment is refused; the registry's
# commands, errors and web pages.
# usage: test_models.sh DTRAIN_BINARY SOURCE_DIR
# Prints "N passed, M failed" and exits non-zero on any failure. The master listens on a free
# loopback port with its own DTRAIN_HOME and is killed on exit, whatever happens.
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-models.XXXXXX)
. "$SRC/tests/e2e/check.sh"
. "$SRC/tests/e2e/master_env.sh"
TOY=$SRC/tests/e2e/toy
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cleanup() {
  [ -n "$MPID" ] && kill -9 "$MPID" 2> /dev/null
  for g in $(cat "$W"/pgids 2> /dev/null); do [ "$g" -gt 1 ] && kill -9 -- "-$g" 2> /dev/null; done
  rm -rf "$W"
}
trap cleanup EXIT

start_master 2 || { bad "the master does not start"; summary; exit 1; }

# a single toy trial, slow enough to register a checkpoint while it trains; GC keeps only the
# latest checkpoint of the trial
cat > "$W/toy.yaml" << 'EOF'
name: toy-models
entrypoint: model_def:ToyTrial
hyperparameters:
  global_batch_size: 16
  lr: 0.01
  batch_ms: 200
searcher:
  name: single
  metric: validation_loss
  max_length:
    batches: 60
min_validation_period:
  batches: 10
min_checkpoint_period:
  batches: 10
checkpoint_storage:
  save_experiment_best: 0
  save_trial_best: 0
  save_trial_latest: 1
scheduling_unit: 5
EOF

A=$($API create "$W/toy.yaml" "$TOY")
TA=$($API get "/api/v1/experiments/$A/trials" 'r["trials"][0]["id"]')
$API get "/api/v1/trials/$TA" 'r["trial"].get("pgid") or ""' >> "$W/pgids" 2> /dev/null
check '$API until "/api/v1/trials/$TA/checkpoints" "len(r[\"checkpoints\"]) >= 2" 120' \
  "two checkpoints expected while the trial trains: $(tail -5 "$W/master.log")"
ck() { $API get "/api/v1/trials/$TA/checkpoints" "[c[\"uuid\"] for c in r[\"checkpoints\"] if c[\"batches\"] == $1][0]"; }
U10=$(ck 10)
U20=$(ck 20)

# the registry: a model, version 1 = the checkpoint at batch 10
out=$("$DTRAIN" model create toy-model --description "the toy" --label small 2>&1)
check '[ $? -eq 0 ] && [ "$out" = "model toy-model created" ]' "model create: $out"
out=$("$DTRAIN" model register-version toy-model "$U10" 2>&1)
check '[ $? -eq 0 ] && echo "$out" | grep -q "model toy-model version 1: checkpoint $U10 (experiment $A, trial $TA, batches 10)"' \
  "register-version: $out"
# a paused experiment that warm-starts from the checkpoint at batch 20
"$DTRAIN" experiment create --paused --config "searcher.source_checkpoint_uuid=$U20" \
  "$W/toy.yaml" "$TOY" > "$W/b.out" 2>&1
B=$($API get /api/v1/experiments 'max(e["id"] for e in r["experiments"])')
check '[ "$B" != "$A" ] && [ "$($API get "/api/v1/experiments/$B" "r[\"experiment\"][\"state\"]")" = PAUSED ]' \
  "the warm-starting experiment is not PAUSED: $(cat "$W/b.out")"

# errors, each with what to do
out=$("$DTRAIN" model create toy-model 2>&1)
check '[ $? -eq 1 ] && echo "$out" | grep -q "already exists" && echo "$out" | grep -q "hint:"' "duplicate name: $out"
out=$("$DTRAIN" model describe no-such 2>&1)
check '[ $? -eq 1 ] && echo "$out" | grep -q "no model named no-such" && echo "$out" | grep -q "hint:"' "unknown model: $out"
out=$("$DTRAIN" model register-version no-such "$U10" 2>&1)
check '[ $? -eq 1 ] && echo "$out" | grep -q "no model named no-such"' "register on an unknown model: $out"
out=$("$DTRAIN" model register-version toy-model 0000-not-a-uuid 2>&1)
check '[ $? -eq 1 ] && echo "$out" | grep -q "no checkpoint has the uuid" && echo "$out" | grep -q "hint:"' "unknown uuid: $out"
out=$("$DTRAIN" model create "bad/name" 2>&1)
check '[ $? -eq 1 ] && echo "$out" | grep -q "is not a model name"' "bad name: $out"

# the trial ends and GC runs with save_trial_latest 1, nothing else: 30, 40, 50 go; 10 (the
# model version) and 20 (the paused experiment's warm start) stay with the latest, 60
check '[ "$($API wait "$A" 180)" = COMPLETED ]' "the toy experiment did not complete: $(tail -20 "$W/master.log")"
cks() { $API get "/api/v1/trials/$TA/checkpoints" "\" \".join(\"%d:%s\" % (c[\"batches\"], c[\"state\"]) for c in r[\"checkpoints\"])"; }
got=$(cks)
check '[ "$got" = "10:COMPLETED 20:COMPLETED 30:DELETED 40:DELETED 50:DELETED 60:COMPLETED" ]' \
  "after GC: $got"
path_of() { $API get "/api/v1/checkpoints/$1" 'r["checkpoint"]["path"]'; }
P10=$(path_of "$U10")
P20=$(path_of "$U20")
U60=$(ck 60)
P60=$(path_of "$U60")
U30=$(ck 30)
check '[ -d "$P10" ] && [ -d "$P20" ] && [ -d "$P60" ] && [ ! -e "$(path_of "$U30")" ]' \
  "on disk after GC: 10 [$P10] 20 [$P20] 60 [$P60] must exist, 30 must not"
out=$("$DTRAIN" model register-version toy-model "$U30" 2>&1)
check '[ $? -eq 1 ] && echo "$out" | grep -q "not COMPLETED"' "a DELETED checkpoint registered: $out"

# describe and list
vers=$("$DTRAIN" model describe toy-model --json)
check '[ "$(echo "$vers" | $PY -c "import json,sys; v=json.load(sys.stdin)[\"versions\"]; print(len(v), v[0][\"checkpoint_uuid\"], v[0][\"experiment_id\"], v[0][\"trial_id\"], \"validation_loss\" in v[0][\"metrics\"])")" = "1 $U10 $A $TA True" ]' \
  "describe --json: $vers"
val10=$($API get "/api/v1/trials/$TA/metrics?kind=validation" '[m["metrics"]["validation_loss"] for m in r["metrics"] if m["batches"] == 10][0]')
check '[ "$(echo "$vers" | $PY -c "import json,sys; print(json.load(sys.stdin)[\"versions\"][0][\"metrics\"][\"validation_loss\"])")" = "$val10" ]' \
  "the version's metrics are not the validation at batch 10 ($val10)"
out=$("$DTRAIN" model describe toy-model)
check 'echo "$out" | grep -q "$U10" && echo "$out" | grep -q "the toy"' "describe: $out"
out=$("$DTRAIN" model list)
check 'echo "$out" | grep -q "^toy-model	1	the toy"' "list: $out"
check '[ "$("$DTRAIN" model list --json | $PY -c "import json,sys; print(json.load(sys.stdin)[\"total\"])")" = 1 ]' "list --json"

# delete: refused for the held ones (files and record stay), done for a free one
out=$("$DTRAIN" checkpoint delete "$U10" 2>&1)
check '[ $? -eq 1 ] && echo "$out" | grep -q "held by model toy-model version 1" && echo "$out" | grep -q "hint:" && [ -d "$P10" ]' \
  "delete of a registered checkpoint: $out"
out=$("$DTRAIN" checkpoint delete "$U20" 2>&1)
check '[ $? -eq 1 ] && echo "$out" | grep -q "held by experiment $B (searcher.source_checkpoint_uuid)" && [ -d "$P20" ]' \
  "delete of a warm start's checkpoint: $out"
code=$(curl -s -o /dev/null -w "%{http_code}" -H "X-Dtrain-Csrf: 1" -X DELETE "$DTRAIN_MASTER/api/v1/checkpoints/$U10")
check '[ "$code" = 409 ] && [ -d "$P10" ]' "REST DELETE of a registered checkpoint: HTTP $code"
out=$("$DTRAIN" checkpoint delete "$U60" 2>&1)
check '[ $? -eq 0 ] && [ ! -e "$P60" ]' "delete of a free checkpoint: $out (files at $P60)"
code=$(curl -s -o /dev/null -w '%{http_code}' "$DTRAIN_MASTER/api/v1/checkpoints/$U60")
check '[ "$code" = 404 ]' "the deleted checkpoint's record is still there (HTTP $code)"
code=$(curl -s -o /dev/null -w "%{http_code}" -H "X-Dtrain-Csrf: 1" -X DELETE "$DTRAIN_MASTER/api/v1/checkpoints/$U60")
check '[ "$code" = 404 ]' "a second delete: HTTP $code"
# once the warm-starting experiment ends, its checkpoint is free
"$DTRAIN" experiment cancel "$B" > /dev/null 2>&1
$API wait "$B" 60 > /dev/null
out=$("$DTRAIN" checkpoint delete "$U20" 2>&1)
check '[ $? -eq 0 ] && [ ! -e "$P20" ]' "delete after the experiment ended: $out"
check '[ -d "$P10" ]' "the registered checkpoint's files are gone"

# deleting the experiment would remove the registered checkpoint's files: refused
out=$("$DTRAIN" experiment delete "$A" 2>&1)
check '[ $? -eq 1 ] && echo "$out" | grep -q "held by model toy-model version 1" && [ -d "$P10" ]' \
  "experiment delete with a registered checkpoint: $out"
check '[ "$($API get "/api/v1/experiments/$A" "r[\"experiment\"][\"state\"]")" = COMPLETED ]' \
  "the experiment is gone or changed after a refused delete"

# the web pages
page=$(curl -s "$DTRAIN_MASTER/models")
check 'echo "$page" | grep -q "href=\"/models/toy-model\"" && echo "$page" | grep -q "href=\"/models\">Models"' \
  "/models: no link to the model or no nav entry"
page=$(curl -s "$DTRAIN_MASTER/models/toy-model")
check 'echo "$page" | grep -q "href=\"/trials/$TA\"" && echo "$page" | grep -q "href=\"/experiments/$A\"" && echo "$page" | grep -q "$U10"' \
  "/models/toy-model: no links to the trial and experiment"
code=$(curl -s -o /dev/null -w '%{http_code}' "$DTRAIN_MASTER/models/no-such")
check '[ "$code" = 404 ]' "/models/no-such: HTTP $code"

# the master stops on request, cleanly (under the sanitizers: without leaks)
$API post /api/v1/master/shutdown > /dev/null 2>&1
wait "$MPID"
rc=$?
MPID=
check '[ "$rc" -eq 0 ]' "the master exited with $rc: $(tail -20 "$W/master.log")"

summary
