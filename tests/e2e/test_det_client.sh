#!/usr/bin/env bash
# The reference platform's own client against a dtrain master (docs/det-client.md): the `det`
# CLI of PyPI `determined==0.38.*` runs every everyday command with no terminal, and its Python
# SDK runs tests/e2e/det_sdk.py, on examples/fashion_mnist with short overrides; the checks read
# what the client prints (states, ids, a training log line, checkpoint uuids, downloaded files).
# A followed log stream is held open while other clients are answered.
# usage: test_det_client.sh DTRAIN_BINARY SOURCE_DIR
# The client comes from $DET_VENV (default SOURCE_DIR/build/det-venv; `make det-venv` makes it),
# installed there once when missing; when PyPI cannot be reached the test is skipped (exit 77)
# saying so. Prints "N passed, M failed" and exits non-zero on any failure.
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
DET_VENV=${DET_VENV:-$SRC/build/det-venv}
W=$(mktemp -d /tmp/dtrain-det.XXXXXX)
. "$SRC/tests/e2e/check.sh"
. "$SRC/tests/e2e/master_env.sh"
FASHION=$SRC/examples/fashion_mnist
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
FOLLOW=
cleanup() {
  [ -n "$FOLLOW" ] && kill "$FOLLOW" 2> /dev/null
  "$DTRAIN" master stop > /dev/null 2>&1
  [ -n "$MPID" ] && kill "$MPID" 2> /dev/null && sleep 1 && kill -9 "$MPID" 2> /dev/null
  rm -rf "$W"
}
trap cleanup EXIT

# ---- the client: installed once into its own venv; skipped only when PyPI is out of reach ----
if [ ! -x "$DET_VENV/bin/det" ]; then
  if ! /usr/bin/python3 -c 'import urllib.request as u; u.urlopen("https://pypi.org/simple/determined/", timeout=15)' 2> /dev/null; then
    echo "SKIP: PyPI (https://pypi.org) cannot be reached to install determined==0.38.*; hint: run make det-venv where it can"
    exit 77
  fi
  rm -rf "$DET_VENV"
  if ! { /usr/bin/python3 -m venv "$DET_VENV" && "$DET_VENV/bin/pip" install -q --disable-pip-version-check 'determined==0.38.*'; } > "$W/pip.log" 2>&1; then
    rm -rf "$DET_VENV"
    echo "FAIL: PyPI answers but determined==0.38.* does not install: $(tail -3 "$W/pip.log")" >&2
    exit 1
  fi
fi
DET="$DET_VENV/bin/det"

start_master 2 || { bad "the master does not start"; summary; exit 1; }
export HOME=$W/home DET_MASTER=$DTRAIN_MASTER
unset DET_USER DET_PASS DET_MASTER_ADDR
mkdir -p "$HOME"
SHORT=(--config searcher.max_length.epochs=1 --config min_validation_period.epochs=1)

# det ARGS...: the client with no terminal; stdout+stderr into $out, status into $rc
det() {
  out=$(timeout 300 "$DET" "$@" < /dev/null 2>&1)
  rc=$?
  echo "$out" >> "$W/det.log"
  if echo "$out" | grep -q Traceback; then bad "det $*: a traceback: $out"; fi
}
has() { echo "$out" | grep -q -- "$1"; }

# ---- the master, the user ----
det master info
check '[ $rc = 0 ] && has "version: 0.38.1" && has "clusterName: dtrain"' "det master info: $out"
out=$(echo "" | timeout 60 "$DET" user login determined 2>&1); rc=$?
check '[ $rc = 0 ]' "det user login determined: $out"
det user whoami
check '[ $rc = 0 ] && has "logged in as user .determined."' "det user whoami: $out"

# ---- A: created paused, activated, followed, waited on ----
det experiment create "$FASHION/const.yaml" "$FASHION" "${SHORT[@]}" --paused
A=$(echo "$out" | sed -n 's/^Created experiment \([0-9]*\)$/\1/p')
check '[ $rc = 0 ] && [ -n "$A" ]' "det experiment create --paused: $out"
det experiment list
check '[ $rc = 0 ] && echo "$out" | grep -E "^ +$A \|.*PAUSED" > /dev/null' "det experiment list (PAUSED): $out"
det experiment activate "$A"
check '[ $rc = 0 ] && has "Activated experiment $A"' "det experiment activate: $out"
for _ in $(seq 100); do
  det experiment list-trials "$A"
  T=$(echo "$out" | sed -n 's/^ *\([0-9][0-9]*\) | ACTIVE.*/\1/p' | head -1)
  [ -n "$T" ] && break
  sleep 0.3
done
check '[ -n "$T" ]' "no active trial of experiment $A: $out"
# a followed stream is held while the master answers others
timeout 300 "$DET" trial logs -f "$T" < /dev/null > "$W/follow.out" 2>&1 &
FOLLOW=$!
sleep 2
det master info
check '[ $rc = 0 ] && kill -0 $FOLLOW 2> /dev/null' "the API while a stream is held: $out"
page=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$DTRAIN_MASTER/")
check '[ "$page" = 200 ] && kill -0 $FOLLOW 2> /dev/null' "the web UI while a stream is held: $page"
det experiment wait "$A" --polling-interval 1
check '[ $rc = 0 ]' "det experiment wait: $out"
wait "$FOLLOW"; frc=$?; FOLLOW=
check '[ $frc = 0 ] && grep -q "training: batch" "$W/follow.out" && grep -q "Trial log stream ended" "$W/follow.out"' \
  "det trial logs -f: $(tail -3 "$W/follow.out")"

det experiment describe "$A"
check '[ $rc = 0 ] && has COMPLETED && has "$T"' "det experiment describe: $out"
det experiment describe "$A" --json
check '[ $rc = 0 ] && has "\"state\": \"STATE_COMPLETED\""' "det experiment describe --json: $out"
det experiment config "$A"
check '[ $rc = 0 ] && has "entrypoint: model_def:FashionMLPTrial"' "det experiment config: $out"
det experiment list-trials "$A"
check '[ $rc = 0 ] && echo "$out" | grep -E "^ +$T \| COMPLETED" > /dev/null' "det experiment list-trials: $out"
det trial describe "$T"
check '[ $rc = 0 ] && has COMPLETED' "det trial describe: $out"
det trial logs "$T"
check '[ $rc = 0 ] && has "validation: batch" && has "Trial log stream ended"' "det trial logs: $out"
det experiment logs "$A"
check '[ $rc = 0 ] && has "training: batch"' "det experiment logs: $out"
det experiment set description "$A" "from det"
check '[ $rc = 0 ] && has "Set description of experiment $A to .from det."' "det experiment set description: $out"
det experiment describe "$A"
check 'has "from det"' "the description: $out"

# ---- checkpoints ----
UUIDRE='[0-9a-f]\{8\}-[0-9a-f]\{4\}-[0-9a-f]\{4\}-[0-9a-f]\{4\}-[0-9a-f]\{12\}'
det experiment list-checkpoints "$A"
check '[ $rc = 0 ] && echo "$out" | grep -q "$UUIDRE"' "det experiment list-checkpoints: $out"
det experiment list-checkpoints --best 1 "$A"
U=$(echo "$out" | grep -o "$UUIDRE" | head -1)
check '[ $rc = 0 ] && [ -n "$U" ] && has COMPLETED' "det experiment list-checkpoints --best 1: $out"
det checkpoint describe "$U"
check '[ $rc = 0 ] && has "$U"' "det checkpoint describe: $out"
det checkpoint download "$U" -o "$W/ck"
check '[ $rc = 0 ] && [ -s "$W/ck/metadata.json" ] && [ -s "$W/ck/model.safetensors" ]' "det checkpoint download: $out $(ls "$W/ck" 2>&1)"
det experiment download "$A" -o "$W/dl"
check '[ $rc = 0 ] && [ -s "$W/dl/$U/model.safetensors" ]' "det experiment download: $out $(ls -R "$W/dl" 2>&1)"
out=$(cd "$W" && timeout 60 "$DET" experiment download-model-def "$A" < /dev/null 2>&1); rc=$?
check '[ $rc = 0 ] && tar tzf "$W/experiment_${A}_model_def.tgz" | grep -qx model_def.c' "det experiment download-model-def: $out"

# ---- B: paused, reactivated, canceled, killed; C: created and followed ----
det experiment create "$FASHION/const.yaml" "$FASHION" "${SHORT[@]}"
B=$(echo "$out" | sed -n 's/^Created experiment \([0-9]*\)$/\1/p')
check '[ $rc = 0 ] && [ -n "$B" ]' "det experiment create: $out"
det experiment pause "$B"
check '[ $rc = 0 ] && has "Paused experiment $B"' "det experiment pause: $out"
det experiment set max-slots "$B" 2
check '[ $rc = 0 ]' "det experiment set max-slots: $out"
det experiment activate "$B"
check '[ $rc = 0 ] && has "Activated experiment $B"' "det experiment activate: $out"
det experiment cancel "$B"
check '[ $rc = 0 ] && has "Canceled experiment $B"' "det experiment cancel: $out"
det experiment kill "$B"
check '[ $rc = 0 ] && has "Killed experiment $B"' "det experiment kill: $out"
det experiment create "$FASHION/const.yaml" "$FASHION" "${SHORT[@]}" -f
check '[ $rc = 0 ] && has "validation: batch" && has "Trial log stream ended"' "det experiment create -f: $out"

# ---- bad input: the reference's error shape, a clean message, nothing created ----
det experiment list
before=$(echo "$out" | grep -cE '^ +[0-9]+ \|')
det experiment describe 99
check '[ $rc = 1 ] && has "Failed to describe experiment: experiment 99 not found"' "unknown id: $out"
printf 'name: bad\nentrypoint: model_def:FashionMLPTrial\nsearcher:\n  name: single\n  metric: validation_loss\n  max_length: {batches: -1}\n' > "$W/bad.yaml"
det experiment create "$W/bad.yaml" "$FASHION"
check '[ $rc = 1 ] && has "Failed to create experiment: config:6:" && has max_length' "a bad config: $out"
det experiment archive "$A"
check '[ $rc = 1 ] && has "does not implement"' "a command outside the set: $out"
det experiment list
check '[ "$(echo "$out" | grep -cE "^ +[0-9]+ \|")" = "$before" ]' "bad input created an experiment: $out"

# ---- the SDK script ----
out=$(timeout 300 "$DET_VENV/bin/python" "$SRC/tests/e2e/det_sdk.py" "$FASHION/const.yaml" "$FASHION" \
  "$W/sdk" searcher.max_length.epochs=1 min_validation_period.epochs=1 < /dev/null 2>&1); rc=$?
echo "$out" >> "$W/det.log"
check '[ $rc = 0 ] && has "state: STATE_COMPLETED" && has "trial: [0-9]* STATE_COMPLETED" && has "validation: .* validation_loss last=" && echo "$out" | grep -q "checkpoint: $UUIDRE" && has "model.safetensors"' \
  "the SDK script: $out"

det user logout
check '[ $rc = 0 ]' "det user logout: $out"
summary
