#!/usr/bin/env bash
# test_browser.sh DTRAIN SRC OUT — the web UI in headless Chromium (tests/web/browser.py): a
# master of its own (tests/e2e/master_env.sh) holding a finished small random search on the toy
# trial, a finished dsat search on tests/e2e/dsat_toy (a 4 MB device budget, so that large
# micro-batches run out of memory) and a slow one to pause; screenshots into OUT. Needs PYTHON with selenium, chromium and
# chromedriver (make test-deps); fails with a hint without them. A fourth experiment whose
# trials validate once each, at the same batch, checks what the charts draw, in screenshots.
set -u
DTRAIN=$1 SRC=$2 OUT=$3
PY=${PYTHON:-python3}
for need in /usr/bin/chromium /usr/bin/chromedriver; do
  [ -x "$need" ] || { echo "FAIL: $need is missing; hint: make test-deps" >&2; exit 1; }
done
"$PY" -c "import selenium" 2> /dev/null || { echo "FAIL: no selenium for $PY; hint: make test-deps" >&2; exit 1; }
W=$(mktemp -d)
source "$SRC/tests/e2e/master_env.sh"
cleanup() {
  [ -n "$MPID" ] && kill "$MPID" 2> /dev/null && wait "$MPID" 2> /dev/null
  rm -rf "$W"
}
trap cleanup EXIT
start_master 2 || exit 1

cat > "$W/fin.yaml" << 'EOF2'
name: small search
entrypoint: model_def:ToyTrial
hyperparameters:
  global_batch_size: 16
  lr: {type: log, base: 10, minval: -3, maxval: -1}
  batch_ms: 0
searcher:
  name: random
  max_trials: 3
  max_concurrent_trials: 2
  metric: validation_loss
  max_length:
    batches: 60
min_validation_period:
  batches: 10
min_checkpoint_period:
  batches: 20
scheduling_unit: 5
reproducibility:
  experiment_seed: 3
EOF2
sed -e 's/name: small search/name: slow one/' -e 's/batch_ms: 0/batch_ms: 200/' \
    -e 's/batches: 60/batches: 100000/' -e 's/max_trials: 3/max_trials: 1/' "$W/fin.yaml" > "$W/run.yaml"
FIN=$($API create "$W/fin.yaml" "$SRC/tests/e2e/toy") || exit 1
[ "$($API wait "$FIN" 180)" = COMPLETED ] || { echo "FAIL: the small search did not complete" >&2; exit 1; }
# the dsat search: stages 1 and 2; seed 2 proposes both (42, the default, only stage 2)
cat > "$W/dsat.yaml" << 'EOF2'
name: dsat toy
entrypoint: model_def:DsatToyTrial
hyperparameters:
  deepspeed_config: ds_config.json
  workspace_from_mbs: 100
  overwrite_deepspeed_args:
    memory_budget: 4M
searcher:
  name: single
  metric: validation_loss
  max_length:
    batches: 20
EOF2
"$DTRAIN" dsat binary "$W/dsat.yaml" "$SRC/tests/e2e/dsat_toy" --max-trials 8 \
  --max-concurrent-trials 2 --zero-stages 1 2 --random-seed 2 > "$W/dsat.out" 2>&1 ||
  { echo "FAIL: the dsat search failed: $(tail -5 "$W/dsat.out")" >&2; exit 1; }
DSAT=$(sed -n 's/^created experiment \([0-9]*\)$/\1/p' "$W/dsat.out" | head -1)
# every trial validates once, at the same batch: one x value, one point per series
sed -e 's/name: small search/name: one point each/' -e 's/batches: 60/batches: 10/' "$W/fin.yaml" > "$W/one.yaml"
ONE=$($API create "$W/one.yaml" "$SRC/tests/e2e/toy") || exit 1
[ "$($API wait "$ONE" 180)" = COMPLETED ] || { echo "FAIL: the one-point search did not complete" >&2; exit 1; }
RUN=$($API create "$W/run.yaml" "$SRC/tests/e2e/toy") || exit 1
$API until "/api/v1/experiments/$RUN/trials" 'any(t["batches"] > 0 for t in r["trials"])' 60 > /dev/null
"$PY" "$SRC/tests/web/browser.py" "$DTRAIN_MASTER" "$OUT" "$FIN" "$RUN" "$DSAT" "$ONE"
rc=$?
$API post "/api/v1/experiments/$RUN/kill" > /dev/null 2>&1
exit $rc
