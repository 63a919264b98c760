#!/usr/bin/env bash
# End-to-end tests of an experiment's kept model definition (docs/experiments.md), through the
# real `dtrain` binary and a master it starts on a free loopback port with its own DTRAIN_HOME:
# the model directory deleted after create, a master restart with the experiment's copy and
# build gone, pause + activate, .dtrainignore / .detignore, --include, the 96 MiB limit naming
# the biggest file, and download-model-def giving the same files back.
# usage: test_snapshot.sh DTRAIN_BINARY SOURCE_DIR
# Prints "N passed, M failed" and exits non-zero on any failure.
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-snap.XXXXXX)
. "$SRC/tests/e2e/master_env.sh" # DTRAIN_HOME, DTRAIN_MASTER on a free port (the CLI starts it)
cleanup() {
  "$DTRAIN" master stop > /dev/null 2>&1
  rm -rf "$W"
}
trap cleanup EXIT
. "$SRC/tests/e2e/check.sh"

CONFIG=$SRC/tests/e2e/toy/const.yaml
# a model directory of its own: the toy trial, a data directory and scratch files to leave out
mkdir -p "$W/model/data" "$W/model/notes"
cp "$SRC/tests/e2e/toy/model_def.c" "$W/model/"
head -c 3000000 /dev/urandom > "$W/model/data/big.bin"
echo keep > "$W/model/notes/keep.txt"
echo scratch > "$W/model/notes/scratch.tmp"
echo again > "$W/model/notes/again.tmp"
printf '# left out of the experiment\n\n/data/\n*.tmp\n!again.tmp\n' > "$W/model/.dtrainignore"
echo "an included file" > "$W/extra.txt"
cp -r "$W/model" "$W/orig"

# wait_state ID STATE: until the experiment is in STATE (60 s at most)
wait_state() {
  for _ in $(seq 600); do
    "$DTRAIN" experiment describe "$1" --json 2> /dev/null | grep -q "\"state\": *\"$2\"" && return 0
    sleep 0.1
  done
  return 1
}

# 1. created paused, its directory deleted, then run: it still completes
"$DTRAIN" experiment create "$CONFIG" "$W/model" --include "$W/extra.txt" --paused > "$W/o" 2> "$W/e"
rc=$?
check '[ $rc -eq 0 ] && grep -q "created experiment 1" "$W/o"' "create: rc $rc: $(cat "$W/o" "$W/e")"
rm -rf "$W/model"
"$DTRAIN" experiment activate 1 > /dev/null 2>&1
timeout 300 "$DTRAIN" experiment wait 1 > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "experiment 1 after its directory was deleted: rc $rc: $(cat "$W/o")"
"$DTRAIN" experiment describe 1 --json > "$W/d" 2>&1
check 'grep -q "\"model_dir\": *\"$DTRAIN_HOME/contexts/ctx-" "$W/d"' \
  "experiment 1 does not run from its own copy: $(grep model_dir "$W/d")"

# 2. download-model-def: the same files back, less the ignored ones, plus the included file
(cd "$W" && "$DTRAIN" experiment download-model-def 1 > "$W/o" 2>&1)
rc=$?
D=$W/experiment_1_model_def
check '[ $rc -eq 0 ] && [ -d "$D" ]' "download-model-def: rc $rc: $(cat "$W/o")"
check 'cmp -s "$W/orig/model_def.c" "$D/model_def.c" && cmp -s "$W/extra.txt" "$D/extra.txt"' \
  "download-model-def: files differ: $(ls -R "$D")"
check 'cmp -s "$W/orig/notes/keep.txt" "$D/notes/keep.txt" && cmp -s "$W/orig/.dtrainignore" "$D/.dtrainignore"' \
  "download-model-def: notes/keep.txt or .dtrainignore missing: $(ls -R "$D")"
check '[ ! -e "$D/data" ] && [ ! -e "$D/notes/scratch.tmp" ]' \
  ".dtrainignore did not leave data/ and *.tmp out: $(ls -R "$D")"
check 'cmp -s "$W/orig/notes/again.tmp" "$D/notes/again.tmp"' "!again.tmp did not take it back in"
"$DTRAIN" experiment download-model-def 1 "$D" > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "not empty" "$W/o"' "download into a non-empty dir: rc $rc: $(cat "$W/o")"

# 3. a master restart with the experiment's copy and build gone: unpacked and built again
cp -r "$W/orig" "$W/model2"
"$DTRAIN" experiment create "$CONFIG" "$W/model2" --paused > /dev/null 2>&1
rm -rf "$W/model2"
ctx=$("$DTRAIN" experiment describe 2 --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["experiment"]["model_dir"])')
"$DTRAIN" master stop > /dev/null 2>&1
check '[ -d "$ctx" ]' "experiment 2's copy $ctx is not there"
rm -rf "$ctx" "$DTRAIN_HOME/builds/exp-2"
"$DTRAIN" experiment activate 2 > "$W/o" 2>&1 # starts the master again
rc=$?
check '[ $rc -eq 0 ]' "activate after a restart: rc $rc: $(cat "$W/o")"
timeout 300 "$DTRAIN" experiment wait 2 > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ -f "$ctx/model_def.c" ]' \
  "experiment 2 after a restart without its copy: rc $rc: $(cat "$W/o"; tail -5 "$DTRAIN_HOME/master.log")"

# 4. pause + activate of a running experiment: its trial runs again from the kept build
sed 's/batches: 30$/batches: 3000/' "$CONFIG" > "$W/long.yaml"
cp -r "$W/orig" "$W/model3"
"$DTRAIN" experiment create "$W/long.yaml" "$W/model3" > /dev/null 2>&1
rm -rf "$W/model3"
wait_state 3 ACTIVE
"$DTRAIN" experiment pause 3 > /dev/null 2>&1
check 'wait_state 3 PAUSED' "experiment 3 did not pause"
"$DTRAIN" experiment activate 3 > /dev/null 2>&1
"$DTRAIN" experiment kill 3 > /dev/null 2>&1
timeout 120 "$DTRAIN" experiment wait 3 > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 2 ]' "experiment 3 after pause, activate, kill: rc $rc: $(cat "$W/o")"
"$DTRAIN" experiment describe 3 --json | grep -q '"state": *"ERROR"' &&
  bad "experiment 3 ended in ERROR: $(tail -5 "$DTRAIN_HOME/master.log")"

# 5. over 96 MiB: refused, the biggest file named; .detignore (read with .dtrainignore) helps
mkdir -p "$W/huge/ckpt"
cp "$SRC/tests/e2e/toy/model_def.c" "$W/huge/"
truncate -s 90M "$W/huge/ckpt/weights.bin"
truncate -s 10M "$W/huge/small.bin"
"$DTRAIN" experiment create "$CONFIG" "$W/huge" --paused > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "over the 96 MiB limit" "$W/o" && grep -q "ckpt/weights.bin (90.0 MiB)" "$W/o" && grep -q ".dtrainignore" "$W/o"' \
  "a 100 MiB model directory: rc $rc: $(cat "$W/o")"
n=$(ls "$DTRAIN_HOME/contexts" | wc -l)
check '[ "$n" -eq 3 ]' "a refused create left a context behind: $(ls "$DTRAIN_HOME/contexts")"
echo 'ckpt/' > "$W/huge/.detignore"
"$DTRAIN" experiment create "$CONFIG" "$W/huge" --paused > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "with .detignore leaving ckpt/ out: rc $rc: $(cat "$W/o")"
"$DTRAIN" experiment download-model-def 4 "$W/dl4" > /dev/null 2>&1
check '[ -f "$W/dl4/small.bin" ] && [ ! -e "$W/dl4/ckpt" ]' "experiment 4's files: $(ls -R "$W/dl4")"

# 6. an include that does not exist: a clear error, nothing created
"$DTRAIN" experiment create "$CONFIG" "$W/orig" --include "$W/nowhere" > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "nowhere" "$W/o"' "--include of a missing path: rc $rc: $(cat "$W/o")"

# 7. the config's warnings name the file as it was given, on the CLI and the experiment page
cp "$CONFIG" "$W/warn.yaml"
echo "bogus_key: 1" >> "$W/warn.yaml"
(cd "$W" && "$DTRAIN" experiment create warn.yaml orig --paused > "$W/o" 2>&1)
rc=$?
check '[ $rc -eq 0 ] && grep -q "warning: warn.yaml:16:1: unknown key" "$W/o"' \
  "create with a warning: rc $rc: $(cat "$W/o")"
id=$(sed -n 's/^created experiment \([0-9]*\)$/\1/p' "$W/o")
"$PY" - "$DTRAIN_MASTER/experiments/$id" "$DTRAIN_HOME/master.token" > "$W/page" 2>&1 << 'PYEOF'
import os, sys, urllib.request
req = urllib.request.Request(sys.argv[1])
if os.path.exists(sys.argv[2]):
    req.add_header("Authorization", "Bearer " + open(sys.argv[2]).read().strip())
print(urllib.request.urlopen(req, timeout=60).read().decode())
PYEOF
check 'grep -q "warn.yaml:16:1: unknown key" "$W/page"' \
  "the experiment page does not name warn.yaml: $(grep -o "[a-z.]*:16:1[^<]*" "$W/page" | head -3)"

summary
