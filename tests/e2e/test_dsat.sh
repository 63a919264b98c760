#!/usr/bin/env bash
# End-to-end test of `dtrain dsat` (docs/dsat.md) on tests/e2e/dsat_toy, a small engine-based
# trial, against a master of its own on a free loopback port with its own DTRAIN_HOME and a
# 4 MB device budget (DT_DEVICE_MEMORY) that makes large micro-batches run out of memory:
#   - bad flags and a config without deepspeed_config fail before any trial, saying why;
#   - `dtrain dsat binary` completes, writes best_ds_config.json and best_ds_metrics.json,
#     prints the summary; an OOM trial is a result (the search goes on, no restart);
#   - asha and random complete; --json gives the summary; --run-full-experiment runs the
#     user's experiment with the best config;
#   - --include: the trials run from a copy of the model directory plus the included file and
#     directory (a trial that reads an included file), removed with the experiment; a missing
#     path or a name the model directory has fails before anything is submitted;
#   - a master killed (SIGKILL) mid-search resumes it from the searcher snapshot: the search
#     completes, writes the two files, and proposes the same trials as an uninterrupted search
#     with the same seed, without running the profile or any finished trial again.
# usage: test_dsat.sh DTRAIN_BINARY SOURCE_DIR
# Prints "N passed, M failed" and exits non-zero on any failure.
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/dtrain-dsat.XXXXXX)
. "$SRC/tests/e2e/master_env.sh"
export DT_DEVICE_MEMORY=4M
CLIPID=
cleanup() {
  [ -n "$CLIPID" ] && kill "$CLIPID" 2> /dev/null
  [ -n "$MPID" ] && kill "$MPID" 2> /dev/null && wait "$MPID" 2> /dev/null
  rm -rf "$W"
}
trap cleanup EXIT
. "$SRC/tests/e2e/check.sh"
start_master 2 || exit 1

TOY=$SRC/tests/e2e/dsat_toy
n_exps() { $API get /api/v1/experiments 'len(r["experiments"])'; }

# ---- bad input: usage errors (exit 2) and a config that cannot run, before any trial ----
"$DTRAIN" dsat binary "$TOY/const.yaml" "$TOY" --max-trials x > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "max-trials must be an integer" "$W/o"' "a bad --max-trials: $(cat "$W/o")"
"$DTRAIN" dsat binary "$TOY/const.yaml" "$TOY" --max-rungs 3 > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "max-rungs is a flag of dtrain dsat asha" "$W/o"' "an asha flag to binary: $(cat "$W/o")"
"$DTRAIN" dsat binary "$TOY/const.yaml" "$TOY" --zero-stages 1 4 > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "zero-stages" "$W/o"' "stage 4: $(cat "$W/o")"
"$DTRAIN" dsat binary "$TOY/const.yaml" "$TOY" --metric speed > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "metric must be" "$W/o"' "a bad metric: $(cat "$W/o")"
"$DTRAIN" dsat grid "$TOY/const.yaml" "$TOY" > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "unknown method" "$W/o"' "an unknown method: $(cat "$W/o")"
"$DTRAIN" dsat binary "$TOY/no_ds.yaml" "$TOY" > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "deepspeed_config" "$W/o"' "no deepspeed_config: $(cat "$W/o")"
check '[ "$(n_exps)" = 0 ]' "a refused search left an experiment behind"

# ---- binary: completes, an OOM is a result, the two files ----
"$DTRAIN" dsat binary "$TOY/const.yaml" "$TOY" --max-trials 8 --max-concurrent-trials 2 \
  > "$W/bin.out" 2> "$W/bin.err"
rc=$?
check '[ $rc -eq 0 ]' "dsat binary failed ($rc): $(tail -5 "$W/bin.err") $(tail -5 "$W/bin.out")"
EXP=$(sed -n 's/^created experiment \([0-9]*\)$/\1/p' "$W/bin.out" | head -1)
DIR=$($API get /api/v1/experiments/$EXP 'r["experiment"]["checkpoint_dir"]')
check '[ -s "$DIR/best_ds_config.json" ] && [ -s "$DIR/best_ds_metrics.json" ]' "no best files in $DIR"
check '$PY -c "import json,sys; c=json.load(open(sys.argv[1])); assert \"autotuning\" not in c; assert c[\"train_batch_size\"] == c[\"train_micro_batch_size_per_gpu\"]" "$DIR/best_ds_config.json"' \
  "best_ds_config.json is not a merged config: $(cat "$DIR/best_ds_config.json")"
check 'grep -q "the search is over: max_trials" "$W/bin.out"' "no done reason: $(cat "$W/bin.out")"
check 'grep -q "approximate max micro-batch" "$W/bin.out"' "no per-stage estimate in the log"
check 'grep -qE "^1[[:space:]]+profile" "$W/bin.out"' "no summary table: $(cat "$W/bin.out")"
check '[ "$($API get /api/v1/experiments/$EXP "len(r[\"trials\"])")" = 8 ]' "binary did not run 8 trials"
NOOM=$(grep -cE "[[:space:]]oom$" "$W/bin.out")
check '[ "$NOOM" -ge 1 ]' "no trial ran out of memory (4 MB budget, a 64 MiB workspace from micro-batch 100): $(cat "$W/bin.out")"
check '[ "$($API get /api/v1/experiments/$EXP "sum(t[\"restarts\"] for t in r[\"trials\"])")" = 0 ]' \
  "a trial was restarted"
check '[ "$($API get /api/v1/experiments/$EXP "[t[\"state\"] for t in r[\"trials\"]].count(\"COMPLETED\")")" = 8 ]' \
  "not every trial COMPLETED (an OOM is a result): $($API get /api/v1/experiments/$EXP '[t["state"] for t in r["trials"]]')"

# ---- asha (--json) and random ----
"$DTRAIN" dsat asha "$TOY/const.yaml" "$TOY" --max-trials 7 --max-concurrent-trials 2 \
  --min-binary-search-trials 2 --zero-stages 1 2 --json > "$W/asha.out" 2> "$W/asha.err"
rc=$?
check '[ $rc -eq 0 ]' "dsat asha failed ($rc): $(tail -5 "$W/asha.err")"
check '$PY -c "import json,sys; s=json.load(open(sys.argv[1])); assert s[\"done\"] and len(s[\"trials\"]) == 7" <(sed -n "/^{/,\$p" "$W/asha.out")' \
  "asha --json: $(cat "$W/asha.out")"
"$DTRAIN" dsat random "$TOY/const.yaml" "$TOY" --max-trials 6 --max-concurrent-trials 2 \
  --trials-per-random-config 3 --metric throughput > "$W/rnd.out" 2> "$W/rnd.err"
rc=$?
check '[ $rc -eq 0 ] && grep -q "best: request" "$W/rnd.out"' "dsat random failed ($rc): $(tail -5 "$W/rnd.err")"

# ---- --run-full-experiment ----
"$DTRAIN" dsat binary "$TOY/const.yaml" "$TOY" --max-trials 4 --max-concurrent-trials 2 \
  --run-full-experiment > "$W/full.out" 2> "$W/full.err"
rc=$?
FULL=$(sed -n 's/^full experiment: \([0-9]*\)$/\1/p' "$W/full.out")
check '[ $rc -eq 0 ] && [ -n "$FULL" ]' "--run-full-experiment failed ($rc): $(tail -5 "$W/full.err")"
if [ -n "$FULL" ]; then
  "$DTRAIN" experiment wait "$FULL" > /dev/null 2>&1
  rc=$?
  check '[ $rc -eq 0 ]' "the full experiment did not complete"
  check '$API get /api/v1/experiments/$FULL "r[\"trials\"][0][\"hparams\"][\"deepspeed_config\"][\"train_micro_batch_size_per_gpu\"]" > /dev/null' \
    "the full experiment does not run the best config"
fi

# ---- --include: the trials run from a copy with the included paths ----
mkdir -p "$W/inc/data"
echo included > "$W/inc/data/words.txt"
echo included > "$W/inc/extra.txt"
sed 's/^hyperparameters:$/&\n  read_file: data\/words.txt/' "$TOY/const.yaml" > "$W/inc.yaml"
NBEFORE=$(n_exps)
NCTX=$(ls "$DTRAIN_HOME/contexts" 2> /dev/null | wc -l) # each experiment runs from its own copy
"$DTRAIN" dsat binary "$W/inc.yaml" "$TOY" --max-trials 3 --include "$W/inc/nope" > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "include .*nope: No such file" "$W/o"' "a missing --include: $(cat "$W/o")"
"$DTRAIN" dsat binary "$W/inc.yaml" "$TOY" --max-trials 3 --include "$TOY/ds_config.json" > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "already has .ds_config.json" "$W/o"' "a --include clashing with the model directory: $(cat "$W/o")"
check '[ "$(n_exps)" = "$NBEFORE" ] && [ "$(ls "$DTRAIN_HOME/contexts" 2> /dev/null | wc -l)" = "$NCTX" ]' \
  "a refused --include left an experiment or a context behind"
"$DTRAIN" dsat binary "$W/inc.yaml" "$TOY" --max-trials 3 --max-concurrent-trials 2 \
  --include "$W/inc/data" --include "$W/inc/extra.txt" > "$W/inc.out" 2> "$W/inc.err"
rc=$?
check '[ $rc -eq 0 ] && grep -qE "^1[[:space:]]+profile.*ok$" "$W/inc.out"' \
  "dsat with --include failed ($rc): $(tail -5 "$W/inc.err") $(tail -5 "$W/inc.out")"
INC=$(sed -n 's/^created experiment \([0-9]*\)$/\1/p' "$W/inc.out" | head -1)
check 'grep -q "^dsat page: http://.*/experiments/$INC/dsat$" "$W/inc.out"' "no link to the dsat page: $(head -3 "$W/inc.out")"
CTX=$($API get /api/v1/experiments/$INC 'r["experiment"]["model_dir"]')
check '[ -f "$CTX/model_def.c" ] && [ -f "$CTX/data/words.txt" ] && [ -f "$CTX/extra.txt" ]' \
  "the context $CTX lacks the model's or the included files: $(ls -R "$CTX")"
"$DTRAIN" dsat binary "$W/inc.yaml" "$TOY" --max-trials 3 > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ]' "a trial that reads a file not included succeeded"
$API delete /api/v1/experiments/$INC > /dev/null 2>&1
check '[ ! -e "$CTX" ]' "deleting the experiment left its context $CTX"

# ---- a killed master resumes the search ----
# One trial at a time (binary's choices then depend only on OK / OOM, not on timings), each
# step 80 ms, so that the kill lands with some trials done and one running.
sed 's/^  workspace_from_mbs: 100$/&\n  batch_ms: 80/' "$TOY/const.yaml" > "$W/slow.yaml"
RESUME_FLAGS="--max-trials 9 --max-concurrent-trials 1 --random-seed 7 --zero-stages 1 2 3"
# the trials a summary holds: kind, knobs, prediction and result (not the timings)
trials_of() {
  $PY -c 'import json,sys
for t in json.load(open(sys.argv[1]))["trials"]:
    print(t["kind"], json.dumps(t["knobs"], sort_keys=True), t["predicted_bytes"], t["result"])' "$1"
}
# shellcheck disable=SC2086
"$DTRAIN" dsat binary "$W/slow.yaml" "$TOY" $RESUME_FLAGS > "$W/ref.out" 2> "$W/ref.err"
rc=$?
check '[ $rc -eq 0 ]' "the uninterrupted search failed ($rc): $(tail -5 "$W/ref.err")"
REF=$(sed -n 's/^created experiment \([0-9]*\)$/\1/p' "$W/ref.out" | head -1)
REFDIR=$($API get /api/v1/experiments/$REF 'r["experiment"]["checkpoint_dir"]')
trials_of "$REFDIR/dsat_summary.json" > "$W/ref.trials"

# shellcheck disable=SC2086
"$DTRAIN" dsat binary "$W/slow.yaml" "$TOY" $RESUME_FLAGS > "$W/res.out" 2> "$W/res.err" &
CLIPID=$!
for _ in $(seq 300); do
  RES=$(sed -n 's/^created experiment \([0-9]*\)$/\1/p' "$W/res.out" | head -1)
  [ -n "$RES" ] && break
  sleep 0.1
done
RESDIR=$($API get /api/v1/experiments/$RES 'r["experiment"]["checkpoint_dir"]')
# kill once the two profiles and two configurations have their results
done_n() { $PY -c 'import json,sys
try: print(sum(t["result"] != "running" for t in json.load(open(sys.argv[1]))["trials"]))
except Exception: print(0)' "$RESDIR/dsat_summary.json"; }
for _ in $(seq 600); do
  [ "$(done_n)" -ge 4 ] && break
  sleep 0.05
done
kill -9 "$MPID"
wait "$MPID" 2> /dev/null
kill "$CLIPID" 2> /dev/null
wait "$CLIPID" 2> /dev/null
CLIPID=
# what the search knew at the kill is its snapshot in the store (the runner's files may be one
# result ahead: they are written before the master commits the event that produced them)
$PY -c 'import json,sqlite3,sys
db = sqlite3.connect(sys.argv[1])
snap = json.loads(db.execute("SELECT snapshot FROM searcher_snapshots WHERE experiment_id = ?",
                             (int(sys.argv[2]),)).fetchone()[0])
def runner_state(x):
    if isinstance(x, dict):
        if "phase" in x and "trials" in x: return x
        x = list(x.values())
    if isinstance(x, list):
        for v in x:
            r = runner_state(v)
            if r: return r
    if isinstance(x, str) and x[:1] == "{":
        return runner_state(json.loads(x))
    return None
json.dump(runner_state(snap), open(sys.argv[3], "w"))' "$DTRAIN_HOME/store.db" "$RES" "$W/before.json"
BEFORE=$(done_n)
check '[ "$BEFORE" -ge 4 ] && [ "$BEFORE" -lt 9 ]' "the kill did not land mid-search ($BEFORE of 9 trials done)"
start_master 2 || bad "the master does not start again"
check '[ "$($API wait "$RES" 180)" = COMPLETED ]' "the resumed search did not complete: $(tail -5 "$W/master.log")"
check '[ -s "$RESDIR/best_ds_config.json" ] && [ -s "$RESDIR/best_ds_metrics.json" ]' \
  "the resumed search wrote no best files in $RESDIR"
trials_of "$RESDIR/dsat_summary.json" > "$W/res.trials"
check 'diff "$W/ref.trials" "$W/res.trials" > /dev/null' \
  "the resumed search proposed other trials than the uninterrupted one: $(diff "$W/ref.trials" "$W/res.trials")"
check '[ "$($API get /api/v1/experiments/$RES "len(r[\"trials\"])")" = 9 ]' \
  "the resumed search ran $($API get /api/v1/experiments/$RES 'len(r["trials"])') trials, not 9 (a search run again from scratch adds its own)"
# the results the search had committed before the kill are kept as they were: same requests,
# not run again
check '$PY -c "import json,sys
b=[t for t in json.load(open(sys.argv[1]))[\"trials\"] if t[\"result\"] != \"running\"]
a=json.load(open(sys.argv[2]))[\"trials\"]
assert len(b) >= 3 and b == a[:len(b)], (b, a)" "$W/before.json" "$RESDIR/dsat_summary.json"' \
  "the trials done before the kill changed after the restart"
check '[ "$(grep -c "the profile trial runs first" "$RESDIR/dsat.log")" = 1 ]' \
  "the search started again from the profile: $(cat "$RESDIR/dsat.log")"
summary
