#!/usr/bin/env bash
# End-to-end tests of the experiment commands, driving the real `dtrain` binary against a
# master it starts itself (the embedded default) on a free loopback port, with its own
# DTRAIN_HOME: create + follow, list, describe, metrics --csv, checkpoint list / describe /
# export, pause / activate / kill / wait / delete, exit codes and bad-input errors.
# usage: test_experiment.sh DTRAIN_BINARY SOURCE_DIR
# Prints "N passed, M failed" and exits non-zero on any failure.
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-exp.XXXXXX)
export DTRAIN_HOME=$W/home
free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
export DTRAIN_MASTER=http://127.0.0.1:$(free_port)
cleanup() {
  "$DTRAIN" master stop > /dev/null 2>&1
  rm -rf "$W"
}
trap cleanup EXIT
. "$SRC/tests/e2e/check.sh"

MODEL=$SRC/examples/fashion_mnist
# a tiny config: a small MLP for a few dozen batches, validated and checkpointed twice
tiny_config() { # NAME BATCHES
  cat << EOF
name: $1
entrypoint: model_def:FashionMLPTrial
hyperparameters:
  global_batch_size: 32
  hidden: 32
  layers: 1
  lr: 0.01
  weight_decay: 0.0
  dropout: 0.0
searcher:
  name: single
  metric: validation_loss
  smaller_is_better: true
  max_length:
    batches: $2
min_validation_period:
  batches: 20
min_checkpoint_period:
  batches: 20
checkpoint_storage:
  host_path: $W/checkpoints
  save_trial_best: 1
  save_trial_latest: 1
reproducibility:
  experiment_seed: 1
data:
  dir: /usr/share/datasets/fashion-mnist
EOF
}
tiny_config e2e_tiny 40 > "$W/tiny.yaml"
tiny_config e2e_long 100000 > "$W/long.yaml"
field() { awk -F'\t' -v k="$1" '$1 == k { print $2 }'; } # a describe's NAME<TAB>VALUE line

# 1. the first command finds no master on loopback and starts one, saying so
"$DTRAIN" experiment list > "$W/o" 2> "$W/e"
rc=$?
check '[ $rc -eq 0 ]' "experiment list with no master: rc $rc: $(cat "$W/e")"
check 'grep -q "started a master at $DTRAIN_MASTER (pid [0-9]*, log $DTRAIN_HOME/master.log)" "$W/e"' \
  "no 'started a master' line: $(cat "$W/e")"
check '[ ! -s "$W/o" ]' "an empty store lists nothing, got: $(cat "$W/o")"
"$DTRAIN" master status > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "^pid	[0-9]" "$W/o"' "master status: rc $rc: $(cat "$W/o")"
# every field the server answers has a value (one name per field for server, CLI and docs)
for k in version pid slots slots_used store started uptime; do
  v=$(field "$k" < "$W/o")
  check '[ -n "$v" ] && [ "$v" != "-" ]' "master status: field $k is '$v': $(cat "$W/o")"
done
check '[ "$(field store < "$W/o")" = "$DTRAIN_HOME/store.db" ]' "master status: store: $(cat "$W/o")"

# 2. create --follow: logs stream, exit 0 when COMPLETED
"$DTRAIN" experiment create "$W/tiny.yaml" "$MODEL" --follow > "$W/o" 2> "$W/e"
rc=$?
check '[ $rc -eq 0 ]' "create --follow: rc $rc: $(tail -5 "$W/e")"
check 'grep -q "^created experiment 1$" "$W/o"' "no 'created experiment 1': $(head -3 "$W/o")"
check 'grep -q "^\[trial [0-9]*, rank 0\] " "$W/o"' "no trial log lines followed"
check 'grep -q "experiment 1: COMPLETED" "$W/e"' "no final state line: $(tail -2 "$W/e")"

# 3. list and describe: plain lines, and --json the API's answer
"$DTRAIN" experiment list > "$W/o" 2>&1
check 'grep -q "^1	e2e_tiny	COMPLETED	" "$W/o"' "experiment list: $(cat "$W/o")"
"$DTRAIN" experiment list --json > "$W/o" 2>&1
check '"$PY" -c "import json,sys; e=json.load(open(sys.argv[1]))[\"experiments\"]; assert e[0][\"state\"]==\"COMPLETED\"" "$W/o"' \
  "experiment list --json: $(head -5 "$W/o")"
"$DTRAIN" experiment describe 1 > "$W/o" 2>&1
check '[ "$(field state < "$W/o")" = COMPLETED ]' "describe state: $(cat "$W/o")"
TRIAL=$("$DTRAIN" trial list 1 | cut -f1 | head -1)
check '[ -n "$TRIAL" ] && grep -q "^$TRIAL	COMPLETED	40/40	" "$W/o"' "describe's trials: $(cat "$W/o")"
"$DTRAIN" experiment list-trials 1 > "$W/o2" 2>&1
check '"$DTRAIN" trial list 1 | cmp -s - "$W/o2"' "list-trials differs from trial list"
"$DTRAIN" experiment logs 1 > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ -s "$W/o" ]' "experiment logs: rc $rc"
"$DTRAIN" experiment wait 1 > /dev/null 2>&1
rc=$?
check '[ $rc -eq 0 ]' "wait on a COMPLETED experiment: rc $rc"

# 4. metrics: CSV with batches/epochs/records first, a column per metric
"$DTRAIN" trial metrics "$TRIAL" --csv > "$W/m.csv" 2>&1
rc=$?
check '[ $rc -eq 0 ] && head -1 "$W/m.csv" | grep -q "^batches,epochs,records,kind,.*validation_loss"' \
  "metrics --csv header: $(head -1 "$W/m.csv")"
check '[ "$(grep -c ",validation," "$W/m.csv")" -eq 2 ]' "2 validation rows expected: $(cat "$W/m.csv")"
"$DTRAIN" trial metrics "$TRIAL" --kind validation --json > "$W/o" 2>&1
check '"$PY" -c "import json,sys; m=json.load(open(sys.argv[1]))[\"metrics\"]; assert [r[\"batches\"] for r in m]==[20,40]" "$W/o"' \
  "metrics --kind validation --json: $(head -c 300 "$W/o")"
"$DTRAIN" trial describe "$TRIAL" > "$W/o" 2>&1
check '[ "$(field state < "$W/o")" = COMPLETED ]' "trial describe: $(cat "$W/o")"

# 5. checkpoints: list, describe, export (and a second export into the same place refused)
"$DTRAIN" checkpoint list 1 > "$W/o" 2>&1
UUID=$(awk -F'\t' '$4 == "COMPLETED" { u = $1 } END { print u }' "$W/o")
check '[ -n "$UUID" ]' "no COMPLETED checkpoint listed: $(cat "$W/o")"
"$DTRAIN" checkpoint describe "$UUID" > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ "$(field uuid < "$W/o")" = "$UUID" ]' "checkpoint describe: $(cat "$W/o")"
"$DTRAIN" checkpoint export "$UUID" "$W/export" > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ -f "$W/export/metadata.json" ]' "export: rc $rc: $(cat "$W/o")"
check '! ls "$W"/export.partial-* > /dev/null 2>&1' "export left its temporary directory"
"$DTRAIN" checkpoint export "$UUID" "$W/export" > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "not an empty directory" "$W/o" && grep -q "hint:" "$W/o"' \
  "export into a non-empty directory: rc $rc: $(cat "$W/o")"
"$DTRAIN" checkpoint describe no-such-uuid > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "hint:" "$W/o"' "unknown uuid: rc $rc: $(cat "$W/o")"

# 6. lifecycle: created paused, activated, paused, killed, waited for, deleted
"$DTRAIN" experiment create "$W/long.yaml" "$MODEL" --paused > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "^created experiment 2$" "$W/o"' "create --paused: $(cat "$W/o")"
check '[ "$("$DTRAIN" experiment describe 2 | field state)" = PAUSED ]' "not PAUSED after --paused"
"$DTRAIN" experiment activate 2 > "$W/o" 2>&1
check 'grep -q "^experiment 2: ACTIVE$" "$W/o"' "activate: $(cat "$W/o")"
"$DTRAIN" experiment pause 2 > "$W/o" 2>&1
check 'grep -q "^experiment 2: PAUSED$" "$W/o"' "pause: $(cat "$W/o")"
"$DTRAIN" experiment delete 2 > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "hint:" "$W/o"' "delete of a paused experiment should fail: rc $rc: $(cat "$W/o")"
"$DTRAIN" experiment kill 2 > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "kill: rc $rc: $(cat "$W/o")"
timeout 120 "$DTRAIN" experiment wait 2 > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "^experiment 2: CANCELED$" "$W/o"' "wait on a killed experiment: rc $rc: $(cat "$W/o")"
"$DTRAIN" experiment delete 2 > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "^deleted experiment 2$" "$W/o"' "delete: rc $rc: $(cat "$W/o")"

# 7. bad input: each a clear error, the right exit code
expect() { # RC GREP -- command...: runs it, checks its exit code and that stderr says GREP
  local want=$1 pat=$2
  shift 3
  "$DTRAIN" "$@" > "$W/o" 2> "$W/e"
  local got=$?
  check '[ $got -eq $want ] && grep -q -- "$pat" "$W/e"' "dtrain $*: rc $got (want $want): $(head -3 "$W/e")"
}
expect 1 "hint:" -- experiment describe 2
expect 1 "hint:" -- experiment describe 999
expect 1 "hint:" -- trial describe 99999
expect 2 "positive integer" -- experiment describe abc
expect 2 "unknown option '--bogus'" -- experiment list --bogus
expect 2 "unknown verb 'frobnicate'" -- experiment frobnicate
expect 2 "missing MODEL_DIR" -- experiment create "$W/tiny.yaml"
expect 2 "no '='" -- experiment create "$W/tiny.yaml" "$MODEL" --config searcher.max_length
expect 2 "not valid YAML" -- experiment create "$W/tiny.yaml" "$MODEL" --config "a.b=[1, 2"
expect 2 "--kind must be" -- trial metrics "$TRIAL" --kind bogus
expect 1 "model directory" -- experiment create "$W/tiny.yaml" "$W/no-such-dir"
expect 1 "cannot read the config" -- experiment create "$W/none.yaml" "$MODEL"
expect 1 "hint:" -- experiment create "$W/tiny.yaml" "$MODEL" --config searcher.name=nonesuch
# an override the master applies: the experiment's searcher takes it
"$DTRAIN" experiment create "$W/tiny.yaml" "$MODEL" --paused --config searcher.max_length.batches=20 \
  > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "create with a valid --config: rc $rc: $(cat "$W/o")"
OV=$(sed -n 's/^created experiment \([0-9]*\).*/\1/p' "$W/o")
"$DTRAIN" experiment describe "$OV" --json > "$W/o" 2>&1
check '"$PY" -c "import json,sys; e=json.load(open(sys.argv[1]))[\"experiment\"]; assert e[\"config\"][\"searcher\"][\"max_length\"][\"batches\"]==20" "$W/o"' \
  "--config searcher.max_length.batches=20 not applied: $(head -c 400 "$W/o")"
"$DTRAIN" experiment kill 3 > /dev/null 2>&1

# 8. no master: stop, then a command that must not start one says so with exit code 3
"$DTRAIN" master stop > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "stopped the master" "$W/o"' "master stop: rc $rc: $(cat "$W/o")"
expect 3 "no master answers" -- master status
# a master elsewhere is never started here: an address that does not answer is an error
DTRAIN_MASTER=http://master.invalid:8080 expect 3 "hint:" -- experiment list
DTRAIN_MASTER=ftp://x expect 3 "is not http://HOST:PORT" -- experiment list

summary
